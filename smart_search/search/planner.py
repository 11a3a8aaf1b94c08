"""Routing and strategy: which provider a query goes to and which tiers a call walks through.

Pure functions of the query, the agent and the settings (spec 4-5, RULINGS 3, 5):

- Strategy A (any agent but `general`): routed API, the opposite API, then DuckDuckGo, which a
  finance query may not use.
- Strategy B (`general`): Google, Bing, the routed API (the only tier that spends quota), then
  DuckDuckGo (RULINGS 5: so an install with no keys still answers when Google and Bing refuse
  plain HTTP clients).

A self-hosted engine (`Source.self_hosted`), once its endpoint is configured, leads the web
tiers of both: first of Strategy B, and in Strategy A right before the fallback (under the same
finance rule, since it answers as web_fetch).
"""

from __future__ import annotations

import re
from functools import lru_cache
from typing import NamedTuple

from smart_search.errors import InvalidInput
from smart_search.host.config import GENERAL_AGENT, PROVIDERS, Settings, configured_apis, engines
from smart_search.host.config_checks import either
from smart_search.sources import registry


class Tier(NamedTuple):
    """One step of a plan: an API provider, or a web_fetch engine."""

    number: int
    provider: str  # an API provider's name, or "web_fetch"
    engine: str | None = None  # set for web_fetch tiers
    finance_blocked: bool = False

    @property
    def is_api(self) -> bool:
        return self.engine is None

    def __repr__(self) -> str:
        what = self.engine if self.engine else self.provider
        blocked = ", finance_blocked" if self.finance_blocked else ""
        return f"Tier({self.number}, {what}{blocked})"


@lru_cache(maxsize=8)
def _keyword_pattern(keywords: tuple[str, ...]) -> re.Pattern[str] | None:
    if not keywords:
        return None
    # Word boundaries on both sides ("esa" is not "mesa", "ipo" is not "hippo"); a phrase's inner
    # spaces match any run of whitespace.
    parts = sorted(
        (r"\s+".join(map(re.escape, k.split())) for k in keywords), key=len, reverse=True
    )
    return re.compile(r"(?<!\w)(?:" + "|".join(parts) + r")(?!\w)", re.IGNORECASE)


def matches_any(query: str, keywords: tuple[str, ...]) -> bool:
    if not _may_match(query, keywords):
        return False  # no compile (~0.5 ms for the finance table) for a query that cannot match
    pattern = _keyword_pattern(keywords)
    return pattern is not None and pattern.search(query) is not None


def _may_match(query: str, keywords: tuple[str, ...]) -> bool:
    """False only when no keyword can match: an ASCII query matches an ASCII keyword only if it
    holds the keyword's first word, lower-cased. (Case-insensitive matching of other characters
    has its own rules, long s and Kelvin sign among them: those go to the pattern.)"""
    if not query.isascii():
        return True
    lowered = query.lower()
    for keyword in keywords:
        words = keyword.split()
        if not keyword.isascii() or not words or words[0].lower() in lowered:
            return True
    return False


def is_finance(query: str, settings: Settings) -> bool:
    return matches_any(query, settings.finance_keywords)


def route(query: str, settings: Settings) -> str:
    """The provider a query's keywords route to: the first API, in the sources' order, whose
    routing keywords it matches (finance's API comes first, so finance beats the rest), else
    `default_provider`."""
    for source in registry.sources("api"):
        field = source.route_keywords
        if field is not None and matches_any(query, getattr(settings, field)):
            return source.name
    return settings.default_provider


def other_providers(routed: str, order: tuple[str, ...] | None = None) -> list[str]:
    """The API providers to try after the routed one: `provider_order` when it is set (issue 20),
    else the default chain in the sources' order (the spec's pair: "the opposite")."""
    return [p for p in (registry.default_chain() if order is None else order) if p != routed]


def routed_provider(query: str, settings: Settings, force_provider: str | None) -> str:
    """`force_provider` when given (it replaces the routed provider only), else `route`."""
    return force_provider or route(query, settings)


def unconfigured_force(force_provider: str | None, settings: Settings) -> InvalidInput | None:
    """The contract's refusal of forcing a source that is not configured, where its module
    declares one (the spec fixes one such string); None otherwise."""
    if force_provider is None or force_provider in configured_apis(settings):
        return None
    message = registry.source(force_provider).forced_unconfigured
    return None if message is None else InvalidInput(message)


def invalid_force_provider(err: InvalidInput, settings: Settings) -> InvalidInput:
    """The contract's force_provider error (the spec's: `Use "gemini" or "brave".`), naming
    also each other API the operator configured, in the registry's order: `Use "gemini", "brave"
    or "<another>".`"""
    named = set(registry.default_chain()) | set(configured_apis(settings))
    names = tuple(p for p in PROVIDERS if p in named)
    if names == registry.default_chain():
        return err
    return InvalidInput(f'Invalid force_provider: "{err.shown}". Use {either(names)}.')


def web_engines(settings: Settings) -> tuple[list[str], list[str], str]:
    """The engines `settings` reaches, as the plans use them: (the configured self-hosted ones,
    which lead the web tiers; the public ones before the fallback; the fallback, the last public
    engine: DuckDuckGo's keyless HTML page, which refuses plain HTTP clients least)."""
    own: list[str] = []
    public: list[str] = []
    for name in engines(settings):
        (own if registry.source(name).self_hosted else public).append(name)
    *first, last = public
    return own, first, last


def plan(agent_id: str, query: str, settings: Settings, routed: str) -> list[Tier]:
    """The tiers to try, in order, for a query already routed to `routed`."""
    own, first_engines, last_engine = web_engines(settings)
    chain = settings.provider_order
    if agent_id == GENERAL_AGENT:  # Strategy B: the web first, the routed API before the last
        # (and the rest of a configured provider_order after it)
        apis = [routed] if chain is None else [routed, *other_providers(routed, chain)]
        steps = [("web_fetch", e) for e in (*own, *first_engines)] + [(p, None) for p in apis]
        steps.append(("web_fetch", last_engine))
        return [Tier(n, p, e) for n, (p, e) in enumerate(steps, 1)]
    # Strategy A: the APIs, then the web (a self-hosted engine, the fallback), refused for finance
    return apis_then_engines(
        routed, settings, (*own, last_engine), blocked=is_finance(query, settings)
    )


def apis_then_engines(
    routed: str, settings: Settings, web: tuple[str, ...], *, blocked: bool
) -> list[Tier]:
    """The routed API, the rest of the chain (`other_providers`), then the engines `web`,
    numbered from 1: Strategy A's plan, and deep mode's legs."""
    apis = [routed, *other_providers(routed, settings.provider_order)]
    tiers = [Tier(n, p) for n, p in enumerate(apis, 1)]
    for engine in web:
        tiers.append(Tier(len(tiers) + 1, "web_fetch", engine, finance_blocked=blocked))
    return tiers


def fold_whitespace(query: str) -> str:
    """Tabs, newlines and carriage returns become spaces before any request (RULINGS 1)."""
    return query.replace("\t", " ").replace("\r", " ").replace("\n", " ")
