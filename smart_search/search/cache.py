"""The result cache, shared by every process through the state seam, with single-flight.

The same question is paid for once. Each tier that would spend something (an API unit, an engine
request) first looks up ITS key; a hit ends the walk with `cached: true` and spends nothing.

Key (`tier_key`): the normalised query actually sent (Unicode NFKC, case-folded, whitespace
collapsed; Brave's fitted query, never the uncut one), the tier that would answer (a source's
name), that tier's request settings (`request_settings`: what the source declares changes its
answer, a model or a result count; its endpoint; and the search filters when any is set) and
the finance rule (whether the query is a finance query, which also picks the TTL and blocks
Strategy A's web tier). Two agents with the
same query and route share an entry; a different route never does.

Stored: only a tier's successful, sanitized answer (tiers sanitize as each tier answers), before
the size cap; never a failure, a skipped tier, or an answer served from the cache itself.

Single-flight: on a miss the caller claims the key's lease (`Store.lease_claim`) and asks the
provider; a heartbeat thread keeps the lease alive while it is in flight. Anyone else who misses
while the lease is held waits (polling the entry and the lease, bounded by its own deadline) and
takes the leader's answer as a hit; when the lease ends with no entry (the leader failed, or died:
its lease expires within `lease_ttl` of its last heartbeat), a waiter claims it and asks itself.

The cache is advisory: any trouble with it (a refused symlink, a wedged database) is one warning
on stderr and the search goes on uncached. It never touches the quota ledger.
"""

from __future__ import annotations

import os
import sys
import time
import unicodedata
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import orjson

from smart_search.store import CacheEntry

if TYPE_CHECKING:
    from smart_search.host.config import Settings
    from smart_search.search.planner import Tier
    from smart_search.search.tiers import Attempt, Outcome, Run
    from smart_search.store import Store

KEY_VERSION = "v1"
STATS_DOC = "cache_stats"
# A lease outlives the leader's current request by this much; the heartbeat renews it every
# third of its length, so a SIGKILLed leader's lease is gone within one length of its death.
LEASE_MARGIN_S = 2.0
# Waiters poll the entry and the lease, starting fast and backing off to this interval.
POLL_FIRST_S = 0.005
POLL_MAX_S = 0.05


def normalize(query: str) -> str:
    """NFKC, case-folded, every run of whitespace one space, trimmed."""
    return " ".join(unicodedata.normalize("NFKC", query).casefold().split())


def request_settings(name: str, settings: Settings) -> dict[str, Any]:
    """The settings that change what source `name` answers, as it declares them (its
    `SOURCE.request_settings`: a model, a result count); the endpoint always counts too."""
    from smart_search.sources import registry

    try:
        fields = registry.source(name).request_settings
    except KeyError:
        return {}
    return {field: getattr(settings, field) for field in fields}


def tier_key(tier: Tier, run: Run) -> str:
    """The cache key of `tier` answering `run`'s query (readable: no hashing, no extra import)."""
    from smart_search.search.planner import is_finance

    name = tier.engine or tier.provider
    sent = run.query if tier.engine else run.api_query[tier.provider]
    request = request_settings(name, run.settings)
    request["endpoint"] = run.settings.endpoints.get(name)
    filters = getattr(run, "filters", None)
    if filters:
        # count, freshness, country, language change the answer: part of the route.
        request["filters"] = filters
    finance = "finance" if is_finance(run.query, run.settings) else "plain"
    request_text = orjson.dumps(request, option=orjson.OPT_SORT_KEYS).decode()
    return f"{KEY_VERSION}|{name}|{request_text}|{finance}|{normalize(sent)}"


def ttl_seconds(query: str, settings: Settings) -> int:
    """Finance and time-sensitive queries (the finance keywords) live shorter."""
    from smart_search.search.planner import is_finance

    conf = settings.cache
    return conf["finance_ttl_seconds"] if is_finance(query, settings) else conf["ttl_seconds"]


def open_flight(
    settings: Settings, store: Store, query: str, day: str, **options: Any
) -> Flight | None:
    """The cache for one smart_search call, or None when `cache.enabled` is false. `options`:
    Flight's `fresh` and `clock`."""
    conf = getattr(settings, "cache", None)
    if not conf or not conf["enabled"]:
        return None
    return Flight(settings, store, ttl_seconds(query, settings), day, **options)


