"""smart_fetch's governor (issue 21): today's fetches per agent against the daily fetch
allocation, and per-host pacing across processes. Both live in the state seam (`store/`), in
documents of their own ("fetch_counts", "fetch_pacing"), apart from the search quota ledger.

- `reserve_fetch` counts one fetch for an agent in one atomic update, before the request
  leaves, and refuses it (`FetchLimit`) when the allocation is spent. A fetch that fails after
  the reservation stays counted: like a search unit, the count may over-state use, never
  under-state it. The first update of a later day starts the counts afresh.
- `wait_for_host` claims the host's next free start time (`fetch.min_interval_ms` after the last
  one) and sleeps until it, as `pacing.wait_for_slot` does per engine; a slot past the call's
  deadline is a `Timeout` without a claim. A server's `Retry-After` pushes the host's next slot
  out by `hold_host`, so that other processes wait too.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from smart_search.errors import FetchLimit, Timeout

if TYPE_CHECKING:
    from smart_search.host.config import Settings
    from smart_search.store import Store

COUNTS_DOC = "fetch_counts"
PACING_DOC = "fetch_pacing"
# Hosts whose slot lies this far in the past are dropped from the pacing document.
_FORGET_S = 3600.0
# A host's slot further ahead than this was stamped by a clock that has since moved back.
_CLOCK_BACK_S = 86400.0


def fetch_limit_message(agent_id: str, allocation: int) -> str:
    plural = "es" if allocation != 1 else ""
    return (
        f"Agent {agent_id} has used its {allocation} fetch{plural} for today "
        "(fetch.daily_allocation)."
    )


def reserve_fetch(store: Store, day: str, agent_id: str, allocation: int) -> int:
    """Count one fetch for `agent_id` today; returns the agent's count after it. `allocation`
    0 means no limit. Raises FetchLimit (counting nothing) when the allocation is spent."""

    def change(doc: dict[str, Any] | None) -> tuple[dict[str, Any] | None, int]:
        doc = _today(doc, day)
        agents = doc["agents"]
        used = _count(agents.get(agent_id))
        if allocation and used >= allocation:
            return None, -1
        agents[agent_id] = used + 1
        return doc, used + 1

    used = _guarded(store, lambda: store.update(COUNTS_DOC, change))
    if used < 0:
        raise FetchLimit(fetch_limit_message(agent_id, allocation))
    return used


def fetch_counts(store: Store, day: str) -> dict[str, int]:
    """Today's fetches per agent (empty on a new day or before the first fetch)."""
    doc = _guarded(store, lambda: store.read(COUNTS_DOC))
    if not isinstance(doc, dict) or doc.get("date") != day:
        return {}
    agents = doc.get("agents")
    if not isinstance(agents, dict):
        return {}
    return {str(agent): _count(n) for agent, n in agents.items()}


def usage(used: int, allocation: int) -> dict[str, int | None]:
    """One agent's `fetch_usage` (schemas/search_quota_status.result.json)."""
    if not allocation:
        return {"used": used, "allocated": None, "remaining": None}
    return {"used": used, "allocated": allocation, "remaining": max(0, allocation - used)}


def wait_for_host(
    store: Store, host: str, interval_s: float, deadline: float, clock: Callable[[], float]
) -> float:
    """Block until `host` may be requested (a stop request ends the wait: `sources/cancel`);
    returns the seconds waited."""
    from smart_search.budget.pacing import claim_slot

    key = host.lower()
    waited = claim_slot(
        store, PACING_DOC, key, interval_s, deadline, _CLOCK_BACK_S, forget_s=_FORGET_S, clock=clock
    )
    if waited is None:
        raise Timeout(f"Pacing for {host}: the next request slot lies past the deadline.")
    return waited


def hold_host(
    store: Store, host: str, seconds: float, *, clock: Callable[[], float] = time.time
) -> None:
    """A server asked for `seconds` of quiet (Retry-After): `host`'s last slot is stamped at
    least that far ahead, so no process starts a request to it before then (the next caller
    also adds its pacing interval, erring on the side of waiting longer)."""
    key = host.lower()

    def push(doc: dict[str, Any] | None) -> tuple[dict[str, Any] | None, None]:
        doc = dict(doc or {})
        until = clock() + seconds
        current = doc.get(key)
        if not isinstance(current, int | float) or isinstance(current, bool) or current < until:
            doc[key] = until
        return doc, None

    store.update(PACING_DOC, push)  # an advisory document: never flushed


def _guarded(store: Store, op: Callable[[], Any]) -> Any:
    """`op` after a forgotten count was restored, or refused (RULINGS 8, budget/recovery.py)."""
    if store.kind == "files":
        return op()
    from smart_search.budget.recovery import guarded

    return guarded(store, COUNTS_DOC, op, lambda doc: doc or {"date": "", "agents": {}}, [])


def _today(doc: dict[str, Any] | None, day: str) -> dict[str, Any]:
    """The counts document for `day`; a later day starts afresh, an earlier one (a clock moved
    back) keeps the counts it holds, as the quota ledger does."""
    if isinstance(doc, dict) and isinstance(doc.get("agents"), dict):
        held = str(doc.get("date", ""))
        if held >= day:
            return doc
    return {"date": day, "agents": {}}


def _count(value: Any) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else 0


def fetch_status(
    settings: Settings, store: Store, day: str, agent_id: str | None
) -> dict[str, Any]:
    """search_quota_status's `fetches`: one agent's usage, or every agent's and the total."""
    allocation = settings.fetch["daily_allocation"]
    counts = fetch_counts(store, day)
    if agent_id is not None:
        return usage(counts.get(agent_id, 0), allocation)
    return {
        "date": day,
        "total": sum(counts.values()),
        "agents": {agent: usage(n, allocation) for agent, n in sorted(counts.items())},
    }
