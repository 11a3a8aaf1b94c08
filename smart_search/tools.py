"""The three tools as plain library calls: validated arguments and `Settings` in, result dict out.

The runner (CLI) and a future MCP server are thin shells over `call_tool`.
"""

from __future__ import annotations

import time
from typing import Any

from .config import Settings
from .errors import SearchError, UnknownAgent, unknown_agent
from .ledger import Ledger


def failure_result(
    tool: str | None, err: SearchError, queries_remaining: int | None = None
) -> dict[str, Any]:
    """The one place a failure becomes a result: smart_search's full return shape (every spec
    key, null when unused), or `{error, error_code}` for the other tools and unknown ones."""
    if tool != "smart_search":
        return {"error": err.message, "error_code": err.error_code}
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
        "cached": False,
        "cached_at": None,
    }


def smart_search(
    args: dict[str, Any], settings: Settings, *, backends: Any = None
) -> dict[str, Any]:
    from . import cache, output, planner, quota
    from .breaker import Breaker
    from .logline import log_search
    from .pacing import wait_for_slot
    from .store import open_store
    from .tiers import RealBackends, Run, fit_api_queries, run_tiers

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
        return failure_result("smart_search", UnknownAgent(unknown_agent(agent_id)))
    routed = planner.routed_provider(query, settings, force)
    store = open_store(settings)
    ledger = Ledger(settings, store)
    day = ledger.today
    api_query, api_warnings = fit_api_queries(query, settings)
    from .filters import normalise

    filters = normalise(args)
    # Deep mode asks every leg afresh (its merged answer is not one tier's); first mode looks up
    # each tier's key, the filters part of it.
    flight = (
        None
        if args.get("mode") == "deep"
        else cache.open_flight(settings, store, query, day, fresh=bool(args.get("fresh")))
    )
    run = Run(
        agent_id=agent_id,
        query=query,
        settings=settings,
        ledger=ledger,
        backends=backends or RealBackends(),
        deadline=deadline,
        breaker=Breaker(settings, store=store),
        pace=lambda s, engine, until: wait_for_slot(s, engine, until, store=store),
        api_query=api_query,
        api_warnings=api_warnings,
        cache=flight,
        filters=filters,
    )
    deep = args.get("mode") == "deep"
    answer: str | None = None
    try:
        if deep:
            from .deep import run_deep

            outcome, answer = run_deep(run, routed)
        else:
            outcome = run_tiers(planner.plan(agent_id, query, settings, routed), run)
        snapshot = _snapshot(ledger, settings)
    except SearchError as err:
        result = failure_result("smart_search", err)
        log_search(settings, day, result, agent_id=agent_id, query=query, force=force,
                   mode="deep" if deep else "first", started=started)  # fmt: skip
        return result

    overcommit = None if snapshot is None else quota.overcommit_warning(snapshot, ledger.ceilings)
    remaining = outcome.queries_remaining
    if remaining is None and snapshot is not None:
        remaining = quota.allocation_remaining(snapshot, ledger.ceilings, agent_id, routed)
    if outcome.error is not None:
        result = failure_result("smart_search", outcome.error, remaining)
        result["warning"] = overcommit
    else:
        found, unsupported = outcome.results, None
        if not deep:
            from .filters import first_mode

            source = outcome.engine or outcome.provider_used or routed
            found, unsupported = first_mode(found, source, filters)
        warnings = [w for w in (outcome.warning, unsupported, overcommit) if w]
        # Already sanitized, tier by tier (tiers._usable); keys are scrubbed BEFORE the size cap,
        # so that a cut can never leave part of a key behind.
        from .scrub import scrub, settings_secrets

        secrets = settings_secrets(settings)
        capped, truncated = output.cap_results(
            scrub(found, secrets), settings.max_result_chars
        )
        result = {
            "results": capped,
            "provider_used": outcome.provider_used,
            "queries_remaining": remaining,
            "quota_source": outcome.quota_source,
            "fallback_used": outcome.provider_used != routed,
            "warning": " ".join(warnings) if warnings else None,
            "web_fetch_engine": outcome.engine,
            "error": None,
            "error_code": None,
            "attempts": [],
            "citations": scrub(outcome.citations, secrets),
            "truncated": truncated,
            "cached": False,
            "cached_at": None,
        }
        if deep:
            result["answer"] = scrub(answer, secrets)
    if deep:
        result.setdefault("answer", None)
    if flight is not None and flight.hit and outcome.error is None:
        result["cached"], result["cached_at"] = True, flight.cached_at
    result["attempts"] = [a.as_dict() for a in outcome.attempts]
    saved = flight.units_saved if flight is not None and result["cached"] else 0
    log_search(settings, day, result, agent_id=agent_id, query=query, force=force,
               mode="deep" if deep else "first", started=started, units_saved=saved)  # fmt: skip
    return result


def _snapshot(ledger: Ledger, settings: Settings) -> dict[str, Any] | None:
    """The ledger after the walk; None when the shared store is away and the operator chose
    `on_unavailable: "web_only"` (a web answer is still returned, without quota figures)."""
    from .errors import StateUnavailable

    try:
        return ledger.snapshot()
    except StateUnavailable:
        if settings.state_backend.get("on_unavailable") != "web_only":
            raise
        return None


def search_quota_status(args: dict[str, Any], settings: Settings) -> dict[str, Any]:
    ledger = Ledger(settings)
    agent_id = args.get("agent_id")
    status = ledger.agent_status(agent_id) if agent_id else ledger.full_status()
    if not agent_id:
        from . import cache

        status["cache"] = cache.status(settings, ledger.store, ledger.today)
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
    """Run one validated tool call; SearchError becomes the tool's error object. No configured API
    key appears in any string of what it returns."""
    from .scrub import scrub, settings_secrets

    try:
        if settings.legacy_state_dir:
            from .legacy_ledger import merge_legacy_ledger

            merge_legacy_ledger(settings)
        if tool == "smart_search":
            result = smart_search(args, settings, **options)
        elif tool == "search_quota_status":
            result = search_quota_status(args, settings)
        else:
            result = search_mark_agent_complete(args, settings)
    except SearchError as err:
        result = failure_result(tool, err)
    return scrub(with_config_warnings(result, settings), settings_secrets(settings))


def with_config_warnings(result: dict[str, Any], settings: Settings) -> dict[str, Any]:
    """Append config warnings (rejected layouts, unknown keys) to the result's `warning`."""
    if settings.warnings:
        result["warning"] = " ".join(filter(None, (result.get("warning"), *settings.warnings)))
    return result
