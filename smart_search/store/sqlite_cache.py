"""The file backend's result cache: one SQLite database in WAL mode in the state directory.

`search-cache.sqlite3` holds three tables: `entries` (the cached answers, with their size and
last use for LRU eviction), `leases` (single-flight: who is asking the provider for a key, until
when) and `documents` (the advisory `cache_stats` document, kept here so that a cache hit never
pays for the file lock's import). Every change is one SQLite transaction (`BEGIN IMMEDIATE`), so
it is atomic across processes; readers never wait for writers (WAL).

The cache is advisory, never the ledger: a database that SQLite reports as corrupt (or that is not
a database at all) is moved aside to `search-cache.sqlite3.corrupt` (replacing an older one) and
rebuilt empty, with one warning on stderr. Anything else that keeps it from working (a symlink in
its place, a full disk, a lock held past `lock_timeout_ms`) raises `CacheUnavailable`, and the
search goes on without the cache. The quota ledger is never read or written here.

**Decision: no fsync** (`synchronous=OFF`). With fsyncs, a hit's counter update cost ~10 ms, more
than the rest of the hit. An application crash (SIGKILL included) still loses nothing committed;
an OS crash or power loss may lose or damage the cache, and damage is moved aside as above.

File safety, as for the ledger: the database (and its `-wal` and `-shm` companions) must not be
symlinks (checked with `os.lstat` before SQLite opens anything; a link is refused, never
followed or removed), and it is created 0600 (SQLite gives its companions the same mode).
"""

from __future__ import annotations

import _thread  # its lock costs no import; `threading` costs a cache hit ~2 ms
import os
import sqlite3
import stat
import sys
from collections.abc import Callable
from typing import Any

import orjson

from smart_search.store.base import CacheEntry
from smart_search.store.statefile import ensure_state_dir, lstat_refusing_links

CACHE_FILE = "search-cache.sqlite3"
SCHEMA_VERSION = 1
_SCHEMA = """
CREATE TABLE IF NOT EXISTS entries (
    key TEXT PRIMARY KEY,
    value BLOB NOT NULL,
    size INTEGER NOT NULL,
    stored_at REAL NOT NULL,
    expires_at REAL NOT NULL,
    used_at REAL NOT NULL
);
-- Covering indexes: eviction walks by last use and counts sizes without touching the values.
CREATE INDEX IF NOT EXISTS entries_by_use ON entries (used_at, size);
CREATE INDEX IF NOT EXISTS entries_by_expiry ON entries (expires_at);
CREATE TABLE IF NOT EXISTS leases (
    key TEXT PRIMARY KEY,
    owner TEXT NOT NULL,
    expires_at REAL NOT NULL
);
CREATE TABLE IF NOT EXISTS documents (
    name TEXT PRIMARY KEY,
    body BLOB NOT NULL
);
"""
# Every hit refreshes its entry's last use, so eviction is least-recently-USED exactly as the
# Redis backend's (one contract suite runs on both); the write is one small WAL update.
TOUCH_EVERY_S = 0.0
_CREATE = object()


class CacheUnavailable(Exception):
    """The cache cannot be used right now (a refused symlink, I/O trouble, a long-held lock);
    the search goes on without it."""


def _corrupt(exc: BaseException) -> bool:
    """SQLite says the file is damaged or not a database (as opposed to busy or I/O)."""
    name = getattr(exc, "sqlite_errorname", "")
    if name.startswith(("SQLITE_CORRUPT", "SQLITE_NOTADB")):
        return True
    return type(exc) is sqlite3.DatabaseError


