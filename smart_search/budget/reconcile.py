"""Reconciliation: the ledger's month beside what each provider reports of it (issue 20, point 5).

A provider reports its own count one of two ways:

- a **usage endpoint** its module can ask, free of charge: `usage_request(settings, key)` builds
  the request and `parse_usage(resp)` reads `{"used": n, "limit": n | None}` for the key's month;
- the **remaining figure its answers carry**, which the ledger records at every settle (what
  a provider's `observation` reads from its headers, per key of a pool): reconciling reads the
  last one, and never spends a unit to learn a new one.

`drift_rows` lines the two up, one row per provider (and per key where the provider keeps a key
pool); `smart-search reconcile` asks the usage endpoints and has the ledger adopt the stricter
figure (`Ledger.adopt_reports`), the rule every answer already follows: a provider that says
less is left than we think wins, one that says more never raises our limit.
"""

from __future__ import annotations

from typing import Any

Document = dict[str, Any]


def recorded_report(window: dict[str, Any]) -> dict[str, Any] | None:
    """What the provider's last answer said of a window's month (a provider's, or one account's
    of its key pool), as a report: `used` is its limit less its remaining (None when it gave no
    limit), `ledger_used` what we had counted then."""
    seen = window.get("reported")
    if not seen or seen.get("month") != window["month"]:
        return None
    limit = seen.get("limit")
    return {
        "used": None if limit is None else max(0, limit - seen["remaining"]),
        "remaining": seen["remaining"],
        "limit": limit,
        "ledger_used": seen["used_at_seen"],
        "seen_at": seen["seen_at"],
        "from": "last answer",
    }


def drift_row(
    window: dict[str, Any], provider: str, key: str, report: dict[str, Any] | None, now: float
) -> dict[str, Any]:
    """One line of the reconciliation: a window's month (`key` "-" for the provider's own, else
    the account's label: a key's fingerprint or a project's name), the provider's figure, the
    drift (provider minus ledger: positive means the provider counted more than we did)."""
    row: dict[str, Any] = {
        "provider": provider,
        "key": key,
        "month": window["month"],
        "ledger_used": window["month_used"],
        "provider_used": None,
        "provider_limit": None,
        "drift": None,
        "from": "not reported",
        "age_s": None,
    }
    if report is None:
        return row
    row["provider_limit"] = report.get("limit")
    row["from"] = report["from"]
    if "seen_at" in report:
        row["age_s"] = round(max(0.0, now - report["seen_at"]), 1)
    used = report.get("used")
    if used is not None:
        row["provider_used"] = used
        # Against what the ledger counted when the provider spoke (its answer), else now.
        row["drift"] = used - report.get("ledger_used", window["month_used"])
    return row


def drift_rows(
    doc: Document,
    providers: tuple[str, ...],
    asked: dict[tuple[str, str], dict[str, Any]],
    now: float,
) -> list[dict[str, Any]]:
    """Every provider's rows, one per account of its key pool (else one for the provider): what
    a usage endpoint just said (`asked`, by (provider, account)), else the last answer's report
    recorded in the ledger, else "not reported"."""
    rows = []
    for p in providers:
        window = doc["windows"][p]
        accounts = dict(window.get("keys") or {})
        for asked_p, label in asked:
            if asked_p == p and label != "-" and label not in accounts:
                # An account of the pool that has spent nothing yet: the ledger counts 0.
                accounts[label] = {"month": window["month"], "month_used": 0}
        for label, account in (accounts or {"-": window}).items():
            report = asked.get((p, label)) or recorded_report(account)
            rows.append(drift_row(account, p, label, report, now))
    return rows


def render(rows: list[dict[str, Any]]) -> str:
    """The rows as a table for a terminal."""
    head = ("provider", "key", "ledger", "provider", "limit", "drift", "from")
    table = [head]
    for r in rows:
        drift = r["drift"]
        table.append((
            r["provider"], r["key"], str(r["ledger_used"]),
            "-" if r["provider_used"] is None else str(r["provider_used"]),
            "-" if r["provider_limit"] is None else str(r["provider_limit"]),
            "-" if drift is None else f"{drift:+d}",
            r["from"] + ("" if r["age_s"] is None else f" ({_age(r['age_s'])} ago)"),
        ))  # fmt: skip
    widths = [max(len(line[i]) for line in table) for i in range(len(head))]
    out = ["  ".join(cell.ljust(w) for cell, w in zip(line, widths, strict=True)).rstrip()
           for line in table]  # fmt: skip
    return "\n".join(out) + "\n"


def _age(seconds: float) -> str:
    if seconds < 120:
        return f"{int(seconds)} s"
    if seconds < 7200:
        return f"{int(seconds // 60)} min"
    return f"{int(seconds // 3600)} h"
