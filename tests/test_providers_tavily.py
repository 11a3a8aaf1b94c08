"""Tavily (issue 20, point 1) against a loopback fake serving the answers Tavily documents
(tests/fixtures/api/tavily-*.json): the request, the parsing, every error class, billing in
credits, filters, the search mode, the usage endpoint read for reconciliation, and whole calls
through the runner, with the sentinel key never leaving its header."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import orjson
import pytest

from smart_search import errors
from smart_search.host.config import Settings
from smart_search.sources import http
from smart_search.sources.http import HttpResponse
from smart_search.sources.providers import tavily
from smart_search.sources.providers.calls import ProviderCall
from tests.conftest import REPO, Env
from tests.fakes import FakeServer, Reply, fixture_bytes, fixture_json
from tests.provider_support import (
    assert_key_never_written,
    assert_walked_only_when_named,
    provider_call,
    provider_settings,
)

KEY = "SENTINEL-TAVILY-KEY-0001"
PATH = "/search"


def make_settings(tmp_path: Path, fake: FakeServer, **config: Any) -> Settings:
    """Settings loaded the real way, from an openclaw.json pointing Tavily at the fake."""
    return provider_settings(tmp_path, fake, "tavily", KEY, **config)


def search(settings: Settings, query: str = "james webb launch", **filters: Any) -> ProviderCall:
    return provider_call("tavily", settings, query, filters=filters or None)


def api(name: str, status: int = 200, **headers: str) -> Reply:
    headers = {"content-type": "application/json", **headers}
    return Reply(status, fixture_bytes(name), headers=headers)


def assert_no_key(fake: FakeServer, *texts: str) -> None:
    for request in fake.requests:
        assert KEY not in request.target and KEY.encode() not in request.body
    for text in texts:
        assert KEY not in text


# --- the request ------------------------------------------------------------------------------


def test_the_request_is_a_post_with_the_key_in_the_bearer_header_only(tmp_path, fake) -> None:
    fake.route(PATH, api("tavily-ok.json"))
    record = search(make_settings(tmp_path, fake))
    assert record.error is None
    (sent,) = fake.requests_to(PATH)
    assert sent.method == "POST" and sent.target == PATH  # no query string at all
    assert sent.headers["authorization"] == f"Bearer {KEY}"
    assert sent.headers["content-type"].startswith("application/json")
    assert sent.json() == {
        "query": "james webb launch",
        "search_depth": "basic",
        "max_results": 10,
        "include_usage": True,
    }
    assert_no_key(fake)


def test_an_advanced_mode_is_sent_and_its_worst_case_becomes_the_default(tmp_path, fake) -> None:
    fake.route(PATH, api("tavily-ok.json"))
    basic = make_settings(tmp_path, fake)
    assert basic.modes["tavily"] == "basic" and basic.max_units_per_call["tavily"] == 1
    advanced = make_settings(tmp_path, fake, providers={"tavily": {"mode": "advanced"}})
    assert advanced.max_units_per_call["tavily"] == 2
    search(advanced)
    assert fake.requests_to(PATH)[0].json()["search_depth"] == "advanced"
    # An explicit max_units_per_call still wins.
    pinned = make_settings(
        tmp_path, fake, providers={"tavily": {"mode": "advanced", "max_units_per_call": 5}}
    )
    assert pinned.max_units_per_call["tavily"] == 5


@pytest.mark.parametrize(
    ("providers", "message"),
    [
        ({"tavily": {"mode": "deep"}}, '"providers.tavily.mode" must be "basic" or "advanced".'),
        ({"brave": {"mode": "basic"}}, '"providers.brave.mode" is not used'),
        ({"tavily": {"unit": "request"}}, '"providers.tavily.unit" must be "credit".'),
    ],
)
def test_a_bad_mode_or_unit_is_a_config_error(tmp_path, fake, providers, message) -> None:
    with pytest.raises(errors.ConfigError) as caught:
        make_settings(tmp_path, fake, providers=providers)
    assert message in str(caught.value)


def test_a_long_query_is_cut_at_a_word_boundary_with_a_warning() -> None:
    assert tavily.fit_query("short query") == ("short query", None)
    long = " ".join(["word"] * 100)  # 499 characters
    fitted, warning = tavily.fit_query(long)
    assert len(fitted) <= 400 and fitted.endswith("word") and long.startswith(fitted)
    assert warning and "Tavily" in warning and "400 characters" in warning
    assert tavily.fit_query("a" + " " * 500 + "b") == ("a b", None)
    assert tavily.fit_query(" " * 500) == ("", None)
    assert tavily.fit_query("x" * 450) == ("x" * 400, tavily.fit_query("x" * 450)[1])


# --- the answer -------------------------------------------------------------------------------


def test_results_are_title_url_and_content_and_junk_urls_are_dropped(tmp_path, fake) -> None:
    fake.route(PATH, api("tavily-ok.json"))
    record = search(make_settings(tmp_path, fake))
    assert record.error is None and record.units == 1 and record.retries == 0
    assert record.answer.results == [
        {
            "title": "James Webb Space Telescope - NASA Science",
            "url": "https://science.nasa.gov/mission/webb/",
            "snippet": "The James Webb Space Telescope launched on December 25, 2021 aboard an "
            "Ariane 5 rocket from Kourou, French Guiana.",
        },
        {
            "title": "James Webb Space Telescope - Wikipedia",
            "url": "https://en.wikipedia.org/wiki/James_Webb_Space_Telescope",
            "snippet": "The James Webb Space Telescope (JWST) is a space telescope designed to "
            "conduct infrared astronomy.",
        },
    ]
    assert record.observation is None  # a search answer never says what is left


@pytest.mark.parametrize(
    ("reply", "kind", "attempts"),
    [
        (api("tavily-empty.json"), errors.NoResults, 1),
        (Reply(200, b"<html>oops</html>"), errors.ParseError, 1),
        (Reply(200, json={"results": {"not": "a list"}}), errors.ParseError, 1),
        (Reply(200, json=[1, 2]), errors.ParseError, 1),
        (api("tavily-400.json", 400), errors.AuthFailed, 1),
        (api("tavily-401.json", 401), errors.AuthFailed, 1),
        (Reply(403, json={"detail": {"error": "Forbidden"}}), errors.AuthFailed, 1),
        (api("tavily-432.json", 432), errors.QuotaExhausted, 1),
        (api("tavily-433.json", 433), errors.QuotaExhausted, 1),
        (api("tavily-429.json", 429, **{"retry-after": "0"}), errors.RateLimited, 3),
        (Reply(500, json={"detail": {"error": "Internal Server Error"}}), errors.ServerError, 3),
        (Reply(503, b"busy"), errors.ProviderOverloaded, 3),
    ],
)
def test_every_answer_is_classified(tmp_path, fake, reply, kind, attempts) -> None:
    fake.route(PATH, reply)
    record = search(make_settings(tmp_path, fake))
    assert type(record.error) is kind, record.error
    assert len(fake.requests_to(PATH)) == attempts  # quota and refusals are never retried
    assert record.error.http_status == reply.status
    assert str(record.error).startswith("Tavily")
    assert_no_key(fake, str(record.error), repr(record.error))


def test_an_error_body_echoing_the_key_is_never_copied(tmp_path, fake) -> None:
    fake.route(PATH, Reply(401, json={"detail": {"error": f"bad key {KEY}"}}))
    record = search(make_settings(tmp_path, fake))
    assert str(record.error) == "Tavily API error: 401"


def test_out_of_credits_marks_the_month_exhausted_and_bills_nothing(tmp_path, fake) -> None:
    fake.route(PATH, api("tavily-432.json", 432))
    record = search(make_settings(tmp_path, fake))
    assert record.units == 0
    assert record.observation == {
        "exhausted": "month",
        "why": "Tavily 432 (plan credit limit reached)",
    }
    rate = HttpResponse(429, {}, fixture_bytes("tavily-429.json"))
    assert tavily.observation(rate) is None


# --- billing ----------------------------------------------------------------------------------


def _ok(credits: object = None) -> HttpResponse:
    data: dict[str, Any] = fixture_json("tavily-ok.json")  # type: ignore[assignment]
    if credits is None:
        data.pop("usage")
    else:
        data["usage"] = {"credits": credits}
    return HttpResponse(200, {}, orjson.dumps(data))


def test_billing_reads_the_reported_credits_else_the_modes_price(tmp_path, fake) -> None:
    basic = make_settings(tmp_path, fake)
    advanced = basic._replace(modes={**basic.modes, "tavily": "advanced"})
    assert tavily.billed_units(_ok(2), basic) == 2  # what Tavily says it charged
    assert tavily.billed_units(_ok(), basic) == 1
    assert tavily.billed_units(_ok(), advanced) == 2
    assert tavily.billed_units(_ok("two"), advanced) == 2  # unreadable: the mode's price
    assert tavily.billed_units(HttpResponse(200, {}, b"not json"), basic) == 1
    for status in (400, 401, 429, 432, 433, 500):
        assert tavily.billed_units(HttpResponse(status, {}, b"{}"), advanced) == 0
    assert tavily.units_per_call("basic") == 1 and tavily.units_per_call("advanced") == 2
    assert tavily.units_per_call(None) == 2  # an unknown mode: the dearest


def test_an_advanced_search_bills_two_credits_from_its_answer(tmp_path, fake) -> None:
    data: dict[str, Any] = fixture_json("tavily-ok.json")  # type: ignore[assignment]
    data["usage"] = {"credits": 2}
    fake.route(PATH, Reply(200, json=data))
    record = search(make_settings(tmp_path, fake, providers={"tavily": {"mode": "advanced"}}))
    assert record.error is None and record.units == 2


# --- filters ----------------------------------------------------------------------------------


def test_filters_map_to_tavilys_fields_and_language_is_unsupported() -> None:
    params, unsupported = tavily.filter_params(
        {"count": 7, "freshness": "week", "country": "gb", "language": "de"}
    )
    assert params == {"max_results": 7, "time_range": "week", "country": "united kingdom"}
    assert unsupported == ["language"]
    params, unsupported = tavily.filter_params({"country": "XX", "count": 50})
    assert params == {} and unsupported == ["count", "country"]
    assert tavily.filter_params({}) == ({}, [])


def test_filters_reach_the_request_body(tmp_path, fake) -> None:
    fake.route(PATH, api("tavily-ok.json"))
    search(make_settings(tmp_path, fake), count=3, freshness="day", country="US")
    body = fake.requests_to(PATH)[0].json()
    assert (body["max_results"], body["time_range"], body["country"]) == (3, "day", "united states")


# --- the usage endpoint (reconciliation, issue 20 point 5) -------------------------------------


def read_usage(settings: Settings) -> dict[str, int | None]:
    request = tavily.usage_request(settings, KEY)
    response = http.send(request, deadline=time.monotonic() + 5, request_timeout_s=5)
    return tavily.parse_usage(response)


def test_usage_is_a_get_with_the_key_in_its_header(tmp_path, fake) -> None:
    fake.route("/usage", api("tavily-usage.json"))
    assert read_usage(make_settings(tmp_path, fake)) == {"used": 150, "limit": 1000}
    (sent,) = fake.requests_to("/usage")
    assert sent.method == "GET" and sent.target == "/usage" and sent.body == b""
    assert sent.headers["authorization"] == f"Bearer {KEY}"
    assert_no_key(fake)


@pytest.mark.parametrize(
    ("key", "account", "expected"),
    [
        ({"usage": 42, "limit": None}, {"plan_limit": 1000}, {"used": 42, "limit": 1000}),
        ({"usage": 42, "limit": None}, None, {"used": 42, "limit": None}),
        ({"usage": 42, "limit": None}, {"plan_limit": None}, {"used": 42, "limit": None}),
        ({"usage": 0, "limit": 2147483647}, {}, {"used": 0, "limit": None}),
    ],
)
def test_usage_limits(tmp_path, fake, key, account, expected) -> None:
    body: dict[str, Any] = {"key": key}
    if account is not None:
        body["account"] = account
    fake.route("/usage", Reply(200, json=body))
    assert read_usage(make_settings(tmp_path, fake)) == expected


def test_usage_of_a_key_without_its_own_limit_is_the_plans(tmp_path, fake) -> None:
    fake.route("/usage", api("tavily-usage-no-key-limit.json"))
    assert read_usage(make_settings(tmp_path, fake)) == {"used": 42, "limit": 1000}


@pytest.mark.parametrize(
    ("reply", "kind"),
    [
        (api("tavily-401.json", 401), errors.AuthFailed),
        (api("tavily-429.json", 429), errors.RateLimited),
        (Reply(500, b"oops"), errors.ServerError),
        (Reply(200, b"not json"), errors.ParseError),
        (Reply(200, json={"account": {}}), errors.ParseError),
        (Reply(200, json={"key": {"usage": "150"}}), errors.ParseError),
        (Reply(200, json={"key": {"usage": -1}}), errors.ParseError),
        (Reply(200, json={"key": {"usage": 1, "limit": "lots"}}), errors.ParseError),
        (Reply(200, json={"key": {"usage": 1}, "account": []}), errors.ParseError),
    ],
)
def test_usage_errors_are_classified(tmp_path, fake, reply, kind) -> None:
    fake.route("/usage", reply)
    with pytest.raises(kind) as caught:
        read_usage(make_settings(tmp_path, fake))
    assert KEY not in str(caught.value)


# --- whole calls through the runner ------------------------------------------------------------


def configure(env: Env, fake: FakeServer, **config: Any) -> None:
    env.environ["TAVILY_API_KEY"] = KEY
    env.write_config(
        {
            "endpoints": {s: fake.url for s in ("gemini", "brave", "tavily", "duckduckgo")},
            "web_fetch_min_interval_ms": 0,
            "retry_base_delay": 10,
            **config,
        }
    )


def test_forced_tavily_answers_through_the_cli(tmp_path, fake) -> None:
    env = Env(tmp_path)
    configure(env, fake, agent_allocations={"a": {"tavily": 3}})
    fake.route(PATH, api("tavily-ok.json"))
    call = {
        "tool": "smart_search",
        "args": {"query": "webb", "agent_id": "a", "force_provider": "tavily", "language": "de"},
    }
    proc = env.run_cli(json.dumps(call))
    result = json.loads(proc.stdout)
    assert result["error"] is None, result
    assert (result["provider_used"], result["quota_source"]) == ("tavily", "agent_allocation")
    assert result["results"][0]["url"] == "https://science.nasa.gov/mission/webb/"
    assert result["attempts"][0]["provider"] == "tavily" and result["attempts"][0]["units"] == 1
    assert 'language "de"' in result["warning"]  # Tavily has no language field
    assert fake.requests_to(PATH)[0].headers["authorization"] == f"Bearer {KEY}"
    assert_no_key(fake)
    assert_key_never_written(env, KEY, proc.stdout, proc.stderr)


def test_a_scheduled_agent_walks_to_tavily_and_status_shows_its_windows(tmp_path, fake) -> None:
    env = Env(tmp_path)
    assert_walked_only_when_named(env, fake, "tavily", PATH, configure, KEY)
    status = env.call("search_quota_status", {})
    windows = status["windows"]["tavily"]
    assert windows["unit"] == "credit" and windows["reset_timezone"] == "UTC"
    assert windows["daily"]["limit"] == 33 and windows["daily"]["used"] == 1
    assert windows["monthly"]["limit"] == 1000 and windows["monthly"]["used"] == 1
    assert status["providers"]["tavily"]["daily_limit"] == 33
    assert_key_never_written(env, KEY, json.dumps(status))


def test_a_432_stops_the_month_and_the_call_falls_through(tmp_path, fake) -> None:
    env = Env(tmp_path)
    configure(env, fake, agent_allocations={"a": {"tavily": 3}})
    fake.route(PATH, api("tavily-432.json", 432))
    fake.route("/html/", Reply(404, b"no"))
    found = env.call("smart_search", {"query": "webb", "agent_id": "a", "force_provider": "tavily"})
    tier = found["attempts"][0]
    assert tier["provider"] == "tavily" and tier["error_code"] == "quota_exhausted"
    assert tier["units"] == 0
    windows = env.call("search_quota_status", {})["windows"]["tavily"]
    assert windows["exhausted_until"] is not None and windows["monthly"]["used"] == 0
    assert len(fake.requests_to(PATH)) == 1  # never retried
    assert_key_never_written(env, KEY, json.dumps(found))


def test_only_its_own_module_names_tavily() -> None:
    """Issue 20, point 6: the package learns about Tavily from the registry alone."""
    naming = sorted(
        str(path.relative_to(REPO))
        for path in (REPO / "smart_search").rglob("*.py")
        if "tavily" in path.read_text().lower()
    )
    assert naming == ["smart_search/sources/providers/tavily.py"]


def _ledger_without_tavily(env: Env) -> dict[str, Any]:
    """Today's ledger as a release without Tavily wrote it: the same document, no Tavily."""
    env.write_config({"agent_allocations": {"a": {"gemini": 2, "brave": 1}}})
    assert env.call("search_mark_agent_complete", {"agent_id": "a"})["error"] is None
    doc = env.quota_doc()
    agent = doc["agents"]["a"]
    for part in (doc["carried"], doc["windows"], agent, agent["released"]):
        del part["tavily"]
    return doc


def test_a_ledger_written_before_tavily_existed_adopts_it_at_zero(tmp_path) -> None:
    env = Env(tmp_path)
    doc = _ledger_without_tavily(env)
    (env.state_dir / "search-quota.json").write_text(json.dumps(doc))
    status = env.call("search_quota_status", {})
    assert status["error"] is None, status
    assert status["agents"]["a"]["gemini"] == {"allocated": 2, "used": 0, "remaining": 0}
    assert status["agents"]["a"]["tavily"] == {"allocated": 0, "used": 0, "remaining": 0}
    assert status["windows"]["tavily"]["monthly"]["used"] == 0


def test_a_ledger_missing_only_part_of_a_provider_is_still_corrupt(tmp_path) -> None:
    env = Env(tmp_path)
    doc = _ledger_without_tavily(env)
    doc["windows"]["tavily"] = {"day": "2026-12-01"}  # named, but damaged: not a new provider
    (env.state_dir / "search-quota.json").write_text(json.dumps(doc))
    assert env.call("search_quota_status", {})["error_code"] == "state_corrupt"
