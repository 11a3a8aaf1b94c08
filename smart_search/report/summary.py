"""Shaping the counts into the report document: summary blocks (totals, per day, per agent)
merged from the buckets, and the document around them (`schemas/report.result.json`)."""

from __future__ import annotations

import math
from collections.abc import Iterable
from typing import Any

from smart_search.host.config import ENGINES, PROVIDERS
from smart_search.report.aggregate import SOURCES, Aggregator, Bucket, count_keys
from smart_search.report.budgets import budgets
from smart_search.report.reading import FileStats
from smart_search.report.window import days_between
from smart_search.sources import registry
from smart_search.text.stamps import utc_stamp

REPORT_VERSION = 1
TIER_ORDER = ("cache", *PROVIDERS, *ENGINES, "web_fetch")


def document(agg: Aggregator, files: FileStats, days_with_logs: set[str]) -> dict[str, Any]:
    """The report document (`--json`, schemas/report.result.json) from an Aggregator's counts."""
    window = agg.window
    all_days = days_between(window.since, window.until)
    missing = [d for d in all_days if d not in days_with_logs]
    by_day: dict[str, list[tuple[str, Bucket]]] = {d: [] for d in all_days}
    by_agent: dict[str, list[Bucket]] = {}
    for (day, agent), bucket in agg.buckets.items():
        by_day[day].append((agent, bucket))
        by_agent.setdefault(agent, []).append(bucket)
    tiers = tier_names(agg.buckets.values())
    engines = engine_names(agg.buckets.values())
    return {
        "report_version": REPORT_VERSION,
        "generated_at": utc_stamp(window.now),
        "since": agg.since,
        "until": agg.until,
        "days": len(all_days),
        "timezone": window.ledger_timezone or "UTC",
        "agent": window.agent,
        "files": {
            "matched": files.matched,
            "read": files.read,
            "unreadable": files.unreadable,
            "ignored": files.ignored,
            "days_without_logs": len(missing),
            "missing_days": missing,
        },
        "lines": {
            "read": agg.read,
            "counted": agg.counted,
            "not_counted": agg.not_counted,
            "skipped": sum(agg.skipped.values()),
            "skipped_by_reason": dict(agg.skipped),
            "by_version": dict(agg.by_version),
        },
        "tiers": tiers,
        "engines": engines,
        "totals": summarize(list(agg.buckets.values()), tiers, engines),
        "by_day": [
            {
                "day": d,
                **summarize([b for _, b in bs], tiers, engines),
                "units_by_agent": units_by_agent(bs),
            }
            for d, bs in by_day.items()
        ],
        "by_agent": [
            {"agent_id": a, **summarize(by_agent[a], tiers, engines)} for a in sorted(by_agent)
        ],
        "budgets": budgets(agg.budget_units, window),
    }


def summarize(buckets: list[Bucket], tiers: list[str], engines: list[str]) -> dict[str, Any]:
    """One summary block (a day's, an agent's or the totals) from its buckets."""
    searches = succeeded = deep = fallback = hits = saved = 0
    units = {p: [0, 0, 0, 0] for p in PROVIDERS}
    web = dict.fromkeys(engines, 0)
    keys: dict[str, dict[str, int]] = {}
    failures: dict[str, int] = {}
    call_latency: list[float] = []
    for b in buckets:
        searches += b.searches
        succeeded += b.succeeded
        deep += b.deep
        fallback += b.fallback
        hits += b.cache_hits
        saved += b.units_saved
        for p, row in b.units.items():
            total = units.setdefault(p, [0, 0, 0, 0])
            for i, n in enumerate(row):
                total[i] += n
        for engine, n in b.web.items():
            web[engine] = web.get(engine, 0) + n
        for p, by_key in b.keys.items():
            count_keys(keys.setdefault(p, {}), by_key)
        for code, n in b.failures.items():
            failures[code] = failures.get(code, 0) + n
        call_latency.extend(b.call_latency)
    call_p50, call_p95 = percentiles(call_latency)
    return {
        "searches": searches,
        "succeeded": succeeded,
        "failed": searches - succeeded,
        "deep": deep,
        "fallback": {"count": fallback, "rate": rate(fallback, searches)},
        "units": {
            p: {"total": sum(row), **dict(zip(SOURCES, row, strict=True))}
            for p, row in units.items()
        },
        "units_total": sum(sum(row) for row in units.values()),
        "units_by_key": {p: dict(sorted(by_key.items())) for p, by_key in sorted(keys.items())},
        "web_answers": web,
        "cache": {"hits": hits, "units_saved": saved},
        "failures": dict(sorted(failures.items(), key=lambda kv: (-kv[1], kv[0]))),
        "latency_ms": {"p50": call_p50, "p95": call_p95},
        "tiers": _tier_block(buckets, tiers),
    }


def percentiles(values: list[float]) -> tuple[float | None, float | None]:
    """Nearest-rank p50 and p95 (values that occurred, never interpolated); None when empty."""
    if not values:
        return None, None
    ordered = sorted(values)
    n = len(ordered)
    return ordered[math.ceil(0.5 * n) - 1], ordered[math.ceil(0.95 * n) - 1]


def _tier_block(buckets: list[Bucket], tiers: list[str]) -> dict[str, dict[str, Any]]:
    """Per tier: attempts by outcome, retries, and latency percentiles."""
    tier_counts = {t: [0, 0, 0, 0] for t in tiers}
    tier_latency: dict[str, list[float]] = {t: [] for t in tiers}
    for b in buckets:
        for tier, counts in b.tiers.items():
            total = tier_counts[tier]
            for i, n in enumerate(counts):
                total[i] += n
        for tier, values in b.tier_latency.items():
            tier_latency[tier].extend(values)
    tier_block = {}
    for tier in tiers:
        p50, p95 = percentiles(tier_latency[tier])
        ok, failed, skipped, retries = tier_counts[tier]
        tier_block[tier] = {
            "success": ok,
            "failed": failed,
            "skipped": skipped,
            "retries": retries,
            "latency_p50_ms": p50,
            "latency_p95_ms": p95,
        }
    return tier_block


def units_by_agent(buckets: list[tuple[str, Bucket]]) -> dict[str, int]:
    units = {agent: sum(sum(row) for row in b.units.values()) for agent, b in buckets}
    return {agent: units[agent] for agent in sorted(units) if units[agent]}


def tier_names(buckets: Iterable[Bucket]) -> list[str]:
    seen: set[str] = set()
    for b in buckets:
        seen.update(b.tiers)
    return [t for t in TIER_ORDER if t in seen] + sorted(seen - set(TIER_ORDER))


def engine_names(buckets: Iterable[Bucket]) -> list[str]:
    seen: set[str] = set()
    for b in buckets:
        seen.update(b.web)
    # A self-hosted engine has a column only when the logs show it (it may not be configured).
    listed = [e for e in ENGINES if e in seen or not registry.source(e).self_hosted]
    return listed + sorted(seen - set(ENGINES))


def rate(part: int, whole: int) -> float | None:
    return round(part / whole, 4) if whole else None
