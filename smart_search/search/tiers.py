"""Walks a plan's tiers under one deadline: breaker, pacing, quota, the call itself.

`run_tiers(tiers, run)` tries each tier in order until one answers. `run` is one frozen `Run`:
who asks what, with which settings, ledger, breaker, pacing and network (`RealBackends`), by when.
Every tier ends as one `Attempt` record (the `attempt` schema); the walk never raises except for
state trouble (`StateError`: spending blind is never safe).

API tier: no key → skipped (not_configured); breaker open → skipped (circuit_open); no unit in
any source or window, or the provider told us it is exhausted → skipped (quota_exhausted).
Otherwise the call's worst case (`max_units_per_call`) is held before the request (RULINGS 4),
a retry after an attempt that may have been billed holds another, and afterwards each hold is
settled to what the provider really billed (`ProviderCall.units`), together with anything it
reported about our quota, in one step.

web_fetch tier: a finance query in Strategy A → skipped (finance_blocked); breaker; pacing; one
request. Answers pass the sanitizer here, as each tier answers, so an all-junk answer fails its
tier instead of passing as a success.

With the result cache on (`run.cache`, cache.py), each tier runs through `Flight.walk`: a hit for
its key replaces the tier; otherwise the tier runs as the key's single-flight leader.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, NamedTuple

from smart_search.budget import quota
from smart_search.errors import (
    ALL_EXHAUSTED,
    FINANCE_BLOCKED,
    WEB_FETCH_WARNING,
    AllExhausted,
    AuthFailed,
    Cancelled,
    FinanceBlocked,
    InternalError,
    NoResults,
    NotConfigured,
    QuotaExhausted,
    SearchError,
    StateError,
    StateLost,
    StateUnavailable,
    Timeout,
    error_class,
)
from smart_search.sources import registry

if TYPE_CHECKING:
    from smart_search.budget.breaker import Breaker
    from smart_search.budget.ledger import Ledger
    from smart_search.host.config import Settings
    from smart_search.search.planner import Tier
    from smart_search.sources.engines.fetch import EngineCall
    from smart_search.sources.providers.calls import ProviderCall



class RealBackends:
    """The network seam: these two methods are all a run asks of its `backends`, so tests pass
    fakes of the same shape. The network code is imported only when a tier actually runs
    (httpx and lxml cost to import)."""

    def call_api(
        self,
        provider: str,
        query: str,
        settings: Settings,
        deadline: float,
        may_retry: Callable[[int], bool],
        *,
        filters: dict[str, Any] | None = None,
    ) -> ProviderCall:
        from smart_search.sources.providers.calls import call_provider

        return call_provider(
            provider, query, settings, deadline, may_retry=may_retry, filters=filters
        )

    def fetch_engine(
        self,
        engine: str,
        query: str,
        settings: Settings,
        deadline: float,
        before_send: Callable[[], object],
        *,
        filters: dict[str, Any] | None = None,
    ) -> EngineCall:
        """Fetch and parse one engine page; call `before_send` (the pacing wait) last thing
        before the request leaves."""
        from smart_search.sources.engines.fetch import fetch_engine

        return fetch_engine(engine, query, settings, deadline, before_send, filters=filters)


class Run(NamedTuple):
    """Everything one smart_search walk needs, fixed for its whole length."""

    agent_id: str
    query: str  # whitespace folded
    settings: Settings
    ledger: Ledger
    backends: RealBackends  # or a fake of its shape
    deadline: float  # time.monotonic() by which the call must end
    breaker: Breaker
    pace: Callable[..., object]  # pacing.wait_for_slot(settings, engine, deadline)
    api_query: dict[str, str]  # the query each API is sent (Brave's fitted to its limits)
    api_warnings: dict[str, str | None]
    cache: Any = None  # cache.Flight: each tier looks up its key first (None: no cache)
    # Search filters (filters.normalise): passed to each source only when some are set.
    filters: dict[str, Any] = {}  # never mutated
    # Unix time for the whole run: the ledger, breaker, pacing and cache above read this one.
    clock: Callable[[], float] = time.time


class Attempt(NamedTuple):
    """One tier's record, exactly the `attempt` schema."""

    tier: int
    provider: str
    engine: str | None
    outcome: str  # success | skipped | failed
    error_code: str | None
    error: str | None
    http_status: int | None
    retries: int
    latency_ms: float
    attempt_latencies_ms: list[float]
    quota_source: str | None
    units: int
    units_by_source: dict[str, int] = {}  # of `units`, per quota_source name; never mutated
    key: str | None = None  # with a key pool: the fingerprint of the key that answered last

    def as_dict(self) -> dict[str, Any]:
        out = self._asdict()
        if out["key"] is None:  # no key pool: the record is exactly what it always was
            del out["key"]
        return out


