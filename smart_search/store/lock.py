"""The state directory's file lock: an exclusive flock(2) on `<document>.lock`, waited for in the
kernel.

A waiter sleeps in flock(2) and the kernel wakes it when the holder lets go, so waiting costs no
CPU. filelock, which this replaced, only polls with a non-blocking flock: in a cron burst (64
processes on 2 cores) the pollers took the CPU the lock holder needed, so the longest wait passed
a second, and since filelock 4 its import cost every search about 20 ms.

flock(2) has no deadline, `lock_timeout_ms` does: an uncontended lock is taken at once, and a
contended wait runs in a helper thread the caller waits for. A helper that gets the lock after
its caller gave up closes its descriptor at once, which lets the lock go. The lock belongs to the
open file (not the process): each update opens its own, so threads of one process exclude each
other too, and a process that dies holding it loses it with its descriptors. The lock file is
created 0600 (less under a stricter umask) and never followed through a link. The protocol is
filelock's own on Unix (flock on the same file, left in place), so processes of a release that
still used filelock and of this one exclude each other.
"""

from __future__ import annotations

import fcntl
import os
import threading

# O_NONBLOCK: a FIFO planted at the name after statefile's check must not hang the open (it has
# no effect on flock, whose blocking is LOCK_NB's business).
_FLAGS = (
    os.O_RDWR
    | os.O_CREAT
    | os.O_NONBLOCK
    | getattr(os, "O_NOFOLLOW", 0)
    | getattr(os, "O_CLOEXEC", 0)
)


def acquire(path: str, timeout_s: float) -> int:
    """A descriptor of `path` that holds its exclusive lock, for `release`. TimeoutError when
    another holder keeps it for `timeout_s`; OSError when it cannot be opened or locked."""
    fd = os.open(path, _FLAGS, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return _wait(fd, timeout_s)
    except BaseException:
        os.close(fd)
        raise
    return fd


def release(fd: int) -> None:
    """Let the lock go (closing its descriptor releases it)."""
    os.close(fd)


class _Waiter:
    """A blocking flock in a helper thread, and who owns the descriptor when it returns."""

    def __init__(self, fd: int) -> None:
        self.fd = fd
        self.guard = threading.Lock()
        self.done = threading.Event()
        self.abandoned = False  # the caller gave up: the helper closes the descriptor
        self.error: OSError | None = None

    def run(self) -> None:
        try:
            fcntl.flock(self.fd, fcntl.LOCK_EX)
        except OSError as exc:
            self.error = exc
        with self.guard:
            if not self.abandoned:
                self.done.set()
                return
        os.close(self.fd)


def _wait(fd: int, timeout_s: float) -> int:
    waiter = _Waiter(fd)
    try:
        threading.Thread(target=waiter.run, name="smart-search-lock", daemon=True).start()
    except BaseException:
        os.close(fd)
        raise
    interrupted: BaseException | None = None
    try:
        waiter.done.wait(max(timeout_s, 0.0))
    except BaseException as exc:  # noqa: BLE001 - re-raised below, once the descriptor is settled
        interrupted = exc
    with waiter.guard:
        got = waiter.done.is_set()
        waiter.abandoned = not got
    if interrupted is not None or (got and waiter.error is not None):
        if got:
            os.close(fd)
        raise interrupted or waiter.error  # type: ignore[misc]
    if not got:
        raise TimeoutError("the lock stayed held past the timeout")
    return fd
