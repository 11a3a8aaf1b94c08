"""The file backend of the state seam: one JSON file per document in the state directory.

Locking, atomic writes and the file-safety rules are `state.StateFile`'s; this module only maps
document names to files and keeps one `StateFile` per document for the life of the store.
"""

from __future__ import annotations

from ..state import StateFile
from . import DOCUMENTS, Change, Document, T


class FileStore:
    kind = "files"

    def __init__(self, state_dir: str, lock_timeout_ms: int) -> None:
        self.state_dir = state_dir
        self.lock_timeout_ms = lock_timeout_ms
        self._files: dict[str, StateFile] = {}

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
        return self.file(name).read()

    def update(self, name: str, change: Change[T]) -> T:
        return self.file(name).update(change)

    def where(self) -> str:
        return self.state_dir

    @property
    def last_lock_wait_s(self) -> float:
        """How long the most recent update waited for its lock (the cron-burst benchmark)."""
        return max((f.last_lock_wait_s for f in self._files.values()), default=0.0)