class Outcome(NamedTuple):
    """What a whole walk produced, before shaping into the result object."""

    attempts: list[Attempt]
    error: SearchError | None = None
    results: Any = None
    citations: list[dict[str, str]] = []
    provider_used: str | None = None
    engine: str | None = None
    quota_source: str = "none"
    queries_remaining: int | None = None
    warning: str | None = None
    cacheable: bool = True  # False: a partial answer the result cache must not keep


def record_attempt(
    tier: Tier,
    started: float,
    outcome: str,
    err: SearchError | None = None,
    *,
    http_status: int | None = None,
    retries: int = 0,
    latencies: list[float] | None = None,
    quota_source: str | None = None,
    units: int = 0,
    units_by_source: dict[str, int] | None = None,
    key: str | None = None,
) -> Attempt:
    return Attempt(
        tier=tier.number,
        provider=tier.provider,
        engine=tier.engine,
        outcome=outcome,
        error_code=None if err is None else err.error_code,
        error=None if err is None else err.message,
        http_status=http_status if err is None or http_status else err.http_status,
        retries=retries,
        latency_ms=round((time.monotonic() - started) * 1000, 1),
        attempt_latencies_ms=list(latencies or []),
        quota_source=quota_source,
        units=units,
        units_by_source=units_by_source or {},
        key=key,
    )


def fit_api_queries(query: str, settings: Settings) -> tuple[dict[str, str], dict[str, Any]]:
    """The query each API is sent, fitted once by the source's own `fit_query` where it declares
    one (Brave takes at most 400 characters, 50 words), and the warning when it was cut."""
    queries: dict[str, str] = {}
    warnings: dict[str, Any] = {}
    for source in registry.sources("api"):
        fit = source.fit_query
        queries[source.name], warnings[source.name] = (query, None) if fit is None else fit(query)
    return queries, warnings


def run_tiers(tiers: list[Tier], run: Run) -> Outcome:
    """Try each tier in order until one answers; raises only StateError."""
    attempts: list[Attempt] = []
    for tier in tiers:
        started = time.monotonic()
        if started >= run.deadline:
            late = Timeout("The call's total_timeout_ms ran out before this tier.")
            attempts.append(record_attempt(tier, started, "skipped", late))
            continue
        walk = _api_tier if tier.is_api else _web_tier
        if run.cache is not None:  # a hit instead of the tier, or the tier as the key's leader
            attempt, answer = run.cache.walk(walk, tier, run, started)
        else:
            attempt, answer = walk(tier, run, started)
        attempts.append(attempt)
        if answer is not None:
            return answer._replace(attempts=attempts)
    return Outcome(attempts=attempts, error=final_error(attempts))


def _api_tier(tier: Tier, run: Run, started: float) -> tuple[Attempt, Outcome | None]:
    provider = tier.provider
    if run.settings.api_keys.get(provider) is None:
        missing = NotConfigured(registry.source(provider).not_configured or "")
        return record_attempt(tier, started, "skipped", missing), None
    try:
        run.breaker.admit(provider)
    except StateError:
        raise
    except SearchError as err:
        return record_attempt(tier, started, "skipped", err), None
    try:
        first, remaining = run.ledger.reserve(run.agent_id, provider)
    except StateUnavailable as err:
        if run.settings.state_backend.get("on_unavailable") != "web_only":
            raise
        # The operator chose web_only: no API tier without the shared ledger; web tiers go on.
        return record_attempt(tier, started, "skipped", err), None
    except StateLost as err:
        # RULINGS 8, on_state_lost "refuse": no API tier until the ledger is restored; the web
        # tiers spend nothing of it and still answer.
        return record_attempt(tier, started, "skipped", err), None
    except StateError:
        raise
    except SearchError as err:
        return record_attempt(tier, started, "skipped", err), None
    call, telemetry, settled = _ask(run, provider, first)
    if settled is not None:
        remaining = settled
    run.breaker.record(provider, call.error)
    source = telemetry["quota_source"]
    if call.error is not None:
        return record_attempt(tier, started, "failed", call.error, **telemetry), None
    assert call.answer is not None
    results = _usable(call.answer.results)
    if results is None:
        # Billed all the same (Brave bills every 2xx): the unit stays charged.
        empty = _nothing_usable(provider, call.http_status)
        return record_attempt(tier, started, "failed", empty, **telemetry), None
    if source is None:
        # A grounded prompt that ran no search query: free, so the answer spent no unit.
        source = "none"
        telemetry["quota_source"] = "none"
    telemetry["http_status"] = None  # the attempt schema keeps a status for failures only
    attempt = record_attempt(tier, started, "success", **telemetry)
    return attempt, Outcome(
        attempts=[],
        results=results,
        citations=_usable(list(call.answer.citations or [])) or [],
        provider_used=provider,
        quota_source=source,
        queries_remaining=remaining,
        warning=run.api_warnings[provider],
        cacheable=call.answer.complete,
    )