class Flight:
    """One smart_search call's use of the cache: lookups, single-flight, puts, and what it
    served (`cached_at`, `units_saved`) for the result and the log line. `clock` (Unix time)
    dates entries and judges their age: the run's clock, injectable like the ledger's and the
    breaker's. Leases stay on real time: they cover requests really in flight."""

    def __init__(
        self,
        settings: Settings,
        store: Store,
        ttl_s: int,
        day: str,
        *,
        fresh: bool = False,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.settings, self.store, self.clock = settings, store, clock
        self.ttl_s, self.day, self.fresh = ttl_s, day, fresh
        self.owner = f"{os.uname().nodename}:{os.getpid()}:{os.urandom(4).hex()}"
        self.cached_at: str | None = None  # set when the answer came from the cache
        self.units_saved = 0
        self.broken = False

    @property
    def hit(self) -> bool:
        return self.cached_at is not None

    def walk(
        self,
        walk: Callable[[Tier, Run, float], tuple[Attempt, Outcome | None]],
        tier: Tier,
        run: Run,
        started: float,
    ) -> tuple[Attempt, Outcome | None]:
        """Run one tier through the cache: a hit (now, or the leader's answer after a wait)
        instead of `walk`, or `walk` as the key's leader, storing its success."""
        not_configured = tier.is_api and run.settings.api_keys.get(tier.provider) is None
        if self.broken or self.ttl_s <= 0 or not_configured or tier.finance_blocked:
            return walk(tier, run, started)
        key = tier_key(tier, run)
        if self.fresh:
            self._count(hit=False)
            return self._lead(walk, tier, run, started, key, lease=False)
        found = self._get(key)
        while found is None and not self.broken:
            if self._claim(key, run.deadline):
                found = self._get(key)  # the last leader may have answered before we claimed
                if found is not None:
                    self._release(key)
                    break
                self._count(hit=False)
                return self._lead(walk, tier, run, started, key, lease=True)
            found = self._wait(key, run.deadline)
            if found is None and time.monotonic() >= run.deadline:
                return self._late(tier, started), None
        if found is None:  # the cache broke while we looked: go on without it
            return walk(tier, run, started)
        return self._serve(found, tier, run, started)

    # -- the leader -------------------------------------------------------------------------------
    def _lead(
        self,
        walk: Callable[[Tier, Run, float], tuple[Attempt, Outcome | None]],
        tier: Tier,
        run: Run,
        started: float,
        key: str,
        *,
        lease: bool,
    ) -> tuple[Attempt, Outcome | None]:
        beat = _Heartbeat(self, key, run.deadline) if lease else None
        try:
            attempt, answer = walk(tier, run, started)
            if answer is not None and answer.cacheable and attempt.outcome == "success":
                self._put(key, attempt, answer)
            return attempt, answer
        finally:
            if beat is not None:
                beat.stop()
                self._release(key)

    def lease_ttl(self, deadline: float) -> float:
        left = max(0.0, deadline - time.monotonic())
        return min(left, self.settings.request_timeout_ms / 1000.0) + LEASE_MARGIN_S

    def _claim(self, key: str, deadline: float) -> bool:
        ttl = self.lease_ttl(deadline)
        return bool(self._guard(self.store.lease_claim, key, self.owner, ttl, time.time()))

    def _release(self, key: str) -> None:
        """Give the lease up even when the cache broke meanwhile: waiters should not have to
        sit out its TTL."""
        try:
            self.store.lease_release(key, self.owner)
        except Exception:  # noqa: BLE001 - it expires on its own
            pass

    def _put(self, key: str, attempt: Attempt, answer: Outcome) -> None:
        from smart_search.text.scrub import scrub, settings_secrets

        now = self.clock()
        # A provider that echoes a key back in its answer must not put it on disk (or in Redis).
        secrets = settings_secrets(self.settings)
        value = orjson.dumps(
            {
                "provider": answer.provider_used,
                "engine": answer.engine,
                "results": scrub(answer.results, secrets),
                "citations": scrub(answer.citations, secrets),
                "units": attempt.units,
            }
        )
        conf = self.settings.cache
        entry = CacheEntry(value, now, now + self.ttl_s)
        self._guard(
            self.store.cache_put,
            key,
            entry,
            max_entries=conf["max_entries"],
            max_bytes=conf["max_bytes"],
        )

    # -- waiters and hits -------------------------------------------------------------------------
    def _wait(self, key: str, deadline: float) -> dict[str, Any] | None:
        """Until the leader's entry appears (returned), its lease ends (None), or `deadline`."""
        pause = POLL_FIRST_S
        from smart_search.sources import cancel

        while time.monotonic() < deadline and not self.broken and not cancel.requested():
            cancel.sleep(min(pause, max(0.0, deadline - time.monotonic())))
            pause = min(pause * 2, POLL_MAX_S)
            found = self._get(key)
            if found is not None:
                return found
            if self._guard(self.store.lease_holder, key, time.time()) is None:
                return None
        return None

    def _get(self, key: str) -> dict[str, Any] | None:
        entry = self._guard(self.store.cache_get, key, self.clock())
        if entry is None:
            return None
        try:
            answer = orjson.loads(entry.value)
        except orjson.JSONDecodeError:
            return None
        if not isinstance(answer, dict) or not answer.get("results"):
            return None
        answer["stored_at"] = entry.stored_at
        return answer

    def _serve(
        self, found: dict[str, Any], tier: Tier, run: Run, started: float
    ) -> tuple[Attempt, Outcome]:
        from smart_search.errors import WEB_FETCH_WARNING
        from smart_search.search.tiers import Outcome, record_attempt

        provider = found.get("provider") or tier.provider
        from smart_search.text.stamps import utc_stamp

        self.cached_at = utc_stamp(found["stored_at"])
        units = found.get("units")
        self.units_saved = units if isinstance(units, int) and units > 0 else 0
        self._count(hit=True, units=self.units_saved)
        attempt = record_attempt(tier, started, "success", quota_source="none")
        attempt = attempt._replace(provider="cache")
        web = provider == "web_fetch"
        return attempt, Outcome(
            attempts=[],
            results=found["results"],
            citations=found.get("citations") or [],
            provider_used=provider,
            engine=found.get("engine") if web else None,
            quota_source="none",
            queries_remaining=None,  # tools fills in the agent's real remaining
            warning=WEB_FETCH_WARNING if web else run.api_warnings.get(provider),
        )

    def _late(self, tier: Tier, started: float) -> Attempt:
        from smart_search.errors import Timeout
        from smart_search.search.tiers import record_attempt

        late = Timeout(
            "The call's total_timeout_ms ran out while another process was asking the same "
            "question."
        )
        return record_attempt(tier, started, "skipped", late)

    # -- stats and trouble ------------------------------------------------------------------------
    def _count(self, *, hit: bool, units: int = 0) -> None:
        day = self.day

        def change(doc: dict[str, Any] | None) -> tuple[dict[str, Any], None]:
            doc = _today(doc, day)
            doc["hits" if hit else "misses"] += 1
            doc["units_saved"] += units
            return doc, None

        self._guard(self.store.update, STATS_DOC, change)

    def _guard(self, method: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        """Call a store's cache method; on any trouble warn once and stop using the cache."""
        if self.broken:
            return None
        try:
            return method(*args, **kwargs)
        except Exception as exc:  # noqa: BLE001 - the cache is advisory: it never fails a search
            self.broken = True
            _warn(f"result cache not used for this call ({_reason(exc)})")
            return None


class _Heartbeat:
    """Renews the leader's lease while its request is in flight (a thread, started at once)."""

    def __init__(self, flight: Flight, key: str, deadline: float) -> None:
        import threading

        self.flight = flight
        self.key = key
        self.deadline = deadline
        self.stopped = threading.Event()
        self.thread = threading.Thread(target=self._beat, name="cache-lease", daemon=True)
        self.thread.start()

    def _beat(self) -> None:
        flight = self.flight
        while not self.stopped.wait(flight.lease_ttl(self.deadline) / 3):
            try:
                ttl = flight.lease_ttl(self.deadline)
                if not flight.store.lease_claim(self.key, flight.owner, ttl, time.time()):
                    return  # lost (we stalled past its end): the new leader has it now
            except Exception:  # noqa: BLE001 - the main thread reports cache trouble
                return

    def stop(self) -> None:
        self.stopped.set()
        self.thread.join(timeout=5)


def _today(doc: dict[str, Any] | None, day: str) -> dict[str, Any]:
    if not isinstance(doc, dict) or doc.get("date") != day:
        return {"date": day, "hits": 0, "misses": 0, "units_saved": 0}
    out = {"date": day}
    for name in ("hits", "misses", "units_saved"):
        value = doc.get(name)
        out[name] = value if isinstance(value, int) and value >= 0 else 0
    return out


def _reason(exc: BaseException) -> str:
    text = str(exc)
    return f"{exc.__class__.__name__}: {text}" if text else exc.__class__.__name__


def _warn(message: str) -> None:
    try:
        sys.stderr.write(f"smart-search: {message}\n")
    except Exception:  # noqa: BLE001 - a warning must not break the search
        pass


# -- visibility: search_quota_status, doctor, `smart-search cache clear` ------------------------
def status(settings: Settings, store: Store, day: str) -> dict[str, Any]:
    """The `cache` object of the full quota status: size now, today's hits, misses, savings."""
    conf = getattr(settings, "cache", None) or {"enabled": False}
    out: dict[str, Any] = {"enabled": bool(conf["enabled"]), "entries": None, "bytes": None}
    try:
        out["entries"], out["bytes"] = store.cache_size()
        stats = _today(store.read(STATS_DOC), day)
    except Exception as exc:  # noqa: BLE001 - a broken cache is not a broken quota status
        _warn(f"result cache unreadable ({_reason(exc)})")
        stats = _today(None, day)
    out["hits_today"] = stats["hits"]
    out["misses_today"] = stats["misses"]
    out["units_saved_today"] = stats["units_saved"]
    return out


def cache_summary(settings: Settings) -> dict[str, Any]:
    """For `doctor`: the status object plus where the cache lives, its limits and TTLs, and
    `ok`/`error` (never raises)."""
    from smart_search.budget.ledger import today
    from smart_search.store import open_store

    conf = getattr(settings, "cache", None) or {"enabled": False}
    summary: dict[str, Any] = {"ok": True, "error": None}
    try:
        store = open_store(settings)
        summary["where"] = store.where()
        summary.update(status(settings, store, today(settings)))
        if summary["entries"] is None:
            summary["ok"], summary["error"] = False, "the cache database cannot be read"
    except Exception as exc:  # noqa: BLE001 - doctor reports, it does not crash
        summary.update(ok=False, error=_reason(exc))
    summary["config"] = dict(conf)
    return summary
