"""`smart-search state export | import FILE`: move shared state between backends.

`export` prints every document of the configured backend (quota, breaker, pacing, cache stats;
not the cache itself) as one JSON object. `import FILE` folds such an export, or a bare ledger
file of any version this package reads (`search-quota.json`, the predecessor's file), into the
configured backend in one atomic update per document, never lowering a counter:

- the same window on both sides: each counter becomes the larger of the two (so importing the
  same file twice changes nothing, and a host moved mid-day keeps what it spent);
  `--add` sums usage counters instead, for folding a second host's separate ledger into a shared
  one (run it once per host: a repeat counts twice);
- different windows (agents' day, a provider's day or month): the later one is kept whole;
- completion stays set once set; an exhaustion mark keeps the later of the two ends.
"""

from __future__ import annotations

import os
import sys
import time
from typing import Any

import orjson

from smart_search.errors import InvalidInput, SearchError, StateCorrupt
from smart_search.shell.state_files import EXPORT_FORMAT, read_documents
from smart_search.text.stamps import utc_stamp

USAGE = (
    "usage: smart-search state export\n       smart-search state import [--add] FILE\n"
    "       smart-search state restore [--from FILE] [--providers] [--dry-run]\n"
)

Document = dict[str, Any]


def state_main(argv: list[str]) -> int:
    if argv in (["--help"], ["-h"]):
        sys.stdout.write(USAGE)
        return 0
    if argv[:1] == ["restore"]:
        from smart_search.shell.state_restore import restore_main

        return restore_main(argv[1:])
    if argv == ["export"]:
        action = _export
    elif len(argv) in (2, 3) and argv[0] == "import" and argv[1:-1] in ([], ["--add"]):
        add = argv[1] == "--add"
        path = argv[-1]

        def action() -> Any:
            return _import(path, add=add)

    else:
        sys.stderr.write(f"smart-search state: unknown arguments {' '.join(argv)!r}\n{USAGE}")
        return 2
    try:
        out = action()
    except SearchError as err:
        sys.stderr.write(f"smart-search state: {err.message} ({err.error_code})\n")
        return 1
    sys.stdout.buffer.write(orjson.dumps(out, option=orjson.OPT_INDENT_2) + b"\n")
    return 0


def _open() -> Any:
    from smart_search.host.config import load_settings
    from smart_search.store import open_store

    settings = load_settings(os.environ)
    return settings, open_store(settings)


def _export() -> Document:
    _, store = _open()
    return {
        "format": EXPORT_FORMAT,
        "backend": store.kind,
        "where": store.where(),
        "exported_at": utc_stamp(),
        "documents": store.export_state(),
    }


def _import(path: str, *, add: bool) -> Document:
    from smart_search.budget.ledger import Ledger

    documents = read_documents(path)
    settings, store = _open()
    imported: list[str] = []
    if "quota" in documents:
        ledger = Ledger(settings, store)
        now = time.time()
        # Checked (and converted from older versions) before the target is touched.
        try:
            incoming = ledger.current(documents["quota"], now)
        except StateCorrupt:
            raise InvalidInput(
                f"The quota ledger in {path} is damaged or of an unknown version; nothing was "
                "imported."
            ) from None

        ledger.merge(incoming, add=add)
        imported.append("quota")
    for name, merge in (("breaker", _merge_breaker), ("pacing", _merge_pacing),
                        ("cache_stats", _merge_stats)):  # fmt: skip
        doc = documents.get(name)
        if isinstance(doc, dict):
            store.update(name, lambda current, doc=doc, merge=merge: (merge(current or {}, doc),
                                                                       None))  # fmt: skip
            imported.append(name)
    return {"imported": imported, "backend": store.kind, "where": store.where()}


# -- merging (pure; the quota ledger's merge is quota_merge.merge_quota) ---------------------
def _merge_breaker(current: Document, incoming: Document) -> Document:
    # Advisory: the target's own view of a service wins; the file only fills gaps.
    return {**incoming, **current}


def _merge_pacing(current: Document, incoming: Document) -> Document:
    out = dict(current)
    for engine, slot in incoming.items():
        if isinstance(slot, int | float) and not isinstance(slot, bool):
            mine = out.get(engine)
            ok = isinstance(mine, int | float) and not isinstance(mine, bool)
            out[engine] = max(mine, slot) if ok else slot
    return out


def _merge_stats(current: Document, incoming: Document) -> Document:
    if str(incoming.get("date", "")) > str(current.get("date", "")):
        return dict(incoming)
    if incoming.get("date") != current.get("date"):
        return current
    out = dict(current)
    for k, v in incoming.items():
        if isinstance(v, int | float) and not isinstance(v, bool):
            mine = out.get(k)
            out[k] = max(mine, v) if isinstance(mine, int | float) else v
    return out
