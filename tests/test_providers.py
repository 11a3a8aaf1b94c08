"""Gemini and Brave through call_provider, against a loopback fake that sends the real payloads."""

from __future__ import annotations

import copy
import logging
import time
from pathlib import Path

import orjson
import pytest
from hypothesis import given
from hypothesis import strategies as st

from smart_search import errors
from smart_search.host.config import Settings, load_settings
from smart_search.sources.http import HttpResponse
from smart_search.sources.providers import brave, gemini
from smart_search.sources.providers.calls import ProviderCall, call_provider
from smart_search.sources.providers.parsing import Answer
from tests.fakes import FakeServer, Reply, fixture_bytes, fixture_headers, fixture_json

KEY = "SENTINEL-KEY-7f3a9c"
MODEL = "gemini-test-flash"
GEMINI_PATH = f"/v1beta/models/{MODEL}:generateContent"
BRAVE_PATH = "/res/v1/web/search"
HTML_PAGE = b"<!DOCTYPE html><html><head><title>Error</title></head><body>oops</body></html>"


def make_settings(
    tmp_path: Path, fake: FakeServer, *, keys: bool = True, **config: object
) -> Settings:
    """Settings loaded the real way, from an openclaw.json pointing both APIs at the fake."""
    section = {
        "endpoints": {"gemini": fake.url, "brave": fake.url},
        "gemini_model": MODEL,
        "retry_base_delay": 10,
        "request_timeout_ms": 3000,
        "total_timeout_ms": 10000,
        "brave_count": 7,
        **config,
    }
    path = tmp_path / "openclaw.json"
    path.write_bytes(orjson.dumps({"skills": {"entries": {"smart-search": {"config": section}}}}))
    env = {"OPENCLAW_CONFIG_PATH": str(path), "HOME": str(tmp_path)}
    if keys:
        env |= {"GEMINI_API_KEY": KEY, "BRAVE_API_KEY": KEY}
    return load_settings(env)


_LAST: list[ProviderCall] = []


def last_call() -> ProviderCall:
    """The record of the most recent `call` (retries, latencies, units: telemetry travels in the
    record, never on the exception)."""
    return _LAST[-1]


def call(name: str, settings: Settings, query: str = "james webb launch", budget: float = 10):
    """(answer, retries) of a successful call; the error it ended with is raised."""
    record = call_provider(name, query, settings, time.monotonic() + budget)
    _LAST.append(record)
    if record.error is not None:
        raise record.error
    return record.answer, record.retries


def fails_with(name: str, settings: Settings, kind: type[errors.SearchError]) -> errors.SearchError:
    with pytest.raises(kind) as caught:
        call(name, settings)
    assert KEY not in str(caught.value) and KEY not in repr(caught.value)
    return caught.value


def gemini_429(retry_delay: str | None, quota_id: str) -> dict:
    body = copy.deepcopy(fixture_json("gemini-429.json"))
    details = body["error"]["details"]
    details[1]["violations"][0]["quotaId"] = quota_id
    if retry_delay is None:
        del details[2]
    else:
        details[2]["retryDelay"] = retry_delay
    return body


# --- Gemini: the request ---


def test_gemini_request_is_a_post_with_the_key_in_its_header_only(
    tmp_path: Path, fake: FakeServer
) -> None:
    fake.route(GEMINI_PATH, Reply(200, body=fixture_bytes("gemini-ok.json")))
    call("gemini", make_settings(tmp_path, fake), query="when did JWST launch")
    (seen,) = fake.requests
    assert seen.method == "POST"
    assert seen.path == GEMINI_PATH
    assert seen.query == {}
    assert seen.headers["x-goog-api-key"] == KEY
    assert KEY not in seen.target and KEY.encode() not in seen.body
    body = seen.json()
    assert body["tools"] == [{"google_search": {}}]
    assert body["contents"][0]["parts"] == [{"text": "when did JWST launch"}]


