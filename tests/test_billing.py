"""Quota that matches what providers bill (the billing issue) and a ledger that cannot be talked
into giving free searches (the hardening issue, items 1, 2 and 9).

Windows on each provider's clock, real units settled after the answer, provider-reported
headroom, exhaustion marks every process obeys, migration from version 1, and a worked month.
"""

from __future__ import annotations

import copy
import json
import random
import subprocess
import sys
from calendar import timegm
from typing import Any

import pytest

from smart_search.budget import quota
from smart_search.budget.ledger import Ledger, next_reset, windows
from tests.conftest import Env, charge
from tests.fakes import FakeServer, Reply, fixture_bytes, fixture_json

GEMINI_PATH = "/v1beta/models/gemini-flash-latest:generateContent"
BRAVE_PATH = "/res/v1/web/search"
MONTH_POLICY = "1;w=1, 15000;w=2592000"


def utc(year: int, month: int, day: int, hour: int = 0, minute: int = 0) -> float:
    return float(timegm((year, month, day, hour, minute, 0, 0, 0, 0)))


def gemini_answer(queries: int) -> bytes:
    """The real fixture, with the model having run `queries` search queries."""
    body: Any = copy.deepcopy(fixture_json("gemini-ok.json"))
    metadata = body["candidates"][0]["groundingMetadata"]
    metadata["webSearchQueries"] = [f"query {i}" for i in range(queries)]
    return json.dumps(body).encode()


def brave_ok(remaining: int | None = None, status: int = 200) -> Reply:
    headers = {"content-type": "application/json"}
    if remaining is not None:
        headers |= {
            "X-RateLimit-Limit": "1, 15000",
            "X-RateLimit-Policy": MONTH_POLICY,
            "X-RateLimit-Remaining": f"0, {remaining}",
            "X-RateLimit-Reset": "1, 86400",
        }
    return Reply(status, fixture_bytes("brave-ok.json"), headers)


@pytest.fixture
def fake() -> Any:
    with FakeServer() as server:
        yield server


def configure(env: Env, fake: FakeServer, **config: Any) -> None:
    base: dict[str, Any] = {
        "endpoints": {n: fake.url for n in ("gemini", "brave", "google", "bing", "duckduckgo")},
        "web_fetch_min_interval_ms": 0,
        "retry_base_delay": 10,
        "request_timeout_ms": 3000,
        "agent_allocations": {"cron": {"gemini": 5, "brave": 5}},
        # These tests pay for repeated questions on purpose: what is spent is what is tested.
        "cache": {"enabled": False},
    }
    base.update(config)
    env.write_config(base)
    env.environ["GEMINI_API_KEY"] = "SENTINEL-GEMINI-7d1"
    env.environ["BRAVE_API_KEY"] = "SENTINEL-BRAVE-3c9"


def search(env: Env, query: str, agent: str = "cron", **args: Any) -> dict[str, Any]:
    return env.call("smart_search", {"query": query, "agent_id": agent, **args})


def windows_of(env: Env, provider: str) -> dict[str, Any]:
    return env.call("search_quota_status")["windows"][provider]


# --- windows: arithmetic ----------------------------------------------------------------------


def test_a_reservation_needs_headroom_in_both_windows() -> None:
    c = quota.Ceilings({"gemini": 10, "brave": 10}, {}, {"gemini": 0, "brave": 0}, {"brave": 3})
    doc = quota.roll(quota.new_day("2026-12-01"), quota.Windows("2026-12-01", {
        "gemini": ("2026-12-01", "2026-12"), "brave": ("2026-12-01", "2026-12")}))  # fmt: skip
    assert [quota.reserve(doc, c, "a", "brave").source for _ in range(3)] == ["direct"] * 3
    with pytest.raises(quota.QuotaExhausted, match="Brave quota is exhausted for this month"):
        quota.reserve(doc, c, "a", "brave")
    # The day still had room: only the month stopped it.
    assert doc["windows"]["brave"]["day_used"] == 3 < c.daily_limits["brave"]


