"""The fetch log line (issue 21): built here and nowhere else, to `schemas/fetch-log.json`, and
appended to `logs/fetch-YYYY-MM-DD.jsonl` (`logs.append_log`: one write, scrubbed, never
raises). A sibling file of the search log rather than a second shape inside it: the search log's
readers (the report) keep reading one shape, and the report reads this file on its own."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from smart_search.contract import load_schema
from smart_search.logs.line import with_client
from smart_search.text.stamps import utc_stamp

if TYPE_CHECKING:
    from smart_search.host.config import Settings

SCHEMA = "fetch-log.json"


def build_fetch_line(
    *,
    agent_id: str,
    url: str,
    result: dict[str, Any],
    bytes_read: int,
    latency_ms: float,
    http_status: int | None,
    now: float | None = None,
    client: str | None = None,
) -> dict[str, Any]:
    """The line for one smart_fetch `result` (its success or error shape); `client` as in the
    search log."""
    failed = result.get("error") is not None
    outcome = "failed" if failed else ("cached" if result.get("cached") else "fetched")
    line = {
        "timestamp": utc_stamp(now, millis=True),
        "tool": "smart_fetch",
        "agent_id": agent_id,
        "url": url,
        "final_url": None if failed else result.get("final_url"),
        "outcome": outcome,
        "http_status": http_status,
        "bytes": bytes_read,
        "chars": len(result.get("text") or ""),
        "truncated": bool(result.get("truncated")),
        "error": result.get("error"),
        "error_code": result.get("error_code"),
        "latency_ms": latency_ms,
        "log_version": load_schema(SCHEMA)["properties"]["log_version"]["const"],
    }
    return with_client(line, client)


def log_fetch(settings: Settings, day: str, line: dict[str, Any]) -> None:
    from smart_search.logs.files import fetch_log_name, log_for

    log_for(settings, fetch_log_name(day), day, line)
