"""`smart-search report`: every number of a known month, the renderers agree, nothing crashes it.

The known logs (`write_known_logs`) span a month boundary with `timezone` = Asia/Tokyo (UTC+9):
the files are Tokyo days, while the budgets run on Gemini's Pacific clock and Brave's UTC, so a
line can sit in a December file and in Gemini's November. Every expected number below was worked
out by hand from the lines, in the comments beside them.
"""

from __future__ import annotations

import gzip
import json
import re
import subprocess
import sys
from datetime import UTC, date, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from smart_search import report
from tests.conftest import SCHEMAS, Env, _registry

TOKYO = "Asia/Tokyo"
SINCE, UNTIL = date(2025, 11, 29), date(2025, 12, 2)
# Long after the window: the projection runs to the end of UNTIL (Tokyo), 2025-12-02T15:00Z.
NOW = datetime(2026, 1, 10, tzinfo=UTC).timestamp()
LIMITS = {"gemini": 5, "brave": 4}
PRICES: dict[str, float | None] = {"gemini": 10.0, "brave": None}
CONFIG = {
    "timezone": TOKYO,
    "providers": {
        "gemini": {"monthly_limit": 5, "price_per_1000": 10},
        "brave": {"monthly_limit": 4},
    },
}


# --- building logs ---------------------------------------------------------------------------


def att(provider: str, outcome: str, latency: float | None = None, **extra: Any) -> dict[str, Any]:
    """One attempt record; web engines are ('web_fetch', engine=...)."""
    record = {
        "tier": extra.pop("tier", 1),
        "provider": provider,
        "engine": extra.pop("engine", None),
        "outcome": outcome,
        "error_code": extra.pop("code", None),
        "error": None,
        "http_status": None,
        "retries": extra.pop("retries", 0),
        "latency_ms": 0.1 if latency is None else latency,
        "attempt_latencies_ms": [],
        "quota_source": extra.pop("source", None),
    }
    record.update(extra)
    return record


def rec(stamp: str, agent: str, provider: str | None, **extra: Any) -> dict[str, Any]:
    """A log line as an older release wrote it (log version 1 unless extra says log_version=2);
    lines of the version written today come from the real builder (`line`)."""
    success = extra.pop("success", True)
    record = {
        "timestamp": stamp,
        "agent_id": agent,
        "query": "q",
        "provider_used": provider,
        "force_provider": None,
        "quota_source": extra.pop("source", "none"),
        "queries_remaining": 3,
        "success": success,
        "response_summary": "r" if success else None,
        "error": None if success else "All search providers exhausted or unavailable.",
        "fallback_used": extra.pop("fallback", False),
        "web_fetch_engine": extra.pop("engine", None),
        "error_code": extra.pop("code", None),
        "attempts": extra.pop("attempts", []),
        "latency_ms": extra.pop("latency", None),
    }
    record.update(extra)
    return record


def line(stamp: str, agent: str, provider: str | None, **extra: Any) -> dict[str, Any]:
    """The line the real writer (logline.build_line) writes for a call that ended with this
    result at `stamp`: today's log version, every field, `mode` included."""
    from smart_search.logs.line import build_line

    success = extra.pop("success", True)
    result = {
        "results": "r" if success else None,
        "provider_used": provider,
        "quota_source": extra.pop("source", "none"),
        "queries_remaining": 3,
        "error": None if success else "All search providers exhausted or unavailable.",
        "fallback_used": extra.pop("fallback", False),
        "web_fetch_engine": extra.pop("engine", None),
        "error_code": extra.pop("code", None),
        "attempts": extra.pop("attempts", []),
        "cached": extra.pop("cached", False),
    }
    moment = datetime.fromisoformat(stamp).timestamp()
    written = build_line(result, agent_id=agent, query="q", force=None, now=moment,
                         mode=extra.pop("mode"), latency_ms=extra.pop("latency"),
                         units_saved=extra.pop("units_saved", 0))  # fmt: skip
    assert not extra, extra
    assert written["timestamp"] == stamp
    return written


def dumps(*records: dict[str, Any]) -> bytes:
    return b"".join(json.dumps(r).encode() + b"\n" for r in records)