def test_settle_refunds_zero_and_charges_extra_units_even_past_an_allocation() -> None:
    c = quota.Ceilings({"gemini": 10, "brave": 10}, {"a": {"gemini": 1}}, {"gemini": 0})
    doc = quota.new_day("2026-12-01")
    held = quota.reserve(doc, c, "a", "gemini")
    assert quota.settle(doc, "a", "gemini", held, 0)  # zero search queries: refunded
    assert quota.allocation_remaining(doc, c, "a", "gemini") == 1
    held = quota.reserve(doc, c, "a", "gemini")
    assert quota.settle(doc, "a", "gemini", held, 3)  # three queries: two more charged
    assert doc["agents"]["a"]["gemini"]["allocation"] == 3  # past the allocation of 1, once
    assert doc["windows"]["gemini"]["day_used"] == 3
    assert quota.pick_source(doc, c, "a", "gemini") == "direct"  # the next call needs headroom


def test_provider_windows_follow_their_own_clock_and_never_reset_backwards(env: Env) -> None:
    env.write_config({"agent_allocations": {"cron": {"gemini": 5, "brave": 5}}})
    s = env.settings()
    # 07:30 UTC on Dec 2 is 23:30 on Dec 1 in Los Angeles: Gemini's day has not turned yet.
    before_pacific_midnight = utc(2026, 12, 2, 7, 30)
    w = windows(s, before_pacific_midnight)
    assert w.date == "2026-12-02"
    assert w.provider == {
        "gemini": ("2026-12-01", "2026-12"),
        "brave": ("2026-12-02", "2026-12"),
        "tavily": ("2026-12-02", "2026-12"),
    }
    charge(Ledger(s, clock=lambda: utc(2026, 12, 1, 20)), "cron", "gemini")
    at = Ledger(s, clock=lambda: before_pacific_midnight)
    charge(at, "cron", "gemini")
    assert at.snapshot()["windows"]["gemini"]["day_used"] == 2  # same Pacific day
    assert at.agent_status("cron")["gemini"]["used"] == 1  # the agents' (UTC) day did turn
    after = Ledger(s, clock=lambda: utc(2026, 12, 2, 8, 30))
    assert after.snapshot()["windows"]["gemini"]["day_used"] == 0
    charge(after, "cron", "gemini")
    # A clock moved back never resets the newer windows.
    back = Ledger(s, clock=lambda: utc(2026, 12, 1, 20))
    assert back.snapshot()["windows"]["gemini"] | {"reported": None} == back.snapshot()[
        "windows"
    ]["gemini"]
    assert back.snapshot()["windows"]["gemini"]["day"] == "2026-12-02"
    assert back.snapshot()["windows"]["gemini"]["month_used"] == 3
    assert next_reset(s, "gemini", utc(2026, 12, 2, 8, 30), monthly=False) == utc(2026, 12, 3, 8)
    assert next_reset(s, "brave", utc(2026, 12, 31, 23), monthly=True) == utc(2027, 1, 1)


# --- real units, against loopback fakes ------------------------------------------------------


@pytest.mark.parametrize(("queries", "charged"), [(0, 0), (1, 1), (3, 3)])
def test_gemini_3_is_charged_per_search_query_it_ran(
    env: Env, fake: FakeServer, queries: int, charged: int
) -> None:
    configure(env, fake)
    fake.route(GEMINI_PATH, Reply(200, gemini_answer(queries)))
    r = search(env, "NSE stock news")
    assert r["provider_used"] == "gemini" and r["attempts"][0]["units"] == charged
    assert r["quota_source"] == ("agent_allocation" if charged else "none")
    assert r["queries_remaining"] == max(0, 5 - charged)
    win = windows_of(env, "gemini")
    assert win["unit"] == "search_query"
    assert win["daily"]["used"] == win["monthly"]["used"] == charged
    assert env.call("search_quota_status", {"agent_id": "cron"})["gemini"]["used"] == charged


def test_gemini_2_is_charged_per_grounded_prompt(env: Env, fake: FakeServer) -> None:
    configure(env, fake, gemini_model="gemini-2.5-flash")
    fake.route("/v1beta/models/gemini-2.5-flash:generateContent", Reply(200, gemini_answer(3)))
    assert search(env, "NSE stock news")["attempts"][0]["units"] == 1
    assert windows_of(env, "gemini")["unit"] == "request"


