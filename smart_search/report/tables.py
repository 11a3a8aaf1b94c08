"""The report's tables: one titled grid of formatted cells per view (summary, budgets, tiers,
failures, and per day and per agent: searches, units, latency, failures). The text and the HTML
renderers both print exactly these cells, so the two always agree."""

from __future__ import annotations

import re
from typing import Any, NamedTuple

from smart_search.report.aggregate import SOURCES
from smart_search.report.summary import rate


class Table(NamedTuple):
    """A titled grid of already formatted cells; the text and the HTML print exactly these."""

    key: str
    title: str
    columns: list[str]
    rows: list[list[str]]
    note: str = ""
    # one letter per leading column, l(eft) or r(ight); the rest are right-aligned numbers
    align: str = "l"
    total: bool = False  # the last row is the totals row


_UNPRINTABLE = re.compile(r"[\x00-\x1f\x7f-\x9f\u2028\u2029]")


def label_of(text: str) -> str:
    """A name read from the logs, safe for a terminal and short: control characters become ?."""
    text = _UNPRINTABLE.sub("?", text)
    return text if len(text) <= 40 else text[:39] + "~"


def fmt_int(n: int | None) -> str:
    return "-" if n is None else f"{n:,}"


def fmt_rate(rate: float | None) -> str:
    return "-" if rate is None else f"{rate * 100:.1f}%"


def fmt_pct(pct: float | None) -> str:
    return "-" if pct is None else f"{pct:.1f}%"


def fmt_ms(ms: float | None) -> str:
    return "-" if ms is None else f"{ms:.0f}"


def fmt_money(value: float | None) -> str:
    return "-" if value is None else f"{value:,.2f}"


def _p50_p95(p50: float | None, p95: float | None) -> str:
    return "-" if p50 is None else f"{fmt_ms(p50)}/{fmt_ms(p95)}"


def report_tables(report: dict[str, Any]) -> list[Table]:
    """Every table of the report, in print order."""
    tables = [_summary_table(report), *_budget_tables(report), *_key_tables(report)]
    tables.append(_tier_table(report))
    tables.append(_failure_table(report))
    for dim, key, label in (("by_day", "day", "day"), ("by_agent", "agent_id", "agent")):
        rows = report[dim]
        tables.append(_searches_table(report, rows, key, label))
        tables.append(_units_table(report, rows, key, label))
        tables.append(_latency_table(report, rows, key, label))
        tables.append(_failures_by_table(rows, key, label))
    if report.get("fetches", {}).get("agents"):  # an install that never fetched shows none
        tables.append(_fetch_table(report["fetches"]))
    return tables


def _fetch_table(fetches: dict[str, Any]) -> Table:
    """smart_fetch calls per agent (report/fetches.py)."""
    rows = [
        [label_of(agent), fmt_int(n["fetched"]), fmt_int(n["cached"]), fmt_int(n["failed"]),
         fmt_int(n["bytes"])]
        for agent, n in fetches["agents"].items()
    ]  # fmt: skip
    return Table("fetches", "Page fetches by agent",
                 ["agent", "fetched", "cached", "failed", "bytes"], rows)  # fmt: skip


