"""Deep mode (issue 15): several sources at once under the call's one deadline, one merged list.

`run_deep(run, routed)` asks, in parallel threads, the routed API, the opposite API and one web
engine the strategy allows (Strategy A: DuckDuckGo, blocked for a finance query; Strategy B:
Google), each through the very tier step a normal walk uses (`tiers.api_tier` /
`tiers.web_tier`: breaker, ledger reserve / settle / refund, pacing, sanitizer). Their answers are
merged by `fusion.merge` into one ranked list with `sources` and `ranking` per result.

Budget (`deep_max_units`; by default the sum of the API legs' worst cases, 4 with Gemini 3 and
Brave, so a default deep call asks both APIs: RULINGS 7): counted in units before anything is
sent. An API leg runs
only when its provider's `max_units_per_call` (what one call may bill: 1 for a request-billed
provider, 3 by default for Gemini 3's per-search-query billing) fits in what the budget has left,
routed leg first; a leg that does not fit is recorded as skipped (`quota_exhausted`, saying why),
and a leg's retries are refused when they could take it past its share. So a deep call never
bills more than `deep_max_units`; 0 makes it web-only. The result's `warning` states the budget.

A leg that fails does not fail the call: every leg's record is in `attempts` (tier 1 routed,
2 opposite, 3 web); the call fails only when every leg failed (`tiers.final_error`).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

from smart_search.errors import QuotaExhausted, Timeout
from smart_search.host.config import GENERAL_AGENT
from smart_search.search.planner import Tier, apis_then_engines, is_finance, web_engines
from smart_search.search.tiers import (
    Attempt,
    Outcome,
    Run,
    api_tier,
    final_error,
    record_attempt,
    web_tier,
)
from smart_search.sources import registry


def legs(agent_id: str, query: str, run: Run, routed: str) -> list[Tier]:
    """The legs, numbered as their attempts are: the routed API, the other APIs, one web engine
    (the first engine for the chat agent, whose strategy starts on the web; else the fallback;
    a configured self-hosted engine for either, as it leads both strategies' web tiers)."""
    general = agent_id == GENERAL_AGENT
    own, first, last = web_engines(run.settings)
    engine = [*own, *first, last][0] if general else [*own, last][0]
    blocked = not general and is_finance(query, run.settings)
    return apis_then_engines(routed, run.settings, (engine,), blocked=blocked)


def budget(tiers: list[Tier], run: Run) -> tuple[dict[int, int], dict[int, QuotaExhausted]]:
    """(units each API leg may bill, the legs left out with why), routed leg first. A leg
    without a key takes no share: the tier step reports it not configured."""
    settings = run.settings
    left = settings.deep_max_units
    shares: dict[int, int] = {}
    refused: dict[int, QuotaExhausted] = {}
    for tier in tiers:
        if not tier.is_api or settings.api_keys.get(tier.provider) is None:
            continue
        most = max(1, settings.max_units_per_call.get(tier.provider, 1))
        if most <= left:
            shares[tier.number] = most
            left -= most
            continue
        label = registry.label(tier.provider)
        units = "unit" if most == 1 else "units"
        refused[tier.number] = QuotaExhausted(
            f"Deep search left {label} out: one call may bill up to {most} {units} and "
            f"deep_max_units ({settings.deep_max_units}) leaves {left}."
        )
    return shares, refused


class _Share:
    """The run's backends with the retry gate narrowed to one leg's share of the budget: a retry
    is allowed only while what is billed so far plus one more call's worst case still fits."""

    def __init__(self, inner: Any, share: int, most: int) -> None:
        self.inner = inner
        self.share = share
        self.most = most

    def call_api(
        self,
        provider: str,
        query: str,
        settings: Any,
        deadline: float,
        may_retry: Callable[[int], bool],
        **kwargs: Any,
    ) -> Any:
        def within_share(billed: int) -> bool:
            return billed + self.most <= self.share and may_retry(billed)

        return self.inner.call_api(provider, query, settings, deadline, within_share, **kwargs)

    def fetch_engine(self, *args: Any, **kwargs: Any) -> Any:
        return self.inner.fetch_engine(*args, **kwargs)


def run_deep(run: Run, routed: str) -> tuple[Outcome, str | None]:
    """(the merged outcome, Gemini's answer text or None). Raises only what a tier step raises
    (StateError, or a bug), once every leg has ended."""
    tiers = legs(run.agent_id, run.query, run, routed)
    shares, refused = budget(tiers, run)
    ended: dict[int, tuple[Attempt, Outcome | None]] = {}
    raised: list[BaseException] = []

    def leg(tier: Tier) -> None:
        started = time.monotonic()
        try:
            if tier.number in refused:
                skipped = record_attempt(tier, started, "skipped", refused[tier.number])
                ended[tier.number] = (skipped, None)
                return
            if started >= run.deadline:
                late = Timeout("The call's total_timeout_ms ran out before this tier.")
                ended[tier.number] = (record_attempt(tier, started, "skipped", late), None)
                return
            leg_run = run
            if tier.is_api and tier.number in shares:
                most = max(1, run.settings.max_units_per_call.get(tier.provider, 1))
                leg_run = run._replace(backends=_Share(run.backends, shares[tier.number], most))
            walk = api_tier if tier.is_api else web_tier
            ended[tier.number] = walk(tier, leg_run, started)
        except BaseException as exc:  # noqa: BLE001 - re-raised below, after every leg ended
            raised.append(exc)

    threads = [
        threading.Thread(target=leg, args=(tier,), name=f"deep-leg-{tier.number}", daemon=True)
        for tier in tiers
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()  # each leg ends by run.deadline: the HTTP layer and pacing enforce it
    if raised:
        raise raised[0]
    attempts = [ended[tier.number][0] for tier in tiers]
    answered = {
        tier.number: (tier, found)
        for tier in tiers
        if (found := ended[tier.number][1]) is not None
    }
    if not answered:
        return Outcome(attempts=attempts, error=final_error(attempts)), None
    return _merged(run, tiers, attempts, answered, shares), _answer_text(answered)


def _merged(
    run: Run,
    tiers: list[Tier],
    attempts: list[Attempt],
    answered: dict[int, tuple[Tier, Outcome]],
    shares: dict[int, int],
) -> Outcome:
    from smart_search.search.filter_notes import source_warning
    from smart_search.search.fusion import merge

    lists: dict[str, Any] = {}
    warnings: list[str] = [budget_warning(run, tiers, shares)]
    for tier, found in answered.values():
        source = tier.engine or tier.provider
        # An answer-text leg (Gemini's) is its citations; its text is kept whole, apart.
        lists[source] = found.citations if isinstance(found.results, str) else found.results
        if found.warning and found.warning not in warnings:
            warnings.append(found.warning)
        unsupported = source_warning(source, run.filters)
        if unsupported:
            warnings.append(unsupported)
    results: Any = merge(
        lists,
        run.settings.source_weights,
        extra_tracking=run.settings.tracking_params,
        limit=run.filters.get("count"),
    )
    text = _text_leg(answered)
    if not results:
        # Only an answer-text leg answered and cited nothing usable: its answer is the result,
        # as in first mode (it is in `answer` too).
        assert text is not None
        results = text.results
    # The routed leg speaks for the call when it answered, else the first leg that did.
    lead = (answered.get(tiers[0].number) or next(iter(answered.values())))[1]
    return Outcome(
        attempts=attempts,
        results=results,
        citations=text.citations if text is not None else [],
        provider_used=lead.provider_used,
        engine=lead.engine,
        quota_source=lead.quota_source,
        queries_remaining=lead.queries_remaining,
        warning=" ".join(warnings),
    )


def _text_leg(answered: dict[int, tuple[Tier, Outcome]]) -> Outcome | None:
    """The leg that answered with text (Gemini's answer; a web leg never does), or None."""
    return next((found for _, found in answered.values() if isinstance(found.results, str)), None)


def _answer_text(answered: dict[int, tuple[Tier, Outcome]]) -> str | None:
    text = _text_leg(answered)
    return None if text is None else text.results


def budget_warning(run: Run, tiers: list[Tier], shares: dict[int, int]) -> str:
    """What the deep call could spend, decided before any leg was sent."""
    allowed = run.settings.deep_max_units
    if not shares:
        return f"Deep search spent no units (deep_max_units {allowed}): the APIs were not asked."
    parts = ", ".join(
        f"{registry.label(tier.provider)} {shares[tier.number]}"
        for tier in tiers
        if tier.number in shares
    )
    most = sum(shares.values())
    units = "unit" if most == 1 else "units"
    return f"Deep search could spend up to {most} {units} ({parts}; deep_max_units {allowed})."