def write_known_logs(state_dir: Path) -> Path:
    logs = state_dir / "logs"
    logs.mkdir(parents=True)
    files: dict[str, bytes] = {
        # Tokyo 2025-11-28: before the report's days, read for November's budget only.
        # L0: LA 11-27 19:00 -> gemini November +1.
        "search-2025-11-28.jsonl": dumps(
            rec("2025-11-28T03:00:00.000Z", "alpha", "gemini", source="agent_allocation",
                attempts=[att("gemini", "success", 90, source="agent_allocation")], latency=95)
        ),
        "search-2025-11-29.jsonl": dumps(
            # L1 alpha: gemini from its allocation.
            rec("2025-11-29T01:00:00.000Z", "alpha", "gemini", source="agent_allocation",
                attempts=[att("gemini", "success", 100, source="agent_allocation")], latency=110),
            # L2 beta: gemini failed (2 retries), brave answered from direct headroom: fallback.
            rec("2025-11-29T02:00:00.000Z", "beta", "brave", source="provider_direct",
                fallback=True, latency=510,
                attempts=[att("gemini", "failed", 300, code="timeout", retries=2),
                          att("brave", "success", 200, tier=2, source="provider_direct")]),
            # L3 alpha: both APIs skipped, DuckDuckGo answered.
            rec("2025-11-29T03:00:00.000Z", "alpha", "web_fetch", engine="duckduckgo",
                fallback=True, latency=420,
                attempts=[att("gemini", "skipped", code="quota_exhausted"),
                          att("brave", "skipped", tier=2, code="not_configured"),
                          att("web_fetch", "success", 400, tier=3, engine="duckduckgo")]),
            # L4 beta: every tier failed.
            rec("2025-11-29T04:00:00.000Z", "beta", None, success=False, code="all_exhausted",
                latency=470,
                attempts=[att("gemini", "failed", 250, code="server_error"),
                          att("brave", "failed", 150, tier=2, code="rate_limited", retries=1),
                          att("web_fetch", "failed", 50, tier=3, engine="duckduckgo",
                              code="blocked")]),
        )
        # L5 alpha: a line of the spec's original fields only (no attempts, error_code, latency).
        + json.dumps({
            "timestamp": "2025-11-29T05:00:00.000Z", "agent_id": "alpha", "query": "q",
            "provider_used": "brave", "force_provider": None, "quota_source": "shared_pool",
            "queries_remaining": 0, "success": True, "response_summary": "r", "error": None,
            "fallback_used": False, "web_fetch_engine": None,
        }).encode() + b"\n",
        "search-2025-11-30.jsonl": dumps(
            # L6 gamma, today's version, deep: Gemini ran 3 search queries, paid from the pool.
            line("2025-11-30T10:00:00.000Z", "gamma", "gemini", source="shared_pool", latency=950,
                 mode="deep",
                 attempts=[att("gemini", "success", 900, source="shared_pool", units=3)]),
            # L7 alpha, today's version: a cache hit, saved 2 units, charged none.
            line("2025-11-30T11:00:00.000Z", "alpha", "gemini", source="agent_allocation",
                 latency=2.0, cached=True, units_saved=2, mode="first",
                 attempts=[att("cache", "success", 1.5, units=0)]),
            # L8 gamma, v2: brave from its allocation (Tokyo 23:30, UTC 11-30).
            rec("2025-11-30T14:30:00.000Z", "gamma", "brave", source="agent_allocation",
                latency=220, log_version=2, units=1,
                attempts=[att("brave", "success", 210, source="agent_allocation", units=1)]),
        ),
        "search-2025-12-01.jsonl": dumps(
            # L9 alpha, v2, units on the line only: Tokyo 12-01 01:00 is LA 11-30 08:00, so it
            # is in a December file and in Gemini's November.
            rec("2025-11-30T16:00:00.000Z", "alpha", "gemini", source="agent_allocation",
                latency=130, log_version=2, units=1,
                attempts=[att("gemini", "success", 120, source="agent_allocation")]),
            # L10 beta, v2: Tokyo 12-01, UTC 11-30: Brave's November.
            rec("2025-11-30T20:00:00.000Z", "beta", "brave", source="agent_allocation",
                latency=190, log_version=2, units=1,
                attempts=[att("brave", "success", 180, source="agent_allocation", units=1)]),
            # L11 beta, v2: Brave's December.
            rec("2025-12-01T03:00:00.000Z", "beta", "brave", source="agent_allocation",
                latency=250, log_version=2, units=1,
                attempts=[att("brave", "success", 240, source="agent_allocation", units=1)]),
            # L12 gamma, today's version: 2 Gemini units from direct headroom, LA 12-01 01:00.
            line("2025-12-01T09:00:00.000Z", "gamma", "gemini", source="provider_direct",
                 latency=710, mode="first",
                 attempts=[att("gemini", "success", 700, source="provider_direct", units=2)]),
        )
        # Lines that cannot be counted: foreign, not JSON, a future version, wrong types.
        + b'{"event": "rotated", "at": "2025-12-01"}\n'
        + b"hello, not json\n"
        + dumps({"log_version": 99, "agent_id": "alpha", "success": True, "units": 99})
        + dumps({"agent_id": 5, "success": True, "provider_used": "gemini"}),
        "search-2025-12-02.jsonl": dumps(
            # L13 alpha, v2: Google answered.
            rec("2025-12-02T01:00:00.000Z", "alpha", "web_fetch", engine="google", latency=360,
                log_version=2, units=0,
                attempts=[att("web_fetch", "success", 350, engine="google", units=0)]),
            # L14 alpha, v2: failed, yet Brave billed a 2xx without usable results (1 unit).
            rec("2025-12-02T02:00:00.000Z", "alpha", None, success=False, code="all_exhausted",
                latency=190, log_version=2, units=1,
                attempts=[att("brave", "failed", 120, code="no_results",
                              source="agent_allocation", units=1),
                          att("web_fetch", "failed", 60, tier=3, engine="duckduckgo",
                              code="blocked", units=0)]),
        )
        # A crash mid-write: the last line has no end.
        + b'{"timestamp": "2025-12-02T03:00:00.000Z", "agent_id": "alpha", "succ',
        # Rotated copies of a day's log count like the day's file.
        # L15 gamma (v1): gemini from direct headroom, LA 12-01 20:00.
        "search-2025-12-02.jsonl.1": dumps(
            rec("2025-12-02T04:00:00.000Z", "gamma", "gemini", source="provider_direct",
                latency=520, attempts=[att("gemini", "success", 500, source="provider_direct")])
        ),
        # After UNTIL: never read (its unit would show in the December budgets).
        "search-2025-12-03.jsonl": dumps(
            rec("2025-12-03T01:00:00.000Z", "alpha", "gemini", source="agent_allocation",
                attempts=[att("gemini", "success", 100, source="agent_allocation")], latency=1)
        ),
        "notes.txt": b"not a log\n",
        "search-2025-13-45.jsonl": dumps(rec("2025-12-01T00:00:00Z", "x", "gemini")),
    }  # fmt: skip
    for name, data in files.items():
        (logs / name).write_bytes(data)
    # L16 beta (v1), gzip-rotated: brave from its allocation, UTC 12-01.
    with gzip.open(logs / "search-2025-12-01.jsonl.2.gz", "wb") as fh:
        fh.write(dumps(
            rec("2025-12-01T05:00:00.000Z", "beta", "brave", source="agent_allocation",
                latency=170, attempts=[att("brave", "success", 160, source="agent_allocation")])
        ))  # fmt: skip
    return logs


def known_window(**overrides: Any) -> report.Window:
    options: dict[str, Any] = {
        "ledger_timezone": TOKYO,
        "monthly_limits": LIMITS,
        "reset_timezones": {"gemini": "America/Los_Angeles", "brave": "UTC"},
        "prices_per_1000": PRICES,
        "now": NOW,
    }
    options.update(overrides)
    return report.Window(SINCE, UNTIL, **options)


# --- expected numbers, by hand ---------------------------------------------------------------

TIERS = ["cache", "gemini", "brave", "google", "duckduckgo"]
ZERO_TIER = {"success": 0, "failed": 0, "skipped": 0, "retries": 0,
             "latency_p50_ms": None, "latency_p95_ms": None}  # fmt: skip


def tier(ok: int, failed: int, skipped: int, retries: int, p50: float, p95: float) -> dict:
    return {"success": ok, "failed": failed, "skipped": skipped, "retries": retries,
            "latency_p50_ms": p50, "latency_p95_ms": p95}  # fmt: skip


def units(alloc: int = 0, pool: int = 0, direct: int = 0) -> dict[str, int]:
    return {"total": alloc + pool + direct, "agent_allocation": alloc, "shared_pool": pool,
            "provider_direct": direct, "unattributed": 0}  # fmt: skip


def block(
    searches: int, ok: int, deep: int, fallback: tuple[int, float | None],
    gemini: dict, brave: dict, web: tuple[int, int, int], cache: tuple[int, int],
    failures: dict[str, int], latency: tuple[float | None, float | None], tiers: dict[str, dict],
    keys: dict[str, dict[str, int]] | None = None,
) -> dict[str, Any]:  # fmt: skip
    return {
        "searches": searches,
        "succeeded": ok,
        "failed": searches - ok,
        "deep": deep,
        "fallback": {"count": fallback[0], "rate": fallback[1]},
        "units": {"gemini": gemini, "brave": brave, "tavily": units()},  # no Tavily in the logs
        "units_total": gemini["total"] + brave["total"],
        "units_by_key": keys or {},
        "web_answers": dict(zip(("google", "bing", "duckduckgo"), web, strict=True)),
        "cache": {"hits": cache[0], "units_saved": cache[1]},
        "failures": failures,
        "latency_ms": {"p50": latency[0], "p95": latency[1]},
        "tiers": {t: tiers.get(t, ZERO_TIER) for t in TIERS},
    }


