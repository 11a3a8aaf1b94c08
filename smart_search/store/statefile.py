"""The one module that opens shared-state files: locking, reading and atomic writes.

Every cross-process structure (the quota ledger, the circuit breaker, web_fetch pacing) is a small
JSON document in the state directory, changed only by `StateFile.update` under a file lock
(`lock.py`) and written atomically: temp file, fsync, rename, then (the lock already released,
before `update` returns) fsync of the directory. A reader
without the lock therefore always sees a whole document, old or new, never a torn one. Advisory
documents (breaker, pacing) skip both fsyncs: they may be lost in an OS crash without harm, and
the fsyncs, a variable few milliseconds inside the lock, would delay every search that paces or
consults a breaker.

A document that cannot be parsed is never reset or rewritten: the call fails with StateCorrupt and
the bytes stay as they are for the operator.

Hostile state is refused, never followed: files are opened with O_NOFOLLOW, the temp file is
created exclusively after removing whatever sits at its name, lock files are created 0600, and the
directory and every file must be this user's and writable by no one else (StateUnsafe). An OS
error while writing (read-only file system, full disk, ...) is StateUnwritable, raised before the
rename: the document is unchanged.
"""

from __future__ import annotations

import errno
import os
import stat
from collections.abc import Callable
from typing import Any, TypeVar

import orjson

from smart_search.errors import LOCKED, LockTimeout, StateCorrupt, StateUnsafe, StateUnwritable

T = TypeVar("T")

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
            check_state_dir(self.state_dir)
        except FileNotFoundError:
            return None
        try:
            fd = os.open(self.path, os.O_RDONLY | _NOFOLLOW | os.O_NONBLOCK | _CLOEXEC)
        except FileNotFoundError:
            return None
        except OSError as exc:
            if exc.errno == errno.ELOOP:
                raise _link_refused(self.path) from None
            raise StateCorrupt(
                f"State file {self.path} cannot be read ({_reason(exc)}). It was left in place."
            ) from None
        try:
            check_owned(self.path, os.fstat(fd), "State file", stat.S_ISREG)
            chunks = []
            while chunk := os.read(fd, 1 << 20):
                chunks.append(chunk)
        except OSError as exc:
            raise StateCorrupt(
                f"State file {self.path} cannot be read ({_reason(exc)}). It was left in place."
            ) from None
        finally:
            os.close(fd)
        return self._parse(b"".join(chunks))

    def update(
        self,
        change: Callable[[Document | None], tuple[Document | None, T]],
        *,
        durable: bool = True,
    ) -> T:
        """Run `change(document)` under the lock; write the document it returns (None: no write).

        `change` must be a pure function of the document: it may raise, and then nothing is
        written. `durable=False` skips the directory's fsync for this write: for a change whose
        loss in an OS crash only leaves more charged than was billed. The ledger's temp file is
        synced all the same: a rename that reached the disk before its file's contents (the
        journal's own commit, or another writer's directory fsync, may carry it) would leave a
        ledger that reads as corrupt, not the older one. Advisory documents skip both.
        """
        from time import perf_counter

        from smart_search.store import lock

        ensure_state_dir(self.state_dir)
        check_lock_file(self.lock_path)
        started = perf_counter()
        try:
            fd = lock.acquire(self.lock_path, self.lock_timeout_s)
        except TimeoutError:
            raise LockTimeout(LOCKED) from None
        except OSError as exc:  # a link put there since the check above: StateUnsafe
            raise write_failure(self.lock_path, exc, "Lock file") from None
        self.last_lock_wait_s = perf_counter() - started
        flush = False
        try:
            new_doc, result = change(self.read())
            if new_doc is not None:
                flush = durable and not self.advisory
                self._write(new_doc, sync_file=not self.advisory)
        finally:
            lock.release(fd)
        if flush:
            self._flush_rename()
        return result

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

    def _write(self, doc: Document, sync_file: bool) -> None:
        data = orjson.dumps(doc, option=orjson.OPT_INDENT_2 | orjson.OPT_APPEND_NEWLINE)
        # One temp name is enough: only the lock holder writes. Whatever sits at that name (a
        # stale temp file from a killed writer, or a planted link) is removed, then the temp file
        # is created exclusively: never written through a link. The real file is never
        # half-written, and a failure before the rename leaves it exactly as it was.
        tmp = self.path + ".tmp"
        try:
            _unlink_if_present(tmp)
            fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | _NOFOLLOW | _CLOEXEC, 0o600)
            try:
                view = memoryview(data)
                while view:
                    view = view[os.write(fd, view) :]
                if sync_file:
                    os.fsync(fd)
            finally:
                os.close(fd)
            os.replace(tmp, self.path)
        except OSError as exc:
            try:
                _unlink_if_present(tmp)
            except OSError:
                pass
            raise write_failure(self.path, exc, "State file") from None

    def _flush_rename(self) -> None:
        """Make the rename durable: losing it in an OS crash would forget spent units. Done
        after the lock is released (a holder that sleeps in fsync keeps every waiter waiting)
        and before `update` returns, so nothing acts on a change that is not yet on disk; a
        later writer read this document, so its own flush keeps this change too."""
        try:
            dir_fd = os.open(self.state_dir, os.O_RDONLY | _CLOEXEC)
            try:
                os.fsync(dir_fd)
            finally:
                os.close(dir_fd)
        except OSError as exc:
            raise StateUnwritable(
                f"State directory {self.state_dir} cannot be synced ({_reason(exc)}). The change "
                "was written but may not survive a crash."
            ) from None


