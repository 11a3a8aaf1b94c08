"""The one module that opens shared-state files: locking, reading and atomic writes.

Every cross-process structure (the quota ledger, the circuit breaker, web_fetch pacing) is a small
JSON document in the state directory, changed only by `StateFile.update` under a file lock
(filelock) and written atomically: temp file, fsync, rename, fsync of the directory. A reader
without the lock therefore always sees a whole document, old or new, never a torn one. Advisory
documents (breaker, pacing) skip the two fsyncs: they may be lost in an OS crash without harm, and
the fsyncs, a variable few milliseconds inside the lock, would delay every search that paces or
consults a breaker.

A document that cannot be parsed is never reset or rewritten: the call fails with StateCorrupt and
the bytes stay as they are for the operator.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any, TypeVar

import orjson

from .errors import LOCKED, LockTimeout, StateCorrupt

T = TypeVar("T")

# filelock polls with a non-blocking flock. Its 50 ms default starves waiters in a cron burst
# (a waiter sleeps through most releases). 1 ms gave the lowest worst-case wait for 64 processes
# on 2 cores (README, Performance); the fsyncs inside the lock, not the polling, dominate it.
LOCK_POLL_INTERVAL_S = 0.001

Document = dict[str, Any]


class StateFile:
    """One JSON document in the state directory, shared by every process on the host."""

    def __init__(
        self, state_dir: str, name: str, lock_timeout_ms: int, *, advisory: bool = False
    ) -> None:
        self.state_dir = state_dir
        self.path = os.path.join(state_dir, name)
        # Advisory state (breaker, pacing) may be lost without harm: a corrupt file reads as
        # empty and is rewritten by the next update. The quota ledger is never advisory.
        self.advisory = advisory
        self.lock_path = self.path + ".lock"
        self.lock_timeout_s = lock_timeout_ms / 1000.0
        # Time the last update waited for the lock, for the cron-burst benchmark.
        self.last_lock_wait_s = 0.0

    def read(self) -> Document | None:
        """The current document, or None when the file does not exist yet. No lock needed."""
        try:
            with open(self.path, "rb") as fh:
                raw = fh.read()
        except FileNotFoundError:
            return None
        except OSError as exc:
            raise StateCorrupt(
                f"State file {self.path} cannot be read ({exc.__class__.__name__}). "
                "It was left in place."
            ) from None
        return self._parse(raw)

    def update(self, change: Callable[[Document | None], tuple[Document | None, T]]) -> T:
        """Run `change(document)` under the lock; write the document it returns (None: no write).

        `change` must be a pure function of the document: it may raise, and then nothing is
        written.
        """
        from time import perf_counter

        import filelock

        ensure_state_dir(self.state_dir)
        lock = filelock.FileLock(self.lock_path, timeout=self.lock_timeout_s)
        started = perf_counter()
        try:
            lock.acquire(poll_interval=LOCK_POLL_INTERVAL_S)
        except filelock.Timeout:
            raise LockTimeout(LOCKED) from None
        self.last_lock_wait_s = perf_counter() - started
        try:
            new_doc, result = change(self.read())
            if new_doc is not None:
                self._write(new_doc)
            return result
        finally:
            lock.release()

    def _parse(self, raw: bytes) -> Document | None:
        try:
            doc = orjson.loads(raw)
        except orjson.JSONDecodeError:
            doc = None
        if not isinstance(doc, dict) and self.advisory:
            return None
        if not isinstance(doc, dict):
            raise StateCorrupt(
                f"State file {self.path} is corrupt (not a JSON object). It was left in place: "
                "repair or move it aside."
            )
        return doc

    def _write(self, doc: Document) -> None:
        data = orjson.dumps(doc, option=orjson.OPT_INDENT_2 | orjson.OPT_APPEND_NEWLINE)
        # One temp name is enough: only the lock holder writes. A writer killed mid-write leaves
        # a stale temp file that the next writer truncates; the real file is never half-written.
        tmp = self.path + ".tmp"
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        try:
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view) :]
            if not self.advisory:
                os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(tmp, self.path)
        if self.advisory:
            return
        # Make the rename itself durable: losing it after a crash would forget spent units.
        dir_fd = os.open(self.state_dir, os.O_RDONLY)
        try:
            os.fsync(dir_fd)
        finally:
            os.close(dir_fd)


def ensure_state_dir(path: str) -> None:
    """Create the state directory (0700) on first use."""
    if not os.path.isdir(path):
        os.makedirs(path, mode=0o700, exist_ok=True)
