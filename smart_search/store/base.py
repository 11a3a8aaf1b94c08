"""The state seam's vocabulary: the `Store` protocol every backend implements, the documents it
holds and the cache entry it keeps (the package's `__init__` picks a backend; see its docstring).
Backends import from here, never from the package, so the package can import them."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, NamedTuple, Protocol, TypeVar

T = TypeVar("T")
Document = dict[str, Any]
Change = Callable[[Document | None], tuple[Document | None, T]]


class DocumentKind:
    """A document the store holds. (A plain slotted class: a NamedTuple costs every call ~0.1 ms
    to define.)"""

    __slots__ = ("file_name", "durable", "ttl_s")

    def __init__(self, file_name: str, durable: bool, ttl_s: float | None) -> None:
        self.file_name = file_name  # the file backend's file in the state directory
        self.durable = durable  # False: advisory, may be lost or rebuilt without harm
        self.ttl_s = ttl_s  # how long a networked backend keeps it after its last write


# Name -> kind. The quota document carries a month window, so it lives a little past a month.
DOCUMENTS: dict[str, DocumentKind] = {
    "quota": DocumentKind("search-quota.json", True, 40 * 86400.0),
    "breaker": DocumentKind("search-breaker.json", False, 7 * 86400.0),
    "pacing": DocumentKind("search-pacing.json", False, 86400.0),
    # Today's cache hits, misses and units saved ({"date": ..., "hits": n, ...}): advisory.
    "cache_stats": DocumentKind("search-cache-stats.json", False, 2 * 86400.0),
    # smart_fetch (issue 21): today's fetches per agent ({"date": ..., "agents": {id: n}}), which
    # the daily fetch allocation is enforced against; and each host's next free request slot.
    "fetch_counts": DocumentKind("search-fetch-counts.json", True, 2 * 86400.0),
    "fetch_pacing": DocumentKind("search-fetch-pacing.json", False, 86400.0),
}


class CacheEntry(NamedTuple):
    """One cached answer. `value` is the serialized answer (JSON bytes; never an API key)."""

    value: bytes
    stored_at: float  # Unix time it was stored
    expires_at: float  # Unix time it stops being served


class Store(Protocol):
    """What every backend offers. Each method is atomic across all processes sharing the store."""

    kind: str

    def read(self, name: str) -> Document | None:
        """The document as it stands (whole, never torn), or None when there is none yet."""
        ...

    def update(self, name: str, change: Change[T], *, durable: bool = True) -> T:
        """Apply `change` atomically; write what it returns (None: no write); return its result.

        `durable=False`: the write may skip flushing to disk (a backend that flushes, the file
        one, does not wait for it). Only for a change whose loss in an OS crash errs on the safe
        side, as a settle that only gives units back does (it leaves the worst case charged)."""
        ...

    def where(self) -> str:
        """Where the state lives, for messages: a path, or a URL without its password."""
        ...

    # -- the result cache (advisory: a broken cache is dropped and rebuilt, never blocks) ------
    def cache_get(self, key: str, now: float) -> CacheEntry | None:
        """The entry for `key` if it has not expired at `now` (a hit counts as a use for LRU)."""
        ...

    def cache_put(self, key: str, entry: CacheEntry, *, max_entries: int, max_bytes: int) -> None:
        """Store `entry` (replacing any), then evict least-recently-used entries until at most
        `max_entries` entries and `max_bytes` bytes of values remain; expired ones go first."""
        ...

    def cache_clear(self) -> int:
        """Remove every entry (and lease); returns how many entries there were."""
        ...

    def cache_size(self) -> tuple[int, int]:
        """(entries, bytes of values) stored now."""
        ...

    # -- single-flight leases: one process (on any host) asks the provider per key ------------
    def lease_claim(self, key: str, owner: str, ttl_s: float, now: float) -> bool:
        """True when `owner` holds the lease on `key` after this call: it was free, had expired
        at `now`, or was `owner`'s already. Atomic: of N concurrent claimants exactly one wins."""
        ...

    def lease_release(self, key: str, owner: str) -> None:
        """Give the lease up, only if `owner` still holds it."""
        ...

    def lease_holder(self, key: str, now: float) -> str | None:
        """Who holds a live (unexpired at `now`) lease on `key`, or None."""
        ...

    # -- migration between backends --------------------------------------------------------------
    def export_state(self) -> dict[str, Any]:
        """Every document (by name) as JSON-ready data; the cache is not exported."""
        ...


def export_documents(store: Store) -> dict[str, Any]:
    """Every document a store holds, by name (`Store.export_state` of both backends)."""
    found = {name: store.read(name) for name in DOCUMENTS}
    return {name: doc for name, doc in found.items() if doc is not None}


