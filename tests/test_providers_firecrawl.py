"""Firecrawl search (issue 30, point 1) through call_provider and the whole runner, against a
loopback fake that sends the answers Firecrawl documents (tests/fixtures/api/firecrawl-*.json):
billed in credits (2 a search of up to 10 results), held at that worst case and settled to what
the answer reports. Its keyless tier is tested in test_keyless_tiers.py, its scrape (smart_fetch's
fallback) in test_fetch_fallback.py."""

from __future__ import annotations

import logging
import threading
import time
from pathlib import Path

import orjson
import pytest

from smart_search import errors
from smart_search.budget.ledger import Ledger
from smart_search.host.config import Settings
from smart_search.sources.providers import firecrawl
from smart_search.sources.providers.calls import ProviderCall
from tests.conftest import Env
from tests.fakes import FakeServer, Reply, fixture_bytes
from tests.provider_support import (
    assert_api_error,
    assert_echoed_key_stays_secret,
    assert_key_never_written,
    forced_cli,
    install_key,
    provider_call,
    provider_settings,
    response,
)

KEY = "SENTINEL-FIRECRAWL-KEY-0001"
PATH = "/v2/search"


def make_settings(tmp_path: Path, fake: FakeServer, **config: object) -> Settings:
    return provider_settings(tmp_path, fake, "firecrawl", KEY, **config)


def run(settings: Settings, query: str = "firecrawl", **kw: object) -> ProviderCall:
    return provider_call("firecrawl", settings, query, **kw)


def ok(**headers: str) -> Reply:
    return Reply(200, body=fixture_bytes("firecrawl-ok.json"), headers=headers)


def test_request_is_a_json_post_with_the_key_as_a_bearer_token_only(
    tmp_path: Path, fake: FakeServer
) -> None:
    fake.route(PATH, ok())
    record = run(make_settings(tmp_path, fake), query="web data api")
    assert record.error is None
    (seen,) = fake.requests
    assert (seen.method, seen.path, seen.query) == ("POST", PATH, {})
    assert seen.headers["authorization"] == f"Bearer {KEY}"
    assert KEY not in seen.target and KEY.encode() not in seen.body
    assert seen.json() == {"query": "web data api", "limit": 10}


def test_web_results_are_title_url_snippet_and_junk_urls_are_dropped(
    tmp_path: Path, fake: FakeServer
) -> None:
    fake.route(PATH, ok())
    record = run(make_settings(tmp_path, fake))
    assert record.error is None and record.units == 2
    assert record.answer.results == [
        {"title": "Firecrawl - The Web Data API for AI", "url": "https://www.firecrawl.dev/",
         "snippet": "The web crawling, scraping, and search API for AI. Built for scale."},
        {"title": "mendableai/firecrawl: Turn entire websites into LLM-ready markdown",
         "url": "https://github.com/mendableai/firecrawl",
         "snippet": "Firecrawl is an API service that takes a URL, crawls it, and converts it "
                    "into clean markdown."},
    ]  # fmt: skip


@pytest.mark.parametrize(
    "body", [fixture_bytes("firecrawl-empty.json"), b'{"success": true, "data": {}}'],
)  # fmt: skip
def test_empty_is_no_results_and_not_retried(tmp_path: Path, fake: FakeServer, body: bytes) -> None:
    fake.route(PATH, Reply(200, body=body), ok())
    record = run(make_settings(tmp_path, fake, retry_max_attempts=3))
    assert isinstance(record.error, errors.NoResults) and len(fake.requests) == 1


@pytest.mark.parametrize("body", [b"nope", b"[]", b'{"success": true, "data": []}'])
def test_unreadable_success_is_a_parse_error(tmp_path: Path, fake: FakeServer, body: bytes) -> None:
    fake.route(PATH, Reply(200, body=body))
    record = run(make_settings(tmp_path, fake, retry_max_attempts=1))
    assert isinstance(record.error, errors.ParseError)