# Call latencies, all 15 lines that have one: 2, 110, 130, 170, 190, 190, 220, 250, 360, 420,
# 470, 510, 520, 710, 950 -> nearest rank p50 = 8th = 250, p95 = 15th = 950.
TOTALS = block(
    16, 14, 1, (2, 0.125),
    gemini=units(alloc=2, pool=3, direct=3),  # L1 L9 | L6 | L12 L15
    brave=units(alloc=5, pool=1, direct=1),  # L8 L10 L11 L16 L14 | L5 | L2
    web=(1, 0, 1), cache=(1, 2), failures={"all_exhausted": 2}, latency=(250, 950),
    tiers={
        "cache": tier(1, 0, 0, 0, 1.5, 1.5),
        # 100 120 250 300 500 700 900
        "gemini": tier(5, 2, 1, 2, 300, 900),
        # 120 150 160 180 200 210 240
        "brave": tier(5, 2, 1, 1, 180, 240),
        "google": tier(1, 0, 0, 0, 350, 350),
        # 50 60 400
        "duckduckgo": tier(1, 2, 0, 0, 60, 400),
    },
)  # fmt: skip
BY_DAY = [
    {"day": "2025-11-29", **block(
        5, 4, 0, (2, 0.4), gemini=units(alloc=1), brave=units(pool=1, direct=1),
        web=(0, 0, 1), cache=(0, 0), failures={"all_exhausted": 1}, latency=(420, 510),
        tiers={"gemini": tier(1, 2, 1, 2, 250, 300), "brave": tier(1, 1, 1, 1, 150, 200),
               "duckduckgo": tier(1, 1, 0, 0, 50, 400)}),
     "units_by_agent": {"alpha": 2, "beta": 1}},
    {"day": "2025-11-30", **block(
        3, 3, 1, (0, 0.0), gemini=units(pool=3), brave=units(alloc=1),
        web=(0, 0, 0), cache=(1, 2), failures={}, latency=(220, 950),
        tiers={"cache": tier(1, 0, 0, 0, 1.5, 1.5), "gemini": tier(1, 0, 0, 0, 900, 900),
               "brave": tier(1, 0, 0, 0, 210, 210)}),
     "units_by_agent": {"gamma": 4}},
    {"day": "2025-12-01", **block(
        5, 5, 0, (0, 0.0), gemini=units(alloc=1, direct=2), brave=units(alloc=3),
        web=(0, 0, 0), cache=(0, 0), failures={}, latency=(190, 710),
        tiers={"gemini": tier(2, 0, 0, 0, 120, 700), "brave": tier(3, 0, 0, 0, 180, 240)}),
     "units_by_agent": {"alpha": 1, "beta": 3, "gamma": 2}},
    {"day": "2025-12-02", **block(
        3, 2, 0, (0, 0.0), gemini=units(direct=1), brave=units(alloc=1),
        web=(1, 0, 0), cache=(0, 0), failures={"all_exhausted": 1}, latency=(360, 520),
        tiers={"gemini": tier(1, 0, 0, 0, 500, 500), "brave": tier(0, 1, 0, 0, 120, 120),
               "google": tier(1, 0, 0, 0, 350, 350), "duckduckgo": tier(0, 1, 0, 0, 60, 60)}),
     "units_by_agent": {"alpha": 1, "gamma": 1}},
]  # fmt: skip
BY_AGENT = [
    {"agent_id": "alpha", **block(
        7, 6, 0, (1, 0.1429), gemini=units(alloc=2), brave=units(alloc=1, pool=1),
        web=(1, 0, 1), cache=(1, 2), failures={"all_exhausted": 1}, latency=(130, 420),
        tiers={"cache": tier(1, 0, 0, 0, 1.5, 1.5), "gemini": tier(2, 0, 1, 0, 100, 120),
               "brave": tier(0, 1, 1, 0, 120, 120), "google": tier(1, 0, 0, 0, 350, 350),
               "duckduckgo": tier(1, 1, 0, 0, 60, 400)})},
    {"agent_id": "beta", **block(
        5, 4, 0, (1, 0.2), gemini=units(), brave=units(alloc=3, direct=1),
        web=(0, 0, 0), cache=(0, 0), failures={"all_exhausted": 1}, latency=(250, 510),
        tiers={"gemini": tier(0, 2, 0, 2, 250, 300), "brave": tier(4, 1, 0, 1, 180, 240),
               "duckduckgo": tier(0, 1, 0, 0, 50, 50)})},
    {"agent_id": "gamma", **block(
        4, 4, 1, (0, 0.0), gemini=units(pool=3, direct=3), brave=units(alloc=1),
        web=(0, 0, 0), cache=(0, 0), failures={}, latency=(520, 950),
        tiers={"gemini": tier(3, 0, 0, 0, 700, 900), "brave": tier(1, 0, 0, 0, 210, 210)})},
]  # fmt: skip


def month_daily(month: date, days: int, units_on: dict[int, int]) -> list[dict[str, Any]]:
    out, total = [], 0
    for d in range(1, days + 1):
        total += units_on.get(d, 0)
        out.append({"day": month.replace(day=d).isoformat(), "units": units_on.get(d, 0),
                    "cumulative": total})  # fmt: skip
    return out


def budget(provider: str, month: str, zone: str, **values: Any) -> dict[str, Any]:
    return {"provider": provider, "month": month, "reset_timezone": zone, **values}


LA = "America/Los_Angeles"
BUDGETS = [
    # Gemini, Pacific clock. November: L0 (11-27), L1 (11-28), L6 + L9 (11-30) = 1+1+3+1.
    budget("gemini", "2025-11", LA, limit=5, used=6, used_pct=120.0, days_in_month=30,
           elapsed_days=30.0, complete=True, projected=6, projected_pct=120.0,
           limit_reached_on="2025-11-30", projected_to_reach_on=None, price_per_1000=10.0,
           cost_used=0.06, cost_projected=0.06,
           daily=month_daily(date(2025, 11, 1), 30, {27: 1, 28: 1, 30: 4})),
    # December: L12 (2) + L15 (1) on LA 12-01. The month starts 12-01 08:00Z; the report ends
    # 12-02 15:00Z: 31 hours of 31 days = 1/24 -> projected 3 * 24 = 72; 5 units are reached
    # after 31 h * 5/3 = 51 h 40 min: 12-03 11:40Z = LA 12-03.
    budget("gemini", "2025-12", LA, limit=5, used=3, used_pct=60.0, days_in_month=31,
           elapsed_days=1.292, complete=False, projected=72, projected_pct=1440.0,
           limit_reached_on=None, projected_to_reach_on="2025-12-03", price_per_1000=10.0,
           cost_used=0.03, cost_projected=0.72,
           daily=month_daily(date(2025, 12, 1), 2, {1: 3})),
    # Brave, UTC. November: L2 + L5 (11-29), L8 + L10 (11-30).
    budget("brave", "2025-11", "UTC", limit=4, used=4, used_pct=100.0, days_in_month=30,
           elapsed_days=30.0, complete=True, projected=4, projected_pct=100.0,
           limit_reached_on="2025-11-30", projected_to_reach_on=None, price_per_1000=None,
           cost_used=None, cost_projected=None,
           daily=month_daily(date(2025, 11, 1), 30, {29: 2, 30: 2})),
    # December: L11 + L16 (12-01), L14 (12-02). 39 h of 744: 3 * 744 / 39 = 57.2 -> 57;
    # 4 units after 39 h * 4/3 = 52 h: 12-03 04:00Z.
    budget("brave", "2025-12", "UTC", limit=4, used=3, used_pct=75.0, days_in_month=31,
           elapsed_days=1.625, complete=False, projected=57, projected_pct=1425.0,
           limit_reached_on=None, projected_to_reach_on="2025-12-03", price_per_1000=None,
           cost_used=None, cost_projected=None,
           daily=month_daily(date(2025, 12, 1), 2, {1: 2, 2: 1})),
    # Tavily, UTC: in no log and with no limit in this window, both months empty.
    budget("tavily", "2025-11", "UTC", limit=0, used=0, used_pct=None, days_in_month=30,
           elapsed_days=30.0, complete=True, projected=0, projected_pct=None,
           limit_reached_on=None, projected_to_reach_on=None, price_per_1000=None,
           cost_used=None, cost_projected=None, daily=month_daily(date(2025, 11, 1), 30, {})),
    budget("tavily", "2025-12", "UTC", limit=0, used=0, used_pct=None, days_in_month=31,
           elapsed_days=1.625, complete=False, projected=0, projected_pct=None,
           limit_reached_on=None, projected_to_reach_on=None, price_per_1000=None,
           cost_used=None, cost_projected=None, daily=month_daily(date(2025, 12, 1), 2, {})),
]  # fmt: skip
FILES = {"matched": 8, "read": 7, "unreadable": 0, "ignored": 2, "days_without_logs": 0,
         "missing_days": []}  # fmt: skip
