"""The worst-case reservation (issue 18, RULINGS 4): a call holds the most it may bill in every
window and source before its request leaves, and settles to the truth after.

Also the quota behaviours that thirty planted one-line bugs showed no test watched (issue 18,
point 9): each test here fails when its rule breaks. The many-process proofs are in
`test_concurrency.py`.
"""

from __future__ import annotations

from typing import Any

import pytest

from smart_search.budget import quota
from smart_search.budget.ledger import Ledger
from smart_search.errors import QuotaExhausted
from tests.conftest import Env, charge
from tests.fakes import FakeServer, Reply
from tests.test_billing import (
    BRAVE_PATH,
    GEMINI_PATH,
    brave_ok,
    brave_only_month,
    configure,
    gemini_answer,
    search,
    utc,
    windows_of,
)

W = 3  # Gemini 3's default max_units_per_call


def ceilings(limit: int, monthly: int | None = None, **agents: dict[str, int]) -> quota.Ceilings:
    return quota.Ceilings(
        {"gemini": limit, "brave": limit},
        agents,
        {"gemini": 0, "brave": 0},
        None if monthly is None else {"gemini": monthly},
        None,
        {"gemini": W, "brave": 1},
    )


def today() -> quota.Document:
    return quota.roll(quota.new_day("2026-12-01"), quota.Windows("2026-12-01", {
        "gemini": ("2026-12-01", "2026-12"), "brave": ("2026-12-01", "2026-12")}))  # fmt: skip


@pytest.fixture
def fake() -> Any:
    with FakeServer() as server:
        yield server


# --- the arithmetic ----------------------------------------------------------------------------


def test_three_calls_in_flight_near_the_limit_never_pass_it() -> None:
    """docs' worked example: daily limit 7, worst case 3, three calls at once."""
    c = ceilings(7)
    doc = today()
    first = quota.reserve(doc, c, "a", "gemini", 0.0, hold_id="1", until=100.0)
    second = quota.reserve(doc, c, "b", "gemini", 0.0, hold_id="2", until=100.0)
    assert doc["windows"]["gemini"]["day_used"] == 6 and quota.in_flight(doc, "gemini", 0.0) == 6
    with pytest.raises(QuotaExhausted, match="Gemini quota is exhausted for today"):
        quota.reserve(doc, c, "c", "gemini", 0.0, hold_id="3", until=100.0)
    assert "c" not in doc["agents"] or quota.agent_used(doc, "c", "gemini") == 0
    # The first answer ran one search query: two units go back, and now the third fits.
    assert quota.settle(doc, "a", "gemini", first, 1)
    assert doc["windows"]["gemini"]["day_used"] == 4
    third = quota.reserve(doc, c, "c", "gemini", 0.0, hold_id="3", until=100.0)
    assert doc["windows"]["gemini"]["day_used"] == 7
    quota.settle(doc, "b", "gemini", second, 3)
    quota.settle(doc, "c", "gemini", third, 2)
    assert doc["windows"]["gemini"]["day_used"] == 1 + 3 + 2
    assert quota.in_flight(doc, "gemini", 0.0) == 0


def test_the_worst_case_is_taken_from_allocation_then_pool_then_direct() -> None:
    c = ceilings(20, a={"gemini": 1}, done={"gemini": 1})
    doc = today()
    quota.complete(doc, c, "done")  # one unit in the pool
    hold = quota.reserve(doc, c, "a", "gemini")
    assert hold.parts == (("allocation", 1), ("pool", 1), ("direct", 1))
    assert hold.source == "allocation" and hold.units == W
    assert quota.allocation_remaining(doc, c, "a", "gemini") == 0
    assert quota.pool_remaining(doc, "gemini") == 0


def test_sources_that_cannot_hold_the_worst_case_refuse_the_call_and_change_nothing() -> None:
    # Window room for 10, but the sources hold 2: allocation 1 + direct 1 (L 3 - A 2).
    c = ceilings(3, a={"gemini": 1}, b={"gemini": 1})
    doc = today()
    before = repr(doc)
    with pytest.raises(QuotaExhausted):
        quota.reserve(doc, c, "a", "gemini")
    assert repr(doc) == before
    assert quota.pick_source(doc, c, "a", "gemini") is None