def test_brave_bills_every_2xx_even_with_no_usable_results(env: Env, fake: FakeServer) -> None:
    """The fake served 12 answers with no results; each was billed, so each stays charged."""
    configure(env, fake, agent_allocations={"cron": {"gemini": 0, "brave": 20}})
    env.environ.pop("GEMINI_API_KEY")
    fake.route(BRAVE_PATH, Reply(200, fixture_bytes("brave-empty.json")))
    fake.route("/html/", Reply(404, b"no"))
    for _ in range(12):
        r = search(env, "nasa news")
        assert r["attempts"][0]["error_code"] == "no_results" and r["attempts"][0]["units"] == 1
    assert len(fake.requests_to(BRAVE_PATH)) == 12
    assert env.call("search_quota_status", {"agent_id": "cron"})["brave"]["used"] == 12


def test_a_request_that_never_left_is_refunded(env: Env, fake: FakeServer) -> None:
    import socket

    closed = socket.socket()
    closed.bind(("127.0.0.1", 0))
    port = closed.getsockname()[1]
    closed.close()  # nothing listens there: connect is refused
    configure(env, fake)
    env.write_config(
        {
            "endpoints": {"brave": f"http://127.0.0.1:{port}", "duckduckgo": fake.url},
            "agent_allocations": {"cron": {"gemini": 0, "brave": 5}},
            "retry_max_attempts": 2,
            "retry_base_delay": 10,
        }
    )
    env.environ.pop("GEMINI_API_KEY")
    fake.route("/html/", Reply(404, b"no"))
    r = search(env, "nasa news")
    assert r["attempts"][0]["error_code"] == "transport_failure"
    assert r["attempts"][0]["units"] == 0 and r["attempts"][0]["retries"] == 1
    assert env.call("search_quota_status", {"agent_id": "cron"})["brave"]["used"] == 0


@pytest.mark.parametrize(("limit", "requests", "used"), [(1, 1, 1), (2, 2, 2)])
def test_a_retry_after_a_request_that_left_needs_a_unit_of_its_own(
    env: Env, fake: FakeServer, limit: int, requests: int, used: int
) -> None:
    """A stall after the request left may have been billed: the retry is sent only if one more
    unit can be reserved for it (daily limit 1: one request in all; 2: the retry goes)."""
    configure(
        env,
        fake,
        providers={"brave": {"daily_limit": limit}},
        agent_allocations={"cron": {"gemini": 0, "brave": 0}},
        request_timeout_ms=400,
        retry_max_attempts=3,
    )
    env.environ.pop("GEMINI_API_KEY")
    fake.route(BRAVE_PATH, Reply(200, b"{}", delay=30), brave_ok())
    fake.route("/html/", Reply(404, b"no"))
    r = search(env, "nasa news")
    assert len(fake.requests_to(BRAVE_PATH)) == requests
    assert env.call("search_quota_status")["providers"]["brave"]["used"] == used
    assert r["attempts"][0]["units"] == used
    assert (r["provider_used"] == "brave") is (limit == 2)


# --- provider-reported headroom and exhaustion -------------------------------------------------


def brave_only_month(env: Env, fake: FakeServer) -> None:
    """Brave alone, 40 units a month, `cron` allocated 50: the month is the window that binds."""
    configure(
        env,
        fake,
        providers={"brave": {"daily_limit": 50, "monthly_limit": 40}},
        agent_allocations={"cron": {"gemini": 0, "brave": 50}},
    )
    env.environ.pop("GEMINI_API_KEY")


def test_a_provider_that_reports_less_left_wins_and_one_that_reports_more_never_raises(
    env: Env, fake: FakeServer
) -> None:
    brave_only_month(env, fake)
    fake.route(BRAVE_PATH, brave_ok(remaining=3), brave_ok(2), brave_ok(1), brave_ok(0))
    fake.route("/html/", Reply(404, b"no"))
    first = search(env, "nasa one")
    assert first["provider_used"] == "brave"
    win = windows_of(env, "brave")
    assert win["provider_reported_remaining"] == 3 and win["headroom"] == 3
    assert win["provider_reported_age_s"] is not None and win["monthly"]["used"] == 1
    for _ in range(3):
        assert search(env, "nasa more")["provider_used"] == "brave"
    skipped = search(env, "nasa again")
    assert skipped["attempts"][0]["outcome"] == "skipped"
    assert skipped["attempts"][0]["error_code"] == "quota_exhausted"
    assert "Brave reported no quota left for this month." == skipped["attempts"][0]["error"]
    assert len(fake.requests_to(BRAVE_PATH)) == 4
    # A report of more than our own limit leaves our limit in charge.
    env.call("search_mark_agent_complete", {"agent_id": "cron"})
    env.state_dir.joinpath("search-quota.json").unlink()
    fake.route(BRAVE_PATH, brave_ok(remaining=99999))
    search(env, "nasa fresh")
    win = windows_of(env, "brave")
    assert win["provider_reported_remaining"] == 99999 and win["headroom"] == 39