# 22 lines read: 16 counted, L0 outside the days, 5 skipped; versions: 8 v1, 6 v2, 3 v4 lines.
LINES = {
    "read": 22, "counted": 16, "not_counted": 1, "skipped": 5,
    "skipped_by_reason": {"truncated": 1, "oversized": 0, "not_json": 1, "foreign": 1,
                          "malformed": 1, "unknown_version": 1},
    "by_version": {"1": 8, "2": 6, "3": 0, "4": 3},
}  # fmt: skip


def validate(doc: dict[str, Any]) -> None:
    from jsonschema import Draft202012Validator

    schema = json.loads((SCHEMAS / "report.result.json").read_text())
    errors = list(Draft202012Validator(schema, registry=_registry()).iter_errors(doc))
    assert not errors, errors[0]


def as_json(doc: dict[str, Any]) -> dict[str, Any]:
    import orjson

    return json.loads(orjson.dumps(doc))


# --- every number ----------------------------------------------------------------------------


def test_known_logs_every_number(tmp_path: Path) -> None:
    logs = write_known_logs(tmp_path)
    doc = as_json(report.build_report(str(logs), known_window()))
    validate(doc)
    assert doc.pop("generated_at") == "2026-01-10T00:00:00Z"
    # No fetch log among the known logs (tests/test_fetch.py counts fetches).
    assert doc.pop("fetches") == {"total": 0, "skipped": 0, "agents": {}}
    assert doc == {
        "report_version": 1,
        "since": "2025-11-29",
        "until": "2025-12-02",
        "days": 4,
        "timezone": TOKYO,
        "agent": None,
        "files": FILES,
        "lines": LINES,
        "tiers": TIERS,
        "engines": ["google", "bing", "duckduckgo"],
        "totals": TOTALS,
        "by_day": BY_DAY,
        "by_agent": BY_AGENT,
        "budgets": BUDGETS,
    }


