"""The files `state export` writes and `state import` / `state restore` read: one place that
knows their format and refuses anything else before any store is touched."""

from __future__ import annotations

from typing import Any

import orjson

from smart_search.errors import InvalidInput

EXPORT_FORMAT = "smart-search/state@1"


def read_documents(path: str) -> dict[str, dict[str, Any]]:
    """The documents of a state export, or {"quota": ...} for a bare ledger file of any version
    the ledger reads. InvalidInput for a file that cannot be read or is neither."""
    try:
        with open(path, "rb") as fh:
            raw = orjson.loads(fh.read())
    except (OSError, orjson.JSONDecodeError) as exc:
        raise InvalidInput(f"Cannot read {path} as JSON ({exc.__class__.__name__}).") from None
    if isinstance(raw, dict) and raw.get("format") == EXPORT_FORMAT:
        documents = raw.get("documents")
    elif isinstance(raw, dict):
        documents = {"quota": raw}  # a bare ledger file, any version the ledger reads
    else:
        documents = None
    if not isinstance(documents, dict) or not all(isinstance(d, dict) for d in documents.values()):
        raise InvalidInput(f"{path} is neither a state export nor a quota ledger file.")
    return documents
