"""Exa (issue 20, point 1) through call_provider and the whole runner, against a loopback fake
that sends the answers Exa documents (tests/fixtures/api/exa-*.json)."""

from __future__ import annotations

import json
import logging
from datetime import UTC, datetime
from pathlib import Path

import orjson
import pytest

from smart_search import errors
from smart_search.host.config import Settings
from smart_search.sources.filters import unsupported_warning
from smart_search.sources.providers import exa
from smart_search.sources.providers.calls import ProviderCall
from tests.conftest import Env
from tests.fakes import FakeServer, Reply, fixture_bytes
from tests.provider_support import (
    assert_api_error,
    assert_key_never_written,
    assert_walked_only_when_named,
    provider_call,
    provider_settings,
    response,
)

KEY = "SENTINEL-EXA-KEY-0001"
PATH = "/search"


def make_settings(tmp_path: Path, fake: FakeServer, **config: object) -> Settings:
    return provider_settings(tmp_path, fake, "exa", KEY, **config)


def run(settings: Settings, query: str = "james webb launch", **kw: object) -> ProviderCall:
    return provider_call("exa", settings, query, **kw)


# --- the request ---


def test_request_is_a_json_post_with_the_key_in_its_header_only(
    tmp_path: Path, fake: FakeServer
) -> None:
    fake.route(PATH, Reply(200, body=fixture_bytes("exa-ok.json")))
    record = run(make_settings(tmp_path, fake), query="when did JWST launch")
    assert record.error is None
    (seen,) = fake.requests
    assert (seen.method, seen.path, seen.query) == ("POST", PATH, {})
    assert seen.headers["x-api-key"] == KEY
    assert seen.headers["content-type"].startswith("application/json")
    assert KEY not in seen.target and KEY.encode() not in seen.body
    assert seen.json() == {
        "query": "when did JWST launch",
        "type": "auto",
        "numResults": 10,
        "contents": {"highlights": True},
    }


# --- parsing ---


def test_results_are_title_url_snippet_and_junk_urls_are_dropped(
    tmp_path: Path, fake: FakeServer
) -> None:
    fake.route(PATH, Reply(200, body=fixture_bytes("exa-ok.json")))
    record = run(make_settings(tmp_path, fake))
    assert record.error is None and record.retries == 0
    assert record.answer.results == [
        {
            "title": "James Webb Space Telescope - NASA",
            "url": "https://www.nasa.gov/mission/webb/",
            # The first highlight, its runs of whitespace folded.
            "snippet": "Webb launched on Dec. 25, 2021, from Europe's Spaceport in French Guiana.",
        },
        {
            "title": "About Webb | ESA/Webb",
            "url": "https://esawebb.org/about/",
            "snippet": "The James Webb Space Telescope is an international partnership between "
            "NASA, ESA and the Canadian Space Agency.",
        },
        {  # a null title and no contents: still a result, with empty text
            "title": "",
            "url": "https://en.wikipedia.org/wiki/James_Webb_Space_Telescope",
            "snippet": "",
        },
    ]
    assert record.units == 1 and record.http_status == 200 and record.observation is None


def test_a_long_page_text_is_cut_to_a_snippet() -> None:
    body = orjson.dumps({"results": [{"url": "https://a.example/", "title": "A",
                                      "text": "word " * 400}]})  # fmt: skip
    answer = exa.parse_response(response(200, body), None)
    assert len(answer.results[0]["snippet"]) == exa.SNIPPET_CHARS


@pytest.mark.parametrize(
    "body",
    [
        fixture_bytes("exa-empty.json"),
        orjson.dumps({"results": [{"url": "javascript:void(0)", "title": "x"}, {"title": "y"}]}),
    ],
    ids=["empty", "only-junk"],
)
def test_empty_is_no_results_and_not_retried(tmp_path: Path, fake: FakeServer, body: bytes) -> None:
    fake.route(PATH, Reply(200, body=body))
    record = run(make_settings(tmp_path, fake, retry_max_attempts=3))
    assert isinstance(record.error, errors.NoResults)
    assert str(record.error) == "Exa returned no results."
    assert len(fake.requests) == 1
    assert record.units == 1  # Exa billed the request all the same


