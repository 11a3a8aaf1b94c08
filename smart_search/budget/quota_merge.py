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


def excess_quota(incoming: Document, base: Document) -> Document:
    """What `incoming` counted beyond `base`, an earlier state of the same ledger (a restore's
    base, RULINGS 8): each counter of a window both share less base's, never below 0; a window
    only `incoming` has is whole; holds `base` already carried are left out. Folded with
    `merge_quota(..., add=True)`: a witness that saw more than a restore knew adds only that."""
    out = orjson.loads(orjson.dumps(incoming))
    if out["date"] == base["date"]:
        for p in PROVIDERS:
            for k in ("used", "pool_used"):
                out["carried"][p][k] = max(0, out["carried"][p][k] - base["carried"][p][k])
        for agent_id, mine in out["agents"].items():
            theirs = base["agents"].get(agent_id)
            for p in PROVIDERS:
                for s in SOURCES:
                    mine[p][s] = max(0, mine[p][s] - (theirs[p][s] if theirs else 0))
    for p in PROVIDERS:
        mine, theirs = out["windows"][p], base["windows"][p]
        _less(mine, theirs)
        for key in theirs.get("holds") or {}:
            (mine.get("holds") or {}).pop(key, None)
        for label, account in (mine.get("keys") or {}).items():
            other = (theirs.get("keys") or {}).get(label)
            if other is not None:
                _less(account, other)
    return out


def _less(mine: Document, theirs: Document) -> None:
    if mine["day"] == theirs["day"]:
        mine["day_used"] = max(0, mine["day_used"] - theirs["day_used"])
    if mine["month"] == theirs["month"]:
        mine["month_used"] = max(0, mine["month_used"] - theirs["month_used"])


def quota_units(doc: Document) -> int:
    """Units a ledger counts this month, every provider: how much a fold or a restore moved."""
    return sum(doc["windows"][p]["month_used"] for p in PROVIDERS)


# -- smart_fetch's daily counts ({"date": day, "agents": {id: n}}), the other durable document --
def merge_counts(target: Document, incoming: Document, *, add: bool = False) -> Document:
    """The later day wins whole; on the same day each agent's count takes the larger (or, with
    `add`, the sum)."""
    mine, theirs = _counts(target), _counts(incoming)
    if theirs["date"] > mine["date"]:
        return theirs
    if theirs["date"] < mine["date"]:
        return mine
    for agent, n in theirs["agents"].items():
        mine["agents"][agent] = _count(mine["agents"].get(agent, 0), n, add)
    return mine


def excess_counts(incoming: Document, base: Document) -> Document:
    out, base = _counts(incoming), _counts(base)
    if out["date"] == base["date"]:
        for agent, n in out["agents"].items():
            out["agents"][agent] = max(0, n - base["agents"].get(agent, 0))
    return out


def count_units(doc: Document) -> int:
    return sum(_counts(doc)["agents"].values())


def _counts(doc: Document | None) -> Document:
    agents = (doc or {}).get("agents")
    clean = {
        str(a): n
        for a, n in (agents.items() if isinstance(agents, dict) else ())
        if isinstance(n, int) and not isinstance(n, bool) and n > 0
    }
    return {"date": str((doc or {}).get("date", "")), "agents": clean}