def test_two_processes_count_what_one_counts(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Big reports fork a child for half the files; its counts merge to the same report."""
    logs = write_known_logs(tmp_path)
    alone = report.build_report(str(logs), known_window(), workers=1)
    shared = report.build_report(str(logs), known_window(), workers=2)
    assert as_json(shared) == as_json(alone)
    # A child that fails is redone by the parent: the same report again.
    monkeypatch.setattr(report.Aggregator, "state", lambda self: 1 / 0)
    redone = report.build_report(str(logs), known_window(), workers=2)
    assert as_json(redone) == as_json(alone)


def test_agent_filter_counts_one_agent_but_budgets_count_all(tmp_path: Path) -> None:
    logs = write_known_logs(tmp_path)
    doc = as_json(report.build_report(str(logs), known_window(agent="alpha")))
    validate(doc)
    assert doc["agent"] == "alpha"
    assert doc["by_agent"] == [BY_AGENT[0]]
    alpha = {k: v for k, v in BY_AGENT[0].items() if k != "agent_id"}
    assert doc["totals"] == alpha
    assert [d["units_by_agent"] for d in doc["by_day"]] == [{"alpha": 2}, {}, {"alpha": 1},
                                                            {"alpha": 1}]  # fmt: skip
    assert [d["searches"] for d in doc["by_day"]] == [3, 1, 1, 2]
    assert doc["lines"] == {**LINES, "counted": 7, "not_counted": 10}
    assert doc["budgets"] == BUDGETS  # the budget is the provider's, whoever spent it


def test_projection_stops_at_now_when_the_report_reaches_today(tmp_path: Path) -> None:
    """`now` inside the last day: elapsed time, daily points and projection end at now."""
    logs = write_known_logs(tmp_path)
    now = datetime(2025, 12, 2, 3, 0, tzinfo=UTC).timestamp()  # Tokyo 12-02 12:00
    doc = as_json(report.build_report(str(logs), known_window(now=now)))
    brave_dec = doc["budgets"][3]
    # 27 h of 744; the line at 12-02 02:00Z is in, so 3 units: 3 * 744 / 27 = 82.67 -> 83.
    assert (brave_dec["used"], brave_dec["elapsed_days"], brave_dec["projected"]) == (3, 1.125, 83)
    gemini_dec = doc["budgets"][1]
    # LA: the month began 12-01 08:00Z, 19 h ago: 3 * 744 / 19 = 117.47 -> 117; today is LA 12-01.
    assert (gemini_dec["elapsed_days"], gemini_dec["projected"]) == (0.792, 117)
    assert [d["day"] for d in gemini_dec["daily"]] == ["2025-12-01"]


def test_without_timezone_the_files_are_utc_days_and_so_is_the_window(tmp_path: Path) -> None:
    """Same files, no `timezone`: the window ends at 12-03 00:00Z, later than in Tokyo."""
    logs = write_known_logs(tmp_path)
    doc = as_json(report.build_report(str(logs), known_window(ledger_timezone=None)))
    assert doc["timezone"] == "UTC"
    brave_dec = doc["budgets"][3]
    # 48 h of 744: 3 * 744 / 48 = 46.5 -> 47 (half rounds up).
    assert (brave_dec["elapsed_days"], brave_dec["projected"]) == (2.0, 47)
    assert doc["totals"] == TOTALS  # the days are the files' names either way


def test_month_of_days_reads_from_the_first_of_the_month(tmp_path: Path) -> None:
    """A one-day report on 12-01 still counts December's budget from its first hour."""
    logs = write_known_logs(tmp_path)
    window = known_window()
    window = report.Window(date(2025, 12, 2), date(2025, 12, 2), **{
        k: getattr(window, k) for k in ("monthly_limits", "reset_timezones", "prices_per_1000",
                                        "now")}, ledger_timezone=TOKYO)  # fmt: skip
    doc = as_json(report.build_report(str(logs), window))
    assert [(b["provider"], b["month"], b["used"]) for b in doc["budgets"]] == [
        ("gemini", "2025-12", 3),
        ("brave", "2025-12", 3),
        ("tavily", "2025-12", 0),
    ]
    assert doc["totals"]["searches"] == 3 and doc["lines"]["counted"] == 3


def test_half_hour_zone_splits_an_hour_between_two_days(tmp_path: Path) -> None:
    """Kolkata is UTC+5:30: its midnight falls at 18:30Z, inside one UTC hour."""
    logs = tmp_path / "logs"
    logs.mkdir()
    lines = [
        rec(stamp, "alpha", "gemini", source="agent_allocation")
        for stamp in ("2025-11-30T18:20:00.000Z", "2025-11-30T18:40:00.000Z",
                      "2025-11-30T18:50:00.000Z", "2025-11-30T23:59:00+05:30")
    ]  # fmt: skip
    (logs / "search-2025-11-30.jsonl").write_bytes(dumps(*lines))
    window = known_window(ledger_timezone=None,
                          reset_timezones={"gemini": "Asia/Kolkata", "brave": "UTC"})  # fmt: skip
    doc = as_json(report.build_report(str(logs), window))
    gemini = {b["month"]: b for b in doc["budgets"] if b["provider"] == "gemini"}
    # November: 18:20Z (23:50 there) and 23:59+05:30; December: 18:40Z and 18:50Z.
    assert gemini["2025-11"]["daily"][29] == {"day": "2025-11-30", "units": 2, "cumulative": 2}
    assert gemini["2025-12"]["daily"][0] == {"day": "2025-12-01", "units": 2, "cumulative": 2}


# --- text and HTML render the same numbers ---------------------------------------------------


def html_tables(page: str) -> dict[str, list[list[str]]]:
    from lxml import html

    tree = html.fromstring(page)
    out = {}
    for table in tree.iter("table"):
        rows = [[cell.text_content() for cell in tr.iter("th", "td")] for tr in table.iter("tr")]
        out[table.get("data-key")] = rows
    return out


def row_pattern(cells: list[str]) -> re.Pattern[str]:
    return re.compile(r"^\s*" + r"\s+".join(re.escape(c) for c in cells if c) + r"\s*$", re.M)


def test_text_and_html_print_the_same_cells_and_those_are_the_json_numbers(
    tmp_path: Path,
) -> None:
    logs = write_known_logs(tmp_path)
    doc = report.build_report(str(logs), known_window())
    tables = {t.key: t for t in report.report_tables(doc)}
    # The cells are the JSON's numbers, formatted.
    # Tavily billed nothing in the period: it gets no columns.
    assert tables["day-units"].rows[-1] == ["total", "8", "2", "3", "3", "7", "5", "1", "1", "15"]
    assert tables["day-searches"].rows[0] == ["2025-11-29", "5", "4", "1", "0", "2", "40.0%",
                                              "0", "0", "1", "0", "0"]  # fmt: skip
    assert tables["agent-searches"].rows[0][:7] == ["alpha", "7", "6", "1", "0", "1", "14.3%"]
    assert tables["day-latency"].rows[-1] == ["total", "250/950", "2/2", "300/900", "180/240",
                                              "350/350", "60/400"]  # fmt: skip
    assert tables["tiers"].rows[1] == ["gemini", "5", "2", "1", "2", "300", "900"]
    assert tables["failures"].rows == [["all_exhausted", "2", "12.5%"]]
    assert tables["budgets"].rows[1] == ["gemini", "2025-12", LA, "3", "5", "60.0%",
                                         "1.3 of 31", "-", "0.03"]  # fmt: skip
    assert tables["projections"].rows[1] == ["gemini", "2025-12", "72", "5", "1440.0%",
                                             "2025-12-03", "0.72"]  # fmt: skip
    assert tables["agent-failures"].rows == [["alpha", "all_exhausted", "1"],
                                             ["beta", "all_exhausted", "1"]]  # fmt: skip

    text = report.render_text(doc)
    page = report.render_html(doc)
    in_html = html_tables(page)
    assert set(in_html) == set(tables)
    for key, table in tables.items():
        header = [table.columns] if any(table.columns) else []
        assert in_html[key] == header + table.rows, key
        for row in header + table.rows:
            assert row_pattern(row).search(text), (key, row)
    assert all(len(line) <= 100 for line in text.splitlines())


def test_text_fits_100_columns_with_long_names_and_escapes_control_characters(
    tmp_path: Path,
) -> None:
    logs = tmp_path / "logs"
    logs.mkdir()
    long_agent = "a-very-long-agent-name-that-goes-on-and-on-" + "x" * 40
    (logs / "search-2025-11-29.jsonl").write_bytes(dumps(
        rec("2025-11-29T01:00:00Z", long_agent, None, success=False,
            code="\x1b[31mred<script>alert(1)</script>", latency=5,
            attempts=[att("web_fetch", "failed", 5, engine="\x07bell-engine", code="x")]),
    ))  # fmt: skip
    doc = report.build_report(str(logs), known_window())
    text = report.render_text(doc)
    assert max(len(line) for line in text.splitlines()) <= 100
    assert "\x1b" not in text and "\x07" not in text
    assert "?[31mred<script>" in text  # shown, made harmless for a terminal
    page = report.render_html(doc)
    assert "<script" not in page and "&lt;script&gt;" in page and "\x1b" not in page


# --- the page --------------------------------------------------------------------------------


def test_page_is_self_contained_with_one_chart_per_kind(tmp_path: Path) -> None:
    logs = write_known_logs(tmp_path)
    page = report.render_html(report.build_report(str(logs), known_window()))
    assert page.startswith("<!DOCTYPE html>")
    assert "default-src 'none'" in page  # the browser may fetch nothing at all
    assert not re.search(r"<script|<link|<img|<iframe|@import|url\(", page, re.I)
    # Every URL is the SVG namespace, which is a name, not a fetch.
    assert set(re.findall(r"https?://[^\s\"'<>]+", page)) == {"http://www.w3.org/2000/svg"}
    ids = re.findall(r'<svg class="chart" id="chart-([^"]+)"', page)
    assert ids == ["units-by-provider", "units-by-agent", "outcomes-by-tier",
                   "burn-gemini-2025-11", "burn-gemini-2025-12", "burn-brave-2025-11",
                   "burn-brave-2025-12", "burn-tavily-2025-11", "burn-tavily-2025-12"]  # fmt: skip
    # Bars carry their numbers: 12-01 gemini 3, brave 3; alpha's 2 units on 11-29.
    assert "<title>12-01 gemini: 3</title>" in page and "<title>12-01 brave: 3</title>" in page
    assert "<title>11-29 alpha: 2</title>" in page
    assert "<title>gemini failed: 2</title>" in page
    assert "<title>projected: 72</title>" in page and "<title>budget: 5</title>" in page


def test_svg_geometry_follows_the_numbers() -> None:
    svg = report.stacked_bars("k", "t", ["a", "b"], [("s", "#000000", [10, 5])], "units")
    heights = [float(h) for h in re.findall(r'<rect x="[^"]+" y="[^"]+" width="[^"]+" '
                                            r'height="([^"]+)" fill="#000000"><title>',
                                            svg)]  # fmt: skip
    assert len(heights) == 2 and heights[0] == pytest.approx(2 * heights[1], abs=0.11)
    assert [report.svg._scale(v) for v in (0, 3, 7, 10, 101, 150, 5250)] == [
        (4, 1), (3, 1), (8, 2), (10, 5), (150, 50), (150, 50), (6000, 2000)]  # fmt: skip


# --- robustness ------------------------------------------------------------------------------


def test_missing_days_unreadable_files_and_damaged_gzip_are_counted(tmp_path: Path) -> None:
    logs = tmp_path / "logs"
    logs.mkdir()
    good = rec("2025-11-29T01:00:00Z", "alpha", "gemini", source="agent_allocation")
    (logs / "search-2025-11-29.jsonl").write_bytes(dumps(good))
    # 11-30 missing; 12-01 is a directory (cannot be read); 12-02 a gzip cut short.
    (logs / "search-2025-12-01.jsonl").mkdir()
    data = gzip.compress(dumps(*[good] * 200))
    (logs / "search-2025-12-02.jsonl.gz").write_bytes(data[: len(data) // 2])
    doc = as_json(report.build_report(str(logs), known_window()))
    validate(doc)
    assert doc["files"] == {"matched": 3, "read": 3, "unreadable": 2, "ignored": 0,
                            "days_without_logs": 1, "missing_days": ["2025-11-30"]}  # fmt: skip
    assert [d["searches"] for d in doc["by_day"]][:3] == [1, 0, 0]
    empty = block(0, 0, 0, (0, None), gemini=units(), brave=units(), web=(0, 0, 0),
                  cache=(0, 0), failures={}, latency=(None, None), tiers={})  # fmt: skip
    assert doc["tiers"] == []  # no attempt anywhere: no tier columns
    assert doc["by_day"][1] == {"day": "2025-11-30", **empty, "tiers": {}, "units_by_agent": {}}


def test_a_fifo_named_like_a_log_is_unreadable_not_a_hang(env: Env) -> None:
    import os

    write_known_logs(env.state_dir)
    os.mkfifo(env.state_dir / "logs" / "search-2025-11-30.jsonl.7")
    proc = run_report(env, "--since", "2025-11-29", "--until", "2025-12-02", "--json")
    assert proc.returncode == 0, proc.stderr
    files = json.loads(proc.stdout)["files"]
    assert (files["matched"], files["read"], files["unreadable"]) == (9, 8, 1)


def test_no_log_directory_is_an_empty_report(tmp_path: Path) -> None:
    doc = as_json(report.build_report(str(tmp_path / "nothing"), known_window()))
    validate(doc)
    assert doc["files"]["matched"] == 0 and doc["files"]["days_without_logs"] == 4
    assert doc["totals"]["searches"] == 0 and doc["totals"]["fallback"]["rate"] is None
    assert [b["used"] for b in doc["budgets"]] == [0] * 6
    assert report.render_text(doc).count("(none)") >= 4  # empty tables say so
    report.render_html(doc)


def test_odd_lines_each_count_once_under_their_reason(tmp_path: Path) -> None:
    logs = tmp_path / "logs"
    logs.mkdir()
    ok = rec("2025-11-29T01:00:00Z", "alpha", "gemini", source="agent_allocation")
    lines = [
        b"",  # blank lines are not lines
        b"   ",
        b"null",  # foreign
        b"[1, 2]",  # foreign
        b'"text"',  # foreign
        b'{"hello": "world"}',  # foreign
        b'{"agent_id": "a", "success": "yes"}',  # malformed
        b'{"agent_id": "", "success": true}',  # malformed
        b'{"agent_id": "a", "success": true, "provider_used": 7}',  # malformed
        b'{"agent_id": "a", "success": true, "log_version": true}',  # unknown_version
        b'{"agent_id": "a", "success": true, "log_version": "2"}',  # unknown_version
        b"\xff\xfe{not utf-8",  # not_json
        b'{"agent_id": "a", "success": true,}',  # not_json (trailing comma)
        json.dumps(ok).encode(),  # counted: 1 unit
        # counted, odd fields tolerated: no unit (quota_source none), junk attempts ignored
        json.dumps({"agent_id": "b", "success": True, "provider_used": "gemini",
                    "quota_source": "none", "attempts": [1, {"outcome": "odd"}, None],
                    "latency_ms": "fast", "timestamp": 5, "units": -3}).encode(),
        # counted: units given by the line; unparseable time -> budget by the file's day
        json.dumps({"agent_id": "c", "success": True, "provider_used": "brave",
                    "quota_source": "weird", "attempts": "none", "timestamp": "yesterday",
                    "units": 2, "log_version": 2}).encode(),
    ]  # fmt: skip
    (logs / "search-2025-11-29.jsonl").write_bytes(b"\n".join(lines) + b"\n")
    doc = as_json(report.build_report(str(logs), known_window()))
    validate(doc)
    assert doc["lines"] == {
        "read": 14, "counted": 3, "not_counted": 0, "skipped": 11,
        "skipped_by_reason": {"truncated": 0, "oversized": 0, "not_json": 2, "foreign": 4,
                              "malformed": 3, "unknown_version": 2},
        "by_version": {"1": 2, "2": 1, "3": 0, "4": 0},
    }  # fmt: skip
    totals = doc["totals"]
    assert totals["units"]["gemini"] == units(alloc=1)
    assert totals["units"]["brave"] == {**units(), "total": 2, "unattributed": 2}
    assert totals["tiers"] == {} and totals["latency_ms"] == {"p50": None, "p95": None}
    brave_nov = doc["budgets"][2]
    assert brave_nov["daily"][28] == {"day": "2025-11-29", "units": 2, "cumulative": 2}
    text = report.render_text(doc)
    assert "b.other" in text  # the unattributed column appears only when it has units


def test_oversized_lines_are_skipped_without_being_held(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(report.reading, "MAX_LINE", 1000)
    monkeypatch.setattr(report.reading, "CHUNK", 64)
    logs = tmp_path / "logs"
    logs.mkdir()
    ok = json.dumps(rec("2025-11-29T01:00:00Z", "alpha", "brave", source="shared_pool")).encode()
    huge = b'{"agent_id": "x", "query": "' + b"z" * 5000 + b'"}'
    # A huge line in the middle, one at the end without a newline.
    (logs / "search-2025-11-29.jsonl").write_bytes(ok + b"\n" + huge + b"\n" + ok + b"\n" + huge)
    doc = as_json(report.build_report(str(logs), known_window()))
    assert doc["lines"]["skipped_by_reason"]["oversized"] == 2
    assert (doc["lines"]["read"], doc["lines"]["counted"]) == (2, 2)


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    lines=st.lists(st.binary(max_size=40).map(lambda b: b.replace(b"\n", b"")), max_size=12),
    chunk=st.integers(1, 50),
    tail=st.booleans(),
)
def test_streamed_lines_are_the_lines_whatever_the_chunking(
    lines: list[bytes], chunk: int, tail: bool, tmp_path_factory: Any
) -> None:
    path = tmp_path_factory.mktemp("s") / "f.jsonl"
    data = b"\n".join(lines) + (b"" if tail or not lines else b"\n")
    path.write_bytes(data)
    old = report.reading.CHUNK
    report.reading.CHUNK = chunk
    try:
        skipped = dict.fromkeys(report.SKIP_REASONS, 0)
        got = [(line, is_tail) for batch, is_tail in report.read_batches(str(path), skipped)
               for line in batch]  # fmt: skip
    finally:
        report.reading.CHUNK = old
    expected = data.split(b"\n")
    last = expected.pop()
    want = [(line, False) for line in expected] + ([(last, True)] if last else [])
    assert got == want


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    junk=st.lists(
        st.one_of(
            st.binary(max_size=60),
            st.recursive(
                st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False)
                | st.text(max_size=8),
                lambda inner: st.lists(inner, max_size=3)
                | st.dictionaries(
                    st.sampled_from(["agent_id", "success", "provider_used", "attempts",
                                     "units", "log_version", "timestamp", "cached", "outcome",
                                     "provider", "engine", "latency_ms", "quota_source",
                                     "error_code", "units_saved", "retries", "mode"]),
                    inner, max_size=6),
                max_leaves=12,
            ).map(lambda v: json.dumps(v).encode()),
        ),
        max_size=15,
    )
)  # fmt: skip
def test_any_bytes_never_crash_and_every_line_is_accounted_for(
    junk: list[bytes], tmp_path_factory: Any
) -> None:
    logs = tmp_path_factory.mktemp("fuzz") / "logs"
    logs.mkdir()
    (logs / "search-2025-11-30.jsonl").write_bytes(b"\n".join(junk))
    doc = as_json(report.build_report(str(logs), known_window()))
    validate(doc)
    lines = doc["lines"]
    assert lines["read"] == lines["counted"] + lines["not_counted"] + lines["skipped"]
    assert lines["read"] == sum(1 for j in b"\n".join(junk).split(b"\n") if j.strip())
    report.render_text(doc)
    report.render_html(doc)


def test_ten_thousand_files(tmp_path: Path) -> None:
    """27 years of daily logs, one line each: every day counted, the window reads only its own."""
    logs = tmp_path / "logs"
    logs.mkdir()
    first = date(1999, 1, 1)
    line = json.dumps(rec("1999-01-01T00:00:00Z", "alpha", "brave", source="shared_pool"))
    for i in range(10_000):
        (logs / f"search-{(first + timedelta(days=i)).isoformat()}.jsonl").write_text(line + "\n")
    last = first + timedelta(days=9_999)
    week = report.Window(last - timedelta(days=6), last, now=NOW)
    doc = as_json(report.build_report(str(logs), week))
    assert doc["files"]["matched"] == 10_000
    # The week (05-12 .. 05-18) and its month's earlier days, from two days of slack before the
    # first: 04-29 .. 05-18.
    assert doc["files"]["read"] == 20 and doc["lines"]["counted"] == 7
    everything = report.Window(first, last, now=NOW)
    doc = as_json(report.build_report(str(logs), everything))
    assert doc["files"]["read"] == 10_000 and doc["lines"]["counted"] == 10_000
    assert doc["lines"]["skipped"] == 0 and doc["files"]["days_without_logs"] == 0
    assert len(doc["budgets"]) == 3 * 329  # 1999-01 .. 2026-05, per provider
    assert sum(b["used"] for b in doc["budgets"] if b["provider"] == "brave") == 10_000


# --- the command line ------------------------------------------------------------------------


def run_report(env: Env, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "smart_search", "report", *args],
        capture_output=True,
        env=env.environ,
        cwd=str(env.root),
        timeout=60,
        text=True,
    )


