"""The four tools as plain library calls: validated arguments and `Settings` in, result dict out.

The runner (CLI) and a future MCP server are thin shells over `call_tool`.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from smart_search.budget.ledger import Ledger
from smart_search.errors import SearchError, UnknownAgent, unknown_agent
from smart_search.host.config import Settings
from smart_search.sources import registry

if TYPE_CHECKING:
    from smart_search.search.tiers import Outcome, Run


def search_result(
    *,
    results: Any = None,
    provider_used: str | None = None,
    queries_remaining: int | None = None,
    quota_source: str = "none",
    fallback_used: bool = False,
    warning: str | None = None,
    web_fetch_engine: str | None = None,
    error: SearchError | None = None,
    attempts: list[dict[str, Any]] | None = None,
    citations: Any = None,
    truncated: bool = False,
    cached_at: str | None = None,
) -> dict[str, Any]:
    """smart_search's return shape, success and failure alike: every spec key, in the spec's
    order, null (or empty, or false) when unused; `error` is the failure, None on success. A
    deep call appends its `answer`."""
    return {
        "results": results,
        "provider_used": provider_used,
        "queries_remaining": queries_remaining,
        "quota_source": quota_source,
        "fallback_used": fallback_used,
        "warning": warning,
        "web_fetch_engine": web_fetch_engine,
        "error": None if error is None else error.message,
        "error_code": None if error is None else error.error_code,
        "attempts": [] if attempts is None else attempts,
        "citations": [] if citations is None else citations,
        "truncated": truncated,
        "cached": cached_at is not None,
        "cached_at": cached_at,
    }


def failure_result(
    tool: str | None, err: SearchError, queries_remaining: int | None = None
) -> dict[str, Any]:
    """The one place a failure becomes a result: smart_search's full return shape
    (`search_result`), or `{error, error_code}` for the other tools and unknown ones."""
    if tool != "smart_search":
        return {"error": err.message, "error_code": err.error_code}
    return search_result(error=err, queries_remaining=queries_remaining)


def smart_search(
    args: dict[str, Any],
    settings: Settings,
    *,
    backends: Any = None,
    clock: Callable[[], float] = time.time,
    client: str | None = None,
) -> dict[str, Any]:
    """One search. `backends`: the network (tests swap in fakes); `clock`: Unix time for the
    whole run (the ledger's windows, the breaker, pacing slots and cache ages), injectable;
    `client`: the label of the MCP token that made the call, for the log line."""
    from smart_search.logs.line import build_line, log_search
    from smart_search.search import planner

    started = time.monotonic()
    agent_id: str = args["agent_id"]
    query = planner.fold_whitespace(args["query"])
    if not settings.allows_agent(agent_id):
        # Validation: not logged as a search, no state touched.
        return failure_result("smart_search", UnknownAgent(unknown_agent(agent_id)))
    force: str | None = args.get("force_provider")
    refused = planner.unconfigured_force(force, settings)
    if refused is not None:  # validation too: not logged, no state touched
        return failure_result("smart_search", refused)
    routed = planner.routed_provider(query, settings, force)
    run = _start_run(args, settings, agent_id, query, started, backends, clock)
    deep = args.get("mode") == "deep"
    try:
        outcome, answer = _walk(run, routed, deep)
        snapshot = _snapshot(run.ledger, settings)
    except SearchError as err:
        result, saved = failure_result("smart_search", err), 0
    else:
        result = _outcome_result(run, routed, deep, outcome, answer, snapshot)
        saved = run.cache.units_saved if result["cached"] else 0
    restored = _note_restores(result, run.ledger.restored)
    latency_ms = round((time.monotonic() - started) * 1000, 1)
    line = build_line(result, agent_id=agent_id, query=query, force=force, latency_ms=latency_ms,
                      mode="deep" if deep else "first", units_saved=saved, now=clock(),
                      client=client, state_restored=restored)  # fmt: skip
    log_search(settings, run.ledger.today, line)
    return result


def _note_restores(result: dict[str, Any], notes: list[dict[str, Any]]) -> Any:
    """A forgotten ledger restored (or this host's witness folded in) during the call: said in
    the result's `warning`; returns the log line's `state_restored` (RULINGS 8)."""
    if not notes:
        return None
    from smart_search.budget.recovery import warning_of

    said = warning_of(notes)
    result["warning"] = " ".join(w for w in (result["warning"], said) if w)
    return notes[-1]


def _pace(settings: Settings, engine: str, until: float, store: Any, clock: Any) -> float:
    """Wait for `engine`'s slot (budget/pacing.py, loaded only when a web tier runs)."""
    from smart_search.budget.pacing import wait_for_slot

    return wait_for_slot(settings, engine, until, store=store, clock=clock)


def _start_run(
    args: dict[str, Any],
    settings: Settings,
    agent_id: str,
    query: str,
    started: float,
    backends: Any,
    clock: Callable[[], float] = time.time,
) -> Run:
    """The walk's `tiers.Run`: the shared store opened, the queries fitted, the filters read,
    the cache flight opened (first mode only); every part of it reads time from `clock`."""
    from smart_search.budget.breaker import Breaker
    from smart_search.search.tiers import RealBackends, Run, fit_api_queries
    from smart_search.sources.filters import normalise
    from smart_search.store import open_store

    store = open_store(settings)
    ledger = Ledger(settings, store, clock=clock)
    api_query, api_warnings = fit_api_queries(query, settings)
    filters = normalise(args)
    # Deep mode asks every leg afresh (its merged answer is not one tier's); first mode looks up
    # each tier's key, the filters part of it.
    flight = None
    if args.get("mode") != "deep" and settings.cache.get("enabled"):
        from smart_search.search import cache  # not loaded at all with the cache off

        flight = cache.open_flight(
            settings, store, query, ledger.today, fresh=bool(args.get("fresh")), clock=clock
        )
    return Run(
        agent_id=agent_id,
        query=query,
        settings=settings,
        ledger=ledger,
        backends=backends or RealBackends(),
        deadline=started + settings.total_timeout_ms / 1000.0,
        breaker=Breaker(settings, clock=clock, store=store),
        pace=lambda s, engine, until: _pace(s, engine, until, store, clock),
        api_query=api_query,
        api_warnings=api_warnings,
        cache=flight,
        filters=filters,
        clock=clock,
    )


def _walk(run: Run, routed: str, deep: bool) -> tuple[Outcome, str | None]:
    """The tiers' outcome, and deep mode's merged answer (None in first mode)."""
    if deep:
        from smart_search.search.deep import run_deep

        return run_deep(run, routed)
    from smart_search.search import planner
    from smart_search.search.tiers import run_tiers

    return run_tiers(planner.plan(run.agent_id, run.query, run.settings, routed), run), None


def _outcome_result(
    run: Run,
    routed: str,
    deep: bool,
    outcome: Outcome,
    answer: str | None,
    snapshot: dict[str, Any] | None,
) -> dict[str, Any]:
    """The result of a walk that ended: its failure, or its answer filtered, scrubbed of keys
    and capped; the quota figures read from the ledger's `snapshot`."""
    from smart_search.budget import quota

    ceilings = run.ledger.ceilings
    overcommit = None if snapshot is None else quota.overcommit_warning(snapshot, ceilings)
    remaining = outcome.queries_remaining
    if remaining is None and snapshot is not None:
        remaining = quota.allocation_remaining(snapshot, ceilings, run.agent_id, routed)
    attempts = [a.as_dict() for a in outcome.attempts]
    if outcome.error is not None:
        result = search_result(
            error=outcome.error, queries_remaining=remaining, warning=overcommit, attempts=attempts
        )
    else:
        result = _answer_result(run, routed, deep, outcome, overcommit, remaining, attempts)
    if deep:
        result["answer"] = None if outcome.error is not None else _scrub(answer, run.settings)
    return result


def _answer_result(
    run: Run,
    routed: str,
    deep: bool,
    outcome: Outcome,
    overcommit: str | None,
    remaining: int | None,
    attempts: list[dict[str, Any]],
) -> dict[str, Any]:
    """A walk's answer as the result: filtered (first mode), keys scrubbed, capped."""
    from smart_search.text import output

    found, unsupported = outcome.results, None
    if not deep and run.filters:  # no filters: nothing to cut, nothing to warn about
        from smart_search.search.filter_notes import first_mode

        source = outcome.engine or outcome.provider_used or routed
        found, unsupported = first_mode(found, source, run.filters)
    warnings = [w for w in (outcome.warning, unsupported, overcommit) if w]
    # Already sanitized, tier by tier (tiers._usable); keys are scrubbed BEFORE the size cap,
    # so that a cut can never leave part of a key behind.
    capped, truncated = output.cap_results(
        _scrub(found, run.settings), run.settings.max_result_chars
    )
    flight = run.cache
    return search_result(
        results=capped,
        provider_used=outcome.provider_used,
        queries_remaining=remaining,
        quota_source=outcome.quota_source,
        fallback_used=outcome.provider_used != routed,
        warning=" ".join(warnings) if warnings else None,
        web_fetch_engine=outcome.engine,
        attempts=attempts,
        citations=_scrub(outcome.citations, run.settings),
        truncated=truncated,
        cached_at=flight.cached_at if flight is not None and flight.hit else None,
    )


def _scrub(value: Any, settings: Settings) -> Any:
    from smart_search.text.scrub import scrub, settings_secrets

    return scrub(value, settings_secrets(settings))


def _snapshot(ledger: Ledger, settings: Settings) -> dict[str, Any] | None:
    """The ledger after the walk; None when the shared store is away and the operator chose
    `on_unavailable: "web_only"` (a web answer is still returned, without quota figures)."""
    from smart_search.errors import StateLost, StateUnavailable

    try:
        return ledger.snapshot()
    except StateLost:
        return None  # refused until restored (RULINGS 8); the walk's attempts say why
    except StateUnavailable:
        if settings.state_backend.get("on_unavailable") != "web_only":
            raise
        return None


def search_quota_status(args: dict[str, Any], settings: Settings) -> dict[str, Any]:
    ledger = Ledger(settings)
    agent_id = args.get("agent_id")
    status = ledger.agent_status(agent_id) if agent_id else ledger.full_status()
    if not agent_id:
        from smart_search.search import cache

        status["cache"] = cache.status(settings, ledger.store, ledger.today)
        from smart_search.host.host_keys import source_states

        status["sources"] = source_states(settings)
    from smart_search.budget.fetches import fetch_status

    status["fetches"] = fetch_status(settings, ledger.store, ledger.today, agent_id)
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
    """Spec 3: "Agent marked complete. 7 Gemini calls released to shared pool." """
    parts = [
        f"{n} {label} call{'s' if n != 1 else ''}"
        for n, label in ((released[p], registry.label(p)) for p in released)
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
    from smart_search.text.scrub import scrub, settings_secrets

    try:
        if settings.legacy_state_dir:
            from smart_search.budget.legacy_ledger import merge_legacy_ledger

            merge_legacy_ledger(settings)
        if tool == "smart_search":
            result = smart_search(args, settings, **options)
        elif tool == "smart_fetch":
            from smart_search.search.fetch_tool import smart_fetch

            wanted = {k: v for k, v in options.items() if k in ("clock", "resolver", "client")}
            result = smart_fetch(args, settings, **wanted)
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