@pytest.mark.parametrize(
    ("reply", "kind"),
    [(Reply(401, body=fixture_bytes("firecrawl-401.json")), errors.AuthFailed),
     (Reply(402, body=fixture_bytes("firecrawl-402.json")), errors.QuotaExhausted),
     (Reply(429, body=fixture_bytes("firecrawl-429.json"), headers={"retry-after": "0"}),
      errors.RateLimited),
     (Reply(408, body=b"{}"), errors.Timeout),
     (Reply(500, body=b"{}"), errors.ServerError)],
    ids=["401", "402", "429", "408", "500"],
)  # fmt: skip
def test_error_statuses(
    tmp_path: Path, fake: FakeServer, caplog: pytest.LogCaptureFixture, reply: Reply, kind: type
) -> None:
    caplog.set_level(logging.DEBUG)
    fake.route(PATH, reply)
    record = run(make_settings(tmp_path, fake, retry_max_attempts=1))
    assert_api_error(record, kind, "Firecrawl", reply.status, KEY, caplog.text)
    spent = kind is errors.QuotaExhausted
    assert (record.observation is not None) is spent
    if spent:
        assert record.observation == {
            "exhausted": "month", "why": "Firecrawl 402 (credits exhausted)"}  # fmt: skip


def test_spent_credits_are_never_retried(tmp_path: Path, fake: FakeServer) -> None:
    fake.route(PATH, Reply(402, body=fixture_bytes("firecrawl-402.json")), ok())
    record = run(make_settings(tmp_path, fake, retry_max_attempts=5))
    assert isinstance(record.error, errors.QuotaExhausted) and len(fake.requests) == 1


def test_a_429_carries_its_retry_after_and_is_retried(tmp_path: Path, fake: FakeServer) -> None:
    fake.route(PATH, Reply(429, body=b"{}", headers={"retry-after": "9"}))
    one = run(make_settings(tmp_path, fake, retry_max_attempts=1))
    assert isinstance(one.error, errors.RateLimited) and one.error.retry_after == 9
    fake.route(PATH, Reply(429, body=b"{}", headers={"retry-after": "0"}), ok())
    record = run(make_settings(tmp_path, fake, retry_max_attempts=3))
    assert record.error is None and record.retries == 1 and record.units == 2


@pytest.mark.parametrize(
    ("body", "units"),
    [(fixture_bytes("firecrawl-ok.json"), 2),
     (orjson.dumps({"success": True, "data": {"web": []}, "creditsUsed": 1}), 1),
     (orjson.dumps({"success": True, "data": {"web": []}, "creditsUsed": "1"}), 2),
     (orjson.dumps({"success": True, "data": {"web": []}, "creditsUsed": True}), 2),
     (orjson.dumps({"success": True, "data": {"web": []}, "creditsUsed": 10**6}), 2),
     (orjson.dumps({"success": True, "data": {"web": []}}), 2), (b"not json", 2)],
)  # fmt: skip
def test_billed_credits(body: bytes, units: int) -> None:
    assert firecrawl.billed_units(response(200, body), None) == units
    assert firecrawl.billed_units(response(402, body), None) == 0


def test_the_worst_case_is_two_credits_and_can_be_pinned(tmp_path: Path, fake: FakeServer) -> None:
    settings = make_settings(tmp_path, fake)
    assert (settings.units["firecrawl"], settings.max_units_per_call["firecrawl"]) == ("credit", 2)
    pinned = make_settings(tmp_path, fake, providers={"firecrawl": {"max_units_per_call": 4}})
    assert pinned.max_units_per_call["firecrawl"] == 4
    assert settings.modes["firecrawl"] is None  # one price: no search modes


@pytest.mark.parametrize(
    ("filters", "body", "unsupported"),
    [({"count": 4}, {"limit": 4}, []), ({"count": 11}, {}, ["count"]),
     ({"freshness": "week", "country": "de"}, {"tbs": "qdr:w", "country": "DE"}, []),
     ({"freshness": "decade", "language": "de"}, {}, ["freshness", "language"])],
)  # fmt: skip
def test_filters_map_to_firecrawl_body_keys(filters: dict, body: dict, unsupported: list) -> None:
    assert firecrawl.filter_params(filters) == (body, unsupported)


# --- the whole runner ---


def test_a_search_holds_its_worst_case_then_settles_to_what_the_answer_reports(
    tmp_path: Path, fake: FakeServer
) -> None:
    env = Env(tmp_path)
    install_key(env, fake, "firecrawl", KEY, agent_allocations={"desk": {"firecrawl": 5}})
    cheap = orjson.loads(fixture_bytes("firecrawl-ok.json")) | {"creditsUsed": 1}
    fake.route(PATH, Reply(200, json=cheap, delay=1.5))
    done: list[dict] = []
    worker = threading.Thread(target=lambda: done.append(forced_cli(env, "firecrawl")[0]))
    worker.start()
    held = None
    deadline = time.monotonic() + 30
    while held is None and time.monotonic() < deadline and worker.is_alive():
        window = Ledger(env.settings()).snapshot()["windows"]["firecrawl"]
        if window.get("holds"):
            held = (window["day_used"], [h["units"] for h in window["holds"].values()])
        time.sleep(0.02)
    worker.join(60)
    assert held == (2, [2])  # the worst case, held before the request left
    (found,) = done
    assert found["error"] is None and found["attempts"][0]["units"] == 1
    window = Ledger(env.settings()).snapshot()["windows"]["firecrawl"]
    assert (window["day_used"], window["holds"]) == (1, {})  # settled to the reported credit
    agent = env.call("search_quota_status", {"agent_id": "desk"})["firecrawl"]
    assert (agent["used"], agent["remaining"]) == (1, 4)