def test_cli_json_is_the_library_report(env: Env) -> None:
    env.write_config(CONFIG)
    write_known_logs(env.state_dir)
    proc = run_report(env, "--since", "2025-11-29", "--until", "2025-12-02", "--json")
    assert proc.returncode == 0, proc.stderr
    assert proc.stderr == ""
    doc = json.loads(proc.stdout)
    validate(doc)
    doc.pop("generated_at")
    assert doc["timezone"] == TOKYO  # from the config's `timezone`
    assert doc["totals"] == TOTALS and doc["by_day"] == BY_DAY and doc["by_agent"] == BY_AGENT
    assert doc["lines"] == LINES and doc["files"] == FILES
    # Gemini's and Brave's months as the library's; Tavily's with its default limit, unused.
    assert doc["budgets"][:4] == BUDGETS[:4]
    assert [(b["provider"], b["limit"], b["used"]) for b in doc["budgets"][4:]] == [
        ("tavily", 1000, 0), ("tavily", 1000, 0)]


def test_report_of_real_searches(env: Env) -> None:
    """Lines written by real smart_search calls (loopback fakes) are counted as they happened."""
    from tests.fakes import FakeServer, Reply, fixture_bytes

    with FakeServer() as fake:
        env.write_config({
            "endpoints": {n: fake.url for n in ("gemini", "brave", "google", "bing", "duckduckgo")},
            "web_fetch_min_interval_ms": 0,
            "providers": {"brave": {"daily_limit": 3}},
            "agent_allocations": {"cron": {"gemini": 0, "brave": 2}},
            "cache": {"enabled": False},  # four paid searches, not one and three hits
        })  # fmt: skip
        env.environ["BRAVE_API_KEY"] = "SENTINEL-BRAVE-KEY-report"
        fake.route(
            "/res/v1/web/search",
            Reply(200, fixture_bytes("brave-ok.json"), {"content-type": "application/json"}),
        )
        page = (
            Path(__file__).parent
            / "fixtures"
            / "serp"
            / "duckduckgo"
            / "html-results-caffeine.html"
        ).read_bytes()
        fake.route("/html/", Reply(200, page, {"content-type": "text/html; charset=utf-8"}))
        for _ in range(4):  # allocation, allocation, direct headroom, then DuckDuckGo
            result = env.call("smart_search", {"query": "nasa news", "agent_id": "cron"})
            assert result["error"] is None
    proc = run_report(env, "--days", "2", "--json")  # today, and yesterday should midnight pass
    assert proc.returncode == 0, proc.stderr
    doc = json.loads(proc.stdout)
    validate(doc)
    totals = doc["totals"]
    assert (totals["searches"], totals["succeeded"], totals["fallback"]["count"]) == (4, 4, 1)
    assert totals["units"]["brave"] == units(alloc=2, direct=1)
    assert totals["units"]["gemini"] == units()
    assert totals["web_answers"] == {"google": 0, "bing": 0, "duckduckgo": 1}
    tiers = totals["tiers"]
    assert [tiers["brave"][k] for k in ("success", "failed", "skipped")] == [3, 0, 1]
    assert [tiers["gemini"][k] for k in ("success", "failed", "skipped")] == [0, 0, 1]
    assert [tiers["duckduckgo"][k] for k in ("success", "failed", "skipped")] == [1, 0, 0]
    assert doc["lines"]["skipped"] == 0 and doc["lines"]["counted"] == 4
    used = {
        p: sum(b["used"] for b in doc["budgets"] if b["provider"] == p) for p in ("gemini", "brave")
    }
    assert used == {"gemini": 0, "brave": 3}


