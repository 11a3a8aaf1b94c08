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

    waited = claim_slot(
        store, PACING_DOC, engine, interval, deadline, horizon,
        clock=clock, monotonic=monotonic, sleep=sleep,
    )  # fmt: skip
    if waited is None:
        raise Timeout(
            f"{registry.label(engine)} pacing: the next request slot lies past the deadline."
        )
    return waited


def claim_slot(
    store: Store,
    document: str,
    key: str,
    interval_s: float,
    deadline: float,
    horizon_s: float,
    *,
    forget_s: float | None = None,
    clock: Callable[[], float] = time.time,
    monotonic: Callable[[], float] = time.monotonic,
    sleep: Callable[[float], None] = cancel.sleep,
) -> float | None:
    """Claim `key`'s next start time in `document` (`interval_s` after the last one) in one
    atomic update, then sleep until it; returns the seconds waited, or None (nothing claimed)
    when that slot lies past `deadline` (monotonic). A stamp more than `horizon_s` ahead was
    made by a clock that has since moved back and is ignored; with `forget_s`, stamps that far
    in the past are dropped from the document. The engines' pacing and smart_fetch's per-host
    pacing both claim here."""

    def claim(doc: dict[str, Any] | None) -> tuple[dict[str, Any] | None, float | None]:
        now = clock()
        doc = {
            name: stamp
            for name, stamp in (doc or {}).items()
            if forget_s is None
            or (isinstance(stamp, int | float) and not isinstance(stamp, bool)
                and stamp > now - forget_s)
        }  # fmt: skip
        stamp = doc.get(key, 0.0)
        last = (
            float(stamp) if isinstance(stamp, int | float) and not isinstance(stamp, bool) else 0.0
        )
        # Callers never claim a slot past their deadline, so one further ahead than the horizon
        # was stamped by a clock that has since moved back: it must not stall the key forever.
        if last > now + horizon_s:
            last = now
        slot = max(now, last + interval_s)
        if monotonic() + (slot - now) > deadline:
            return None, None
        doc[key] = slot
        return doc, slot

    slot = store.update(document, claim)
    if slot is None:
        return None
    wait = slot - clock()
    if wait > 0:
        sleep(wait)
    return max(wait, 0.0)