class SqliteCache:
    """The cache database of one state directory; safe to share between threads."""

    def __init__(self, state_dir: str, lock_timeout_ms: int) -> None:
        self.state_dir = state_dir
        self.path = os.path.join(state_dir, CACHE_FILE)
        self.busy_timeout_s = max(0.05, lock_timeout_ms / 1000.0)
        self._conn: sqlite3.Connection | None = None
        self._inode: int | None = None
        self._lock = _thread.allocate_lock()

    # -- the protocol's cache methods ------------------------------------------------------------
    def get(self, key: str, now: float) -> CacheEntry | None:
        def op(db: sqlite3.Connection) -> CacheEntry | None:
            row = db.execute(
                "SELECT value, stored_at, expires_at, used_at FROM entries WHERE key = ?", (key,)
            ).fetchone()
            if row is None or row[2] <= now:
                return None
            if row[3] < now - TOUCH_EVERY_S:
                db.execute("UPDATE entries SET used_at = ? WHERE key = ?", (now, key))
            return CacheEntry(bytes(row[0]), row[1], row[2])

        return self._run(op, absent=None)

    def put(self, key: str, entry: CacheEntry, max_entries: int, max_bytes: int) -> None:
        def op(db: sqlite3.Connection) -> None:
            with _transaction(db):
                db.execute(
                    "INSERT OR REPLACE INTO entries VALUES (?, ?, ?, ?, ?, ?)",
                    (
                        key,
                        entry.value,
                        len(entry.value),
                        entry.stored_at,
                        entry.expires_at,
                        entry.stored_at,
                    ),  # fmt: skip
                )
                _evict(db, entry.stored_at, max_entries, max_bytes)
                # A lease whose owner died and that nobody took over: gone a minute after.
                db.execute("DELETE FROM leases WHERE expires_at < ?", (entry.stored_at - 60,))

        self._run(op)

    def clear(self) -> int:
        def op(db: sqlite3.Connection) -> int:
            with _transaction(db):
                (count,) = db.execute("SELECT COUNT(*) FROM entries").fetchone()
                db.execute("DELETE FROM entries")
                db.execute("DELETE FROM leases")
            return int(count)

        return self._run(op)

    def size(self) -> tuple[int, int]:
        def op(db: sqlite3.Connection) -> tuple[int, int]:
            count, total = db.execute(
                "SELECT COUNT(*), COALESCE(SUM(size), 0) FROM entries"
            ).fetchone()
            return int(count), int(total)

        return self._run(op, absent=(0, 0))

    def lease_claim(self, key: str, owner: str, ttl_s: float, now: float) -> bool:
        def op(db: sqlite3.Connection) -> bool:
            with _transaction(db):
                row = db.execute(
                    "SELECT owner, expires_at FROM leases WHERE key = ?", (key,)
                ).fetchone()
                if row is not None and row[0] != owner and row[1] > now:
                    return False
                db.execute(
                    "INSERT OR REPLACE INTO leases VALUES (?, ?, ?)", (key, owner, now + ttl_s)
                )
                return True

        return self._run(op)

    def lease_release(self, key: str, owner: str) -> None:
        self._run(
            lambda db: db.execute("DELETE FROM leases WHERE key = ? AND owner = ?", (key, owner))
        )

    def lease_holder(self, key: str, now: float) -> str | None:
        def op(db: sqlite3.Connection) -> str | None:
            row = db.execute(
                "SELECT owner FROM leases WHERE key = ? AND expires_at > ?", (key, now)
            ).fetchone()
            return None if row is None else str(row[0])

        return self._run(op, absent=None)

    # -- advisory documents kept in the database (cache_stats) -----------------------------------
    def read_document(self, name: str) -> dict[str, Any] | None:
        def op(db: sqlite3.Connection) -> dict[str, Any] | None:
            row = db.execute("SELECT body FROM documents WHERE name = ?", (name,)).fetchone()
            return None if row is None else _document(row[0])

        return self._run(op, absent=None)

    def update_document(self, name: str, change: Callable[[Any], tuple[Any, Any]]) -> Any:
        def op(db: sqlite3.Connection) -> Any:
            with _transaction(db):
                row = db.execute("SELECT body FROM documents WHERE name = ?", (name,)).fetchone()
                new_doc, result = change(None if row is None else _document(row[0]))
                if new_doc is not None:
                    db.execute(
                        "INSERT OR REPLACE INTO documents VALUES (?, ?)",
                        (name, orjson.dumps(new_doc)),
                    )
            return result

        return self._run(op)

    def close(self) -> None:
        with self._lock:
            if self._conn is not None:
                self._conn.close()
                self._conn = None

    # -- opening, and recovering from a broken database -----------------------------------------
    def _run(self, op: Callable[[sqlite3.Connection], Any], absent: Any = _CREATE) -> Any:
        """`op` on the open database; a read (`absent` given) of a database that does not exist
        yet answers `absent` and creates nothing."""
        with self._lock:
            if absent is not _CREATE and self._conn is None and not os.path.lexists(self.path):
                return absent
            for last_try in (False, True):
                try:
                    return op(self._connect())
                except sqlite3.Error as exc:
                    if not _corrupt(exc) or last_try:
                        raise CacheUnavailable(
                            f"{exc.__class__.__name__}: {getattr(exc, 'sqlite_errorname', exc)}"
                        ) from None
                    self._move_aside(exc)
            raise AssertionError("unreachable")

    def _connect(self) -> sqlite3.Connection:
        if self._conn is not None:
            return self._conn
        ensure_state_dir(self.state_dir)
        for suffix in ("", "-wal", "-shm"):
            _refuse_link(self.path + suffix)
        try:
            # O_NOFOLLOW: a link planted between the check and here is refused, not followed.
            fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW, 0o600)
        except OSError as exc:
            raise CacheUnavailable(f"cannot open {self.path} ({exc.__class__.__name__})") from None
        try:
            self._inode = os.fstat(fd).st_ino
        finally:
            os.close(fd)
        db = sqlite3.connect(
            self.path,
            timeout=self.busy_timeout_s,
            isolation_level=None,  # autocommit; transactions are explicit BEGIN IMMEDIATE
            check_same_thread=False,  # the single-flight heartbeat renews from its own thread
        )
        try:
            if db.execute("PRAGMA journal_mode").fetchone()[0] != "wal":
                db.execute("PRAGMA journal_mode=WAL")
            db.execute("PRAGMA synchronous=OFF")  # advisory: see the module docstring
            if db.execute("PRAGMA user_version").fetchone()[0] != SCHEMA_VERSION:
                with _transaction(db):
                    for statement in _SCHEMA.split(";"):
                        if statement.strip():
                            db.execute(statement)
                    db.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")
        except BaseException:
            db.close()
            raise
        self._conn = db
        return db

    def _move_aside(self, exc: BaseException) -> None:
        """Drop a damaged database: rename it (only if it is still the file we opened) and its
        companions away, so that the next connect builds a fresh one."""
        if self._conn is not None:
            self._conn.close()
            self._conn = None
        aside = self.path + ".corrupt"
        try:
            current = os.lstat(self.path)
            if self._inode is None or current.st_ino == self._inode:
                os.replace(self.path, aside)
                for suffix in ("-wal", "-shm"):
                    try:
                        os.remove(self.path + suffix)
                    except FileNotFoundError:
                        pass
        except FileNotFoundError:
            pass  # another process moved it first
        except OSError as err:
            raise CacheUnavailable(f"cannot move {self.path} aside ({err})") from None
        self._inode = None
        _warn(
            f"the result cache {self.path} was unreadable "
            f"({getattr(exc, 'sqlite_errorname', exc.__class__.__name__)}); "
            f"moved aside to {aside} and rebuilt empty"
        )