def test_cli_text_agent_and_html(env: Env) -> None:
    env.write_config(CONFIG)
    write_known_logs(env.state_dir)
    page = env.root / "out" / "report.html"
    page.parent.mkdir()
    proc = run_report(env, "--since", "2025-11-29", "--until", "2025-12-02", "--agent", "beta",
                      "--html", str(page))  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    text = proc.stdout
    assert text.startswith("smart-search report  2025-11-29 to 2025-12-02  (agent: beta)")
    assert row_pattern(["beta", "5", "4", "1", "0", "1", "20.0%", "0", "0", "0", "0", "0"]).search(
        text
    )
    assert all(len(line) <= 100 for line in text.splitlines())
    tables = html_tables(page.read_text())
    assert tables["agent-searches"][1] == ["beta", "5", "4", "1", "0", "1", "20.0%", "0", "0",
                                           "0", "0", "0"]  # fmt: skip
    assert list(page.parent.iterdir()) == [page]  # no temp file left behind


def test_cli_default_window_is_the_last_seven_ledger_days(env: Env) -> None:
    env.write_config({"timezone": TOKYO})
    from smart_search.budget.ledger import today

    day = date.fromisoformat(today(env.settings()))
    logs = env.state_dir / "logs"
    logs.mkdir(parents=True)
    for back in (0, 6, 7):
        name = f"search-{(day - timedelta(days=back)).isoformat()}.jsonl"
        (logs / name).write_bytes(dumps(rec("2025-01-01T00:00:00Z", f"a{back}", None)))
    proc = run_report(env, "--json")
    assert proc.returncode == 0, proc.stderr
    doc = json.loads(proc.stdout)
    assert (doc["since"], doc["until"]) == ((day - timedelta(days=6)).isoformat(), day.isoformat())
    assert [a["agent_id"] for a in doc["by_agent"]] == ["a0", "a6"]
    proc = run_report(env, "--days", "8", "--json")
    assert [a["agent_id"] for a in json.loads(proc.stdout)["by_agent"]] == ["a0", "a6", "a7"]


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--days", "0"], "--days: must be a whole number from 1 to 100000"),
        (["--days", "x"], "--days: must be a whole number from 1 to 100000"),
        (["--since", "2025-02-30"], "--since: '2025-02-30' is not a real date"),
        (["--until", "yesterday"], "--until: 'yesterday' is not a date like 2026-11-30"),
        (["--since", "2025-12-02", "--until", "2025-12-01"],
         "--since 2025-12-02 is after --until 2025-12-01"),
        (["--days", "3", "--since", "2025-12-01"],
         "--days cannot be combined with --since or --until"),
        (["--agent", "Bad_Agent"], "--agent: must contain only lowercase letters"),
        (["--bogus"], "unrecognized arguments: --bogus"),
        (["--since", "0001-01-01", "--until", "0001-01-02"], "between the years 2 and 9998"),
        (["--until", "0001-01-03"], "smart-search report: error: dates must fall between"),
    ],
)  # fmt: skip
def test_cli_bad_command_lines_exit_2_with_usage(env: Env, args: list[str], message: str) -> None:
    proc = run_report(env, *args)
    assert proc.returncode == 2
    assert proc.stdout == ""
    assert proc.stderr.startswith("usage: smart-search report")
    assert message in proc.stderr


