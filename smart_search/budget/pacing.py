"""web_fetch pacing: requests to one engine at least `web_fetch_min_interval_ms` apart across ALL
processes (RULINGS 5). The predecessor's in-process delay never fired for a one-shot CLI.

Each engine's next free start time is kept in the shared store (`store/`, "pacing"). A caller
claims the next slot in one atomic update and then sleeps until that slot's wall-clock time; if
the slot lies beyond its
deadline it claims nothing and gives up at once, so pacing never pushes a call past
`total_timeout_ms`. The sleep aims at the slot itself, not at a duration measured inside the lock:
the lock holder's write and fsync take a variable few milliseconds, and a duration counted from
before them would wake each caller late by its own write time, bringing neighbours closer than the
interval.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from smart_search.errors import Timeout
from smart_search.host.config import Settings
from smart_search.sources import cancel, registry

if TYPE_CHECKING:
    from smart_search.store import Store

PACING_DOC = "pacing"


def wait_for_slot(
    settings: Settings,
    engine: str,
    deadline: float,
    *,
    clock: Callable[[], float] = time.time,
    monotonic: Callable[[], float] = time.monotonic,
    sleep: Callable[[float], None] = cancel.sleep,
    store: Store | None = None,
) -> float:
    """Block until `engine` may be requested; returns the seconds waited."""
    interval = settings.web_fetch_min_interval_ms / 1000.0
    horizon = settings.total_timeout_ms / 1000.0 + interval
    if store is None:
        from smart_search.store import open_store

        store = open_store(settings)

    def claim(doc: dict[str, Any] | None) -> tuple[dict[str, Any] | None, float | None]:
        doc = doc or {}
        now = clock()
        stamp = doc.get(engine, 0.0)
        last = (
            float(stamp) if isinstance(stamp, int | float) and not isinstance(stamp, bool) else 0.0
        )
        # Callers never claim a slot past their deadline, so one further ahead than that was
        # stamped by a clock that has since moved back: it must not stall the engine forever.
        if last > now + horizon:
            last = now
        slot = max(now, last + interval)
        wait = slot - now
        if monotonic() + wait > deadline:
            return None, None
        doc[engine] = slot
        return doc, slot

    slot = store.update(PACING_DOC, claim)
    if slot is None:
        raise Timeout(
            f"{registry.label(engine)} pacing: the next request slot lies past the deadline."
        )
    wait = slot - clock()
    if wait > 0:
        sleep(wait)
    return max(wait, 0.0)
