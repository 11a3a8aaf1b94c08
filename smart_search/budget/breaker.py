"""Circuit breaker per provider and per web engine, shared by every process (RULINGS 5).

The predecessor kept its breaker in process memory, so for a one-shot CLI it never fired. Here it
is a document in the shared store (`store/`, "breaker"):

    {name: {"state": "closed"|"open"|"half_open", "failures": n, "opened_at": t, "trial_at": t}}

closed → open after `circuit_failure_threshold` consecutive health failures (an error whose
`counts_for_breaker` is set) → calls skipped with "<Name> circuit is open. Try again later." →
after `circuit_reset_seconds` exactly one process claims the half-open trial (under the lock) →
closed on any answer that is not a health failure, open again on a health failure. A trial whose
process died is given up after `total_timeout_ms` plus a margin, and another process may try.

The common path (closed, nothing to record) only reads the document: no lock, no write.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any

from smart_search.errors import CircuitOpen, SearchError, circuit_open
from smart_search.host.config import Settings
from smart_search.sources import registry

if TYPE_CHECKING:
    from smart_search.store import Store

BREAKER_DOC = "breaker"
TRIAL_LEASE_MARGIN_S = 5.0

Document = dict[str, Any]


class Breaker:
    def __init__(
        self, settings: Settings, clock: Any = time.time, store: Store | None = None
    ) -> None:
        if store is None:
            from smart_search.store import open_store

            store = open_store(settings)
        self.store = store
        self.threshold = settings.circuit_failure_threshold
        self.reset_s = float(settings.circuit_reset_seconds)
        self.lease_s = settings.total_timeout_ms / 1000.0 + TRIAL_LEASE_MARGIN_S
        self.clock = clock

    def snapshot(self) -> dict[str, Document]:
        """Every breaker's record with sane types (status, doctor, the MCP status resource)."""
        doc = self.store.read(BREAKER_DOC) or {}
        entries = {name: breaker_entry(doc, name) for name in doc}
        return {name: entry for name, entry in sorted(entries.items()) if entry is not None}

    def admit(self, name: str) -> None:
        """Return when `name` may be called now; raise CircuitOpen when it may not."""
        entry = breaker_entry(self.store.read(BREAKER_DOC), name)
        if not entry or entry.get("state") == "closed":
            return
        if not self._trial_due(entry, self.clock()):
            raise CircuitOpen(circuit_open(registry.label(name)))

        def claim(doc: Document | None) -> tuple[Document | None, bool]:
            doc = doc or {}
            current = breaker_entry(doc, name)
            now = self.clock()
            if not current or current.get("state") == "closed":
                return None, True
            if not self._trial_due(current, now):
                return None, False
            current["state"] = "half_open"
            current["trial_at"] = now
            doc[name] = current
            return doc, True

        if not self.store.update(BREAKER_DOC, claim):
            raise CircuitOpen(circuit_open(registry.label(name)))

    def record(self, name: str, error: SearchError | None) -> None:
        """Record how a call to `name` ended: None for success, else the error it raised."""
        failed = error is not None and error.counts_for_breaker
        entry = breaker_entry(self.store.read(BREAKER_DOC), name)
        if not failed and (not entry or (entry["state"] == "closed" and not entry["failures"])):
            return  # Healthy and already recorded as healthy: nothing to write.

        def change(doc: Document | None) -> tuple[Document, None]:
            doc = doc or {}
            now = self.clock()
            current = breaker_entry(doc, name) or {"state": "closed", "failures": 0}
            if not failed:
                doc[name] = {"state": "closed", "failures": 0}
                return doc, None
            current["failures"] += 1
            if current.get("state") == "half_open" or current["failures"] >= self.threshold:
                current["state"] = "open"
                current["opened_at"] = now
            doc[name] = current
            return doc, None

        self.store.update(BREAKER_DOC, change)

    def _trial_due(self, entry: Document, now: float) -> bool:
        if entry.get("state") == "open":
            return now >= entry["opened_at"] + self.reset_s
        if entry.get("state") == "half_open":
            return now >= entry["trial_at"] + self.lease_s
        return True


def breaker_entry(doc: Document | None, name: str) -> Document | None:
    """`name`'s record with sane types, or None; a hand-mangled record reads as closed."""
    raw = (doc or {}).get(name)
    if not isinstance(raw, dict) or raw.get("state") not in ("closed", "open", "half_open"):
        return None

    def number(key: str) -> float:
        value = raw.get(key, 0)
        ok = isinstance(value, int | float) and not isinstance(value, bool)
        return float(value) if ok else 0.0

    return {
        "state": raw["state"],
        "failures": int(number("failures")),
        "opened_at": number("opened_at"),
        "trial_at": number("trial_at"),
    }