def test_gemini_answer_and_citations(tmp_path: Path, fake: FakeServer) -> None:
    fake.route(GEMINI_PATH, Reply(200, body=fixture_bytes("gemini-ok.json")))
    answer, retries = call("gemini", make_settings(tmp_path, fake))
    assert retries == 0
    assert isinstance(answer, Answer)
    assert isinstance(answer.results, str)
    assert answer.results.startswith("The James Webb Space Telescope launched on 25 December 2021")
    assert answer.citations == [
        {
            "title": "nasa.gov",
            "url": "https://vertexaisearch.cloud.google.com/grounding-api-redirect/AUZIYQSampleTokenNasaGov0001xYz",
        },
        {
            "title": "esa.int",
            "url": "https://vertexaisearch.cloud.google.com/grounding-api-redirect/AUZIYQSampleTokenEsaInt0002aBc",
        },
        {
            "title": "wikipedia.org",
            "url": "https://vertexaisearch.cloud.google.com/grounding-api-redirect/AUZIYQSampleTokenWikipedia0003qRs",
        },
    ]
    assert len(last_call().attempt_latencies_ms) == 1


def test_gemini_skips_thoughts_joins_parts_and_dedupes_citations(
    tmp_path: Path, fake: FakeServer
) -> None:
    web = {"uri": "https://example.org/a", "title": "example.org"}
    payload = {
        "candidates": [
            {
                "content": {
                    "parts": [
                        {"text": "Let me think about the launch...", "thought": True},
                        {"text": "JWST launched "},
                        {"text": "in 2021."},
                    ]
                },
                "groundingMetadata": {
                    "groundingChunks": [{"web": web}, {"web": dict(web)}, {"retrievedContext": {}}]
                },
            }
        ]
    }
    fake.route(GEMINI_PATH, Reply(200, json=payload))
    answer, _ = call("gemini", make_settings(tmp_path, fake))
    assert answer.results == "JWST launched in 2021."
    assert answer.citations == [{"title": "example.org", "url": "https://example.org/a"}]


MAX_TOKENS_THOUGHT_ONLY = {
    "candidates": [
        {
            "content": {"parts": [{"text": "thinking...", "thought": True}], "role": "model"},
            "finishReason": "MAX_TOKENS",
        }
    ]
}


@pytest.mark.parametrize(
    "body",
    [
        fixture_bytes("gemini-empty.json"),
        fixture_bytes("gemini-blocked-prompt.json"),
        orjson.dumps(MAX_TOKENS_THOUGHT_ONLY),
        b'{"candidates": [], "usageMetadata": {}}',
        b'{"candidates": [{"content": {"parts": [{"text": "   "}]}}]}',
    ],
    ids=["safety", "blocked-prompt", "max-tokens", "no-candidates", "blank-text"],
)
def test_gemini_empty_answers_are_no_results_and_not_retried(
    tmp_path: Path, fake: FakeServer, body: bytes
) -> None:
    fake.route(GEMINI_PATH, Reply(200, body=body))
    err = fails_with("gemini", make_settings(tmp_path, fake), errors.NoResults)
    assert str(err) == gemini.EMPTY
    assert len(fake.requests) == 1


# --- Gemini: classification by status ---

_KEY_ECHO_400 = copy.deepcopy(fixture_json("gemini-400-key.json"))
_KEY_ECHO_400["error"]["message"] = f"API key not valid: {KEY}. Please pass a valid API key."


