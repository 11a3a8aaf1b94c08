"""Quota arithmetic (RULINGS §4): pure functions over one day's ledger document.

Config owns the ceilings (`Ceilings`: daily limits, allocations); the document owns the live
counters. Nothing here does I/O, so every rule is testable with plain dicts.

Document layout (one UTC day, or the configured zone's day):

    {"format": "smart-search/quota@1", "date": "YYYY-MM-DD",
     "providers": {p: {"unattributed_used": n, "pool_used_unattributed": n}},
     "agents": {id: {"completed": bool, "released": {p: n},
                     p: {"allocation": n, "pool": n, "direct": n}}}}

`unattributed_*` only hold units carried over from a predecessor's file that cannot be pinned on
one agent; they count against every ceiling like any other spent unit.

Per provider p, with L the daily limit and A the sum of the allocations of every known agent:
- allocation source: allocated(agent) - used from allocation (0 once completed);
- shared pool: released by completed agents - used from the pool;
- provider direct: L - A - used directly;
- and, above all three, total used <= L.
"""

from __future__ import annotations

from typing import Any

from .errors import QuotaExhausted

FORMAT = "smart-search/quota@1"
PROVIDERS = ("gemini", "brave")
SOURCES = ("allocation", "pool", "direct")
# quota_source values in results, per source.
SOURCE_NAMES = {
    "allocation": "agent_allocation",
    "pool": "shared_pool",
    "direct": "provider_direct",
}

Document = dict[str, Any]


class Ceilings:
    """The config side of the arithmetic: daily limits and who is allocated what."""

    def __init__(
        self,
        daily_limits: dict[str, int],
        configured: dict[str, dict[str, int]],
        default_allocation: dict[str, int],
    ) -> None:
        self.daily_limits = daily_limits
        self.configured = configured
        self.default_allocation = default_allocation

    def allocation(self, agent_id: str, provider: str) -> int:
        return self.configured.get(agent_id, self.default_allocation).get(provider, 0)

    def known_agents(self, doc: Document) -> list[str]:
        """Configured agents plus those registered today (configured first, in config order)."""
        agents = list(self.configured)
        agents.extend(a for a in doc["agents"] if a not in self.configured)
        return agents


def new_day(date: str) -> Document:
    return {
        "format": FORMAT,
        "date": date,
        "providers": {p: {"unattributed_used": 0, "pool_used_unattributed": 0} for p in PROVIDERS},
        "agents": {},
    }


def new_agent() -> dict[str, Any]:
    record: dict[str, Any] = {"completed": False, "released": {p: 0 for p in PROVIDERS}}
    for p in PROVIDERS:
        record[p] = {s: 0 for s in SOURCES}
    return record


def ensure_agent(doc: Document, agent_id: str) -> bool:
    """Register `agent_id` in today's document; True when that changed the document."""
    if agent_id in doc["agents"]:
        return False
    doc["agents"][agent_id] = new_agent()
    return True


def _agent(doc: Document, agent_id: str) -> dict[str, Any]:
    return doc["agents"].get(agent_id) or new_agent()


def agent_used(doc: Document, agent_id: str, provider: str) -> int:
    counts = _agent(doc, agent_id)[provider]
    return counts["allocation"] + counts["pool"] + counts["direct"]


def allocation_remaining(doc: Document, c: Ceilings, agent_id: str, provider: str) -> int:
    record = _agent(doc, agent_id)
    if record["completed"]:
        return 0
    return max(0, c.allocation(agent_id, provider) - record[provider]["allocation"])


def total_used(doc: Document, provider: str) -> int:
    extra = doc["providers"][provider]["unattributed_used"]
    return extra + sum(agent_used(doc, a, provider) for a in doc["agents"])


def allocated_total(doc: Document, c: Ceilings, provider: str) -> int:
    return sum(c.allocation(a, provider) for a in c.known_agents(doc))


def pool_size(doc: Document, provider: str) -> int:
    return sum(rec["released"][provider] for rec in doc["agents"].values())


def pool_remaining(doc: Document, provider: str) -> int:
    used = doc["providers"][provider]["pool_used_unattributed"]
    used += sum(rec[provider]["pool"] for rec in doc["agents"].values())
    return max(0, pool_size(doc, provider) - used)


