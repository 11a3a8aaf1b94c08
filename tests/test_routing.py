"""Routing and the strategies' tier tables (planner.py: pure)."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from smart_search.host.config import load_settings
from smart_search.search import planner
from smart_search.sources import registry
from tests.conftest import Env


@pytest.mark.parametrize(
    ("query", "provider"),
    [
        ("AAPL share price", "gemini"),
        ("NASDAQ futures", "gemini"),
        ("company results 3 hours ago", "gemini"),
        ("share  price of apple", "gemini"),  # a phrase matches across any whitespace
        ("nasa budget", "brave"),
        ("ESA launch window", "brave"),
        ("mesa arizona weather", "brave-default"),  # "esa" is not "mesa"
        ("hippo facts", "brave-default"),  # "ipo" is not "hippo"
        ("stockholm travel", "brave-default"),  # "stock" is not "stockholm"
        ("nasa stock today", "gemini"),  # finance wins over Brave keywords
        ("plain question", "brave-default"),
    ],
)
def test_keyword_routing_on_word_boundaries(query: str, provider: str, tmp_path: Any) -> None:
    settings = load_settings({"HOME": str(tmp_path)})
    assert planner.route(query, settings) == provider.replace("-default", "")
    settings = settings._replace(default_provider="gemini")
    expected = "gemini" if provider.endswith("-default") else provider
    assert planner.route(query, settings) == expected


def test_configured_keyword_lists_replace_the_built_in_ones(env: Env) -> None:
    env.write_config({"finance_keywords": ["crypto"], "brave_keywords": ["Space Weather"]})
    s = env.settings()
    assert planner.route("crypto prices", s) == "gemini"
    assert planner.route("stock prices", s) == "brave"  # built-in list replaced
    assert planner.route("space   weather alerts", s) == "brave"


def test_tier_tables() -> None:
    s = load_settings({"HOME": "/nonexistent"})
    # Without provider_order, Strategy A walks the default chain only: the spec's pair, exactly as
    # before more APIs were registered (issue 20, point 2).
    assert [n for n in registry.api_names() if n not in ("gemini", "brave")]  # there are others
    a = planner.plan("stock-analysis", "NSE open", s, planner.routed_provider("NSE open", s, None))
    assert [(t.number, t.provider, t.engine, t.finance_blocked) for t in a] == [
        (1, "gemini", None, False),
        (2, "brave", None, False),
        (3, "web_fetch", "duckduckgo", True),
    ]
    a2 = planner.plan("tech-news", "ai papers", s, planner.routed_provider("ai papers", s, None))
    assert [(t.provider, t.finance_blocked) for t in a2] == [
        ("brave", False),
        ("gemini", False),
        ("web_fetch", False),
    ]
    b = planner.plan("general", "NSE open", s, planner.routed_provider("NSE open", s, None))
    assert [(t.number, t.provider, t.engine, t.finance_blocked) for t in b] == [
        (1, "web_fetch", "google", False),
        (2, "web_fetch", "bing", False),
        (3, "gemini", None, False),
        (4, "web_fetch", "duckduckgo", False),
    ]
    forced = planner.plan(
        "stock-analysis", "NSE open", s, planner.routed_provider("NSE open", s, "brave")
    )
    assert [t.provider for t in forced] == ["brave", "gemini", "web_fetch"]
    # A provider outside the default chain, forced, is followed by the chain.
    tav = planner.plan("tech-news", "ai papers", s, planner.routed_provider("ai", s, "tavily"))
    assert [t.provider for t in tav] == ["tavily", "gemini", "brave", "web_fetch"]
    assert forced[-1].finance_blocked  # force_provider changes the provider, not the strategy




def test_provider_order_replaces_the_fixed_pair_where_it_is_set(env: Env) -> None:
    """Issue 20, point 2: the routed provider first, then the rest of the chain, then the web
    tier, under the same strategy and finance rules; a provider left out is never asked."""
    env.write_config({"provider_order": ["brave"]})
    s = env.settings()
    assert s.provider_order == ("brave",)
    a = planner.plan("cron", "nasa news", s, planner.routed_provider("nasa news", s, None))
    assert [(t.provider, t.engine) for t in a] == [("brave", None), ("web_fetch", "duckduckgo")]
    # The routed provider is asked even when the chain leaves it out; the finance rule holds.
    f = planner.plan("cron", "NSE open", s, planner.routed_provider("NSE open", s, None))
    assert [t.provider for t in f] == ["gemini", "brave", "web_fetch"] and f[2].finance_blocked
    env.write_config({"provider_order": ["gemini", "brave"]})
    s = env.settings()
    b = planner.plan("general", "nasa news", s, planner.routed_provider("nasa news", s, None))
    assert [(t.number, t.provider, t.engine) for t in b] == [
        (1, "web_fetch", "google"), (2, "web_fetch", "bing"), (3, "brave", None),
        (4, "gemini", None), (5, "web_fetch", "duckduckgo")]  # fmt: skip


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ("brave", 'Config key "provider_order" must be a non-empty array of provider names.'),
        ([], 'Config key "provider_order" must be a non-empty array of provider names.'),
        (["brave", "brave"], 'Config key "provider_order" names a provider twice.'),
        (
            ["yahoo"],
            'Config key "provider_order[0]" must be '
            '"gemini", "brave", "tavily", "exa", "serper", "perplexity", "parallel", '
            '"grok", "kimi", "minimax", "ollama" or "firecrawl".',
        ),
    ],
)
def test_a_bad_provider_order_is_a_config_error_naming_the_key(
    env: Env, value: Any, message: str
) -> None:
    env.write_config({"provider_order": value})
    r = env.call("search_quota_status")
    assert (r["error_code"], r["error"]) == ("config_error", message)


_WORDS = st.sampled_from(["stock", "Share", "price", "nasa", "esa", "mesa", "ipo", "hippo", "ſtock",
                          "\u212aelvin", "kelvin", "s&p", "ünïcode", "today", "", " "])


@settings(max_examples=400, deadline=None)
@given(
    query=st.lists(st.one_of(_WORDS, st.text(max_size=6)), max_size=6).map(" ".join),
    keywords=st.lists(st.lists(_WORDS, min_size=1, max_size=2).map(" ".join), max_size=4),
)
def test_the_keyword_gate_never_hides_a_match(query: str, keywords: list[str]) -> None:
    """The cheap pre-check may only say "no" where the pattern finds nothing."""
    from smart_search.search import planner

    pattern = planner._keyword_pattern(tuple(keywords))
    if pattern is not None and pattern.search(query):
        assert planner._may_match(query, tuple(keywords))
        assert planner.matches_any(query, tuple(keywords))