@pytest.mark.parametrize(
    ("reply", "kind", "message"),
    [
        (
            Reply(400, body=fixture_bytes("gemini-400-key.json")),
            errors.AuthFailed,
            "Gemini API error: 400",
        ),
        (Reply(400, json=_KEY_ECHO_400), errors.AuthFailed, "Gemini API error: 400"),
        (Reply(401, body=b""), errors.AuthFailed, "Gemini API error: 401"),
        (Reply(403, body=HTML_PAGE), errors.AuthFailed, "Gemini API error: 403"),
        (
            Reply(404, body=fixture_bytes("gemini-404-model.json")),
            errors.ModelUnavailable,
            f"Gemini model {MODEL} is unavailable.",
        ),
        (
            Reply(429, json=gemini_429("5s", "GenerateRequestsPerDayPerProjectPerModel-FreeTier")),
            errors.QuotaExhausted,
            "Gemini API error: 429",
        ),
        (
            Reply(429, body=fixture_bytes("gemini-429.json")),
            errors.RateLimited,
            "Gemini API error: 429",
        ),
        (
            Reply(503, body=fixture_bytes("gemini-503.json")),
            errors.ProviderOverloaded,
            "Gemini API error: 503",
        ),
        (Reply(500, body=b'{"error": {"code": 500}}'), errors.ServerError, "Gemini API error: 500"),
        (Reply(502, body=HTML_PAGE), errors.ServerError, "Gemini API error: 502"),
        (Reply(504, body=b'truncated {"err'), errors.ServerError, "Gemini API error: 504"),
    ],
    ids=[
        "400-key",
        "400-key-echoed",
        "401",
        "403-html",
        "404-model",
        "429-per-day",
        "429-per-minute",
        "503",
        "500",
        "502-html",
        "504-junk",
    ],
)
def test_gemini_error_statuses(
    tmp_path: Path,
    fake: FakeServer,
    caplog: pytest.LogCaptureFixture,
    reply: Reply,
    kind: type[errors.SearchError],
    message: str,
) -> None:
    caplog.set_level(logging.DEBUG)
    fake.route(GEMINI_PATH, reply)
    # One attempt, so retryable classes are seen as classified, before any retry.
    err = fails_with("gemini", make_settings(tmp_path, fake, retry_max_attempts=1), kind)
    assert str(err) == message
    assert err.http_status == reply.status
    assert last_call().retries == 0
    assert len(fake.requests) == 1
    assert KEY not in caplog.text


@pytest.mark.parametrize(
    "reply",
    [
        Reply(400, body=fixture_bytes("gemini-400-key.json")),
        Reply(404, body=fixture_bytes("gemini-404-model.json")),
        Reply(429, json=gemini_429("1s", "GenerateRequestsPerDayPerProjectPerModel-FreeTier")),
    ],
    ids=["400", "404", "429-per-day"],
)
def test_gemini_never_retries_what_cannot_heal(
    tmp_path: Path, fake: FakeServer, reply: Reply
) -> None:
    fake.route(GEMINI_PATH, reply, Reply(200, body=fixture_bytes("gemini-ok.json")))
    with pytest.raises(errors.SearchError) as caught:
        call("gemini", make_settings(tmp_path, fake, retry_max_attempts=5))
    assert not caught.value.retryable
    assert len(fake.requests) == 1


def test_gemini_retries_overload_then_succeeds(tmp_path: Path, fake: FakeServer) -> None:
    overloaded = Reply(503, body=fixture_bytes("gemini-503.json"))
    fake.route(
        GEMINI_PATH, overloaded, overloaded, Reply(200, body=fixture_bytes("gemini-ok.json"))
    )
    answer, retries = call("gemini", make_settings(tmp_path, fake, retry_max_attempts=3))
    assert retries == 2
    assert len(fake.requests) == 3
    assert len(last_call().attempt_latencies_ms) == 3
    assert "James Webb" in answer.results


def test_gemini_persistent_overload_gives_up_after_max_attempts(
    tmp_path: Path, fake: FakeServer
) -> None:
    fake.route(GEMINI_PATH, Reply(503, body=fixture_bytes("gemini-503.json")))
    err = fails_with(
        "gemini", make_settings(tmp_path, fake, retry_max_attempts=3), errors.ProviderOverloaded
    )
    assert last_call().retries == 2
    assert err.http_status == 503
    assert len(last_call().attempt_latencies_ms) == 3
    assert len(fake.requests) == 3


def test_gemini_retry_delay_is_honoured_when_it_fits(tmp_path: Path, fake: FakeServer) -> None:
    limited = Reply(429, json=gemini_429("0.4s", "GenerateRequestsPerMinutePerProjectPerModel"))
    fake.route(GEMINI_PATH, limited, Reply(200, body=fixture_bytes("gemini-ok.json")))
    _, retries = call("gemini", make_settings(tmp_path, fake), budget=5)
    assert retries == 1
    first, second = fake.requests
    assert second.arrived - first.arrived >= 0.4


