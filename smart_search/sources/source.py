"""What a source declares about itself: the one value each provider and engine module holds as
`SOURCE`, which the registry (`registry.py`) collects. Everything outside a source's own module
learns about it from this value, never from its name."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, NamedTuple


class Source(NamedTuple):
    """One search API or web engine, as its module declares it."""

    name: str  # config keys, ledger, logs and results call it this
    label: str  # how messages name it ("Gemini", "DuckDuckGo")
    kind: str  # "api": a keyed, billed search API; "web": a scraped engine (no key, no units)
    order: int  # its place among its kind: routing's fallback, the web tier, reports
    endpoint: str  # the default base URL (`endpoints.<name>` overrides it)
    key_variable: str | None = None  # the API key's variable (environment, env.vars)
    not_configured: str | None = None  # the message when that key is missing
    # Billing (API sources): the units it may bill in (the first is the default), and its free
    # allowance as the default windows on its own clock.
    units: tuple[str, ...] = ("request",)
    daily_limit: int = 0
    monthly_limit: int = 0
    reset_timezone: str = "UTC"
    # The unit to bill in when config does not say, from the skill's config section (None: the
    # first of `units`): Gemini 2.x models bill per prompt, Gemini 3 per search query.
    default_unit: Callable[[dict[str, Any]], str] | None = None
    # Settings fields that change what it answers (they go into the result cache's key).
    request_settings: tuple[str, ...] = ()
    # The Settings field of the keywords that route a query to this API (finance beats the rest:
    # sources are tried in their order). None: reached by default_provider or the fallback.
    route_keywords: str | None = None
    # How a sentence names what it does ("Gemini grounded search"; default: the label), and
    # whether it answers with text (and its sources as citations) rather than a result list.
    described: str = ""
    answers_with_text: bool = False
    # Whether a query no routing keyword matches goes here by default (`default_provider`).
    default_route: bool = False
    # An unconfigured agent's allocation of this API (the predecessor skill's: Gemini 5).
    default_allocation: int = 0
    # The query as this API takes it, and a warning when it had to be cut (None: as asked).
    fit_query: Callable[[str], tuple[str, str | None]] | None = None