def test_no_allocation_or_pool_passes_its_cap_with_holds_in_flight() -> None:
    c = ceilings(100, a={"gemini": 4}, done={"gemini": 4})
    doc = today()
    quota.complete(doc, c, "done")
    held = [quota.reserve(doc, c, "a", "gemini") for _ in range(4)]
    record = doc["agents"]["a"]["gemini"]
    assert record["allocation"] == 4 and record["pool"] == 4 and record["direct"] == 4
    for hold in held:
        quota.settle(doc, "a", "gemini", hold, 3)
    assert record == {"allocation": 4, "pool": 4, "direct": 4}


def test_a_settle_between_zero_and_the_hold_refunds_exactly_the_difference_last_source_first() -> (
    None
):
    c = ceilings(20, a={"gemini": 1}, done={"gemini": 1})
    doc = today()
    quota.complete(doc, c, "done")
    hold = quota.reserve(doc, c, "a", "gemini")
    assert quota.settle(doc, "a", "gemini", hold, 2)
    assert doc["agents"]["a"]["gemini"] == {"allocation": 1, "pool": 1, "direct": 0}
    window = doc["windows"]["gemini"]
    assert (window["day_used"], window["month_used"]) == (2, 2)
    assert quota.total_used(doc, "gemini") == 2
    assert hold.by_source(2) == {"agent_allocation": 1, "shared_pool": 1}


def test_refund_gives_the_whole_hold_back_to_every_source_and_window() -> None:
    c = ceilings(20, a={"gemini": 2})
    doc = today()
    hold = quota.reserve(doc, c, "a", "gemini", 0.0, hold_id="h", until=50.0)
    assert quota.refund(doc, "a", "gemini", hold)
    assert doc["agents"]["a"]["gemini"] == {"allocation": 0, "pool": 0, "direct": 0}
    assert doc["windows"]["gemini"]["day_used"] == doc["windows"]["gemini"]["month_used"] == 0
    assert doc["windows"]["gemini"]["holds"] == {}
    assert quota.allocation_remaining(doc, c, "a", "gemini") == 2


def test_a_completed_agents_allocation_unit_given_back_goes_to_the_pool() -> None:
    c = ceilings(20, a={"gemini": 5})
    doc = today()
    hold = quota.reserve(doc, c, "a", "gemini")
    assert quota.complete(doc, c, "a") == {"gemini": 2, "brave": 0, "tavily": 0}
    quota.settle(doc, "a", "gemini", hold, 0)
    assert quota.pool_remaining(doc, "gemini") == 5  # nothing allocated is lost


def test_holds_show_in_flight_until_settled_or_past_their_time() -> None:
    c = ceilings(20)
    doc = today()
    hold = quota.reserve(doc, c, "a", "gemini", 10.0, hold_id="x", until=40.0)
    assert quota.in_flight(doc, "gemini", 20.0) == W
    assert quota.in_flight(doc, "gemini", 20.0, "a") == W
    assert quota.in_flight(doc, "gemini", 20.0, "b") == 0
    assert quota.in_flight(doc, "gemini", 40.0) == 0  # past its time: its call is long over
    quota.drop_stale_holds(doc, "gemini", 40.0)
    assert doc["windows"]["gemini"]["holds"] == {}
    assert doc["windows"]["gemini"]["day_used"] == W  # a dead call's worst case stays charged
    quota.settle(doc, "a", "gemini", hold, 1)  # a late settle still settles to the truth
    assert doc["windows"]["gemini"]["day_used"] == 1


# --- point 9: behaviours each planted bug slipped past -------------------------------------------


def test_after_a_provider_report_calls_without_a_new_report_count_down_from_it(
    env: Env, fake: FakeServer
) -> None:
    brave_only_month(env, fake)
    # One answer says 3 are left; the next answers carry no rate-limit headers at all.
    fake.route(BRAVE_PATH, brave_ok(remaining=3), brave_ok())
    fake.route("/html/", Reply(404, b"no"))
    assert search(env, "nasa one")["provider_used"] == "brave"
    for _ in range(3):
        assert search(env, "nasa more")["provider_used"] == "brave"
    skipped = search(env, "nasa again")
    assert skipped["attempts"][0]["error_code"] == "quota_exhausted"
    assert skipped["attempts"][0]["error"] == "Brave reported no quota left for this month."
    assert len(fake.requests_to(BRAVE_PATH)) == 4
    assert windows_of(env, "brave")["headroom"] == 0


