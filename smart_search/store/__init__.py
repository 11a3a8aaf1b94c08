"""The state seam: every piece of state shared between processes (and, with Redis, hosts).

Ledger, breaker, pacing, provider exhaustion marks and the result cache reach shared state only
through a `Store`. A store holds a few named JSON documents (`DOCUMENTS`) and changes one only
through `update(name, change)`: `change(document) -> (new_document | None, result)` is a pure
function of the document (it may run more than once when a backend retries an optimistic
transaction) and `update` applies it as ONE atomic step across every process sharing the store.
The arithmetic stays in `quota.py`, `breaker.py` and `pacing.py`; a backend only has to make
`update` atomic, so a second backend is one new module.

Backends:
- `files` (default, zero config): a JSON file per document in the state directory, under a file
  lock, written atomically (`state.py`).
- `redis` (`state_backend: {"kind": "redis", ...}`): one key per document (`store/redis.py`),
  imported only when configured.

Documents hold no API key. The quota document is durable (never reset, corrupt → StateCorrupt);
the others are advisory (a damaged one reads as empty and is rebuilt). In a networked store the
durable documents also carry their identity, and each host keeps a witness of them in its state
directory, so that a store that forgot them is noticed (`witness.py`, StateLost; RULINGS 8).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from smart_search.store.base import (  # the seam's vocabulary, for the package's users
    DOCUMENTS,
    CacheEntry,
    Change,
    Document,
    DocumentKind,
    Store,
    T,
    export_documents,
)

if TYPE_CHECKING:
    from smart_search.host.config import Settings

__all__ = [
    "DOCUMENTS",
    "CacheEntry",
    "Change",
    "Document",
    "DocumentKind",
    "Store",
    "T",
    "export_documents",
    "open_store",
]


def open_store(settings: Settings) -> Store:
    """The store `state_backend` names (the file backend unless configured otherwise)."""
    backend = getattr(settings, "state_backend", None) or {"kind": "files"}
    if backend.get("kind", "files") == "files":
        from smart_search.store.files import FileStore

        return FileStore(settings.state_dir, settings.lock_timeout_ms)
    from smart_search.store.redis import (
        RedisStore,  # an optional extra: imported only when configured
    )

    return RedisStore(settings)