def _ask(
    run: Run, provider: str, first: quota.Hold
) -> tuple[ProviderCall, dict[str, Any], int | None]:
    """Ask `provider` under `first`, and with a key pool (`first.key`) the next key after each
    key the provider refused (401/403: disabled for its day) or reported out of quota (a quota
    429: exhausted until its reset), within this same call. Returns the last call, the tier's
    telemetry over every key tried, and queries_remaining after the last settle."""
    tried: list[tuple[_Holds, ProviderCall]] = []
    hold: quota.Hold | None = first
    settled = None
    while hold is not None:
        held = _Holds(hold)
        call, after = held.call(run, provider)
        settled = after if after is not None else settled
        tried.append((held, call))
        hold = None
        if first.key is not None and _key_is_out(call):
            done = tuple(h.holds[0].key or "" for h, _ in tried)
            try:
                hold, _ = run.ledger.reserve(run.agent_id, provider, exclude=done)
            except StateError:
                raise
            except SearchError:
                hold = None  # no other key has room: the tier ends with this key's error
    units = sum(c.units for _, c in tried)
    by_source: dict[str, int] = {}
    for held, c in tried:
        for name, n in held.by_source(c.units - held.starts[-1]).items():
            by_source[name] = by_source.get(name, 0) + n
    telemetry: dict[str, Any] = {
        "http_status": call.http_status,
        "retries": sum(c.retries for _, c in tried) + len(tried) - 1,  # a key switch re-sends
        "latencies": [ms for _, c in tried for ms in c.attempt_latencies_ms],
        "quota_source": quota.SOURCE_NAMES[first.source] if units else None,
        "units": units,
        "units_by_source": by_source,
        "key": tried[-1][0].holds[0].key,
    }
    return call, telemetry, settled


def _key_is_out(call: ProviderCall) -> bool:
    """The key itself is the trouble: refused (401/403) or out of quota (a quota 429)."""
    refused = isinstance(call.error, AuthFailed) and call.http_status in (401, 403)
    return refused or isinstance(call.error, QuotaExhausted)


def _key_observation(call: ProviderCall, hold: quota.Hold) -> dict[str, Any] | None:
    """What the ledger records from the answer; with a key pool also that the key was refused
    (`disable`), and a quota 429 that named no window exhausts the key for its day."""
    seen = call.observation
    if hold.key is None or not _key_is_out(call):
        return seen
    seen = dict(seen or {})
    if isinstance(call.error, QuotaExhausted):
        seen["exhausted"] = seen.get("exhausted") or "day"
    else:
        seen["disable"] = True
    return seen


def _key_settings(run: Run, provider: str, hold: quota.Hold) -> Settings:
    """The settings a request is built from: with a key pool, the hold's key is the provider's."""
    if hold.key is None:
        return run.settings
    for key in run.settings.key_pools[provider]:
        if key.fingerprint == hold.key:
            return run.settings._replace(api_keys={**run.settings.api_keys, provider: key.secret})
    raise InternalError("The ledger chose a key the config no longer has.")  # config re-read