def _unlink_if_present(path: str) -> None:
    try:
        os.unlink(path)
    except FileNotFoundError:
        pass


# -- safety of the state directory -------------------------------------------------------------
# Every file is opened without following a link in its last component (O_NOFOLLOW), and the
# directory and each file must belong to this user and be writable by no one else: another user
# who can write there could plant links or rewrite the ledger.

_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)
_CLOEXEC = getattr(os, "O_CLOEXEC", 0)
_UNSAFE_BITS = stat.S_IWGRP | stat.S_IWOTH
_REASONS = {
    errno.EROFS: "the file system is read-only",
    errno.ENOSPC: "no space left on the device",
    errno.EDQUOT: "the disk quota is exhausted",
    errno.EFBIG: "the file size limit was reached",
    errno.EACCES: "permission denied",
    errno.EPERM: "operation not permitted",
}


def _reason(exc: OSError) -> str:
    if exc.errno in _REASONS:
        return _REASONS[exc.errno]
    if exc.errno:
        return os.strerror(exc.errno).lower()
    return exc.__class__.__name__


def _link_refused(path: str, what: str = "State file") -> StateUnsafe:
    return StateUnsafe(
        f"{what} {path} is a symbolic link; smart-search never follows links in its state "
        "directory. It was left in place: remove it."
    )


def write_failure(path: str, exc: OSError, what: str) -> StateCorrupt:
    """The error for an OSError met while creating or writing `path`."""
    if exc.errno == errno.ELOOP:
        return _link_refused(path, what)
    return StateUnwritable(
        f"{what} {path} cannot be written ({_reason(exc)}). Nothing was changed or spent."
    )


def check_owned(path: str, st: os.stat_result, what: str, is_kind: Callable[[int], bool]) -> None:
    """Refuse `path` unless it is of the right kind, ours, and writable by no one else."""
    if not is_kind(st.st_mode):
        kind = "a directory" if is_kind is stat.S_ISDIR else "a regular file"
        raise StateUnsafe(f"{what} {path} is not {kind}. It was left in place.")
    if st.st_uid != os.geteuid():
        raise StateUnsafe(
            f"{what} {path} belongs to uid {st.st_uid}, not to this user (uid {os.geteuid()}). "
            "It was left in place: chown it or choose another state_dir."
        )
    if st.st_mode & _UNSAFE_BITS:
        raise StateUnsafe(
            f"{what} {path} has mode {stat.S_IMODE(st.st_mode):04o}, writable by group or "
            f"others. It was left in place: chmod go-w {path}."
        )


def check_state_dir(path: str) -> None:
    """Refuse an unsafe state directory; FileNotFoundError when it does not exist."""
    # The directory itself may be reached through a link (an operator's choice); its target
    # must be ours and private.
    check_owned(path, os.stat(path), "State directory", stat.S_ISDIR)


def lstat_refusing_links(path: str, refusal: Callable[[], Exception]) -> os.stat_result | None:
    """`os.lstat(path)`, None when nothing is there; raises `refusal()` for a symbolic link (no
    file in the state directory is ever reached through one)."""
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        return None
    if stat.S_ISLNK(st.st_mode):
        raise refusal()
    return st


def check_lock_file(path: str) -> None:
    st = lstat_refusing_links(path, lambda: _link_refused(path, "Lock file"))
    if st is None:
        return
    if stat.S_ISREG(st.st_mode) and st.st_uid == os.geteuid() and st.st_mode & _UNSAFE_BITS:
        # A lock file of ours left 0666 by an older version under umask 000: its content means
        # nothing, so it is tightened rather than refused.
        try:
            fd = os.open(path, os.O_RDONLY | _NOFOLLOW | os.O_NONBLOCK | _CLOEXEC)
            try:
                os.fchmod(fd, 0o600)
                st = os.fstat(fd)
            finally:
                os.close(fd)
        except OSError as exc:
            raise write_failure(path, exc, "Lock file") from None
    check_owned(path, st, "Lock file", stat.S_ISREG)


def ensure_state_dir(path: str) -> None:
    """Create the state directory (0700, parents too) on first use; refuse an unsafe one."""
    try:
        check_state_dir(path)
        return
    except FileNotFoundError:
        pass
    try:
        _make_private_dirs(path)
        check_state_dir(path)
    except OSError as exc:
        raise StateUnwritable(
            f"State directory {path} cannot be created ({_reason(exc)}). Nothing was changed."
        ) from None


def _make_private_dirs(path: str) -> None:
    # os.makedirs gives missing parents the umask's mode (0777 under umask 000); these are 0700.
    parent = os.path.dirname(os.path.abspath(path))
    if parent != os.path.abspath(path) and not os.path.isdir(parent):
        _make_private_dirs(parent)
    try:
        os.mkdir(path, 0o700)
    except FileExistsError:
        pass
