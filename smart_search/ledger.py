"""The quota ledger: reserve/refund/complete/status over one shared document per host.

`Ledger` is the seam: today its one backend is `search-quota.json` in the state directory (through
`state.StateFile`); a networked backend for fleets only has to offer the same five methods. The
arithmetic itself is in `quota.py`.

Days: the UTC date (or `timezone`'s). The first call of a later day starts fresh counters; a day
earlier than the file's (a clock moved back) keeps counting into the file's day, never resetting.

A file written by the original Node skill (`providers.<p>.{daily_limit, remaining, used,
shared_pool}`, `agent_allocations.<id>.{gemini, brave, gemini_used, brave_used, completed}`) is
read and, when it is today's, its counts carry over (see `_from_node`).
"""

from __future__ import annotations

import time
from typing import Any

from . import quota
from .config import PROVIDERS, Settings
from .errors import (
    AgentNotFound,
    AlreadyComplete,
    StateCorrupt,
    agent_already_complete,
    agent_not_found,
)
from .state import StateFile

QUOTA_FILE = "search-quota.json"

Document = dict[str, Any]


def today(settings: Settings, now: float | None = None) -> str:
    """The ledger's (and the logs') day: UTC unless `timezone` names an IANA zone."""
    now = time.time() if now is None else now
    if not settings.timezone:
        return time.strftime("%Y-%m-%d", time.gmtime(now))
    from datetime import datetime
    from zoneinfo import ZoneInfo

    # config._zone already proved the name.
    return datetime.fromtimestamp(now, ZoneInfo(settings.timezone)).strftime("%Y-%m-%d")


def ceilings(settings: Settings) -> quota.Ceilings:
    return quota.Ceilings(
        settings.daily_limits, settings.agent_allocations, settings.default_allocation
    )


class Ledger:
    """Quota operations for one call; every change happens under the state file's lock."""

    def __init__(self, settings: Settings, now: float | None = None) -> None:
        self.file = StateFile(settings.state_dir, QUOTA_FILE, settings.lock_timeout_ms)
        self.ceilings = ceilings(settings)
        self.today = today(settings, now)

    # -- reads ---------------------------------------------------------------------------------
    def snapshot(self) -> Document:
        """Today's document as it stands (not locked: atomic writes keep it whole)."""
        return self._current(self.file.read())

    def agent_status(self, agent_id: str) -> dict[str, Any]:
        doc = self.snapshot()
        self._require_known(doc, agent_id)
        return quota.agent_status(doc, self.ceilings, agent_id)

    def full_status(self) -> dict[str, Any]:
        return quota.full_status(self.snapshot(), self.ceilings)

    # -- changes -------------------------------------------------------------------------------
    def register(self, agent_id: str) -> None:
        """Make `agent_id` a known agent for today; writes only the first time each day."""
        doc = self.snapshot()
        if agent_id in doc["agents"]:
            return

        def change(raw: Document | None) -> tuple[Document | None, None]:
            doc = self._current(raw)
            return (doc if quota.ensure_agent(doc, agent_id) else None), None

        self.file.update(change)

    def reserve(self, agent_id: str, provider: str) -> tuple[str, int]:
        """Take one unit; returns (source, queries_remaining after it). Raises QuotaExhausted."""

        def change(raw: Document | None) -> tuple[Document, tuple[str, int]]:
            doc = self._current(raw)
            source = quota.reserve(doc, self.ceilings, agent_id, provider)
            left = quota.queries_remaining(doc, self.ceilings, agent_id, provider, source)
            return doc, (source, left)

        return self.file.update(change)

    def refund(self, agent_id: str, provider: str, source: str) -> None:
        """Give back a unit a failed request reserved."""

        def change(raw: Document | None) -> tuple[Document | None, None]:
            doc = self._current(raw)
            return (doc if quota.refund(doc, agent_id, provider, source) else None), None

        self.file.update(change)

    def complete(self, agent_id: str) -> dict[str, int]:
        """Mark the agent complete and release its unused allocation to the pool."""

        def change(raw: Document | None) -> tuple[Document, dict[str, int]]:
            doc = self._current(raw)
            self._require_known(doc, agent_id)
            record = doc["agents"].get(agent_id)
            if record is not None and record["completed"]:
                raise AlreadyComplete(agent_already_complete(agent_id))
            return doc, quota.complete(doc, self.ceilings, agent_id)

        return self.file.update(change)

    # -- internals -----------------------------------------------------------------------------
    def _require_known(self, doc: Document, agent_id: str) -> None:
        known = agent_id in doc["agents"] or agent_id in self.ceilings.configured
        if not known and agent_id != "general":
            raise AgentNotFound(agent_not_found(agent_id))

    def _current(self, raw: Document | None) -> Document:
        """Today's document from whatever the file holds (nothing, ours, the Node skill's)."""
        if raw is None:
            return quota.new_day(self.today)
        if raw.get("format") == quota.FORMAT:
            doc = _checked(raw, self.file.path)
        elif "agent_allocations" in raw or "providers" in raw:
            doc = _from_node(raw, self.today, self.file.path)
        else:
            raise _corrupt(self.file.path, "unknown layout")
        # A later day starts fresh; an earlier one (clock moved back) never resets counters.
        if doc["date"] < self.today:
            return quota.new_day(self.today)
        return doc