def test_a_report_seen_while_other_calls_are_in_flight_still_counts_them_down() -> None:
    c = ceilings(100)
    doc = today()
    other = quota.reserve(doc, c, "b", "gemini", 0.0, hold_id="b", until=99.0)
    mine = quota.reserve(doc, c, "a", "gemini", 0.0, hold_id="a", until=99.0)
    quota.settle(doc, "a", "gemini", mine, 1)
    quota.observe(doc, "gemini", 1.0, remaining=10)  # the provider had not counted `other` yet
    quota.settle(doc, "b", "gemini", other, 2)
    assert quota.reported_remaining(doc, "gemini") == 10 - 2


def test_an_agent_charged_past_its_allocation_shows_zero_left_and_releases_nothing(
    env: Env,
) -> None:
    # max_units_per_call 1 with a provider that bills 3 (a config mistake): the truth is charged.
    env.write_config(
        {
            "providers": {"gemini": {"daily_limit": 50, "max_units_per_call": 1}},
            "agent_allocations": {"over": {"gemini": 1, "brave": 0},
                                  "done": {"gemini": 4, "brave": 0}},
        }
    )  # fmt: skip
    ledger = Ledger(env.settings())
    env.call("search_mark_agent_complete", {"agent_id": "done"})
    assert env.call("search_quota_status")["providers"]["gemini"]["shared_pool"] == 4
    charge(ledger, "over", "gemini", 3)
    status = env.call("search_quota_status", {"agent_id": "over"})
    assert status["gemini"] == {"allocated": 1, "used": 3, "remaining": 0}
    done = env.call("search_mark_agent_complete", {"agent_id": "over"})
    assert done["released"]["gemini"] == 0
    assert env.call("search_quota_status")["providers"]["gemini"]["shared_pool"] == 4


def test_units_carried_from_a_migrated_ledger_reduce_direct_headroom(env: Env) -> None:
    import json

    env.write_config({"providers": {"gemini": {"daily_limit": 30}},
                      "agent_allocations": {"a": {"gemini": 10, "brave": 0}}})  # fmt: skip
    env.state_dir.mkdir(parents=True)
    node = {
        "date": Ledger(env.settings()).today,
        "providers": {"gemini": {"used": 7}},
        "agent_allocations": {},
    }
    (env.state_dir / "search-quota.json").write_text(json.dumps(node))
    gemini = env.call("search_quota_status")["providers"]["gemini"]
    assert gemini["used"] == 7
    assert gemini["direct_headroom"] == 30 - 10 - 7


def test_unconfigured_agents_default_allocations_are_set_aside_from_direct_headroom(
    env: Env,
) -> None:
    env.write_config({"providers": {"brave": {"daily_limit": 20}},
                      "default_allocation": {"gemini": 0, "brave": 4}})  # fmt: skip
    assert env.call("search_quota_status")["providers"]["brave"]["direct_headroom"] == 20
    charge(Ledger(env.settings()), "newcomer", "brave")  # registered: its 4 are set aside
    brave = env.call("search_quota_status")["providers"]["brave"]
    assert brave["allocated"] == 4 and brave["direct_headroom"] == 20 - 4
    assert env.call("search_quota_status", {"agent_id": "newcomer"})["brave"]["remaining"] == 3


def test_a_refund_across_the_agents_midnight_never_returns_yesterdays_unit_to_today(
    env: Env,
) -> None:
    env.write_config({"agent_allocations": {"cron": {"gemini": 0, "brave": 3}}})
    s = env.settings()
    late = Ledger(s, clock=lambda: utc(2026, 12, 1, 23, 59))
    hold, _ = late.reserve("cron", "brave")  # yesterday's call, still in flight at midnight
    after = Ledger(s, clock=lambda: utc(2026, 12, 2, 0, 1))
    charge(after, "cron", "brave")  # today's first unit
    after.refund("cron", "brave", hold)
    status = after.agent_status("cron")["brave"]
    assert status == {"allocated": 3, "used": 1, "remaining": 2}
    assert after.snapshot()["windows"]["brave"]["day_used"] == 1