def test_gemini_retry_delay_that_does_not_fit_ends_at_once(
    tmp_path: Path, fake: FakeServer
) -> None:
    # The fixture asks for 21 s; the call has 10, and ends at once rather than sleeping them away.
    fake.route(GEMINI_PATH, Reply(429, body=fixture_bytes("gemini-429.json")))
    started = time.monotonic()
    with pytest.raises(errors.RateLimited) as caught:
        call("gemini", make_settings(tmp_path, fake), budget=10)
    assert time.monotonic() - started < 5
    assert caught.value.retry_after == 21
    assert last_call().retries == 0
    assert len(fake.requests) == 1


def test_gemini_429_wait_falls_back_to_message_text_then_retry_after(
    tmp_path: Path, fake: FakeServer
) -> None:
    settings = make_settings(tmp_path, fake)
    no_info = gemini_429(None, "GenerateRequestsPerMinute")
    from_text = gemini.classify_error(HttpResponse(429, {}, orjson.dumps(no_info)), settings)
    assert from_text.retry_after == pytest.approx(21.417306518)
    no_info["error"]["message"] = "Slow down."
    from_header = gemini.classify_error(
        HttpResponse(429, {"retry-after": "7"}, orjson.dumps(no_info)), settings
    )
    assert isinstance(from_header, errors.RateLimited) and from_header.retry_after == 7
    junk = gemini.classify_error(HttpResponse(429, {}, HTML_PAGE), settings)
    assert isinstance(junk, errors.RateLimited) and junk.retry_after is None


@pytest.mark.parametrize(
    "body",
    [
        HTML_PAGE,
        b"",
        fixture_bytes("gemini-ok.json")[:700],
        b"[1, 2, 3]",
        b'{"candidates": {"0": 1}}',
        b'{"candidates": ["text"]}',
        b'{"candidates": [{"content": {"parts": "text"}}]}',
        b'{"something": "else"}',
    ],
    ids=[
        "html",
        "empty",
        "truncated",
        "list",
        "dict-candidates",
        "str-candidate",
        "str-parts",
        "other",
    ],
)
def test_gemini_unreadable_success_is_a_parse_error_not_retried(
    tmp_path: Path, fake: FakeServer, body: bytes
) -> None:
    fake.route(GEMINI_PATH, Reply(200, body=body))
    err = fails_with("gemini", make_settings(tmp_path, fake), errors.ParseError)
    assert err.http_status == 200
    assert len(fake.requests) == 1


def test_gemini_oversized_body_is_a_parse_error(tmp_path: Path, fake: FakeServer) -> None:
    fake.route(GEMINI_PATH, Reply(200, body=b" " * (3 * 1024 * 1024) + b"{}"))
    err = fails_with("gemini", make_settings(tmp_path, fake), errors.ParseError)
    assert "2 MiB" in str(err)


def test_gemini_stalls_are_retried_within_the_deadline(tmp_path: Path, fake: FakeServer) -> None:
    fake.route(GEMINI_PATH, Reply(200, body=b"{}", delay=60))
    settings = make_settings(tmp_path, fake, request_timeout_ms=500, retry_max_attempts=5)
    started = time.monotonic()
    with pytest.raises(errors.Timeout):
        call("gemini", settings, budget=1.15)
    elapsed = time.monotonic() - started
    # Two 0.5 s attempts fit in 1.15 s; the 0.15 s left is too little for a third (retry.py's
    # MIN_ATTEMPT_S), so the call stops instead of starting an attempt doomed to time out.
    assert 0.95 <= elapsed < 1.15 + 5.0  # the 60 s stall never holds the call
    assert last_call().retries == 1
    assert len(fake.requests) == 2
    assert all(400 <= ms < 5000 for ms in last_call().attempt_latencies_ms)


# --- Brave: the request ---


def test_brave_request_is_a_get_with_the_token_header(tmp_path: Path, fake: FakeServer) -> None:
    fake.route(BRAVE_PATH, Reply(200, body=fixture_bytes("brave-ok.json")))
    call("brave", make_settings(tmp_path, fake), query="httpx timeout")
    (seen,) = fake.requests
    assert seen.method == "GET"
    assert seen.path == BRAVE_PATH
    assert seen.query == {"q": ["httpx timeout"], "count": ["7"]}
    assert seen.headers["x-subscription-token"] == KEY
    assert seen.headers["accept"] == "application/json"
    assert KEY not in seen.target