EXHAUSTED_SEARCH = """
import json, sys
from smart_search.shell.runner import handle
call = {"tool": "smart_search", "args": {"query": "nasa news", "agent_id": "cron"}}
print(json.dumps(handle(json.dumps(call).encode())))
"""


@pytest.mark.multiprocess
def test_after_one_quota_429_no_process_sends_that_provider_a_request(
    env: Env, fake: FakeServer
) -> None:
    configure(env, fake, agent_allocations={"cron": {"gemini": 0, "brave": 50}})
    env.environ.pop("GEMINI_API_KEY")
    quota_429 = Reply(
        429,
        json={"type": "ErrorResponse", "error": {"code": "QUOTA_LIMITED", "status": 429}},
        headers={"X-RateLimit-Policy": MONTH_POLICY, "X-RateLimit-Remaining": "0, 0"},
    )
    fake.route(BRAVE_PATH, quota_429, brave_ok())
    fake.route("/html/", Reply(200, fixture_bytes("../serp/duckduckgo/html-results-caffeine.html")))
    first = search(env, "nasa news")
    assert first["attempts"][0]["error_code"] == "quota_exhausted"
    until = windows_of(env, "brave")["exhausted_until"]
    assert until is not None and until.endswith("-01T00:00:00Z")  # Brave's next month, UTC
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", EXHAUSTED_SEARCH],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env=env.environ,
        )
        for _ in range(24)
    ]
    results = [json.loads(p.communicate(timeout=120)[0]) for p in procs]
    assert len(fake.requests_to(BRAVE_PATH)) == 1  # the one 429, nothing after it
    for r in results:
        assert r["web_fetch_engine"] == "duckduckgo"
        brave = r["attempts"][0]
        assert (brave["outcome"], brave["error_code"]) == ("skipped", "quota_exhausted")
        assert brave["error"].startswith("Brave reported its quota exhausted; it resets at ")
    assert env.call("search_quota_status", {"agent_id": "cron"})["brave"]["used"] == 0


def test_gemini_per_day_exhaustion_lasts_until_pacific_midnight(env: Env) -> None:
    env.write_config({})
    s = env.settings()
    now = utc(2026, 12, 1, 12)
    ledger = Ledger(s, clock=lambda: now)
    held, _ = ledger.reserve("general", "gemini")
    ledger.settle("general", "gemini", [(held, 0)], {"exhausted": "day", "why": "per day"})
    win = ledger.full_status()["windows"]["gemini"]
    assert win["exhausted_until"] == "2026-12-02T08:00:00Z"
    with pytest.raises(quota.QuotaExhausted, match="Gemini reported its quota exhausted"):
        ledger.reserve("general", "gemini")
    later = Ledger(s, clock=lambda: utc(2026, 12, 2, 8, 1))
    charge(later, "general", "gemini")  # the mark has lapsed with the provider's day


def test_status_shows_both_windows_the_unit_and_the_money(env: Env) -> None:
    env.write_config(
        {"providers": {"brave": {"price_per_1000": 5, "monthly_limit": 2000, "daily_limit": 70}}}
    )
    ledger = Ledger(env.settings())
    for _ in range(4):
        ledger.reserve("general", "brave")
    brave = env.call("search_quota_status")["windows"]["brave"]
    assert brave["daily"]["used"] == 4 and brave["daily"]["limit"] == 70
    assert (brave["monthly"]["used"], brave["monthly"]["limit"]) == (4, 2000)
    assert brave["monthly"]["resets_at"].endswith("-01T00:00:00Z")
    assert brave["estimated_spend"] == 0.02 and brave["unit"] == "request"
    assert brave["currency"] == "USD"  # providers.<p>.currency, USD unless configured
    assert env.call("search_quota_status")["windows"]["gemini"]["estimated_spend"] is None


