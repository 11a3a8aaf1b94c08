"""`smart-search cache clear`: empty the shared result cache (entries and single-flight leases).

Today's hit and miss counters stay (they describe what happened, not what is stored). Exit 0 on
success, 1 when the cache cannot be opened, 2 on a bad command line.
"""

from __future__ import annotations

import sys

USAGE = "usage: smart-search cache clear [--json]\n"


def cache_main(argv: list[str]) -> int:
    args = list(argv)
    as_json = "--json" in args
    args = [a for a in args if a != "--json"]
    if args in (["--help"], ["-h"]):
        sys.stdout.write(USAGE)
        return 0
    if args != ["clear"]:
        sys.stderr.write(f"smart-search cache: expected 'clear'\n{USAGE}")
        return 2
    import orjson

    from smart_search.errors import SearchError
    from smart_search.host.config import load_settings
    from smart_search.store import open_store

    try:
        store = open_store(load_settings())
        removed = store.cache_clear()
    except SearchError as err:
        sys.stderr.write(f"smart-search cache: {err.message}\n")
        return 1
    except Exception as exc:  # noqa: BLE001 - one clear line, never a traceback
        sys.stderr.write(f"smart-search cache: the cache cannot be cleared ({exc})\n")
        return 1
    if as_json:
        sys.stdout.buffer.write(
            orjson.dumps({"cleared": removed}, option=orjson.OPT_APPEND_NEWLINE)
        )
    else:
        noun = "answer" if removed == 1 else "answers"
        sys.stdout.write(f"Cleared {removed} cached {noun} from {store.where()}.\n")
    return 0
