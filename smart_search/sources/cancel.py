"""The process's own stop request: a one-shot `smart-search` asked to stop (SIGTERM, as the
OpenClaw plugin sends when the host aborts a call) sends nothing more, and a request already in
flight is cut off, so the walk refunds every hold whose request never left and keeps the worst
case of one that did (`search/tiers.py`).

`request()` runs the hooks `sources/http.py` registered (it cancels the exchanges in flight);
`sleep` is `time.sleep` that a stop request cuts short (the retry backoff, the pacing wait).
Only the one-shot CLI asks for this (`__main__`); a library user or the MCP server never does.
Nothing here is heavy to import: it loads before anything is sent.
"""

from __future__ import annotations

import threading
from collections.abc import Callable

_stop = threading.Event()
_hooks: list[Callable[[], object]] = []


def request() -> None:
    """Stop: every later send refuses to start, every one in flight is cut off. Call it from a
    thread, never from a signal handler itself (it takes locks the interrupted code may hold):
    `request_from_signal` does that."""
    _stop.set()
    for hook in tuple(_hooks):
        hook()


def request_from_signal(signum: int, frame: object) -> None:
    """A signal handler: `request()` on a thread of its own."""
    threading.Thread(target=request, name="smart-search-stop", daemon=True).start()


def requested() -> bool:
    return _stop.is_set()


def on_request(hook: Callable[[], object]) -> None:
    """Run `hook` when a stop is requested (at once when it already was)."""
    _hooks.append(hook)
    if _stop.is_set():
        hook()


def sleep(seconds: float) -> None:
    """Sleep `seconds`, or until a stop is requested."""
    if seconds > 0:
        _stop.wait(seconds)