def _corrupt(path: str, why: str) -> StateCorrupt:
    return StateCorrupt(
        f"Quota file {path} is corrupt ({why}). It was left in place: repair or move it aside."
    )


def _count(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


def _checked(doc: Document, path: str) -> Document:
    """Reject a document whose shape the arithmetic cannot trust (hand-edited, truncated...)."""
    try:
        ok = isinstance(doc["date"], str) and len(doc["date"]) == 10
        for p in PROVIDERS:
            entry = doc["providers"][p]
            keys = ("unattributed_used", "pool_used_unattributed")
            ok = ok and all(_count(entry[k]) for k in keys)
        for agent_id, rec in doc["agents"].items():
            ok = ok and isinstance(agent_id, str) and isinstance(rec["completed"], bool)
            for p in PROVIDERS:
                ok = ok and _count(rec["released"][p])
                ok = ok and all(_count(rec[p][s]) for s in quota.SOURCES)
    except (KeyError, TypeError, AttributeError):
        ok = False
    if not ok:
        raise _corrupt(path, "unexpected structure")
    return doc


def _node_date(raw: Document, path: str) -> str | None:
    for key in ("date", "last_reset", "lastReset", "reset_date", "day"):
        value = raw.get(key)
        if isinstance(value, str) and len(value) >= 10 and value[4] == "-" and value[7] == "-":
            return value[:10]
    try:
        import os

        return time.strftime("%Y-%m-%d", time.gmtime(os.stat(path).st_mtime))
    except OSError:
        return None


def _from_node(raw: Document, day: str, path: str) -> Document:
    """Carry today's counts over from the Node skill's file so nobody's budget resets mid-day.

    Per agent, `<p>_used` units count as spent from its allocation up to the Node allocation and
    as provider-direct beyond it (the Node file does not say which); a completed agent released
    the rest of its allocation. Provider `used` beyond what agents account for is kept as
    unattributed use, and pool units the Node file shows as already drawn likewise: every unit
    the old skill spent still counts against the daily limit.
    """
    date = _node_date(raw, path) or day
    doc = quota.new_day(date)
    if date < day:
        return doc
    agents = raw.get("agent_allocations") or {}
    providers = raw.get("providers") or {}
    if not isinstance(agents, dict) or not isinstance(providers, dict):
        raise _corrupt(path, "unexpected structure")
    for agent_id, entry in agents.items():
        if not isinstance(entry, dict):
            raise _corrupt(path, "unexpected structure")
        rec = quota.new_agent()
        rec["completed"] = entry.get("completed") is True
        for p in PROVIDERS:
            allocated = entry.get(p, 0) if _count(entry.get(p, 0)) else 0
            used = entry.get(f"{p}_used", 0) if _count(entry.get(f"{p}_used", 0)) else 0
            rec[p]["allocation"] = min(used, allocated)
            rec[p]["direct"] = used - rec[p]["allocation"]
            if rec["completed"]:
                rec["released"][p] = allocated - rec[p]["allocation"]
        doc["agents"][agent_id] = rec
    for p in PROVIDERS:
        entry = providers.get(p) or {}
        if not isinstance(entry, dict):
            raise _corrupt(path, "unexpected structure")
        used = entry.get("used", 0) if _count(entry.get("used", 0)) else 0
        by_agents = sum(quota.agent_used(doc, a, p) for a in doc["agents"])
        doc["providers"][p]["unattributed_used"] = max(0, used - by_agents)
        pool_left = entry.get("shared_pool")
        if _count(pool_left):
            drawn = quota.pool_size(doc, p) - pool_left
            doc["providers"][p]["pool_used_unattributed"] = max(0, drawn)
    return doc
