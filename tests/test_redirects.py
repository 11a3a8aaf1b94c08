"""A redirect to a non-http(s) URL (`javascript:`, `data:`, `ftp:`...) is the server's fault.

httpx builds the next request of every redirect, followed or not, and fails on such a target
with the same exception as a badly configured URL; that used to reach the caller as
`config_error`, blaming the operator. It is `parse_error` now, for API providers and engines
alike, against a loopback fake that sends the redirect.
"""

from __future__ import annotations

import time
from typing import Any

import pytest

from smart_search import errors
from smart_search.host.config import ENGINES as ALL_ENGINES
from smart_search.sources import http, registry
from smart_search.sources.engines.fetch import engine_module, fetch_engine
from smart_search.sources.providers.calls import call_provider
from tests.fakes import FakeServer, Reply

# The scraped engines: a self-hosted one (SearXNG, JSON) has its own tests (test_searxng.py).
ENGINES = tuple(e for e in ALL_ENGINES if not registry.source(e).self_hosted)

KEY = "SENTINEL-REDIRECT-KEY-41b7"
MODEL = "gemini-test-flash"
API_PATHS = {"gemini": f"/v1beta/models/{MODEL}:generateContent", "brave": "/res/v1/web/search"}
NON_WEB = [
    "javascript:alert(1)",
    "JavaScript:alert(document.cookie)",
    "data:text/html,<script>alert(1)</script>",
    "ftp://files.example/pub/x",
    "file:///etc/passwd",
    "mailto:someone@example.com",
]


@pytest.fixture
def fake() -> Any:
    with FakeServer() as server:
        yield server


def _send(url: str, **options: Any) -> http.HttpResponse:
    request = http.HttpRequest("GET", url, **options)
    return http.send(request, deadline=time.monotonic() + 10, request_timeout_s=10)


@pytest.mark.parametrize("location", NON_WEB)
@pytest.mark.parametrize(
    "options",
    [
        {},
        {"follow_redirects": True},
        {"follow_redirects": True, "headers": {"x-goog-api-key": KEY}},
    ],
    ids=["unfollowed", "followed", "with-key"],
)
def test_redirect_to_a_non_web_url_is_a_parse_error(
    fake: FakeServer, location: str, options: dict[str, Any]
) -> None:
    fake.route("/from", Reply(302, headers={"Location": location}))
    with pytest.raises(errors.SearchError) as caught:
        _send(fake.url + "/from", **options)
    err = caught.value
    assert err.error_code == "parse_error", (type(err).__name__, str(err))
    assert err.http_status == 302
    scheme = location.split(":")[0].lower()
    assert str(err) == f"127.0.0.1 redirected to a non-http(s) URL ({scheme}:)."
    assert len(fake.requests) == 1  # nothing was followed


def test_redirect_to_http_is_still_followed_and_unfollowed_one_still_returned(
    fake: FakeServer,
) -> None:
    fake.route("/from", Reply(302, headers={"Location": "/to"}))
    fake.route("/to", Reply(200, body=b"landed"))
    assert _send(fake.url + "/from", follow_redirects=True).body == b"landed"
    assert _send(fake.url + "/from").status == 302


@pytest.mark.parametrize("url", ["javascript:alert(1)", "ftp://127.0.0.1/x"])
def test_a_bad_request_url_of_our_own_is_still_a_config_error(url: str) -> None:
    with pytest.raises(errors.ConfigError, match="not a valid http"):
        _send(url)


@pytest.mark.parametrize("provider", ["gemini", "brave"])
def test_api_redirect_to_javascript_is_the_providers_fault(
    env: Any, fake: FakeServer, provider: str
) -> None:
    env.write_config(
        {
            "endpoints": {"gemini": fake.url, "brave": fake.url},
            "gemini_model": MODEL,
            "retry_base_delay": 10,
        }
    )
    env.environ |= {"GEMINI_API_KEY": KEY, "BRAVE_API_KEY": KEY}
    fake.route(API_PATHS[provider], Reply(302, headers={"Location": "javascript:alert(1)"}))
    call = call_provider(provider, "james webb", env.settings(), time.monotonic() + 10)
    assert isinstance(call.error, errors.ParseError) and call.answer is None
    assert call.error.error_code == "parse_error"
    assert KEY not in str(call.error) and call.units == 0  # a 302 is not billed
    assert len(fake.requests) == 1  # parse_error is not retried


@pytest.mark.parametrize("engine", ENGINES)
def test_engine_redirect_to_javascript_is_the_engines_fault(
    env: Any, fake: FakeServer, engine: str
) -> None:
    env.write_config({"endpoints": {name: fake.url for name in ENGINES}})
    settings = env.settings()
    path = engine_module(engine).PATH
    fake.route(path, Reply(302, headers={"Location": "javascript:alert(1)"}))
    call = fetch_engine(engine, "q", settings, time.monotonic() + 10)
    assert isinstance(call.error, errors.ParseError)
    assert call.error.http_status == 302 and call.http_status == 302
    assert [r.path for r in fake.requests] == [path]


def test_whole_call_blames_no_operator_for_redirects_to_javascript(
    env: Any, fake: FakeServer
) -> None:
    env.write_config(
        {
            "endpoints": {
                name: fake.url
                for name in ("gemini", "brave", "tavily", "google", "bing", "duckduckgo")
            },
            "gemini_model": MODEL,
            "web_fetch_min_interval_ms": 0,
            "retry_base_delay": 10,
        }
    )
    env.environ |= {"GEMINI_API_KEY": KEY, "BRAVE_API_KEY": KEY, "TAVILY_API_KEY": KEY}
    for path in (*API_PATHS.values(), "/search", "/html/"):  # Tavily's path is /search too
        fake.route(path, Reply(302, headers={"Location": "javascript:alert(1)"}))
    result = env.call("smart_search", {"query": "plain words", "agent_id": "a"})
    assert result["results"] is None and result["provider_used"] is None
    codes = [attempt["error_code"] for attempt in result["attempts"]]
    assert len(codes) >= 3 and set(codes) == {"parse_error"}, result["attempts"]
    assert result["error_code"] == "parse_error"
    assert KEY not in repr(result)