# --- migration and refusing to be reset (hardening items 1, 2) ----------------------------------


def v1_document(day: str) -> dict[str, Any]:
    agent = {"completed": False, "released": {"gemini": 0, "brave": 0},
             "gemini": {"allocation": 3, "pool": 0, "direct": 1},
             "brave": {"allocation": 0, "pool": 0, "direct": 2}}  # fmt: skip
    return {
        "format": "smart-search/quota@1",
        "date": day,
        "providers": {
            "gemini": {"unattributed_used": 2, "pool_used_unattributed": 0},
            "brave": {"unattributed_used": 0, "pool_used_unattributed": 0},
        },
        "agents": {"cron": agent},
    }


def test_a_version_1_ledger_is_upgraded_in_place_with_todays_counts_in_the_month(
    env: Env,
) -> None:
    env.write_config({"agent_allocations": {"cron": {"gemini": 5, "brave": 0}}})
    s = env.settings()
    now = utc(2026, 12, 1, 20)  # same day in UTC and in Los Angeles
    env.state_dir.mkdir(parents=True)
    path = env.state_dir / "search-quota.json"
    path.write_text(json.dumps(v1_document("2026-12-01")))
    ledger = Ledger(s, clock=lambda: now)
    assert ledger.full_status()["providers"]["gemini"]["used"] == 6
    charge(ledger, "cron", "gemini")
    doc = json.loads(path.read_text())
    assert doc["format"] == quota.FORMAT and "providers" not in doc
    assert doc["windows"]["gemini"]["month_used"] == 7 and doc["windows"]["brave"]["day_used"] == 2
    assert doc["carried"]["gemini"]["used"] == 2


@pytest.mark.parametrize(
    ("content", "why"),
    [
        ({"providers": [], "agent_allocations": {}}, "unknown layout"),
        ({"providers": {"gemini": {"used": -4}}, "agent_allocations": {}}, "unknown layout"),
        ({"providers": {"gemini": {"used": 2.5}}, "agent_allocations": {}}, "unknown layout"),
        ({"providers": {}, "agent_allocations": {"a": {"gemini_used": 2**64 - 1}}}, "unknown"),
        ({"agents": {}, "date": "2026-12-01"}, "unknown layout"),  # our shape, format removed
        ({"format": "smart-search/quota@3", "date": "2026-12-01"}, "newer smart-search"),
        ({"format": "smart-search/quota@x"}, "unknown format"),
        ({**v1_document("2026-12-01"), "format": "smart-search/quota@1"} | {
            "agents": {"cron": {"completed": False, "released": {"gemini": 0, "brave": 0},
                                "gemini": {"allocation": -1, "pool": 0, "direct": 0},
                                "brave": {"allocation": 0, "pool": 0, "direct": 0}}}},
         "unexpected structure"),
        ({**v1_document("2026-12-01")} | {
            "agents": {"cron": {"completed": False, "released": {"gemini": 0, "brave": 0},
                                "gemini": {"allocation": 2**64 - 1, "pool": 0, "direct": 0},
                                "brave": {"allocation": 0, "pool": 0, "direct": 0}}}},
         "unexpected structure"),
    ],
)  # fmt: skip
def test_unknown_newer_negative_or_absurd_ledgers_are_refused_untouched(
    env: Env, content: dict[str, Any], why: str
) -> None:
    env.state_dir.mkdir(parents=True)
    path = env.state_dir / "search-quota.json"
    raw = json.dumps(content).encode()
    path.write_bytes(raw)
    for tool, args in (
        ("search_quota_status", {}),
        ("smart_search", {"query": "q", "agent_id": "cron"}),
        ("search_mark_agent_complete", {"agent_id": "general"}),
    ):
        result = env.call(tool, args)
        assert result["error_code"] == "state_corrupt", (tool, result)
        assert why in result["error"] and str(path) in result["error"]
        assert path.read_bytes() == raw