def _summary_table(report: dict[str, Any]) -> Table:
    t = report["totals"]
    lines = report["lines"]
    files = report["files"]
    reasons = ", ".join(
        f"{reason} {fmt_int(n)}" for reason, n in lines["skipped_by_reason"].items() if n
    )
    missing = files["missing_days"]
    shown = ", ".join(missing[:3]) + (", ..." if len(missing) > 3 else "")
    rows = [
        ["days", f"{report['since']} to {report['until']} ({report['days']}, "
                 f"{report['timezone']})"],
        ["agent", label_of(report["agent"] or "all")],
        ["searches", f"{fmt_int(t['searches'])} (ok {fmt_int(t['succeeded'])}, "
                     f"failed {fmt_int(t['failed'])}, deep {fmt_int(t['deep'])})"],
        ["fallback", f"{fmt_int(t['fallback']['count'])} ({fmt_rate(t['fallback']['rate'])})"],
        # The APIs that billed something (the rest are zero; a long list would not fit a line).
        ["API units", (", ".join(
            f"{p} {fmt_int(t['units'][p]['total'])}" for p in t["units"] if t["units"][p]["total"]
        ) or "none") + f" (total {fmt_int(t['units_total'])})"],
        ["web answers", ", ".join(
            f"{label_of(e)} {fmt_int(n)}" for e, n in t["web_answers"].items()
        )],
        ["cache", f"{fmt_int(t['cache']['hits'])} hits, {fmt_int(t['cache']['units_saved'])} "
                  "units saved"],
        ["latency ms", f"p50/p95 {_p50_p95(t['latency_ms']['p50'], t['latency_ms']['p95'])}"],
        ["log lines", f"{fmt_int(lines['read'])} read, {fmt_int(lines['counted'])} counted, "
                      f"{fmt_int(lines['not_counted'])} outside the days or agent, "
                      f"{fmt_int(lines['skipped'])} skipped"],
        ["skipped", reasons or "none"],
        ["log files", f"{fmt_int(files['read'])} read of {fmt_int(files['matched'])}, "
                      f"{fmt_int(files['unreadable'])} unreadable, "
                      f"{fmt_int(files['ignored'])} other files"],
        ["days without logs", f"{fmt_int(files['days_without_logs'])}"
                              + (f" ({shown})" if missing else "")],
    ]  # fmt: skip
    return Table("summary", "Summary", ["", ""], rows)


def _budget_tables(report: dict[str, Any]) -> list[Table]:
    used_rows, projection_rows = [], []
    for b in report["budgets"]:
        used_rows.append(
            [
                b["provider"],
                b["month"],
                b["reset_timezone"],
                fmt_int(b["used"]),
                fmt_int(b["limit"]),
                fmt_pct(b["used_pct"]),
                f"{b['elapsed_days']:.1f} of {b['days_in_month']}",
                b["limit_reached_on"] or "-",
                fmt_money(b["cost_used"]),
            ]
        )
        projection_rows.append(
            [
                b["provider"],
                b["month"],
                fmt_int(b["projected"]),
                fmt_int(b["limit"]),
                fmt_pct(b["projected_pct"]),
                b["projected_to_reach_on"] or "-",
                fmt_money(b["cost_projected"]),
            ]
        )
    return [
        Table(
            "budgets",
            "Monthly budgets",
            ["provider", "month", "reset zone", "used", "budget", "used%", "days elapsed",
             "reached on", "cost"],
            used_rows,
            "all agents; each provider's month runs in its reset zone; cost at price_per_1000",
            align="lll",
        ),
        Table(
            "projections",
            "Projection to month end (at the month's rate so far)",
            ["provider", "month", "projected", "budget", "proj%", "would reach on", "proj. cost"],
            projection_rows,
            align="ll",
        ),
    ]  # fmt: skip


def _key_tables(report: dict[str, Any]) -> list[Table]:
    """Units per key of a key pool (by fingerprint or project), when any pool was used."""
    by_key = report["totals"]["units_by_key"]
    rows = [
        [label_of(p), label_of(key), fmt_int(n)]
        for p, keys in by_key.items()
        for key, n in keys.items()
    ]
    if not rows:
        return []
    return [Table("keys", "Units by key (key pools)", ["provider", "key", "units"], rows)]


def _tier_table(report: dict[str, Any]) -> Table:
    columns = ["tier", "success", "failed", "skipped", "retries", "p50 ms", "p95 ms"]
    rows = []
    for tier, c in report["totals"]["tiers"].items():
        rows.append(
            [label_of(tier), fmt_int(c["success"]), fmt_int(c["failed"]), fmt_int(c["skipped"]),
             fmt_int(c["retries"]), fmt_ms(c["latency_p50_ms"]), fmt_ms(c["latency_p95_ms"])]
        )  # fmt: skip
    return Table("tiers", "Outcomes by tier", columns, rows)


