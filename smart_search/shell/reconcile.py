"""`smart-search reconcile [--json]`: the ledger's month beside what each provider reports.

Providers whose module offers a usage endpoint (`usage_request` / `parse_usage`) are asked, once
per key, free of charge; the others are shown with what their last answer said (recorded in the
ledger at every settle). The ledger then adopts the stricter figure. Nothing is searched and no
unit is spent. The arithmetic is `budget/reconcile.py`.

Exit 0 when every provider reported no more than the ledger counted, 1 when one counted more
(the ledger was behind: it has now adopted the provider's figure), 2 for a bad command line or
an unreadable config or ledger.
"""

from __future__ import annotations

import sys
import time
from typing import Any

USAGE = "usage: smart-search reconcile [--json]\n"


def main(argv: list[str]) -> int:
    if argv in (["-h"], ["--help"]):
        sys.stdout.write(USAGE)
        return 0
    if argv not in ([], ["--json"]):
        sys.stderr.write(f"{USAGE}unknown arguments: {argv!r}\n")
        return 2
    from smart_search.errors import SearchError
    from smart_search.host.config import load_settings

    try:
        settings = load_settings()
        rows = reconcile(settings)
    except SearchError as err:
        sys.stderr.write(f"smart-search reconcile: {err.message}\n")
        return 2
    if argv == ["--json"]:
        import orjson

        sys.stdout.buffer.write(orjson.dumps({"providers": rows}, option=orjson.OPT_APPEND_NEWLINE))
    else:
        from smart_search.budget.reconcile import render

        sys.stdout.write(render(rows))
    sys.stdout.flush()
    return 1 if any((r["drift"] or 0) > 0 for r in rows) else 0


def reconcile(settings: Any, clock: Any = time.time) -> list[dict[str, Any]]:
    """Ask every usage endpoint (once per account of a key pool), adopt what they said, and
    return the rows (the drift is against what the ledger had counted before adopting)."""
    from smart_search.budget.ledger import Ledger
    from smart_search.budget.reconcile import drift_rows
    from smart_search.host.config import PROVIDERS

    ledger = Ledger(settings, clock=clock)
    asked: dict[tuple[str, str], dict[str, Any]] = {}
    for p in PROVIDERS:
        for account, key in accounts_to_ask(settings, p):
            report = ask_usage(settings, p, key)
            if report is not None:
                asked[(p, account)] = report
    doc = ledger.snapshot()
    rows = drift_rows(doc, PROVIDERS, asked, clock())
    ledger.adopt_reports(asked)
    return rows


def accounts_to_ask(settings: Any, provider: str) -> list[tuple[str, Any]]:
    """(account label, key) to ask: one key per account of the provider's pool ("-" and its one
    key without a pool; none without a key)."""
    pool = settings.key_pools.get(provider) or ()
    if pool:
        first: dict[str, Any] = {}
        for key in pool:
            first.setdefault(key.account, key.secret)
        return list(first.items())
    key = settings.api_keys.get(provider)
    return [] if key is None else [("-", key)]


def ask_usage(settings: Any, provider: str, key: Any) -> dict[str, Any] | None:
    """What the provider's usage endpoint says of this month for `key`, or None when it has no
    usage endpoint. A failure is a report of its own: `from` says why, with no figure."""
    from smart_search.errors import SearchError
    from smart_search.sources import registry
    from smart_search.sources.http import send
    from smart_search.sources.providers.parsing import status_error
    from smart_search.text.scrub import scrub, settings_secrets

    module = registry.module(provider)
    build, read = getattr(module, "usage_request", None), getattr(module, "parse_usage", None)
    if build is None or read is None:
        return None
    timeout = settings.request_timeout_ms / 1000
    try:
        resp = send(build(settings, key.reveal()), deadline=time.monotonic() + timeout,
                    request_timeout_s=timeout)  # fmt: skip
        if not 200 <= resp.status < 300:
            raise status_error(registry.label(provider), resp)
        found = read(resp)
    except SearchError as err:
        why = scrub(err.message, settings_secrets(settings))  # an echoed key never shows
        return {"used": None, "limit": None, "from": f"usage endpoint failed: {why}"}
    return {"used": found["used"], "limit": found.get("limit"), "from": "usage endpoint"}