def test_a_version_2_ledger_is_refused_by_the_first_versions_reader(env: Env) -> None:
    """Downgrade-proof: version 1 took any file with `providers` or `agent_allocations` for the
    Node skill's and reset it; version 2 has neither key, so version 1 refuses it as corrupt."""
    charge(Ledger(env.settings()), "general", "gemini")
    doc = env.quota_doc()
    assert doc["format"] == "smart-search/quota@2"
    assert "providers" not in doc and "agent_allocations" not in doc


def test_absurd_limits_in_config_are_config_errors(env: Env) -> None:
    for bad in ({"providers": {"gemini": {"daily_limit": 1e30}}},
                {"agent_allocations": {"a": {"gemini": 2**64 - 1}}},
                {"providers": {"brave": {"monthly_limit": -1}}},
                {"providers": {"brave": {"unit": "search_query"}}},
                {"providers": {"gemini": {"reset_timezone": "Mars/Base"}}}):  # fmt: skip
        env.write_config(bad)
        for tool in ("search_quota_status", "smart_search"):
            args = {"query": "q", "agent_id": "a"} if tool == "smart_search" else {}
            result = env.call(tool, args)
            assert result["error_code"] == "config_error", (bad, result)
            assert "providers" in result["error"] or "agent_allocations" in result["error"]


# --- unconfigured agents are bounded (hardening item 9) -----------------------------------------


def test_only_spending_agents_are_stored_and_unconfigured_ones_are_capped(
    env: Env, fake: FakeServer
) -> None:
    configure(env, fake, max_unconfigured_agents=2, default_allocation={"gemini": 0, "brave": 1})
    env.environ.pop("GEMINI_API_KEY")
    fake.route(BRAVE_PATH, brave_ok())
    fake.route("/html/", Reply(200, fixture_bytes("../serp/duckduckgo/html-results-caffeine.html")))
    for agent in ("new-1", "new-2"):
        assert search(env, "nasa", agent)["provider_used"] == "brave"
    third = search(env, "nasa", "new-3")
    assert third["web_fetch_engine"] == "duckduckgo"  # the API tier refused, the web answered
    assert third["attempts"][0]["error_code"] == "unknown_agent"
    assert "max_unconfigured_agents" in third["attempts"][0]["error"]
    assert set(env.quota_doc()["agents"]) == {"new-1", "new-2"}
    # A configured agent is never capped; a web-only search stores nothing.
    assert search(env, "nasa", "cron")["provider_used"] == "brave"
    env.environ.pop("BRAVE_API_KEY")
    search(env, "nasa", "web-only-agent")
    assert "web-only-agent" not in env.quota_doc()["agents"]


# --- a worked month ------------------------------------------------------------------------------


class BillingProvider:
    """A provider that bills as the real ones do, on its own clock, and keeps its own books."""

    def __init__(self, clock: Any, rng: random.Random) -> None:
        self.clock = clock
        self.rng = rng
        self.billed: dict[tuple[str, str], int] = {}  # (provider, window name) -> units
        self.quota_429_at: float | None = None

    def bill(self, settings: Any, provider: str, units: int) -> None:
        day, month = windows(settings, self.clock()).provider[provider]
        for name in (day, month):
            self.billed[(provider, name)] = self.billed.get((provider, name), 0) + units

    def call_api(self, provider, query, settings, deadline, may_retry):  # noqa: ANN001, ANN201
        from smart_search.errors import QuotaExhausted
        from smart_search.sources.providers.calls import ProviderCall
        from smart_search.sources.providers.parsing import Answer

        if self.quota_429_at is not None and provider == "brave" and self.quota_429_at <= (
            self.clock()
        ):
            self.quota_429_at = None
            err = QuotaExhausted("Brave API error: 429", http_status=429)
            return ProviderCall(None, err, 0, [1], 0, 429, {"exhausted": "month"})
        if provider == "gemini":
            units = self.rng.choice((0, 1, 3))
            self.bill(settings, provider, units)
            return ProviderCall(Answer("An answer."), None, 0, [1], units, 200, None)
        self.bill(settings, provider, 1)
        _, month = windows(settings, self.clock()).provider[provider]
        # Brave says it has less left than the ledger thinks (another key user, say).
        left = max(0, settings.monthly_limits["brave"] - 5 - self.billed[(provider, month)])
        web = [{"title": "t", "url": "https://example.org/", "snippet": "s"}]
        return ProviderCall(Answer(web), None, 0, [1], 1, 200, {"remaining": left})

    def fetch_engine(self, engine, query, settings, deadline, before_send):  # noqa: ANN001, ANN201
        from smart_search.sources.engines.fetch import EngineCall

        web = [{"title": "t", "url": "https://example.org/w", "snippet": "s"}]
        return EngineCall(web, None, True, [1], 200)