def _failure_table(report: dict[str, Any]) -> Table:
    t = report["totals"]
    rows = [
        [label_of(code), fmt_int(n), fmt_rate(rate(n, t["searches"]))]
        for code, n in t["failures"].items()
    ]
    return Table("failures", "Failures by error_code", ["error_code", "searches", "share"], rows)


def _searches_table(
    report: dict[str, Any], rows: list[dict[str, Any]], key: str, label: str
) -> Table:
    engines = report["engines"]
    columns = [label, "searches", "ok", "failed", "deep", "fallbk", "fallbk%",
               *map(label_of, engines),
               "cache", "saved"]  # fmt: skip

    def cells(name: str, s: dict[str, Any]) -> list[str]:
        return [
            name,
            fmt_int(s["searches"]),
            fmt_int(s["succeeded"]),
            fmt_int(s["failed"]),
            fmt_int(s["deep"]),
            fmt_int(s["fallback"]["count"]),
            fmt_rate(s["fallback"]["rate"]),
            *(fmt_int(s["web_answers"][e]) for e in engines),
            fmt_int(s["cache"]["hits"]),
            fmt_int(s["cache"]["units_saved"]),
        ]

    body = [cells(label_of(r[key]), r) for r in rows] + [cells("total", report["totals"])]
    return Table(f"{label}-searches", f"Searches by {label}", columns, body,
                 "web columns: answers by engine", total=True)  # fmt: skip


def _units_table(report: dict[str, Any], rows: list[dict[str, Any]], key: str, label: str) -> Table:
    units = report["totals"]["units"]
    other = any(units[p]["unattributed"] for p in units)
    short = {"agent_allocation": "alloc", "shared_pool": "pool", "provider_direct": "direct",
             "unattributed": "other"}  # fmt: skip
    sources = [s for s in SOURCES if s != "unattributed" or other]
    # Only the providers that billed anything in the period get columns (all of them when none
    # did): every registered provider's four would pass the text report's width.
    spent = [p for p in units if units[p]["total"] or units[p]["unattributed"]] or list(units)
    columns = [label]
    for p in spent:
        columns += [p] + [f"{p[0]}.{short[s]}" for s in sources]
    columns.append("total")

    def cells(name: str, s: dict[str, Any]) -> list[str]:
        out = [name]
        for p in spent:
            out += [fmt_int(s["units"][p]["total"])] + [fmt_int(s["units"][p][x]) for x in sources]
        return [*out, fmt_int(s["units_total"])]

    body = [cells(label_of(r[key]), r) for r in rows] + [cells("total", report["totals"])]
    note = "alloc: agent allocation, pool: shared pool, direct: provider headroom"
    return Table(f"{label}-units", f"API units by {label}", columns, body, note, total=True)


def _latency_table(
    report: dict[str, Any], rows: list[dict[str, Any]], key: str, label: str
) -> Table:
    tiers = report["tiers"]
    columns = [label, "call", *map(label_of, tiers)]

    def cells(name: str, s: dict[str, Any]) -> list[str]:
        out = [name, _p50_p95(s["latency_ms"]["p50"], s["latency_ms"]["p95"])]
        for tier in tiers:
            c = s["tiers"][tier]
            out.append(_p50_p95(c["latency_p50_ms"], c["latency_p95_ms"]))
        return out

    body = [cells(label_of(r[key]), r) for r in rows] + [cells("total", report["totals"])]
    return Table(f"{label}-latency", f"Latency by {label} (ms, p50/p95)", columns, body, total=True)


def _failures_by_table(rows: list[dict[str, Any]], key: str, label: str) -> Table:
    body = [
        [label_of(r[key]), label_of(code), fmt_int(n)]
        for r in rows
        for code, n in r["failures"].items()
    ]
    return Table(f"{label}-failures", f"Failures by {label}", [label, "error_code", "searches"],
                 body, align="ll")  # fmt: skip
