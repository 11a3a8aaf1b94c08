"""The three tools as plain library calls: validated arguments and `Settings` in, result dict out.

The runner (CLI) and a future MCP server are thin shells over `call_tool`.
"""

from __future__ import annotations

import time
from typing import Any

from .config import Settings
from .errors import SearchError, UnknownAgent, unknown_agent
from .ledger import Ledger


def error_result(err: SearchError) -> dict[str, Any]:
    return {"error": err.message, "error_code": err.error_code}


def search_error_result(err: SearchError, queries_remaining: int | None = None) -> dict[str, Any]:
    """smart_search's full return shape for a failure: every spec key, null when unused."""
    return {
        "results": None,
        "provider_used": None,
        "queries_remaining": queries_remaining,
        "quota_source": "none",
        "fallback_used": False,
        "warning": None,
        "web_fetch_engine": None,
        "error": err.message,
        "error_code": err.error_code,
        "attempts": [],
        "citations": [],
        "truncated": False,
    }


def smart_search(
    args: dict[str, Any], settings: Settings, *, backends: Any = None
) -> dict[str, Any]:
    from . import output, planner, quota
    from .tiers import RealBackends, run_tiers

    started = time.monotonic()
    deadline = started + settings.total_timeout_ms / 1000.0
    agent_id: str = args["agent_id"]
    force: str | None = args.get("force_provider")
    query = planner.fold_whitespace(args["query"])
    if (
        settings.strict_agents
        and agent_id != planner.GENERAL_AGENT
        and not settings.is_configured_agent(agent_id)
    ):
        # Validation: not logged as a search, no state touched.
        return search_error_result(UnknownAgent(unknown_agent(agent_id)))
    routed = planner.routed_provider(query, settings, force)
    ledger = Ledger(settings)
    day = ledger.today
    try:
        ledger.register(agent_id)
        outcome = run_tiers(
            planner.plan(agent_id, query, settings, routed),
            agent_id=agent_id,
            query=query,
            settings=settings,
            ledger=ledger,
            backends=backends or RealBackends(),
            deadline=deadline,
        )
        snapshot = ledger.snapshot()
    except SearchError as err:
        result = search_error_result(err)
        _log(settings, day, agent_id, query, force, result, started)
        return result

    warnings = outcome.warnings
    overcommit = quota.overcommit_warning(snapshot, ledger.ceilings)
    if overcommit:
        warnings.append(overcommit)
    remaining = outcome.queries_remaining
    if remaining is None:
        remaining = quota.allocation_remaining(snapshot, ledger.ceilings, agent_id, routed)
    result: dict[str, Any] = {
        "results": None,
        "provider_used": outcome.provider_used,
        "queries_remaining": remaining,
        "quota_source": outcome.quota_source,
        "fallback_used": outcome.provider_used is not None and outcome.provider_used != routed,
        "warning": " ".join(warnings) if warnings else None,
        "web_fetch_engine": outcome.engine,
        "error": None,
        "error_code": None,
        "attempts": outcome.attempts,
        "citations": [],
        "truncated": False,
    }
    if outcome.error is not None:
        result["error"] = outcome.error.message
        result["error_code"] = outcome.error.error_code
        result["warning"] = overcommit
    else:
        # Already sanitized, tier by tier (tiers._usable); only the size cap is left.
        result["results"], result["truncated"] = output.cap_results(
            outcome.results, settings.max_result_chars
        )
        result["citations"] = outcome.citations
    _log(settings, day, agent_id, query, force, result, started)
    return result


def _log(
    settings: Settings,
    day: str,
    agent_id: str,
    query: str,
    force: str | None,
    result: dict[str, Any],
    started: float,
) -> None:
    from .logs import append_search_log
    from .output import summary

    record = {
        "timestamp": time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime())
        + f".{int(time.time() * 1000) % 1000:03d}Z",
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
        "latency_ms": round((time.monotonic() - started) * 1000, 1),
    }
    append_search_log(settings.state_dir, day, record, settings.log_retention_days)


def search_quota_status(args: dict[str, Any], settings: Settings) -> dict[str, Any]:
    ledger = Ledger(settings)
    agent_id = args.get("agent_id")
    status = ledger.agent_status(agent_id) if agent_id else ledger.full_status()
    status["error"] = None
    status["error_code"] = None
    return status


def search_mark_agent_complete(args: dict[str, Any], settings: Settings) -> dict[str, Any]:
    agent_id = args["agent_id"]
    released = Ledger(settings).complete(agent_id)
    return {
        "agent_id": agent_id,
        "released": released,
        "message": completion_message(released),
        "error": None,
        "error_code": None,
    }


def completion_message(released: dict[str, int]) -> str:
    """Spec §3: "Agent marked complete. 7 Gemini calls released to shared pool." """
    parts = [
        f"{n} {label} call{'s' if n != 1 else ''}"
        for n, label in ((released["gemini"], "Gemini"), (released["brave"], "Brave"))
        if n
    ]
    if not parts:
        return "Agent marked complete. No unused calls to release."
    return f"Agent marked complete. {' and '.join(parts)} released to shared pool."


def call_tool(
    tool: str, args: dict[str, Any], settings: Settings, **options: Any
) -> dict[str, Any]:
    """Run one validated tool call; SearchError becomes the tool's error object."""
    try:
        if settings.legacy_state_dir:
            from .openclaw import merge_legacy_ledger

            merge_legacy_ledger(settings)
        if tool == "smart_search":
            result = smart_search(args, settings, **options)
        elif tool == "search_quota_status":
            result = search_quota_status(args, settings)
        else:
            result = search_mark_agent_complete(args, settings)
    except SearchError as err:
        result = search_error_result(err) if tool == "smart_search" else error_result(err)
    return with_config_warnings(result, settings)


def with_config_warnings(result: dict[str, Any], settings: Settings) -> dict[str, Any]:
    """Append config warnings (rejected layouts, unknown keys) to the result's `warning`."""
    if settings.warnings:
        result["warning"] = " ".join(filter(None, (result.get("warning"), *settings.warnings)))
    return result