def test_brave_results_are_plain_text(tmp_path: Path, fake: FakeServer) -> None:
    fake.route(BRAVE_PATH, Reply(200, body=fixture_bytes("brave-ok.json")))
    answer, retries = call("brave", make_settings(tmp_path, fake))
    assert retries == 0 and answer.citations == []
    assert isinstance(answer.results, list) and len(answer.results) == 5
    first = answer.results[0]
    assert first == {
        "title": "Timeouts - HTTPX",
        "url": "https://www.python-httpx.org/advanced/timeouts/",
        "snippet": "HTTPX is careful to enforce timeouts everywhere by default. The default "
        "behavior is to raise a TimeoutException after 5 seconds of network inactivity.",
    }
    assert answer.results[1]["snippet"].startswith("I'm using httpx.AsyncClient")
    assert answer.results[3]["title"] == "Python's httpx: A Practical Guide – Example Tutorials"
    flat = orjson.dumps(answer.results).decode()
    assert "<strong>" not in flat and "&#x27;" not in flat


_REF_PIECES = st.sampled_from(
    ["&amp;", "&lt;", "&gt;", "&quot;", "&#x27;", "&#39;", "&AMP;", "&amp", "&eacute;", "&#233;",
     "&#x110000;", "&#0;", "&nbsp;", "&", ";", "#", "a", " ", "\u00e9"]
)  # fmt: skip


@given(st.lists(_REF_PIECES, max_size=12).map("".join))
def test_brave_unescape_equals_the_standard_library(text: str) -> None:
    """The fast path for the common references decodes exactly as html.unescape does, and
    anything else is left to html.unescape."""
    import html

    assert brave.unescape(text) == html.unescape(text)