class _Holds:
    """The holds one API tier took, each a worst case: the first before the request, another
    before each retry that follows an attempt that may have been billed. `starts[i]`: units
    billed before hold i took over, so hold i's truth is what was billed while it was current."""

    def __init__(self, first: quota.Hold) -> None:
        self.holds = [first]
        self.starts = [0]

    def add(self, hold: quota.Hold, billed: int) -> None:
        self.holds.append(hold)
        self.starts.append(billed)

    def charges(self, last: int | None) -> list[tuple[quota.Hold, int]]:
        """Each hold with what it is settled to; the current one to `last` (None: kept whole,
        its worst case)."""
        # Hold i was current from starts[i] until the next hold took over at starts[i + 1].
        out = [(h, self.starts[i + 1] - self.starts[i]) for i, h in enumerate(self.holds[:-1])]
        current = self.holds[-1]
        out.append((current, current.units if last is None else last))
        return out

    def call(self, run: Run, provider: str) -> tuple[ProviderCall, int | None]:
        """Ask `provider` under these holds, then settle each to what was billed while it was
        current, with what the provider reported, in one step. Returns the call and
        queries_remaining after the settle (None: nothing changed)."""

        def may_retry(billed: int) -> bool:
            """A retry after an attempt that may have been billed needs a worst case of its own."""
            if billed == self.starts[-1]:
                return True  # the last attempt billed nothing: its hold covers the next one
            try:  # the retry carries the same key as the request it repeats
                hold, _ = run.ledger.reserve(run.agent_id, provider, key=self.holds[0].key)
            except QuotaExhausted:
                return False
            self.add(hold, billed)
            return True

        try:
            settings = _key_settings(run, provider, self.holds[0])
            call = run.backends.call_api(
                provider, run.api_query[provider], settings, run.deadline, may_retry,
                **filter_kwargs(run),
            )
        except BaseException as exc:
            # Cancelled, or a bug in a client: the attempt in progress keeps its worst case
            # unless its request certainly never left; earlier holds settle as billed.
            sent = not isinstance(exc, Cancelled) or exc.sent
            run.ledger.settle(run.agent_id, provider, self.charges(None if sent else 0))
            raise
        charges = self.charges(call.units - self.starts[-1])
        seen = _key_observation(call, self.holds[0])
        return call, run.ledger.settle(run.agent_id, provider, charges, seen)

    def by_source(self, last: int) -> dict[str, int]:
        total: dict[str, int] = {}
        for hold, charged in self.charges(last):
            for name, units in hold.by_source(charged).items():
                total[name] = total.get(name, 0) + units
        return total


def _web_tier(tier: Tier, run: Run, started: float) -> tuple[Attempt, Outcome | None]:
    engine = tier.engine
    assert engine is not None
    if tier.finance_blocked:
        return record_attempt(tier, started, "skipped", FinanceBlocked(FINANCE_BLOCKED)), None
    try:
        run.breaker.admit(engine)
    except StateError:
        raise
    except SearchError as err:
        return record_attempt(tier, started, "skipped", err), None

    def wait_for_slot() -> None:
        run.pace(run.settings, engine, run.deadline)

    call = run.backends.fetch_engine(
        engine, run.query, run.settings, run.deadline, wait_for_slot, **filter_kwargs(run)
    )
    if isinstance(call.error, StateError):
        raise call.error
    if not call.sent:
        # No slot before the deadline: nothing was sent, so the engine's health is unknown.
        return record_attempt(tier, started, "skipped", call.error), None
    run.breaker.record(engine, call.error)
    telemetry: dict[str, Any] = {
        "http_status": call.http_status,
        "latencies": call.attempt_latencies_ms,
    }
    if call.error is not None:
        return record_attempt(tier, started, "failed", call.error, **telemetry), None
    usable = _usable(call.results)
    if usable is None:
        empty = _nothing_usable(engine, call.http_status)
        return record_attempt(tier, started, "failed", empty, **telemetry), None
    telemetry["http_status"] = None  # the attempt schema keeps a status for failures only
    attempt = record_attempt(tier, started, "success", quota_source="none", **telemetry)
    return attempt, Outcome(
        attempts=[],
        results=usable,
        provider_used="web_fetch",
        engine=engine,
        warning=WEB_FETCH_WARNING,
    )


def _usable(results: Any) -> Any:
    """The results with injection text and unsafe links removed (sanitize.py); None when nothing
    usable is left, so an all-junk answer is never a success."""
    from smart_search.text.sanitize import sanitize_results

    # An answer string keeps its paragraphs; titles and snippets are single lines.
    clean = sanitize_results(results, keep_newlines=isinstance(results, str))
    return clean or None


def _nothing_usable(name: str, http_status: int | None) -> SearchError:
    return NoResults(
        f"{registry.label(name)} returned nothing usable after removing unsafe content.",
        http_status=http_status,
    )


def final_error(attempts: list[Attempt]) -> SearchError:
    """The call's one error: the finance block when that is what stopped the last resort, the
    single cause when every tier failed for the same one, else the spec's "all exhausted"."""
    if attempts and attempts[-1].error_code == "finance_blocked":
        return FinanceBlocked(FINANCE_BLOCKED)
    causes = {(a.error_code, a.error) for a in attempts}
    if len(causes) == 1:
        code, message = causes.pop()
        return error_class(code)(message)
    return AllExhausted(ALL_EXHAUSTED)


def filter_kwargs(run: Run) -> dict[str, Any]:
    """`filters=` for a backend call when any filter is set: with none, the call is what it was."""
    return {"filters": run.filters} if run.filters else {}


# Deep mode (deep.py) runs single tiers in parallel: the same breaker, ledger and pacing steps.
api_tier = _api_tier
web_tier = _web_tier