def test_a_later_day_exhaustion_never_shortens_an_earlier_month_exhaustion(env: Env) -> None:
    s = env.settings()
    now = utc(2026, 12, 10, 12)
    ledger = Ledger(s, clock=lambda: now)
    first, _ = ledger.reserve("general", "gemini")
    second, _ = ledger.reserve("general", "gemini")  # two calls in flight
    ledger.settle("general", "gemini", [(first, 0)], {"exhausted": "month", "why": "per month"})
    ledger.settle("general", "gemini", [(second, 0)], {"exhausted": "day", "why": "per day"})
    # Gemini's month ends at Pacific midnight on 1 January; the later day mark cannot shorten it.
    assert ledger.full_status()["windows"]["gemini"]["exhausted_until"] == "2027-01-01T08:00:00Z"
    doc = today()
    quota.observe(doc, "gemini", 10.0, exhausted_until=1000.0, why="month")
    quota.observe(doc, "gemini", 20.0, exhausted_until=100.0, why="day")
    assert doc["windows"]["gemini"]["exhausted_until"] == 1000.0


def test_ledger_refund_gives_back_every_unit_and_clears_the_hold(env: Env) -> None:
    env.write_config({"agent_allocations": {"cron": {"gemini": 5, "brave": 0}}})
    ledger = Ledger(env.settings())
    hold, left = ledger.reserve("cron", "gemini")
    assert left == 2
    assert env.call("search_quota_status")["providers"]["gemini"]["in_flight"] == W
    ledger.refund("cron", "gemini", hold)
    full = env.call("search_quota_status")
    assert (full["providers"]["gemini"]["used"], full["providers"]["gemini"]["in_flight"]) == (0, 0)
    assert full["windows"]["gemini"]["daily"]["used"] == 0
    assert env.call("search_quota_status", {"agent_id": "cron"})["gemini"]["remaining"] == 5


# --- through the whole call, against loopback fakes -------------------------------------------


def test_each_attempt_says_how_many_units_came_from_each_source(
    env: Env, fake: FakeServer
) -> None:
    configure(env, fake, agent_allocations={"cron": {"gemini": 1, "brave": 0}})
    fake.route(GEMINI_PATH, Reply(200, gemini_answer(2)))
    r = search(env, "NSE stock news")
    attempt = r["attempts"][0]
    assert (attempt["units"], attempt["quota_source"]) == (2, "agent_allocation")
    assert attempt["units_by_source"] == {"agent_allocation": 1, "provider_direct": 1}
    assert r["quota_source"] == "agent_allocation"
    status = env.call("search_quota_status")
    assert status["providers"]["gemini"]["used"] == 2
    assert status["providers"]["gemini"]["in_flight"] == 0


def test_a_late_answer_after_the_timeout_stays_charged_its_worst_case(
    env: Env, fake: FakeServer
) -> None:
    configure(env, fake, request_timeout_ms=400, retry_max_attempts=1)
    env.environ.pop("BRAVE_API_KEY")
    # Two search queries, answered after the request timeout: we never read what was billed.
    fake.route(GEMINI_PATH, Reply(200, gemini_answer(2), delay=1.5))
    fake.route("/html/", Reply(404, b"no"))
    fake.route("/search", Reply(404, b"no"))
    r = search(env, "NSE stock news")
    assert r["attempts"][0]["error_code"] == "timeout"
    assert r["attempts"][0]["units"] == W
    assert windows_of(env, "gemini")["daily"]["used"] == W


def test_a_retry_after_an_unanswered_attempt_holds_a_fresh_worst_case(
    env: Env, fake: FakeServer
) -> None:
    """Window of 5: the first attempt stalls (kept at 3), the retry would need 3 more: not sent."""
    configure(
        env,
        fake,
        providers={"gemini": {"daily_limit": 5}},
        agent_allocations={"cron": {"gemini": 0, "brave": 0}},
        request_timeout_ms=400,
        retry_max_attempts=3,
    )
    env.environ.pop("BRAVE_API_KEY")
    fake.route(GEMINI_PATH, Reply(200, gemini_answer(1), delay=30), Reply(200, gemini_answer(1)))
    fake.route("/html/", Reply(404, b"no"))
    fake.route("/search", Reply(404, b"no"))
    r = search(env, "NSE stock news")
    assert len(fake.requests_to(GEMINI_PATH)) == 1
    assert r["attempts"][0]["units"] == W
    configure(
        env,
        fake,
        providers={"gemini": {"daily_limit": 9}},
        agent_allocations={"cron": {"gemini": 0, "brave": 0}},
        request_timeout_ms=400,
        retry_max_attempts=3,
    )
    env.environ.pop("BRAVE_API_KEY")
    fake.route(GEMINI_PATH, Reply(200, gemini_answer(1), delay=30), Reply(200, gemini_answer(1)))
    r = search(env, "NSE stock news today")
    assert len(fake.requests_to(GEMINI_PATH)) == 3  # one before, the stall and its retry here
    assert r["provider_used"] == "gemini" and r["attempts"][0]["units"] == W + 1
    assert windows_of(env, "gemini")["daily"]["used"] == W + W + 1