def test_forced_firecrawl_answers_and_status_shows_its_credit_windows(
    tmp_path: Path, fake: FakeServer
) -> None:
    env = Env(tmp_path)
    install_key(env, fake, "firecrawl", KEY)
    fake.route(PATH, ok())
    found, proc = forced_cli(env, "firecrawl", count=1, freshness="day", country="GB")
    assert found["error"] is None, found
    assert found["provider_used"] == "firecrawl" and found["attempts"][0]["units"] == 2
    assert [r["url"] for r in found["results"]] == ["https://www.firecrawl.dev/"]
    assert fake.requests_to(PATH)[0].json() == {
        "query": "james webb launch", "limit": 1, "tbs": "qdr:d", "country": "GB"}  # fmt: skip
    windows = env.call("search_quota_status")["windows"]["firecrawl"]
    assert (windows["unit"], windows["daily"]["limit"], windows["monthly"]["limit"]) == (
        "credit", 16, 500)  # fmt: skip
    assert (windows["daily"]["used"], windows["monthly"]["used"]) == (2, 2)
    assert_key_never_written(env, KEY, proc.stdout, proc.stderr)


def test_a_key_firecrawl_echoes_back_is_never_written(tmp_path: Path, fake: FakeServer) -> None:
    echo = Reply(401, json={"success": False, "error": f"Unauthorized: Invalid token {KEY}"})
    assert_echoed_key_stays_secret(Env(tmp_path), fake, "firecrawl", PATH, KEY, echo)


def test_spent_credits_fall_through_and_mark_the_month_exhausted(
    tmp_path: Path, fake: FakeServer
) -> None:
    env = Env(tmp_path)
    install_key(env, fake, "firecrawl", KEY)
    fake.route(PATH, Reply(402, body=fixture_bytes("firecrawl-402.json")))
    fake.route("/html/", Reply(404, b"no"))
    found, _ = forced_cli(env, "firecrawl", query="plain words")
    first = found["attempts"][0]
    assert (first["provider"], first["error_code"], first["units"]) == (
        "firecrawl", "quota_exhausted", 0)  # fmt: skip
    assert env.call("search_quota_status")["windows"]["firecrawl"]["exhausted_until"] is not None
    assert_key_never_written(env, KEY)


def test_a_scheduled_agents_plan_walks_to_firecrawl_when_provider_order_names_it(
    tmp_path: Path, fake: FakeServer
) -> None:
    def install(env: Env, fake: FakeServer, **config: object) -> None:
        install_key(env, fake, "firecrawl", KEY, **config)

    env = Env(tmp_path)
    fake.route(PATH, ok())
    install(env, fake, agent_allocations={"cron": {"firecrawl": 4}},
            provider_order=["gemini", "firecrawl"])  # fmt: skip
    found = env.call("smart_search", {"query": "webb telescope", "agent_id": "cron"})
    assert (found["provider_used"], found["quota_source"]) == ("firecrawl", "agent_allocation")
    # Two credits of the agent's four.
    assert env.call("search_quota_status")["agents"]["cron"]["firecrawl"] == {
        "allocated": 4, "used": 2, "remaining": 2}  # fmt: skip


@pytest.mark.parametrize("name", ["minimax", "ollama", "firecrawl"])
def test_the_three_have_one_price_so_no_search_mode(tmp_path: Path, name: str) -> None:
    """None of MiniMax, Ollama or Firecrawl sells searches at several prices: `mode` is refused,
    and the worst case is the one price."""
    from smart_search.errors import ConfigError
    from tests.provider_support import provider_settings as settings_for

    with FakeServer() as fake:
        plain = settings_for(tmp_path, fake, name, KEY)
        assert plain.modes[name] is None
        with pytest.raises(ConfigError, match=f"providers.{name}.mode"):
            settings_for(tmp_path, fake, name, KEY, providers={name: {"mode": "advanced"}})