class _transaction:
    """BEGIN IMMEDIATE ... COMMIT (ROLLBACK on any exception): one atomic step."""

    def __init__(self, db: sqlite3.Connection) -> None:
        self.db = db

    def __enter__(self) -> None:
        self.db.execute("BEGIN IMMEDIATE")

    def __exit__(self, kind: object, *rest: object) -> None:
        if kind is None:
            self.db.execute("COMMIT")
        elif self.db.in_transaction:
            self.db.execute("ROLLBACK")


def _evict(db: sqlite3.Connection, now: float, max_entries: int, max_bytes: int) -> None:
    """Expired entries first, then least recently used ones, until both limits hold."""
    db.execute("DELETE FROM entries WHERE expires_at <= ?", (now,))
    count, total = db.execute("SELECT COUNT(*), COALESCE(SUM(size), 0) FROM entries").fetchone()
    if count <= max_entries and total <= max_bytes:
        return
    doomed = []
    for key, size in db.execute("SELECT key, size FROM entries ORDER BY used_at"):
        if count <= max_entries and total <= max_bytes:
            break
        doomed.append((key,))
        count -= 1
        total -= size
    db.executemany("DELETE FROM entries WHERE key = ?", doomed)


def _refuse_link(path: str) -> None:
    info = lstat_refusing_links(
        path, lambda: CacheUnavailable(f"{path} is a symbolic link; refusing to follow it")
    )
    if info is None:
        return
    if not stat.S_ISREG(info.st_mode):
        raise CacheUnavailable(f"{path} is not a regular file")


def _document(body: bytes) -> dict[str, Any] | None:
    try:
        doc = orjson.loads(body)
    except orjson.JSONDecodeError:
        return None
    return doc if isinstance(doc, dict) else None


def _warn(message: str) -> None:
    try:
        sys.stderr.write(f"smart-search: {message}\n")
    except Exception:  # noqa: BLE001 - a warning must not break the search
        pass