def test_cli_into_a_closed_pipe_says_nothing(env: Env) -> None:
    write_known_logs(env.state_dir)
    proc = subprocess.Popen(
        [sys.executable, "-m", "smart_search", "report", "--since", "2025-11-01", "--until",
         "2025-12-31"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env.environ, cwd=str(env.root),
    )  # fmt: skip
    assert proc.stdout is not None and proc.stderr is not None
    proc.stdout.close()  # `| head -0`: the reader is gone before the report is written
    assert proc.stderr.read() == b""
    assert proc.wait(timeout=60) == 0


def test_cli_help_is_usage_on_stdout(env: Env) -> None:
    proc = run_report(env, "--help")
    assert proc.returncode == 0 and "--html FILE" in proc.stdout and proc.stderr == ""


def test_cli_unusable_state_dir_config_or_page_exits_1(env: Env, tmp_path: Path) -> None:
    proc = run_report(env)  # the state directory was never created
    assert proc.returncode == 1 and proc.stdout == ""
    assert proc.stderr == (
        f"smart-search report: state directory {env.state_dir} does not exist "
        "(set SMART_SEARCH_STATE_DIR or --state-dir)\n"
    )
    env.state_dir.write_text("a file")
    proc = run_report(env)
    assert proc.returncode == 1 and "is not a directory" in proc.stderr
    # --state-dir points elsewhere and wins.
    other = tmp_path / "other"
    write_known_logs(other)
    env.write_config(CONFIG)
    proc = run_report(env, "--state-dir", str(other), "--since", "2025-11-29", "--until",
                      "2025-12-02", "--json")  # fmt: skip
    assert proc.returncode == 0 and json.loads(proc.stdout)["totals"] == TOTALS
    proc = run_report(env, "--state-dir", str(other), "--html", str(tmp_path / "no" / "x.html"))
    assert proc.returncode == 1 and proc.stdout == ""
    assert proc.stderr.startswith(f"smart-search report: cannot write {tmp_path / 'no' / 'x.html'}")
    env.config_path.write_text("{ not json at all")
    proc = run_report(env, "--state-dir", str(other))
    assert proc.returncode == 1
    assert proc.stderr.startswith("smart-search report: openclaw.json is not valid JSON5")


def test_main_in_process_returns_codes(capsys: pytest.CaptureFixture[str]) -> None:
    assert report.main(["--days", "-1"]) == 2
    assert "usage: smart-search report" in capsys.readouterr().err
    with pytest.raises(ValueError, match="is after its last day"):
        report.Window(date(2025, 1, 2), date(2025, 1, 1))


# --- the line schema: one definition shared by the writer and the report ----------------------


def line_schema() -> dict[str, Any]:
    return json.loads((SCHEMAS / "search-log.json").read_text())


def test_the_report_reads_every_log_version_the_schema_declares() -> None:
    from smart_search.logs.line import log_version

    written = line_schema()["properties"]["log_version"]["const"]
    assert log_version() == written >= 4  # 4 added `mode`
    assert report.LOG_VERSIONS == tuple(range(1, written + 1))


def test_the_known_lines_of_todays_version_are_what_the_schema_allows(tmp_path: Path) -> None:
    from jsonschema import Draft202012Validator

    validator = Draft202012Validator(line_schema(), registry=_registry())
    logs = write_known_logs(tmp_path)
    current = [
        rec
        for path in sorted(logs.glob("search-*.jsonl"))
        for raw in path.read_bytes().splitlines()
        if b'"log_version": 4' in raw and type(rec := json.loads(raw)) is dict
    ]
    assert [r["mode"] for r in current] == ["deep", "first", "first"]  # L6, L7, L12
    for rec in current:
        errors = list(validator.iter_errors(rec))
        assert not errors, errors[0]


def fields_read(source: str) -> set[str]:
    """The string keys a module reads: `x.get("k")`, `get("k")`, `x["k"]`, `"k" in x`."""
    import ast

    found = set()
    for node in ast.walk(ast.parse(source)):
        key = None
        if isinstance(node, ast.Call) and node.args and (
            (isinstance(node.func, ast.Attribute) and node.func.attr == "get")
            or (isinstance(node.func, ast.Name) and node.func.id == "get")
        ):
            key = node.args[0]
        elif isinstance(node, ast.Subscript) and isinstance(node.ctx, ast.Load):
            key = node.slice
        elif isinstance(node, ast.Compare) and isinstance(node.ops[0], ast.In | ast.NotIn):
            key = node.left
        if isinstance(key, ast.Constant) and isinstance(key.value, str):
            found.add(key.value)
    return found


def test_every_field_the_report_reads_is_declared_by_the_line_schema() -> None:
    """RULINGS 6: a report column fed by a field no writer writes is a defect. The module that
    reads lines (report/aggregate.py) reads only what schemas/search-log.json declares (attempts:
    their schema)."""
    import inspect

    schema = line_schema()
    attempt = json.loads((SCHEMAS / "smart_search.result.json").read_text())["$defs"]["attempt"]
    declared = set(schema["properties"]) | set(attempt["properties"])
    read = fields_read(inspect.getsource(report.aggregate))
    assert {"mode", "agent_id", "attempts", "units_saved", "outcome"} <= read  # it sees reads
    assert read <= declared, sorted(read - declared)
    # ... and the check itself catches a field the schema lacks.
    assert fields_read('rec.get("modus"); att["unit"]; "x" in rec') == {"modus", "unit", "x"}


def test_a_real_deep_call_counts_in_the_deep_column(env: Env) -> None:
    """Two real CLI calls, one deep: the lines say their mode and the report counts one deep."""
    from tests.fakes import FakeServer
    from tests.test_deep import AGENT, QUERY, answer_all, configure

    with FakeServer() as fake:
        configure(env, fake, deep_max_units=4)
        answer_all(fake)
        for mode in ("deep", "first"):
            request = {"tool": "smart_search",
                       "args": {"query": QUERY, "agent_id": AGENT, "mode": mode}}  # fmt: skip
            proc = env.run_cli(json.dumps(request))
            assert proc.returncode == 0 and json.loads(proc.stdout)["error"] is None, proc.stderr
    lines = [json.loads(raw) for path in sorted((env.state_dir / "logs").glob("search-*.jsonl"))
             for raw in path.read_text().splitlines()]  # fmt: skip
    assert [line["mode"] for line in lines] == ["deep", "first"]
    proc = run_report(env, "--days", "2", "--json")
    assert proc.returncode == 0, proc.stderr
    doc = json.loads(proc.stdout)
    validate(doc)
    assert (doc["totals"]["searches"], doc["totals"]["deep"]) == (2, 1)
    assert [(a["agent_id"], a["deep"]) for a in doc["by_agent"]] == [(AGENT, 1)]
    text = run_report(env, "--days", "2").stdout
    assert re.search(rf"^{AGENT}\s+2\s+2\s+0\s+1\s", text, re.M)  # searches, ok, failed, deep
