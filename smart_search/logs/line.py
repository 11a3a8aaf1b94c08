"""The search log line (RULINGS 6): built here and nowhere else, to `schemas/search-log.json`.

`build_line` shapes one smart_search result into the line; `log_search` appends it
(`logs.append_log`: one write, scrubbed, never raises). The schema is the line's one
definition: the version written here is its `log_version`, and the report (`report/aggregate.py`)
reads the versions it accepts and may read only the fields it declares (a test holds it to that).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from smart_search.contract import load_schema
from smart_search.text.output import summary
from smart_search.text.stamps import utc_stamp

if TYPE_CHECKING:
    from smart_search.host.config import Settings

SCHEMA = "search-log.json"


def log_version() -> int:
    """The version this release writes: the schema's `log_version`."""
    version: int = load_schema(SCHEMA)["properties"]["log_version"]["const"]
    return version


def build_line(
    result: dict[str, Any],
    *,
    agent_id: str,
    query: str,
    force: str | None,
    mode: str,
    latency_ms: float,
    units_saved: int = 0,
    now: float | None = None,
    state_restored: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """The line for one call's `result` (smart_search's full result shape); `mode` is "first"
    or "deep" (the schema's enum)."""
    line = {
        "timestamp": utc_stamp(now, millis=True),
        "agent_id": agent_id,
        "query": query,
        "provider_used": result["provider_used"],
        "force_provider": force,
        "quota_source": result["quota_source"],
        "queries_remaining": result["queries_remaining"],
        "success": result["error"] is None,
        "response_summary": summary(result["results"]),
        "error": result["error"],
        "fallback_used": result["fallback_used"],
        "web_fetch_engine": result["web_fetch_engine"],
        "error_code": result["error_code"],
        "attempts": result["attempts"],
        "latency_ms": latency_ms,
        "log_version": log_version(),
        "units": sum(a["units"] for a in result["attempts"]),
        "cached": result["cached"],
        "units_saved": units_saved,
        "mode": mode,
    }
    if state_restored is not None:
        # RULINGS 8: the shared ledger was restored (or this host's witness folded in) during
        # the call: when, by which host, why, and the units no witness could account for.
        line["state_restored"] = state_restored
    return line


def log_search(settings: Settings, day: str, line: dict[str, Any]) -> None:
    """Append one finished call's `line` (`build_line`) to the log of the ledger's `day`."""
    from smart_search.logs.files import log_for, search_log_name

    log_for(settings, search_log_name(day), day, line)
