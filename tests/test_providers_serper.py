"""Serper (issue 20, point 1) through call_provider and the whole runner, against a loopback fake
that sends the answers Serper documents (tests/fixtures/api/serper-*.json)."""

from __future__ import annotations

import json
import logging
from pathlib import Path

import orjson
import pytest

from smart_search import errors
from smart_search.host.config import Settings
from smart_search.sources.filters import unsupported_warning
from smart_search.sources.providers import serper
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

KEY = "SENTINEL-SERPER-KEY-0001"
PATH = "/search"


def make_settings(tmp_path: Path, fake: FakeServer, **config: object) -> Settings:
    return provider_settings(tmp_path, fake, "serper", KEY, **config)


def run(settings: Settings, query: str = "james webb launch", **kw: object) -> ProviderCall:
    return provider_call("serper", settings, query, **kw)


# --- the request ---


def test_request_is_a_json_post_with_the_key_in_its_header_only(
    tmp_path: Path, fake: FakeServer
) -> None:
    fake.route(PATH, Reply(200, body=fixture_bytes("serper-ok.json")))
    record = run(make_settings(tmp_path, fake), query="when did JWST launch")
    assert record.error is None
    (seen,) = fake.requests
    assert (seen.method, seen.path, seen.query) == ("POST", PATH, {})
    assert seen.headers["x-api-key"] == KEY
    assert seen.headers["content-type"].startswith("application/json")
    assert KEY not in seen.target and KEY.encode() not in seen.body
    assert seen.json() == {"q": "when did JWST launch", "num": 10}


# --- parsing ---


def test_organic_results_are_title_url_snippet_and_junk_links_are_dropped(
    tmp_path: Path, fake: FakeServer
) -> None:
    fake.route(PATH, Reply(200, body=fixture_bytes("serper-ok.json")))
    record = run(make_settings(tmp_path, fake))
    assert record.error is None and record.retries == 0
    # The knowledge graph and "people also ask" are not web results; the ftp:// link is junk.
    assert record.answer.results == [
        {
            "title": "James Webb Space Telescope - NASA Science",
            "url": "https://science.nasa.gov/mission/webb/",
            "snippet": "Webb launched on Dec. 25th 2021 and is the premier observatory of the "
            "next decade.",
        },
        {
            "title": "Webb's launch - ESA",
            "url": "https://www.esa.int/Science_Exploration/Space_Science/Webb/Webb_launch",
            "snippet": "",
        },
    ]
    assert record.units == 1 and record.http_status == 200 and record.observation is None


@pytest.mark.parametrize(
    "body",
    [
        fixture_bytes("serper-empty.json"),
        orjson.dumps({"searchParameters": {"q": "x"}, "credits": 1}),  # no `organic` at all
        orjson.dumps({"organic": [{"title": "x", "link": "mailto:a@b.c"}, {"title": "y"}]}),
    ],
    ids=["empty", "no-organic", "only-junk"],
)
def test_empty_is_no_results_and_not_retried(tmp_path: Path, fake: FakeServer, body: bytes) -> None:
    fake.route(PATH, Reply(200, body=body))
    record = run(make_settings(tmp_path, fake, retry_max_attempts=3))
    assert isinstance(record.error, errors.NoResults)
    assert str(record.error) == "Serper returned no results."
    assert len(fake.requests) == 1
    assert record.units == 1  # the page was billed all the same


@pytest.mark.parametrize(
    "body",
    [b"<html>oops</html>", b"[]", b'{"organic": {"title": "x"}}', b'{"knowledgeGraph": {}}'],
    ids=["html", "array", "organic-not-a-list", "no-organic-no-parameters"],
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
        (Reply(403, body=fixture_bytes("serper-403.json")), errors.AuthFailed),
        (Reply(401, json={"message": f"Unauthorized {KEY}", "statusCode": 401}), errors.AuthFailed),
        (Reply(400, json={"message": "Query is required", "statusCode": 400}), errors.AuthFailed),
        (Reply(400, body=fixture_bytes("serper-400-credits.json")), errors.QuotaExhausted),
        (
            Reply(429, json={"message": "Not enough credits", "statusCode": 429}),
            errors.QuotaExhausted,
        ),
        (Reply(402, body=b""), errors.QuotaExhausted),
        (Reply(429, body=fixture_bytes("serper-429.json")), errors.RateLimited),
        (Reply(429, body=b"<html>slow down</html>"), errors.RateLimited),
        (Reply(500, json={"message": "Internal error", "statusCode": 500}), errors.ServerError),
        (Reply(503, body=b""), errors.ProviderOverloaded),
    ],
    ids=[
        "403",
        "401-key-echoed",
        "400-bad-request",
        "400-no-credits",
        "429-no-credits",
        "402",
        "429-rate",
        "429-html",
        "500",
        "503",
    ],  # fmt: skip
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
    assert_api_error(record, kind, "Serper", reply.status, KEY, caplog.text)
    exhausted = kind is errors.QuotaExhausted
    assert (record.observation is not None) is exhausted
    if exhausted:
        assert record.observation == {
            "exhausted": "month",
            "why": f"Serper {reply.status} (credits exhausted)",
        }