def direct_headroom(doc: Document, c: Ceilings, provider: str) -> int:
    used = doc["providers"][provider]["unattributed_used"]
    used += sum(rec[provider]["direct"] for rec in doc["agents"].values())
    return max(0, c.daily_limits[provider] - allocated_total(doc, c, provider) - used)


def limit_headroom(doc: Document, c: Ceilings, provider: str) -> int:
    return max(0, c.daily_limits[provider] - total_used(doc, provider))


def pick_source(doc: Document, c: Ceilings, agent_id: str, provider: str) -> str | None:
    """The first source with a unit for this agent, or None. The daily limit caps them all."""
    if limit_headroom(doc, c, provider) <= 0:
        return None
    if allocation_remaining(doc, c, agent_id, provider) > 0:
        return "allocation"
    if pool_remaining(doc, provider) > 0:
        return "pool"
    if direct_headroom(doc, c, provider) > 0:
        return "direct"
    return None


def reserve(doc: Document, c: Ceilings, agent_id: str, provider: str) -> str:
    """Take one unit for `agent_id` from `provider` (mutates doc); returns the source."""
    ensure_agent(doc, agent_id)
    source = pick_source(doc, c, agent_id, provider)
    if source is None:
        raise QuotaExhausted(f"{provider.capitalize()} quota is exhausted for today.")
    doc["agents"][agent_id][provider][source] += 1
    return source


def refund(doc: Document, agent_id: str, provider: str, source: str) -> bool:
    """Give back a unit a failed request reserved; False when there is nothing to give back
    (the day rolled over in between, so the unit belongs to a reset counter)."""
    record = doc["agents"].get(agent_id)
    if record is None or record[provider][source] <= 0:
        return False
    record[provider][source] -= 1
    return True


def queries_remaining(
    doc: Document, c: Ceilings, agent_id: str, provider: str, source: str | None
) -> int:
    """RULINGS §4: the pool's remainder when the unit came from it, else the agent's allocation."""
    if source == "pool":
        return pool_remaining(doc, provider)
    return allocation_remaining(doc, c, agent_id, provider)


def complete(doc: Document, c: Ceilings, agent_id: str) -> dict[str, int]:
    """Mark the agent done and move its unused allocation into the pool; returns what moved."""
    ensure_agent(doc, agent_id)
    record = doc["agents"][agent_id]
    released = {p: allocation_remaining(doc, c, agent_id, p) for p in PROVIDERS}
    record["released"] = released
    record["completed"] = True
    return released


def agent_status(doc: Document, c: Ceilings, agent_id: str) -> dict[str, Any]:
    status: dict[str, Any] = {"agent_id": agent_id}
    for p in PROVIDERS:
        status[p] = {
            "allocated": c.allocation(agent_id, p),
            "used": agent_used(doc, agent_id, p),
            "remaining": allocation_remaining(doc, c, agent_id, p),
        }
    status["completed"] = _agent(doc, agent_id)["completed"]
    return status


def full_status(doc: Document, c: Ceilings) -> dict[str, Any]:
    providers = {}
    for p in PROVIDERS:
        providers[p] = {
            "daily_limit": c.daily_limits[p],
            "used": total_used(doc, p),
            "remaining": limit_headroom(doc, c, p),
            "allocated": allocated_total(doc, c, p),
            "shared_pool": pool_remaining(doc, p),
            "direct_headroom": direct_headroom(doc, c, p),
        }
    agents = {a: agent_status(doc, c, a) for a in c.known_agents(doc)}
    for status in agents.values():
        del status["agent_id"]
    return {
        "date": doc["date"],
        "providers": providers,
        "agents": agents,
        "warning": overcommit_warning(doc, c),
    }


def overcommit_warning(doc: Document, c: Ceilings) -> str | None:
    """Allocations that add up past a daily limit are a config mistake worth saying out loud."""
    over = [
        f"{p} allocations total {allocated_total(doc, c, p)} > daily_limit {c.daily_limits[p]}"
        for p in PROVIDERS
        if allocated_total(doc, c, p) > c.daily_limits[p]
    ]
    if not over:
        return None
    return "Agent allocations exceed the daily limit (" + "; ".join(over) + "); the limit wins."
