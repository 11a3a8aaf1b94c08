"""A short fleet month (bench/fleet.py, issue 18 point 7): hosts sharing one real redis-server,
cron agents with allocations, repeated questions, fakes billing 0-3 units a call on their own
clocks, lost answers; three days across a month boundary and Pacific midnights, in-process."""

from __future__ import annotations

import importlib.util
import sys
from typing import Any

import pytest

from tests.conftest import REPO


def load_fleet() -> Any:
    spec = importlib.util.spec_from_file_location("fleet_bench", REPO / "bench" / "fleet.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclasses look their module up by name
    spec.loader.exec_module(module)
    return module


# Tight enough that Brave's windows fill up (every day, and its December) in the month without
# the cache; loose enough for Gemini that the cache's saving shows in what is billed (limits
# that bind in both months would make both bill the limit).
LIMITS = {"gemini": (75, 140), "brave": (10, 20)}


@pytest.fixture(scope="module")
def months(shared_redis: Any) -> Any:
    import os

    fleet = load_fleet()
    # Monday 30 November to Thursday 3 December: the UTC month turns, Gemini's (Los Angeles)
    # day turns at 08:00 UTC, its month on 1 December 08:00.
    common: dict[str, Any] = dict(days=3, hosts=5, agents=8, seed=11,
                                  start=fleet.utc("2026-11-30"), timeout_rate=0.05,
                                  latency_ms=2.0, limits=LIMITS)  # fmt: skip
    on = fleet.run_month(shared_redis.url, f"fleet-on-{os.getpid()}", cache=True, **common)
    off = fleet.run_month(shared_redis.url, f"fleet-off-{os.getpid()}", cache=False, **common)
    return fleet, on, off


def test_no_window_is_ever_billed_past_its_limit_on_the_providers_own_books(months: Any) -> None:
    fleet, on, off = months
    for month in (on, off):
        for p in fleet.PROVIDERS:
            daily, monthly = LIMITS[p]
            days = fleet.highest(month.books.billed, p, False)
            by_month = fleet.highest(month.books.billed, p, True)
            # The run crossed a month and (Gemini) a Pacific midnight on the fake's own clock.
            assert len(by_month) == 2 and len(days) >= 3, (p, days, by_month)
            assert max(days.values()) <= daily, (p, days)
            assert max(by_month.values()) <= monthly, (p, by_month)
            assert month.books.past_limit[p] == 0
        assert fleet.check(month) == []
    # The month did run into its windows: Brave's days and its December.
    brave_days = fleet.highest(off.books.billed, "brave", False)
    assert max(brave_days.values()) == LIMITS["brave"][0]
    assert fleet.highest(off.books.billed, "brave", True)["2026-12"] >= LIMITS["brave"][1] - 1


def test_the_ledger_charges_what_was_billed_and_the_worst_case_of_lost_answers(
    months: Any,
) -> None:
    fleet, on, off = months
    for month in (on, off):
        for p in fleet.PROVIDERS:
            for (name_p, window), billed in month.books.billed.items():
                if name_p == p:
                    assert month.ledger_books[(p, window)] >= billed, (p, window)
            charged = sum(fleet.highest(month.ledger_books, p, True).values())
            billed = month.books.total[p]
            assert charged == billed + month.books.unseen[p]
            if month.books.timeouts[p] == 0:
                assert charged == billed
            assert month.tally.charged_attempts[p] == charged  # what the attempts reported


def test_the_cache_and_single_flight_bill_fewer_units_than_the_same_month_without(
    months: Any,
) -> None:
    fleet, on, off = months
    assert on.calls == off.calls
    assert on.tally.answered["cache"] > 0 and off.tally.answered["cache"] == 0
    assert on.tally.joined > 0  # some answers came from another host's flight
    billed_on = sum(on.books.total.values())
    billed_off = sum(off.books.total.values())
    assert billed_on < billed_off, (on.books.total, off.books.total)
    # And with fewer units the cache-on month answered more questions without the web tier.
    api_on = sum(on.tally.answered[k] for k in ("gemini", "brave", "cache"))
    assert api_on > off.tally.answered["gemini"] + off.tally.answered["brave"]