def test_spent_credits_are_never_retried(tmp_path: Path, fake: FakeServer) -> None:
    fake.route(PATH, Reply(400, body=fixture_bytes("serper-400-credits.json")),
               Reply(200, body=fixture_bytes("serper-ok.json")))  # fmt: skip
    record = run(make_settings(tmp_path, fake, retry_max_attempts=5))
    assert isinstance(record.error, errors.QuotaExhausted) and not record.error.retryable
    assert len(fake.requests) == 1


def test_rate_limit_is_retried_then_answers(tmp_path: Path, fake: FakeServer) -> None:
    fake.route(PATH, Reply(429, body=fixture_bytes("serper-429.json")),
               Reply(200, body=fixture_bytes("serper-ok.json")))  # fmt: skip
    record = run(make_settings(tmp_path, fake, retry_max_attempts=3))
    assert record.error is None and record.retries == 1
    assert len(fake.requests) == 2 and record.units == 1


@pytest.mark.parametrize(
    ("body", "units"),
    [
        (fixture_bytes("serper-ok.json"), 1),
        (orjson.dumps({"organic": [], "credits": 2}), 2),  # the answer says what it cost
        (orjson.dumps({"organic": [], "credits": "2"}), 1),
        (orjson.dumps({"organic": [], "credits": True}), 1),
        (orjson.dumps({"organic": [], "credits": 10**6}), 1),
        (orjson.dumps({"organic": []}), 1),
        (b"not json", 1),
        (b"[1]", 1),
    ],
)
def test_billed_credits(body: bytes, units: int) -> None:
    assert serper.billed_units(response(200, body), None) == units
    assert serper.billed_units(response(500, body), None) == 0


# --- filters ---


def test_filters_map_to_serper_body_keys() -> None:
    body, unsupported = serper.filter_params(
        {"count": 5, "freshness": "week", "country": "DE", "language": "de"}
    )
    assert body == {"num": 5, "tbs": "qdr:w", "gl": "de", "hl": "de"}
    assert unsupported == []


@pytest.mark.parametrize(
    ("filters", "unsupported"),
    [
        ({"count": 20}, ["count"]),  # a bigger page costs more credits: not sent
        ({"count": 0}, ["count"]),
        ({"freshness": "hour"}, ["freshness"]),
        ({"country": "USA"}, ["country"]),
        ({"language": "pt-br"}, ["language"]),
        ({"freshness": "day", "count": 10}, []),
    ],
)
def test_filters_serper_cannot_honour_are_reported(filters: dict, unsupported: list) -> None:
    body, left = serper.filter_params(filters)
    assert left == unsupported
    assert set(body) <= {"num", "tbs", "gl", "hl"}
    if unsupported:
        assert unsupported_warning("Serper", left, filters).startswith(
            "Serper could not apply these filters: "
        )


def test_filters_reach_the_request(tmp_path: Path, fake: FakeServer) -> None:
    fake.route(PATH, Reply(200, body=fixture_bytes("serper-ok.json")))
    run(make_settings(tmp_path, fake), filters={"count": 3, "country": "gb", "freshness": "year"})
    assert fake.requests[0].json() == {"q": "james webb launch", "num": 3, "gl": "gb",
                                       "tbs": "qdr:y"}  # fmt: skip


# --- the whole runner ---


def _install(env: Env, fake: FakeServer, **config: object) -> None:
    """Serper pointed at the fake, its key in openclaw.json's top-level `env.vars`."""
    env.write_config({"endpoints": {"serper": fake.url, "duckduckgo": fake.url},
                      "web_fetch_min_interval_ms": 0, **config})  # fmt: skip
    doc = json.loads(env.config_path.read_text())
    doc["env"] = {"vars": {"SERPER_API_KEY": KEY}}
    env.config_path.write_text(json.dumps(doc))


