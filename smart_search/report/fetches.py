"""The report's fetch counts (issue 21): `logs/fetch-YYYY-MM-DD.jsonl`, the sibling of the search
log, read for the window's days; per agent, how many pages were fetched from the network, served
from the cache or failed, and the bytes read. Lines are read against `schemas/fetch-log.json`'s
fields only (a line that does not parse or lacks them is skipped and counted)."""

from __future__ import annotations

from typing import Any

import orjson

from smart_search.report.reading import read_batches
from smart_search.report.window import Window

OUTCOMES = ("fetched", "cached", "failed")


def count_fetches(fetch_logs: dict[str, str], window: Window) -> dict[str, Any]:
    """{"total", "skipped", "agents": {id: {"fetched", "cached", "failed", "bytes"}}} for the
    window's days (and its agent filter), from the fetch logs by day (`list_log_files`)."""
    since, until = window.since.isoformat(), window.until.isoformat()
    agents: dict[str, dict[str, int]] = {}
    skipped = {"oversized": 0, "malformed": 0}
    for day in sorted(fetch_logs):
        if not since <= day <= until:
            continue
        path = fetch_logs[day]
        try:
            for lines, _ in read_batches(path, skipped):
                for raw in lines:
                    _count(raw, window.agent, agents, skipped)
        except OSError:
            continue
    total = sum(a["fetched"] + a["cached"] + a["failed"] for a in agents.values())
    return {
        "total": total,
        "skipped": skipped["oversized"] + skipped["malformed"],
        "agents": dict(sorted(agents.items())),
    }


def _count(
    raw: bytes, agent: str | None, agents: dict[str, dict[str, int]], skipped: dict[str, int]
) -> None:
    if not raw.strip():
        return
    try:
        line = orjson.loads(raw)
        who, outcome, size = line["agent_id"], line["outcome"], line["bytes"]
    except (orjson.JSONDecodeError, KeyError, TypeError):
        skipped["malformed"] += 1
        return
    if not isinstance(who, str) or outcome not in OUTCOMES or not isinstance(size, int):
        skipped["malformed"] += 1
        return
    if agent is not None and who != agent:
        return
    row = agents.setdefault(who, {"fetched": 0, "cached": 0, "failed": 0, "bytes": 0})
    row[outcome] += 1
    row["bytes"] += max(size, 0)