def test_brave_unescape_leaves_the_entity_table_unloaded_for_common_references() -> None:
    import subprocess
    import sys

    code = (
        "import sys\n"
        "from smart_search.sources.providers import brave\n"
        "assert brave.unescape('a &amp; b &#x27;c&#x27; &lt;d&gt;') == \"a & b 'c' <d>\"\n"
        "assert 'html.entities' not in sys.modules\n"
        "assert brave.unescape('caf&eacute;') == 'caf\u00e9'\n"
        "assert 'html.entities' in sys.modules\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True)


def test_brave_long_query_is_cut_once_and_the_caller_warned(
    tmp_path: Path, fake: FakeServer
) -> None:
    from smart_search.search.tiers import fit_api_queries

    fake.route(BRAVE_PATH, Reply(200, body=fixture_bytes("brave-ok.json")))
    settings = make_settings(tmp_path, fake)
    query = " ".join(f"word{i}" for i in range(80))
    queries, warnings = fit_api_queries(query, settings)
    assert queries["gemini"] == query and warnings["gemini"] is None
    call("brave", settings, query=queries["brave"])
    sent = fake.requests[0].query["q"][0]
    assert sent == " ".join(f"word{i}" for i in range(50))
    assert warnings["brave"] and "Brave" in warnings["brave"]


@pytest.mark.parametrize(
    "body",
    [
        fixture_bytes("brave-empty.json"),
        b'{"type": "search", "web": {"type": "search", "results": []}}',
        b'{"type": "search", "web": {"results": [{"title": "no url"}]}}',
    ],
    ids=["no-web", "empty-results", "no-usable-result"],
)
def test_brave_empty_is_no_results(tmp_path: Path, fake: FakeServer, body: bytes) -> None:
    fake.route(BRAVE_PATH, Reply(200, body=body))
    err = fails_with("brave", make_settings(tmp_path, fake), errors.NoResults)
    assert str(err) == brave.EMPTY
    assert len(fake.requests) == 1


# --- Brave: classification by status ---

_BRAVE_429_HEADERS = fixture_headers("brave-429.headers.txt")
_QUOTA_ARRAY = {
    "type": "ErrorResponse",
    "errors": [{"status": 429, "code": "QUOTA_LIMITED", "detail": "Monthly quota exceeded"}],
}
_KEY_ECHO_422 = copy.deepcopy(fixture_json("brave-422-token.json"))
_KEY_ECHO_422["error"]["detail"] = f"The provided subscription token {KEY} is invalid."


@pytest.mark.parametrize(
    ("reply", "kind"),
    [
        (Reply(422, body=fixture_bytes("brave-422-token.json")), errors.AuthFailed),
        (Reply(422, json=_KEY_ECHO_422), errors.AuthFailed),
        (Reply(400, body=b""), errors.AuthFailed),
        (Reply(401, body=HTML_PAGE), errors.AuthFailed),
        (Reply(403, json={"errors": [{"code": "FORBIDDEN"}]}), errors.AuthFailed),
        (
            Reply(429, body=fixture_bytes("brave-429.json"), headers=_BRAVE_429_HEADERS),
            errors.RateLimited,
        ),
        (Reply(429, json=_QUOTA_ARRAY), errors.QuotaExhausted),
        (
            Reply(
                429,
                body=fixture_bytes("brave-429.json"),
                headers=_BRAVE_429_HEADERS | {"X-RateLimit-Remaining": "1, 0"},
            ),
            errors.QuotaExhausted,
        ),
        (Reply(503, body=HTML_PAGE), errors.ProviderOverloaded),
        (Reply(500, body=b"{}"), errors.ServerError),
        (Reply(502, body=HTML_PAGE), errors.ServerError),
    ],
    ids=[
        "422-token",
        "422-key-echoed",
        "400",
        "401-html",
        "403-array",
        "429-rate",
        "429-quota-code",
        "429-monthly-window",
        "503",
        "500",
        "502-html",
    ],
)
def test_brave_error_statuses(
    tmp_path: Path,
    fake: FakeServer,
    caplog: pytest.LogCaptureFixture,
    reply: Reply,
    kind: type[errors.SearchError],
) -> None:
    caplog.set_level(logging.DEBUG)
    fake.route(BRAVE_PATH, reply)
    err = fails_with("brave", make_settings(tmp_path, fake, retry_max_attempts=1), kind)
    assert str(err) == f"Brave API error: {reply.status}"
    assert err.http_status == reply.status
    assert len(fake.requests) == 1
    assert KEY not in caplog.text


@pytest.mark.parametrize(
    "reply",
    [
        Reply(422, body=fixture_bytes("brave-422-token.json")),
        Reply(400, body=b"{}"),
        Reply(404, body=b"{}"),
        Reply(429, json=_QUOTA_ARRAY),
    ],
    ids=["422", "400", "404", "429-quota"],
)
def test_brave_never_retries_what_cannot_heal(
    tmp_path: Path, fake: FakeServer, reply: Reply
) -> None:
    fake.route(BRAVE_PATH, reply, Reply(200, body=fixture_bytes("brave-ok.json")))
    with pytest.raises(errors.SearchError) as caught:
        call("brave", make_settings(tmp_path, fake, retry_max_attempts=5))
    assert not caught.value.retryable
    assert len(fake.requests) == 1


def test_brave_rate_limit_waits_for_the_window_reset(tmp_path: Path, fake: FakeServer) -> None:
    limited = Reply(429, body=fixture_bytes("brave-429.json"), headers=_BRAVE_429_HEADERS)
    fake.route(BRAVE_PATH, limited, Reply(200, body=fixture_bytes("brave-ok.json")))
    answer, retries = call("brave", make_settings(tmp_path, fake), budget=5)
    assert retries == 1 and len(answer.results) == 5
    first, second = fake.requests
    # X-RateLimit-Reset: "1, 1419704": the per-second window resets in 1 s.
    assert second.arrived - first.arrived >= 0.95


def test_brave_429_wait_sources() -> None:
    rate = fixture_bytes("brave-429.json")
    no_headers = brave.classify_error(HttpResponse(429, {}, rate))
    assert isinstance(no_headers, errors.RateLimited) and no_headers.retry_after is None
    retry_after = brave.classify_error(HttpResponse(429, {"retry-after": "2"}, rate))
    assert retry_after.retry_after == 2
    # A monthly window found through X-RateLimit-Policy, whatever its position.
    swapped = {
        "x-ratelimit-policy": "2000;w=2592000, 1;w=1",
        "x-ratelimit-remaining": "0, 1",
        "x-ratelimit-reset": "1419704, 1",
    }
    assert isinstance(brave.classify_error(HttpResponse(429, swapped, rate)), errors.QuotaExhausted)
    per_second_spent = {
        "x-ratelimit-policy": "1;w=1, 2000;w=2592000",
        "x-ratelimit-remaining": "0, 5",
    }
    assert isinstance(
        brave.classify_error(HttpResponse(429, per_second_spent, rate)), errors.RateLimited
    )


def test_brave_retries_overload_then_succeeds(tmp_path: Path, fake: FakeServer) -> None:
    fake.route(BRAVE_PATH, Reply(503), Reply(500), Reply(200, body=fixture_bytes("brave-ok.json")))
    answer, retries = call("brave", make_settings(tmp_path, fake))
    assert retries == 2 and len(fake.requests) == 3
    assert len(answer.results) == 5


@pytest.mark.parametrize(
    "body",
    [
        HTML_PAGE,
        fixture_bytes("brave-ok.json")[:900],
        b'"just a string"',
        b'{"web": {"results": {"0": {}}}}',
        b'{"web": "nope", "type": "search"}',
        b'{"unexpected": true}',
    ],
    ids=["html", "truncated", "string", "results-dict", "web-string", "other"],
)
def test_brave_unreadable_success_is_a_parse_error(
    tmp_path: Path, fake: FakeServer, body: bytes
) -> None:
    fake.route(BRAVE_PATH, Reply(200, body=body))
    err = fails_with("brave", make_settings(tmp_path, fake), errors.ParseError)
    assert err.http_status == 200
    assert len(fake.requests) == 1


# --- Brave's query limits ---


def test_fit_query_leaves_a_short_query_alone() -> None:
    assert brave.fit_query("httpx  timeout") == ("httpx  timeout", None)


def test_fit_query_cuts_at_400_characters_on_a_word_boundary() -> None:
    query = " ".join(["abcdefghi"] * 45)  # 449 characters, 45 words
    fitted, warning = brave.fit_query(query)
    assert fitted == " ".join(["abcdefghi"] * 40)  # 399 characters; a 41st word would be 409
    assert warning is not None


def test_fit_query_cuts_one_giant_word_hard() -> None:
    fitted, warning = brave.fit_query("x" * 900)
    assert fitted == "x" * 400 and warning is not None


@given(st.lists(st.text(alphabet="abcé漢 \t", min_size=0, max_size=30), min_size=1, max_size=90))
def test_fit_query_always_fits_and_keeps_a_word_prefix(pieces: list[str]) -> None:
    query = " ".join(pieces)
    if not query.strip():
        return
    fitted, warning = brave.fit_query(query)
    assert len(fitted) <= brave.MAX_QUERY_CHARS
    assert len(fitted.split()) <= brave.MAX_QUERY_WORDS
    words, kept = query.split(), fitted.split()
    if warning is None:
        assert kept == words
    elif len(kept) == 1 and len(words[0]) > brave.MAX_QUERY_CHARS:
        assert words[0].startswith(kept[0])
    else:
        assert kept == words[: len(kept)] and len(kept) < len(words)


# --- key safety, end to end ---


def test_sentinel_key_never_leaks_across_failures(
    tmp_path: Path, fake: FakeServer, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    echo = orjson.dumps({"error": {"code": 400, "message": f"bad key {KEY} for {KEY}"}})
    fake.route(GEMINI_PATH, Reply(400, body=echo))
    fake.route(BRAVE_PATH, Reply(500, body=echo), Reply(200, body=b"x", content_length=50))
    settings = make_settings(tmp_path, fake, retry_max_attempts=2)
    texts = []
    for name in ("gemini", "brave"):
        with pytest.raises(errors.SearchError) as caught:
            call(name, settings)
        texts += [str(caught.value), repr(caught.value), repr(vars(caught.value))]
    assert KEY not in "\n".join(texts)
    assert KEY not in caplog.text
    assert [r.path for r in fake.requests] == [GEMINI_PATH, BRAVE_PATH, BRAVE_PATH]
    for seen in fake.requests:
        assert KEY not in seen.target
    assert fake.requests[0].headers["x-goog-api-key"] == KEY
    assert fake.requests[1].headers["x-subscription-token"] == KEY