def test_forced_serper_answers_and_status_shows_its_windows(
    tmp_path: Path, fake: FakeServer
) -> None:
    env = Env(tmp_path)
    _install(env, fake)
    fake.route(PATH, Reply(200, body=fixture_bytes("serper-ok.json")))
    found = env.call("smart_search", {"query": "james webb launch", "agent_id": "desk",
                                      "force_provider": "serper", "language": "fr"})  # fmt: skip
    assert found["error"] is None, found
    assert found["provider_used"] == "serper" and found["fallback_used"] is False
    assert found["results"][0]["url"] == "https://science.nasa.gov/mission/webb/"
    assert found["attempts"][0]["provider"] == "serper" and found["attempts"][0]["units"] == 1
    assert fake.requests_to(PATH)[0].json()["hl"] == "fr"
    status = env.call("search_quota_status")
    windows = status["windows"]["serper"]
    assert windows["unit"] == "credit"
    assert (windows["daily"]["limit"], windows["monthly"]["limit"]) == (83, 2500)
    assert (windows["daily"]["used"], windows["monthly"]["used"]) == (1, 1)
    proc = env.run_cli(
        json.dumps(
            {
                "tool": "smart_search",
                "args": {
                    "query": "james webb launch",
                    "agent_id": "desk",
                    "force_provider": "serper",
                },
            }
        )
    )
    assert json.loads(proc.stdout)["provider_used"] == "serper"
    assert_key_never_written(env, KEY, proc.stdout, proc.stderr)
    for seen in fake.requests:
        assert KEY not in seen.target


def test_a_scheduled_agents_plan_walks_to_serper_when_provider_order_names_it(
    tmp_path: Path, fake: FakeServer
) -> None:
    assert_walked_only_when_named(Env(tmp_path), fake, "serper", PATH, _install, KEY)


def test_spent_credits_fall_through_and_mark_serper_exhausted(
    tmp_path: Path, fake: FakeServer
) -> None:
    env = Env(tmp_path)
    _install(env, fake)
    fake.route(PATH, Reply(400, body=fixture_bytes("serper-400-credits.json")))
    fake.route("/html/", Reply(404, b"no"))
    found = env.call("smart_search", {"query": "plain words", "agent_id": "desk",
                                      "force_provider": "serper"})  # fmt: skip
    first = found["attempts"][0]
    assert (first["provider"], first["error_code"], first["units"]) == (
        "serper", "quota_exhausted", 0)  # fmt: skip
    assert env.call("search_quota_status")["windows"]["serper"]["exhausted_until"] is not None
    assert_key_never_written(env, KEY)


def test_deep_mode_asks_exa_and_serper_as_legs_and_merges_them(tmp_path: Path) -> None:
    """Issue 20, point 6: named in provider_order and with their keys, both new APIs are deep
    legs like Gemini's and Brave's; each bills its one unit and both lists are merged."""
    env = Env(tmp_path)
    with FakeServer() as exa_fake, FakeServer() as serper_fake:
        exa_fake.route(PATH, Reply(200, body=fixture_bytes("exa-ok.json")))
        serper_fake.route(PATH, Reply(200, body=fixture_bytes("serper-ok.json")))
        serper_fake.route("/html/", Reply(404, b"no"))
        env.write_config({"endpoints": {"exa": exa_fake.url, "serper": serper_fake.url,
                                        "duckduckgo": serper_fake.url},
                          "provider_order": ["brave", "exa", "serper"],
                          "web_fetch_min_interval_ms": 0})  # fmt: skip
        env.environ |= {"EXA_API_KEY": "SENTINEL-EXA-KEY-0002", "SERPER_API_KEY": KEY}
        r = env.call("smart_search", {"query": "james webb launch", "agent_id": "desk",
                                      "mode": "deep"})  # fmt: skip
    assert r["error"] is None, r
    legs = {a["provider"]: a for a in r["attempts"]}
    assert (legs["exa"]["outcome"], legs["exa"]["units"]) == ("success", 1)
    assert (legs["serper"]["outcome"], legs["serper"]["units"]) == ("success", 1)
    sources = {s["source"] for item in r["results"] for s in item["sources"]}
    assert {"exa", "serper"} <= sources
    status = env.call("search_quota_status")["providers"]
    assert (status["exa"]["used"], status["serper"]["used"]) == (1, 1)
    assert_key_never_written(env, KEY, json.dumps(r))