@pytest.mark.parametrize(
    "body",
    [b"<html>oops</html>", b"[]", b'{"results": "none"}', b'{"requestId": "x"}'],
    ids=["html", "array", "results-not-a-list", "no-results-key"],
)
def test_unreadable_success_is_a_parse_error(tmp_path: Path, fake: FakeServer, body: bytes) -> None:
    fake.route(PATH, Reply(200, body=body))
    record = run(make_settings(tmp_path, fake, retry_max_attempts=3))
    assert isinstance(record.error, errors.ParseError)
    assert len(fake.requests) == 1


# --- errors ---


@pytest.mark.parametrize(
    ("reply", "kind"),
    [
        (Reply(401, body=fixture_bytes("exa-401.json")), errors.AuthFailed),
        (
            Reply(403, json={"requestId": "r", "error": f"key {KEY} is not allowed"}),
            errors.AuthFailed,
        ),
        (
            Reply(400, json={"requestId": "r", "error": "bad", "tag": "INVALID_REQUEST_BODY"}),
            errors.AuthFailed,
        ),
        (Reply(402, body=fixture_bytes("exa-402.json")), errors.QuotaExhausted),
        (Reply(429, body=fixture_bytes("exa-429.json")), errors.RateLimited),
        (Reply(500, json={"requestId": "r", "error": "internal"}), errors.ServerError),
        (Reply(502, body=b"<html>bad gateway</html>"), errors.ServerError),
        (Reply(503, body=b""), errors.ProviderOverloaded),
    ],
    ids=["401", "403-key-echoed", "400", "402-credits", "429", "500", "502-html", "503"],
)
def test_error_statuses(
    tmp_path: Path,
    fake: FakeServer,
    caplog: pytest.LogCaptureFixture,
    reply: Reply,
    kind: type[errors.SearchError],
) -> None:
    caplog.set_level(logging.DEBUG)
    fake.route(PATH, reply)
    record = run(make_settings(tmp_path, fake, retry_max_attempts=1))
    assert_api_error(record, kind, "Exa", reply.status, KEY, caplog.text)


def test_spent_credits_are_never_retried_and_mark_the_month(
    tmp_path: Path, fake: FakeServer
) -> None:
    fake.route(PATH, Reply(402, body=fixture_bytes("exa-402.json")),
               Reply(200, body=fixture_bytes("exa-ok.json")))  # fmt: skip
    record = run(make_settings(tmp_path, fake, retry_max_attempts=5))
    assert isinstance(record.error, errors.QuotaExhausted) and not record.error.retryable
    assert len(fake.requests) == 1
    assert record.observation == {"exhausted": "month", "why": "Exa 402 (credits exhausted)"}


def test_rate_limit_is_retried_after_its_retry_after(tmp_path: Path, fake: FakeServer) -> None:
    limited = Reply(429, body=fixture_bytes("exa-429.json"), headers={"Retry-After": "1"})
    fake.route(PATH, limited, Reply(200, body=fixture_bytes("exa-ok.json")))
    record = run(make_settings(tmp_path, fake, retry_max_attempts=3))
    assert record.error is None and record.retries == 1
    first, second = fake.requests
    assert second.arrived - first.arrived >= 0.95
    assert record.units == 1 and record.observation is None


def test_billed_units_are_one_request_per_success() -> None:
    assert exa.billed_units(response(200, fixture_bytes("exa-ok.json")), None) == 1
    assert exa.billed_units(response(200, b"not json"), None) == 1
    for status in (400, 401, 402, 429, 500):
        assert exa.billed_units(response(status), None) == 0
    assert exa.observation(response(429)) is None


# --- filters ---

NOW = datetime(2026, 12, 1, 12, 30, 15, 999, tzinfo=UTC)


def test_filters_map_to_exa_body_keys() -> None:
    body, unsupported = exa.filter_params(
        {"count": 5, "freshness": "week", "country": "de", "language": "de"}, now=NOW
    )
    assert body == {
        "numResults": 5,
        "startPublishedDate": "2026-11-24T12:30:15.000Z",
        "userLocation": "DE",
    }
    assert unsupported == ["language"]
    assert unsupported_warning("Exa", unsupported, {"language": "de"}) == (
        'Exa could not apply these filters: language "de" (searched without them).'
    )


