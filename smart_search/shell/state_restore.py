"""`smart-search state restore [--from FILE] [--providers] [--dry-run]` (RULINGS 8).

Folds into the configured store, taking the larger of each counter (per agent, source and
window): this host's witness of the ledger (its last view of it, kept in its state directory when
the store is networked), an export file (`state export`'s output, or a bare ledger file), and with
`--providers` what the providers' usage endpoints report of their month (`reconcile`'s counters,
for providers that offer one). On a store that forgot the ledger it is a restore, recorded like
the automatic one, and it clears a refusal (`on_state_lost: "refuse"`); on a store that did not,
it only raises counters. `--dry-run` prints what would change and changes nothing.

Bad input (an unreadable or damaged file, an unknown option) is a clear error on stderr, exit 1
or 2, and nothing is changed: every input is read and checked before the store is touched.
"""

from __future__ import annotations

import os
import sys
import time
from typing import Any

from smart_search.errors import InvalidInput, SearchError

USAGE = "usage: smart-search state restore [--from FILE] [--providers] [--dry-run]\n"

Document = dict[str, Any]


def restore_main(argv: list[str]) -> int:
    try:
        options = _parse(argv)
    except ValueError as exc:
        sys.stderr.write(f"smart-search state restore: {exc}\n{USAGE}")
        return 2
    try:
        rows, done = run(**options)
    except SearchError as err:
        sys.stderr.write(f"smart-search state restore: {err.message} ({err.error_code})\n")
        return 1
    sys.stdout.write(render(rows, done, dry_run=options["dry_run"]))
    return 0


def _parse(argv: list[str]) -> dict[str, Any]:
    options: dict[str, Any] = {"path": None, "providers": False, "dry_run": False}
    args = list(argv)
    while args:
        arg = args.pop(0)
        if arg == "--from" and args and not args[0].startswith("--"):
            options["path"] = args.pop(0)
        elif arg == "--providers":
            options["providers"] = True
        elif arg == "--dry-run":
            options["dry_run"] = True
        else:
            raise ValueError(f"unknown argument {arg!r}")
    return options


def run(path: str | None, providers: bool, dry_run: bool) -> tuple[list[tuple[str, int, int]], Any]:
    """Read and check every input, then fold them in one atomic step of the store. Returns the
    rows that change (what, before, after) and what was done (a restore's note, "raised", or
    None for nothing)."""
    from smart_search.budget.ledger import QUOTA_DOC, Ledger
    from smart_search.host.config import load_settings
    from smart_search.store import open_store

    settings = load_settings(os.environ)
    store = open_store(settings)
    ledger = Ledger(settings, store)
    extras = []
    if path is not None:
        extras.append(_ledger_of(ledger, path))
    if providers:
        extras.append(_reported(settings, ledger))
    if store.kind == "files":  # nothing to forget: the extras only, by the larger count
        before = ledger.snapshot()
        after = before
        from smart_search.budget.quota_merge import merge_quota

        for extra in extras:
            after = merge_quota(after, extra)
        if not dry_run and after != before:
            for extra in extras:
                ledger.merge(extra, add=False)
        return changes(before, after), ("raised" if after != before else None)
    from smart_search.budget import recovery

    outcome = recovery.restore(
        store, QUOTA_DOC, ledger.current, why="operator", extras=tuple(extras), dry_run=True,
        force=True,
    )  # fmt: skip
    rows = [] if outcome is None else changes(outcome["before"], outcome["after"])
    if dry_run:
        return rows, None if outcome is None else outcome.get("record")
    done = recovery.restore(
        store, QUOTA_DOC, ledger.current, why="operator", extras=tuple(extras), force=True
    )
    recovery.restore(store, "fetch_counts", lambda d: d or {"date": "", "agents": {}},
                     why="operator")  # fmt: skip
    return rows, done if done is not None else ("raised" if rows else None)


def _ledger_of(ledger: Any, path: str) -> Document:
    from smart_search.errors import StateCorrupt
    from smart_search.shell.state_files import read_documents

    raw = read_documents(path).get("quota")
    if raw is None:
        raise InvalidInput(f"{path} holds no quota ledger; nothing was restored.")
    try:
        return ledger.current(raw, time.time())  # type: ignore[no-any-return]
    except StateCorrupt:
        raise InvalidInput(
            f"The quota ledger in {path} is damaged or of an unknown version; nothing was restored."
        ) from None


def _reported(settings: Any, ledger: Any) -> Document:
    """A ledger holding, per provider with a usage endpoint, the month's use it reports."""
    from smart_search.host.config import PROVIDERS
    from smart_search.shell.reconcile import accounts_to_ask, ask_usage

    doc = ledger.current(None, time.time())
    for p in PROVIDERS:
        if settings.key_pools.get(p):
            continue  # a pool's accounts are per key: reconcile adopts those
        for account, key in accounts_to_ask(settings, p):
            report = ask_usage(settings, p, key)
            if account == "-" and report is not None and report.get("used") is not None:
                window = doc["windows"][p]
                window["month_used"] = max(window["month_used"], int(report["used"]))
    return doc  # type: ignore[no-any-return]


def changes(before: Document, after: Document) -> list[tuple[str, int, int]]:
    """(counter, before, after) for every counter of the quota ledger that differs."""
    from smart_search.budget.quota import SOURCES
    from smart_search.host.config import PROVIDERS

    rows = []
    for p in PROVIDERS:
        mine, theirs = before["windows"][p], after["windows"][p]
        for window in ("day", "month"):
            k = f"{window}_used"
            if mine[k] != theirs[k]:
                rows.append((f"{p} {window} {theirs[window]}", mine[k], theirs[k]))
    for agent, record in after["agents"].items():
        old = before["agents"].get(agent)
        for p in PROVIDERS:
            for s in SOURCES:
                was = old[p][s] if old else 0
                if record[p][s] != was:
                    rows.append((f"agent {agent} {p} {s}", was, record[p][s]))
    return rows


def render(rows: list[tuple[str, int, int]], done: Any, *, dry_run: bool) -> str:
    head = "Would change (dry run, nothing written):" if dry_run else "Changed:"
    if not rows:
        lines = ["Nothing to change: the store already holds every count."]
    else:
        width = max(len(r[0]) for r in rows)
        lines = [head] + [f"  {what.ljust(width)}  {a} -> {b}" for what, a, b in rows]
    if isinstance(done, dict) and not dry_run:
        lines.append(
            f"Restored at {done['at']} by {done['host']}; up to {done['unaccounted']} units "
            "could not be accounted for."
        )
    return "\n".join(lines) + "\n"
