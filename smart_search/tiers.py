"""Walks a plan's tiers under one deadline: breaker, pacing, quota reserve/refund, the call itself.

The I/O of a tier goes through a `Backends` object: `call_api(provider, query, settings, deadline)`
→ (Answer, retries) and `fetch_engine(engine, query, settings, deadline)` → list of results. The
real ones live in `providers/` and `engines/`; tests swap in fakes at this seam.

Failure policy:
- API tier: no key → skipped (not_configured); breaker open → skipped (circuit_open); no quota
  unit → skipped (quota_exhausted). Otherwise one unit is reserved before the request and refunded
  if the request fails.
- web_fetch tier: a finance query in Strategy A → skipped (finance_blocked); breaker; pacing.
- Ledger trouble (lock timeout, corrupt file) ends the call at once: spending blind is never safe.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any, Protocol

from . import quota
from .breaker import Breaker
from .config import Settings
from .errors import (
    ALL_EXHAUSTED,
    FINANCE_BLOCKED,
    WEB_FETCH_WARNING,
    FinanceBlocked,
    LockTimeout,
    SearchError,
    StateCorrupt,
    Timeout,
)
from .ledger import Ledger
from .planner import Tier


class Backends(Protocol):
    def call_api(
        self, provider: str, query: str, settings: Settings, deadline: float
    ) -> tuple[Any, int]: ...

    def fetch_engine(
        self,
        engine: str,
        query: str,
        settings: Settings,
        deadline: float,
        before_send: Callable[[], object],
    ) -> list[dict[str, str]]:
        """Fetch and parse one engine page; call `before_send` (the pacing wait) last thing
        before the request leaves."""
        ...


class RealBackends:
    """The network: imported only when a tier actually runs (httpx, bs4 are costly to import)."""

    def call_api(
        self, provider: str, query: str, settings: Settings, deadline: float
    ) -> tuple[Any, int]:
        from .providers import call_provider

        return call_provider(provider, query, settings, deadline)

    def fetch_engine(
        self,
        engine: str,
        query: str,
        settings: Settings,
        deadline: float,
        before_send: Callable[[], object],
    ) -> list[dict[str, str]]:
        from .engines import fetch_engine

        return fetch_engine(engine, query, settings, deadline, before_send)


class Outcome:
    """What a whole smart_search walk produced, before shaping into the result object."""

    def __init__(self) -> None:
        self.results: Any = None
        self.citations: list[dict[str, str]] = []
        self.provider_used: str | None = None
        self.engine: str | None = None
        self.quota_source = "none"
        self.queries_remaining: int | None = None
        self.warnings: list[str] = []
        self.error: SearchError | None = None
        self.attempts: list[dict[str, Any]] = []


def _attempt(tier: Tier, started: float) -> dict[str, Any]:
    return {
        "tier": tier.number,
        "provider": tier.provider,
        "engine": tier.engine,
        "outcome": "success",
        "error_code": None,
        "error": None,
        "http_status": None,
        "retries": 0,
        "latency_ms": round((time.monotonic() - started) * 1000, 1),
        "attempt_latencies_ms": [],
        "quota_source": None,
    }


def _failed(record: dict[str, Any], err: SearchError, outcome: str) -> dict[str, Any]:
    record["outcome"] = outcome
    record["error_code"] = err.error_code
    record["error"] = err.message
    record["http_status"] = err.http_status
    record["retries"] = err.retries
    record["attempt_latencies_ms"] = list(err.attempt_latencies_ms)
    return record


def run_tiers(
    tiers: list[Tier],
    *,
    agent_id: str,
    query: str,
    settings: Settings,
    ledger: Ledger,
    backends: Backends,
    deadline: float,
    breaker: Breaker | None = None,
    pace: Any = None,
) -> Outcome:
    """Try each tier in order until one answers; never raises SearchError except ledger ones."""
    breaker = breaker or Breaker(settings)
    if pace is None:
        from .pacing import wait_for_slot as pace
    out = Outcome()
    for tier in tiers:
        started = time.monotonic()
        if started >= deadline:
            err = Timeout("The call's total_timeout_ms ran out before this tier.")
            out.attempts.append(_failed(_attempt(tier, started), err, "skipped"))
            continue
        if tier.is_api:
            done = _api_tier(
                tier,
                out,
                agent_id,
                query,
                settings,
                ledger,
                backends,
                deadline,
                breaker,
                started,
            )
        else:
            done = _web_tier(tier, out, query, settings, backends, deadline, breaker, pace, started)
        if done:
            return out
    out.error = _final_error(out.attempts)
    return out


def _api_tier(
    tier: Tier,
    out: Outcome,
    agent_id: str,
    query: str,
    settings: Settings,
    ledger: Ledger,
    backends: Backends,
    deadline: float,
    breaker: Breaker,
    started: float,
) -> bool:
    provider = tier.provider
    if settings.api_keys.get(provider) is None:
        from .errors import BRAVE_NOT_CONFIGURED, GEMINI_NOT_CONFIGURED, NotConfigured

        message = GEMINI_NOT_CONFIGURED if provider == "gemini" else BRAVE_NOT_CONFIGURED
        out.attempts.append(_failed(_attempt(tier, started), NotConfigured(message), "skipped"))
        return False
    try:
        breaker.admit(provider)
    except SearchError as err:
        if isinstance(err, LockTimeout | StateCorrupt):
            raise
        out.attempts.append(_failed(_attempt(tier, started), err, "skipped"))
        return False
    try:
        source, remaining = ledger.reserve(agent_id, provider)
    except (LockTimeout, StateCorrupt):
        raise
    except SearchError as err:
        out.attempts.append(_failed(_attempt(tier, started), err, "skipped"))
        return False
    try:
        answer, retries = backends.call_api(provider, query, settings, deadline)
    except SearchError as err:
        ledger.refund(agent_id, provider, source)
        breaker.record(provider, err)
        out.attempts.append(_failed(_attempt(tier, started), err, "failed"))
        return False
    except BaseException:
        # A bug in a client (or an interrupt) must not leave the unit spent; the runner turns
        # the exception into `internal` and records its traceback.
        ledger.refund(agent_id, provider, source)
        raise
    breaker.record(provider, None)
    latencies = list(getattr(answer, "attempt_latencies_ms", []))
    results = _usable(answer.results)
    if results is None:
        ledger.refund(agent_id, provider, source)
        empty = _nothing_usable(provider)
        empty.retries = retries
        empty.attempt_latencies_ms = latencies
        out.attempts.append(_failed(_attempt(tier, started), empty, "failed"))
        return False
    record = _attempt(tier, started)
    record["retries"] = retries
    record["attempt_latencies_ms"] = latencies
    record["quota_source"] = quota.SOURCE_NAMES[source]
    out.attempts.append(record)
    out.results = results
    out.citations = _usable(list(answer.citations or [])) or []
    out.provider_used = provider
    out.quota_source = quota.SOURCE_NAMES[source]
    out.queries_remaining = remaining
    if answer.warning:
        out.warnings.append(answer.warning)
    return True


def _web_tier(
    tier: Tier,
    out: Outcome,
    query: str,
    settings: Settings,
    backends: Backends,
    deadline: float,
    breaker: Breaker,
    pace: Any,
    started: float,
) -> bool:
    engine = tier.engine
    assert engine is not None
    if tier.finance_blocked:
        out.attempts.append(
            _failed(_attempt(tier, started), FinanceBlocked(FINANCE_BLOCKED), "skipped")
        )
        return False
    try:
        breaker.admit(engine)
    except (LockTimeout, StateCorrupt):
        raise
    except SearchError as err:
        out.attempts.append(_failed(_attempt(tier, started), err, "skipped"))
        return False
    sent_at: float | None = None

    def wait_for_slot() -> None:
        nonlocal sent_at
        pace(settings, engine, deadline)
        sent_at = time.monotonic()

    def request_ms() -> list[float]:
        return [round((time.monotonic() - sent_at) * 1000, 1)] if sent_at is not None else []

    try:
        results = backends.fetch_engine(engine, query, settings, deadline, wait_for_slot)
    except (LockTimeout, StateCorrupt):
        raise
    except SearchError as err:
        if sent_at is None:
            # No slot before the deadline: nothing was sent, so the engine's health is unknown.
            out.attempts.append(_failed(_attempt(tier, started), err, "skipped"))
            return False
        err.attempt_latencies_ms = request_ms()
        breaker.record(engine, err)
        out.attempts.append(_failed(_attempt(tier, started), err, "failed"))
        return False
    fetched_ms = request_ms()
    breaker.record(engine, None)
    usable = _usable(results)
    if usable is None:
        empty = _nothing_usable(engine)
        empty.attempt_latencies_ms = fetched_ms
        out.attempts.append(_failed(_attempt(tier, started), empty, "failed"))
        return False
    record = _attempt(tier, started)
    record["attempt_latencies_ms"] = fetched_ms
    record["quota_source"] = "none"
    out.attempts.append(record)
    out.results = usable
    out.provider_used = "web_fetch"
    out.engine = engine
    out.warnings.append(WEB_FETCH_WARNING)
    return True


def _usable(results: Any) -> Any:
    """The results with injection text and unsafe links removed (sanitize.py); None when nothing
    usable is left, so an all-junk answer is never a success."""
    from .sanitize import sanitize_results

    # An answer string keeps its paragraphs; titles and snippets are single lines.
    clean = sanitize_results(results, keep_newlines=isinstance(results, str))
    return clean or None


def _nothing_usable(name: str) -> SearchError:
    from .errors import PROVIDER_LABELS, NoResults

    return NoResults(
        f"{PROVIDER_LABELS[name]} returned nothing usable after removing unsafe content."
    )


def _final_error(attempts: list[dict[str, Any]]) -> SearchError:
    """The call's one error: the finance block when that is what stopped the last resort, the
    single cause when every tier failed for the same one, else the spec's "all exhausted"."""
    from .errors import AllExhausted

    if attempts and attempts[-1]["error_code"] == "finance_blocked":
        return FinanceBlocked(FINANCE_BLOCKED)
    causes = {(a["error_code"], a["error"]) for a in attempts}
    if len(causes) == 1:
        code, message = causes.pop()
        err = AllExhausted(message)
        err.error_code = code
        return err
    return AllExhausted(ALL_EXHAUSTED)