@pytest.mark.parametrize(
    ("filters", "unsupported"),
    [
        ({"count": 11}, ["count"]),  # a result past 10 is billed on top: not sent
        ({"count": 0}, ["count"]),
        ({"count": True}, ["count"]),
        ({"freshness": "hour"}, ["freshness"]),
        ({"country": "DEU"}, ["country"]),
        ({"country": 7}, ["country"]),
        ({"freshness": "year", "count": 10}, []),
    ],
)
def test_filters_exa_cannot_honour_are_reported(filters: dict, unsupported: list) -> None:
    body, left = exa.filter_params(filters, now=NOW)
    assert left == unsupported
    assert not set(body) & {"language"}


def test_filters_reach_the_request(tmp_path: Path, fake: FakeServer) -> None:
    fake.route(PATH, Reply(200, body=fixture_bytes("exa-ok.json")))
    run(make_settings(tmp_path, fake), filters={"count": 3, "country": "gb", "freshness": "day"})
    sent = fake.requests[0].json()
    assert sent["numResults"] == 3 and sent["userLocation"] == "GB"
    started = datetime.strptime(sent["startPublishedDate"], "%Y-%m-%dT%H:%M:%S.000Z")
    age = datetime.now(UTC).replace(tzinfo=None) - started
    assert 86000 < age.total_seconds() < 86500


# --- the whole runner ---


def _install(env: Env, fake: FakeServer, **config: object) -> None:
    env.write_config({"endpoints": {"exa": fake.url, "duckduckgo": fake.url},
                      "web_fetch_min_interval_ms": 0, **config})  # fmt: skip
    env.environ["EXA_API_KEY"] = KEY


def test_forced_exa_answers_and_status_shows_its_windows(tmp_path: Path, fake: FakeServer) -> None:
    env = Env(tmp_path)
    _install(env, fake)
    fake.route(PATH, Reply(200, body=fixture_bytes("exa-ok.json")))
    found = env.call("smart_search", {"query": "james webb launch", "agent_id": "desk",
                                      "force_provider": "exa", "count": 4})  # fmt: skip
    assert found["error"] is None, found
    assert found["provider_used"] == "exa" and found["fallback_used"] is False
    assert [r["url"] for r in found["results"]][:2] == [
        "https://www.nasa.gov/mission/webb/",
        "https://esawebb.org/about/",
    ]
    assert found["attempts"][0]["provider"] == "exa" and found["attempts"][0]["units"] == 1
    assert fake.requests_to(PATH)[0].json()["numResults"] == 4
    status = env.call("search_quota_status")
    windows = status["windows"]["exa"]
    assert windows["unit"] == "request"
    assert (windows["daily"]["limit"], windows["monthly"]["limit"]) == (46, 1428)
    assert (windows["daily"]["used"], windows["monthly"]["used"]) == (1, 1)
    assert status["providers"]["exa"]["used"] == 1
    # The same call in a fresh process: nothing printed or written carries the key.
    proc = env.run_cli(
        json.dumps(
            {
                "tool": "smart_search",
                "args": {"query": "james webb launch", "agent_id": "desk", "force_provider": "exa"},
            }
        )
    )
    assert json.loads(proc.stdout)["provider_used"] == "exa"
    assert_key_never_written(env, KEY, proc.stdout, proc.stderr)
    for seen in fake.requests:
        assert KEY not in seen.target


def test_a_scheduled_agents_plan_walks_to_exa_when_provider_order_names_it(
    tmp_path: Path, fake: FakeServer
) -> None:
    assert_walked_only_when_named(Env(tmp_path), fake, "exa", PATH, _install, KEY)


def test_spent_credits_fall_through_and_mark_exa_exhausted(
    tmp_path: Path, fake: FakeServer
) -> None:
    env = Env(tmp_path)
    _install(env, fake)
    fake.route(PATH, Reply(402, body=fixture_bytes("exa-402.json")))
    fake.route("/html/", Reply(404, b"no"))
    found = env.call("smart_search", {"query": "plain words", "agent_id": "desk",
                                      "force_provider": "exa"})  # fmt: skip
    exa_attempt = found["attempts"][0]
    assert (exa_attempt["provider"], exa_attempt["error_code"]) == ("exa", "quota_exhausted")
    assert exa_attempt["units"] == 0
    assert env.call("search_quota_status")["windows"]["exa"]["exhausted_until"] is not None
    assert_key_never_written(env, KEY)
