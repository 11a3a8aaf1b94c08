"""How long a call's hold counts as in flight (issue 28 B.4, a planted bug the suite let
through): the call's whole time budget (`total_timeout_ms`) plus the ledger's grace, never less,
and it is forgotten (its units staying charged) after that."""

from __future__ import annotations

from calendar import timegm

from smart_search.budget.ledger import HOLD_GRACE_S, Ledger
from tests.conftest import Env

T0 = float(timegm((2026, 12, 1, 12, 0, 0, 0, 0, 0)))


def brave_totals(env: Env, when: float) -> dict[str, int]:
    return Ledger(env.settings(), clock=lambda: when).full_status()["providers"]["brave"]


def test_a_hold_is_in_flight_for_the_calls_whole_timeout_plus_the_grace(env: Env) -> None:
    env.write_config({"timezone": "UTC", "total_timeout_ms": 45000,
                      "agent_allocations": {"cron": {"gemini": 0, "brave": 5}}})  # fmt: skip
    Ledger(env.settings(), clock=lambda: T0).reserve("cron", "brave")
    lifetime = 45 + HOLD_GRACE_S
    # Just inside its lifetime: still in flight (the call may be on its last retry).
    assert brave_totals(env, T0 + lifetime - 1)["in_flight"] == 1
    # Past it: no longer in flight, and the next change forgets it; the unit stays charged.
    assert brave_totals(env, T0 + lifetime + 1)["in_flight"] == 0
    later = Ledger(env.settings(), clock=lambda: T0 + lifetime + 1)
    hold, _ = later.reserve("cron", "brave")
    later.settle("cron", "brave", [(hold, 1)])
    doc = env.quota_doc()
    assert doc["windows"]["brave"].get("holds", {}) == {}
    assert doc["windows"]["brave"]["day_used"] == 2