# --- budgets in money (issue 20, point 4) -------------------------------------------------------


def test_a_providers_monthly_budget_caps_it_like_a_window(env: Env) -> None:
    # Brave at 5 per 1,000 units: a budget of 0.02 buys 4 units a month.
    env.write_config({"providers": {"brave": {"price_per_1000": 5, "monthly_budget": 0.02}},
                      "agent_allocations": {"cron": {"gemini": 0, "brave": 10}}})  # fmt: skip
    ledger = Ledger(env.settings())
    for _ in range(4):
        charge(ledger, "cron", "brave")
    with pytest.raises(QuotaExhausted, match="Brave monthly budget is spent"):
        ledger.reserve("cron", "brave")
    brave = env.call("search_quota_status")["windows"]["brave"]
    assert (brave["monthly_budget"], brave["estimated_spend"], brave["headroom"]) == (0.02, 0.02, 0)


def test_the_installs_monthly_budget_holds_every_providers_worst_case(env: Env) -> None:
    """Gemini at 10 per 1,000 holds 3 units (0.03) a call; the install's 0.05 a month, 0.02 of it
    spent on Brave, leaves room for exactly one Gemini call in flight."""
    env.write_config({
        "monthly_budget": 0.05,
        "providers": {"brave": {"price_per_1000": 5}, "gemini": {"price_per_1000": 10}},
        "agent_allocations": {"cron": {"gemini": 10, "brave": 10}},
    })  # fmt: skip
    ledger = Ledger(env.settings())
    for _ in range(4):
        charge(ledger, "cron", "brave")
    hold, _ = ledger.reserve("cron", "gemini")  # 0.03 held: 0.05 reached
    with pytest.raises(QuotaExhausted, match="Gemini monthly budget is spent"):
        ledger.reserve("cron", "gemini")
    with pytest.raises(QuotaExhausted, match="Brave monthly budget is spent"):
        ledger.reserve("cron", "brave")
    ledger.settle("cron", "gemini", [(hold, 1)])  # 0.01 billed: 0.02 back
    full = env.call("search_quota_status")
    assert full["monthly_budget"] == {"limit": 0.05, "spent": 0.03, "currency": "USD"}
    assert full["windows"]["brave"]["headroom"] == 4  # 0.02 buys 4 Brave units
    assert full["windows"]["gemini"]["headroom"] == 2


@pytest.mark.parametrize(
    ("config", "message"),
    [
        ({"providers": {"brave": {"monthly_budget": 5}}},
         'Config key "providers.brave.monthly_budget" needs providers.brave.price_per_1000.'),
        ({"monthly_budget": 5, "providers": {"brave": {"price_per_1000": 5}}},
         'Config key "monthly_budget" needs providers.gemini.price_per_1000.'),
        ({"monthly_budget": 5, "providers": {"brave": {"price_per_1000": 5},
          "gemini": {"price_per_1000": 5, "currency": "EUR"}}},
         'Config key "monthly_budget" needs every provider in one currency.'),
    ],
)  # fmt: skip
def test_a_budget_without_its_price_is_a_config_error(
    env: Env, config: dict[str, Any], message: str
) -> None:
    env.environ["GEMINI_API_KEY"] = "SENTINEL-GEMINI-KEY-0001"  # a provider that can spend
    env.write_config(config)
    r = env.call("search_quota_status")
    assert (r["error_code"], r["error"]) == ("config_error", message)


def test_a_provider_without_a_key_or_price_does_not_break_the_installs_budget(env: Env) -> None:
    """Issue 20: a provider an upgrade adds (no key, no price) cannot spend, so a monthly budget
    written before it existed stays valid; once its key is set, its price is required."""
    env.write_config({"monthly_budget": 5, "providers": {
        "brave": {"price_per_1000": 5}, "gemini": {"price_per_1000": 5}}})  # fmt: skip
    assert env.call("search_quota_status")["error"] is None
    env.environ["TAVILY_API_KEY"] = "SENTINEL-TAVILY-KEY-0001"
    r = env.call("search_quota_status")
    assert (r["error_code"], r["error"]) == (
        "config_error", 'Config key "monthly_budget" needs providers.tavily.price_per_1000.')
