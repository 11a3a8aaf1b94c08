"""Folding one quota ledger into another: the one merge both `state import` and the legacy
per-workspace ledger use (pure; `Ledger.merge` applies it through the state seam).

Two ways to fold, by what the incoming document is:
- `add=False` (`state import`, the default): the same ledger seen from elsewhere (an export of
  this install, a backup): each counter takes the larger of the two, so importing twice changes
  nothing and no counter goes down.
- `add=True` (`state import --add`, the legacy merge): another ledger's spending, counted on
  top of ours: its units add.

Either way a later window wins over an earlier one, a provider's newer report wins, an
exhaustion mark is kept to its later end, and calls in flight in either are kept.
"""

from __future__ import annotations

from typing import Any

import orjson

from smart_search.budget.quota import SOURCES, new_agent
from smart_search.host.config import PROVIDERS

Document = dict[str, Any]


def _count(a: int, b: int, add: bool) -> int:
    return a + b if add else max(a, b)


def merge_quota(target: Document, incoming: Document, *, add: bool = False) -> Document:
    """`target` with `incoming` folded in; no counter of `target` goes down. Both documents are
    current (read through `Ledger._current`, so of this version and rolled to now)."""
    out = orjson.loads(orjson.dumps(target))
    if incoming["date"] > out["date"]:
        out["date"] = incoming["date"]
        out["agents"] = orjson.loads(orjson.dumps(incoming["agents"]))
        out["carried"] = orjson.loads(orjson.dumps(incoming["carried"]))
    elif incoming["date"] == out["date"]:
        for p in PROVIDERS:
            mine, theirs = out["carried"][p], incoming["carried"][p]
            for k in ("used", "pool_used"):
                mine[k] = _count(mine[k], theirs[k], add)
        for agent_id, theirs in incoming["agents"].items():
            mine = out["agents"].setdefault(agent_id, new_agent())
            mine["completed"] = bool(mine["completed"] or theirs["completed"])
            for p in PROVIDERS:
                mine["released"][p] = max(mine["released"][p], theirs["released"][p])
                for s in SOURCES:
                    mine[p][s] = _count(mine[p][s], theirs[p][s], add)
    for p in PROVIDERS:
        _merge_window(out["windows"][p], incoming["windows"][p], add)
    return out


def _merge_window(mine: Document, theirs: Document, add: bool) -> None:
    _merge_counters(mine, theirs, add)
    holds = mine.setdefault("holds", {})
    for key, hold in (theirs.get("holds") or {}).items():
        holds.setdefault(key, dict(hold))
    # A key pool's accounts (keys.py): each folded like a window; a disabled key stays disabled
    # to the later of its two ends.
    for label, other in (theirs.get("keys") or {}).items():
        accounts = mine.setdefault("keys", {})
        if label not in accounts:
            accounts[label] = orjson.loads(orjson.dumps(other))
            continue
        own = accounts[label]
        _merge_counters(own, other, add)
        for fp, until in other["disabled"].items():
            own["disabled"][fp] = max(until, own["disabled"].get(fp) or 0)


def _merge_counters(mine: Document, theirs: Document, add: bool) -> None:
    if theirs["day"] > mine["day"]:
        mine["day"], mine["day_used"] = theirs["day"], theirs["day_used"]
    elif theirs["day"] == mine["day"]:
        mine["day_used"] = _count(mine["day_used"], theirs["day_used"], add)
    if theirs["month"] > mine["month"]:
        mine["month"], mine["month_used"] = theirs["month"], theirs["month_used"]
        mine["reported"] = theirs["reported"]
    elif theirs["month"] == mine["month"]:
        mine["month_used"] = _count(mine["month_used"], theirs["month_used"], add)
        seen, other = mine["reported"], theirs["reported"]
        if other is not None and (seen is None or other["seen_at"] > seen["seen_at"]):
            mine["reported"] = other
    if (theirs["exhausted_until"] or 0) > (mine["exhausted_until"] or 0):
        mine["exhausted_until"] = theirs["exhausted_until"]
        mine["exhausted_why"] = theirs.get("exhausted_why")
