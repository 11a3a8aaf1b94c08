"""The process's own stop request: a one-shot `smart-search` asked to stop (SIGTERM, as the
OpenClaw plugin sends when the host aborts a call) sends nothing more, and a request already in
flight is cut off, so the walk refunds every hold whose request never left and keeps the worst
case of one that did (`search/tiers.py`).

`request()` runs the hooks `sources/http.py` registered (it cancels the exchanges in flight);
`sleep` is `time.sleep` that a stop request cuts short (the retry backoff, the pacing wait).
The one-shot CLI asks for this on SIGTERM (`__main__`), and so does the MCP server
(`shell/mcp/cli.py`) before it exits; a library user never does. Otherwise the MCP server (the
OpenClaw plugin's resident worker) stops one call, not the process: each call
runs under `stopping_on(event)` (`http.cancel_scope` binds its scope's event), so a cancelled
call's waits end at once too, exactly as a stopped one-shot's do.
Nothing here is heavy to import: it loads before anything is sent.
"""

from __future__ import annotations

import contextvars
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager

_stop = threading.Event()
_hooks: list[Callable[[], object]] = []
# The stop of the call this context (thread) runs, when it has one of its own (the MCP server's).
_call_stop: contextvars.ContextVar[threading.Event | None] = contextvars.ContextVar(
    "smart_search_call_stop", default=None
)
_calls: set[threading.Event] = set()
_calls_lock = threading.Lock()


def request() -> None:
    """Stop: every later send refuses to start, every one in flight is cut off. Call it from a
    thread, never from a signal handler itself (it takes locks the interrupted code may hold):
    `request_from_signal` does that."""
    _stop.set()
    with _calls_lock:
        calls = tuple(_calls)
    for event in calls:
        event.set()
    for hook in tuple(_hooks):
        hook()


def request_from_signal(signum: int, frame: object) -> None:
    """A signal handler: `request()` on a thread of its own."""
    threading.Thread(target=request, name="smart-search-stop", daemon=True).start()


def requested() -> bool:
    call = _call_stop.get()
    return _stop.is_set() or (call is not None and call.is_set())


@contextmanager
def stopping_on(event: threading.Event) -> Iterator[threading.Event]:
    """In this context, `event` set is a stop request for this call alone (a process stop sets
    it too): `requested()` says so and `sleep` ends."""
    with _calls_lock:
        _calls.add(event)
    if _stop.is_set():
        event.set()
    token = _call_stop.set(event)
    try:
        yield event
    finally:
        _call_stop.reset(token)
        with _calls_lock:
            _calls.discard(event)


def on_request(hook: Callable[[], object]) -> None:
    """Run `hook` when a stop is requested (at once when it already was)."""
    _hooks.append(hook)
    if _stop.is_set():
        hook()


def sleep(seconds: float) -> None:
    """Sleep `seconds`, or until a stop is requested (of the process, or of this call)."""
    if seconds > 0:
        (_call_stop.get() or _stop).wait(seconds)