def test_a_worked_month_never_bills_past_a_window_and_the_ledger_agrees(env: Env) -> None:
    """31 days of scheduled traffic from several agents across a month boundary and Pacific
    midnights; Gemini runs 0, 1 or 3 search queries per prompt; Brave reports less left than the
    ledger; one quota 429. The provider's own books never exceed a window, and match ours."""
    import time as _time

    from smart_search.budget.breaker import Breaker
    from smart_search.search.planner import plan, routed_provider
    from smart_search.search.tiers import Run, fit_api_queries, run_tiers
    from smart_search.store.files import FileStore

    env.write_config(
        {
            "providers": {
                "gemini": {"daily_limit": 40, "monthly_limit": 700},
                "brave": {"daily_limit": 12, "monthly_limit": 300},
            },
            "agent_allocations": {f"agent-{i}": {"gemini": 6, "brave": 2} for i in range(5)},
        }
    )
    env.environ |= {"GEMINI_API_KEY": "k-gemini", "BRAVE_API_KEY": "k-brave"}
    settings = env.settings()
    now = [utc(2026, 11, 15, 0)]
    clock = lambda: now[0]  # noqa: E731
    rng = random.Random(20261201)
    provider = BillingProvider(clock, rng)
    provider.quota_429_at = utc(2026, 12, 10, 9)
    store = FileStore(settings.state_dir, settings.lock_timeout_ms)
    answered = {"gemini": 0, "brave": 0, "web_fetch": 0}
    end = utc(2026, 12, 16, 0)
    while now[0] < end:
        for i in range(5):
            agent = f"agent-{i}"
            query = rng.choice(("NSE stock open", "nasa launch", "ai papers"))
            ledger = Ledger(settings, store, clock=clock)
            queries, warnings = fit_api_queries(query, settings)
            run = Run(agent, query, settings, ledger, provider, _time.monotonic() + 30,
                      Breaker(settings, clock=clock, store=store), lambda *a: None,
                      queries, warnings)  # fmt: skip
            routed = routed_provider(query, settings, None)
            outcome = run_tiers(plan(agent, query, settings, routed), run)
            if outcome.provider_used:
                answered[outcome.provider_used] += 1
        now[0] += 3 * 3600 + 17 * 60  # every 3h17m: the hours drift across both midnights
    doc = store.read("quota")
    assert doc is not None
    for p, daily, monthly in (("gemini", 40, 700), ("brave", 12, 300)):
        for (name_p, window), units in provider.billed.items():
            if name_p == p:
                assert units <= (monthly if len(window) == 7 else daily), (p, window, units)
        window = doc["windows"][p]
        assert provider.billed.get((p, window["month"]), 0) == window["month_used"]
        assert provider.billed.get((p, window["day"]), 0) == window["day_used"]
    # Brave's own report (5 less than ours) bound the month, and the 429 stopped it until Jan 1.
    assert doc["windows"]["brave"]["exhausted_until"] == utc(2027, 1, 1)
    assert answered["gemini"] > 0 and answered["brave"] > 0 and answered["web_fetch"] > 0


def test_empty_search_query_entries_are_not_billed(env: Env, fake: FakeServer) -> None:
    """Google ignores empty `webSearchQueries` entries when it counts billed queries."""
    configure(env, fake)
    body: Any = copy.deepcopy(fixture_json("gemini-ok.json"))
    body["candidates"][0]["groundingMetadata"]["webSearchQueries"] = ["", "jwst launch", " "]
    fake.route(GEMINI_PATH, Reply(200, json.dumps(body).encode()))
    assert search(env, "NSE stock news")["attempts"][0]["units"] == 1
    assert windows_of(env, "gemini")["daily"]["used"] == 1
