"""Folding a ledger into another keeps each stop to its later end (issue 28 B.4, planted bugs
the suite let through): a pooled key refused on both sides stays disabled until the later of
its two ends, and a provider's exhaustion mark until the later of its two."""

from __future__ import annotations

import json
from calendar import timegm
from typing import Any

import pytest

from smart_search.budget.ledger import Ledger
from smart_search.budget.quota_merge import merge_quota
from tests.conftest import Env

NOW = float(timegm((2026, 12, 1, 12, 0, 0, 0, 0, 0)))
KEY_A, KEY_B = "SENTINEL-BRAVE-KEY-000A", "SENTINEL-BRAVE-KEY-000B"
FP_A, FP_B = "…000A", "…000B"


def two_sides(env: Env) -> tuple[dict[str, Any], dict[str, Any]]:
    """A ledger whose pool has spent on both keys, and a copy of it (the other side)."""
    env.write_config({"timezone": "UTC", "providers": {"brave": {"keys": [KEY_A, KEY_B]}}})
    ledger = Ledger(env.settings(), clock=lambda: NOW)
    for _ in range(2):
        hold, _ = ledger.reserve("general", "brave")
        ledger.settle("general", "brave", [(hold, 1)])
    mine = ledger.snapshot()
    assert set(mine["windows"]["brave"]["keys"]) == {FP_A, FP_B}
    return mine, json.loads(json.dumps(mine))


@pytest.mark.parametrize("add", [False, True])
def test_a_key_disabled_on_both_sides_stays_disabled_to_the_later_end(env: Env, add: bool) -> None:
    mine, theirs = two_sides(env)
    mine["windows"]["brave"]["keys"][FP_A]["disabled"] = {FP_A: NOW + 100}
    theirs["windows"]["brave"]["keys"][FP_A]["disabled"] = {FP_A: NOW + 900}
    # B disabled on their side only: folded in as it is.
    theirs["windows"]["brave"]["keys"][FP_B]["disabled"] = {FP_B: NOW + 500}
    for a, b in ((mine, theirs), (theirs, mine)):
        merged = merge_quota(a, b, add=add)["windows"]["brave"]["keys"]
        assert merged[FP_A]["disabled"] == {FP_A: NOW + 900}
    merged = merge_quota(mine, theirs, add=add)["windows"]["brave"]["keys"]
    assert merged[FP_B]["disabled"] == {FP_B: NOW + 500}


@pytest.mark.parametrize("where", ["provider", "account"])
def test_an_exhaustion_mark_is_kept_to_its_later_end_with_its_reason(env: Env, where: str) -> None:
    mine, theirs = two_sides(env)

    def window(doc: dict[str, Any]) -> dict[str, Any]:
        brave = doc["windows"]["brave"]
        return brave if where == "provider" else brave["keys"][FP_A]

    window(mine).update(exhausted_until=NOW + 100, exhausted_why="day")
    window(theirs).update(exhausted_until=NOW + 9000, exhausted_why="month")
    for a, b in ((mine, theirs), (theirs, mine)):
        merged = window(merge_quota(a, b))
        assert (merged["exhausted_until"], merged["exhausted_why"]) == (NOW + 9000, "month")
    # A side with no mark never clears the other's.
    window(theirs).update(exhausted_until=None, exhausted_why=None)
    merged = window(merge_quota(mine, theirs, add=True))
    assert (merged["exhausted_until"], merged["exhausted_why"]) == (NOW + 100, "day")
