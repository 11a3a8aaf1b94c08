"""The file backend of the state seam: one JSON file per document in the state directory.

Locking, atomic writes and the file-safety rules are `state.StateFile`'s; this module only maps
document names to files and keeps one `StateFile` per document for the life of the store.

The result cache, its leases and the advisory `cache_stats` document live in one SQLite database
(`sqlite_cache.py`), opened on first use only: a quota call never imports sqlite3.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from smart_search.store.base import DOCUMENTS, CacheEntry, Change, Document, T
from smart_search.store.statefile import StateFile

if TYPE_CHECKING:
    from smart_search.store.sqlite_cache import SqliteCache

# Documents kept in the cache database instead of a JSON file of their own: a cache hit updates
# them, and the file lock's import would cost a hit more than the whole lookup.
IN_CACHE_DB = frozenset({"cache_stats"})


class FileStore:
    kind = "files"

    def __init__(self, state_dir: str, lock_timeout_ms: int) -> None:
        self.state_dir = state_dir
        self.lock_timeout_ms = lock_timeout_ms
        self._files: dict[str, StateFile] = {}
        self._sqlite: SqliteCache | None = None

    def file(self, name: str) -> StateFile:
        handle = self._files.get(name)
        if handle is None:
            kind = DOCUMENTS[name]
            handle = StateFile(
                self.state_dir, kind.file_name, self.lock_timeout_ms, advisory=not kind.durable
            )
            self._files[name] = handle
        return handle

    def read(self, name: str) -> Document | None:
        if name in IN_CACHE_DB:
            return self.cache_db().read_document(name)
        return self.file(name).read()

    def update(self, name: str, change: Change[T], *, durable: bool = True) -> T:
        if name in IN_CACHE_DB:
            return self.cache_db().update_document(name, change)  # type: ignore[no-any-return]
        return self.file(name).update(change, durable=durable)

    def export_state(self) -> dict[str, Any]:
        from smart_search.store.base import export_documents

        return export_documents(self)

    def where(self) -> str:
        return self.state_dir

    @property
    def last_lock_wait_s(self) -> float:
        """How long the most recent update waited for its lock (the cron-burst benchmark)."""
        return max((f.last_lock_wait_s for f in self._files.values()), default=0.0)

    # -- the result cache: SQLite, opened lazily ---------------------------------------------------
    def cache_db(self) -> SqliteCache:
        if self._sqlite is None:
            from smart_search.store.sqlite_cache import SqliteCache

            self._sqlite = SqliteCache(self.state_dir, self.lock_timeout_ms)
        return self._sqlite

    def cache_get(self, key: str, now: float) -> CacheEntry | None:
        return self.cache_db().get(key, now)

    def cache_put(self, key: str, entry: CacheEntry, *, max_entries: int, max_bytes: int) -> None:
        self.cache_db().put(key, entry, max_entries, max_bytes)

    def cache_clear(self) -> int:
        return self.cache_db().clear()

    def cache_size(self) -> tuple[int, int]:
        return self.cache_db().size()

    def lease_claim(self, key: str, owner: str, ttl_s: float, now: float) -> bool:
        return self.cache_db().lease_claim(key, owner, ttl_s, now)

    def lease_release(self, key: str, owner: str) -> None:
        self.cache_db().lease_release(key, owner)

    def lease_holder(self, key: str, now: float) -> str | None:
        return self.cache_db().lease_holder(key, now)
