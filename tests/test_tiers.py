"""The tier walk (tiers.py): each strategy's rows and the spec's six worked examples, with the
providers faked at the tiers.RealBackends seam; everything else real: ledger, breaker, pacing,
cache, logs."""

from __future__ import annotations

import pytest

from smart_search import errors
from tests.conftest import (
    EXHAUSTED_LIMITS,
    EXHAUSTING_SPEND,
    SHAPE_KEYS,
    SPEC_EXAMPLES,
    SPEC_KEYS,
    WARNING,
    Env,
    spec_view,
)
from tests.tier_fakes import WEB, FakeAnswer, FakeBackends, base_config, blocked, keyed_env, search


@pytest.fixture
def keyed(env: Env) -> Env:
    return keyed_env(env)


# --- Strategy A rows ------------------------------------------------------------------------


def test_a_tier1_primary_answers(keyed: Env) -> None:
    fake = FakeBackends(gemini=FakeAnswer("The NSE opened at 22,450 points today..."))
    r = search(keyed, fake, "NSE market open today", "stock-analysis")
    assert (r["provider_used"], r["quota_source"], r["fallback_used"]) == (
        "gemini",
        "agent_allocation",
        False,
    )
    assert [a["outcome"] for a in r["attempts"]] == ["success"]
    assert fake.calls == ["gemini"]


def test_a_tier2_opposite_api_when_primary_fails(keyed: Env) -> None:
    fake = FakeBackends(
        gemini=errors.ServerError("Gemini API error: 500", http_status=500),
        brave=FakeAnswer(WEB),
    )
    r = search(keyed, fake, "NSE market open today", "stock-analysis")
    assert r["provider_used"] == "brave" and r["fallback_used"] is True
    assert r["quota_source"] == "provider_direct"  # stock-analysis has no Brave allocation
    assert [
        (a["provider"], a["outcome"], a["error_code"], a["http_status"]) for a in r["attempts"]
    ] == [("gemini", "failed", "server_error", 500), ("brave", "success", None, None)]
    # The failed Gemini unit was refunded.
    status = keyed.call("search_quota_status", {"agent_id": "stock-analysis"})
    assert status["gemini"]["used"] == 0 and status["brave"]["used"] == 1
    assert [a["units"] for a in r["attempts"]] == [0, 1]


def test_a_tier3_duckduckgo_when_both_apis_fail(keyed: Env) -> None:
    fake = FakeBackends(
        brave=errors.Timeout("Brave request timed out."),
        gemini=errors.RateLimited("Gemini API error: 429", http_status=429),
        duckduckgo=WEB,
    )
    r = search(keyed, fake, "latest AI research papers", "tech-news")
    assert (r["provider_used"], r["web_fetch_engine"], r["quota_source"]) == (
        "web_fetch",
        "duckduckgo",
        "none",
    )
    assert r["warning"] == WARNING and r["fallback_used"] is True
    # The APIs without a key (beyond the spec's two) are tiers too, skipped before the web.
    assert [a["tier"] for a in r["attempts"]] == [1, 2, 3]


def test_a_tier4_error_when_everything_fails(keyed: Env) -> None:
    fake = FakeBackends(
        brave=errors.Timeout("t"), gemini=errors.Timeout("t"), duckduckgo=blocked("DuckDuckGo")
    )
    r = search(keyed, fake, "latest AI research papers", "tech-news")
    assert (r["error"], r["error_code"]) == (
        "All search providers exhausted or unavailable.",
        "all_exhausted",
    )
    assert r["results"] is None and r["provider_used"] is None
    assert [a["outcome"] for a in r["attempts"]] == [
        "failed", "failed", "failed"]  # fmt: skip


def test_unconfigured_key_is_skipped_with_the_spec_message(env: Env) -> None:
    env.environ["BRAVE_API_KEY"] = "k"
    env.write_config(base_config())
    fake = FakeBackends(brave=FakeAnswer(WEB))
    r = search(env, fake, "NSE market open today", "stock-analysis")
    assert r["provider_used"] == "brave"
    first = r["attempts"][0]
    assert (first["outcome"], first["error_code"], first["error"]) == (
        "skipped",
        "not_configured",
        "GEMINI_API_KEY is not configured in openclaw.json.",
    )
    env.environ.pop("BRAVE_API_KEY")
    env.environ["GEMINI_API_KEY"] = "k"
    r = search(env, FakeBackends(gemini=FakeAnswer("x")), "plain words", "tech-news")
    assert r["attempts"][0]["error"] == (
        "Brave Search is not configured. Add BRAVE_API_KEY to openclaw.json to enable it."
    )


def test_force_provider_replaces_the_routed_provider_only(keyed: Env) -> None:
    fake = FakeBackends(brave=FakeAnswer(WEB))
    r = search(keyed, fake, "NSE market open today", "stock-analysis", force_provider="brave")
    assert r["provider_used"] == "brave" and r["fallback_used"] is False
    fake = FakeBackends(google=WEB)
    r = search(keyed, fake, "anything", "general", force_provider="gemini")
    assert r["web_fetch_engine"] == "google"  # Strategy B still scrapes first


# --- Strategy B rows ------------------------------------------------------------------------


def test_b_bing_when_google_is_blocked(keyed: Env) -> None:
    fake = FakeBackends(google=blocked("Google"), bing=WEB)
    r = search(keyed, fake, "best noise-cancelling headphones 2025", "general")
    assert (r["provider_used"], r["web_fetch_engine"]) == ("web_fetch", "bing")
    assert [(a["engine"], a["outcome"], a["error_code"]) for a in r["attempts"]] == [
        ("google", "failed", "blocked"),
        ("bing", "success", None),
    ]


def test_b_duckduckgo_after_the_api_tier_when_no_key(env: Env) -> None:
    env.write_config(base_config())
    fake = FakeBackends(google=blocked("Google"), bing=blocked("Bing"), duckduckgo=WEB)
    r = search(env, fake, "today AAPL stock price", "general")  # finance allowed in Strategy B
    assert r["web_fetch_engine"] == "duckduckgo"
    assert [a["outcome"] for a in r["attempts"]] == ["failed", "failed", "skipped", "success"]
    assert env.call("search_quota_status", {"agent_id": "general"})["gemini"]["used"] == 0


def test_b_all_fail(keyed: Env) -> None:
    fake = FakeBackends(
        google=blocked("Google"),
        bing=errors.NoResults("Bing found nothing."),
        gemini=errors.Timeout("t"),
        duckduckgo=errors.ParseError("unrecognised"),
    )
    r = search(keyed, fake, "today AAPL stock price", "general")
    assert r["error"] == "All search providers exhausted or unavailable."
    assert [a["error_code"] for a in r["attempts"]] == [
        "blocked",
        "no_results",
        "timeout",
        "parse_error",
    ]


# --- the spec's six worked examples (conftest.SPEC_EXAMPLES) -------------------------------


def test_example_1_general_finance_google_succeeds(keyed: Env) -> None:
    ex = SPEC_EXAMPLES[1]
    r = search(keyed, FakeBackends(google=WEB), ex.query, ex.agent_id)
    assert spec_view(r, SHAPE_KEYS) == ex.shape
    assert r["results"] == WEB
    assert keyed.call("search_quota_status", {"agent_id": "general"})["gemini"]["used"] == 0


def test_example_2_general_finance_both_scrapers_fail_gemini_answers(keyed: Env) -> None:
    ex = SPEC_EXAMPLES[2]
    fake = FakeBackends(
        google=blocked("Google"), bing=blocked("Bing"), gemini=FakeAnswer(ex.results)
    )
    r = search(keyed, fake, ex.query, ex.agent_id)
    assert spec_view(r, SPEC_KEYS) == {"results": ex.results, **ex.shape, "error": None}


def test_example_3_general_plain_query_google_succeeds(keyed: Env) -> None:
    # The spec shows 20 left: that is the routed provider's allocation, so route to Gemini here.
    keyed.write_config(base_config(default_provider="gemini"))
    ex = SPEC_EXAMPLES[3]
    r = search(keyed, FakeBackends(google=WEB), ex.query, ex.agent_id)
    assert spec_view(r, SHAPE_KEYS) == ex.shape


def test_example_4_scheduled_finance_gemini_with_allocation(keyed: Env) -> None:
    keyed.spend((("stock-analysis", "gemini", 3),))  # 12 of 15 left, as in the example
    ex = SPEC_EXAMPLES[4]
    r = search(keyed, FakeBackends(gemini=FakeAnswer(ex.results)), ex.query, ex.agent_id)
    assert spec_view(r, SPEC_KEYS) == {"results": ex.results, **ex.shape, "error": None}


def exhaust_stock_analysis(env: Env) -> None:
    env.write_config(base_config(providers=EXHAUSTED_LIMITS))
    env.spend(EXHAUSTING_SPEND)


def test_example_5_scheduled_finance_both_exhausted_hard_error(keyed: Env) -> None:
    exhaust_stock_analysis(keyed)
    ex = SPEC_EXAMPLES[5]
    r = search(keyed, FakeBackends(), ex.query, ex.agent_id)
    assert spec_view(r, SPEC_KEYS) == {"results": None, **ex.shape, "error": ex.error}
    assert r["error_code"] == "finance_blocked"
    assert [(a["outcome"], a["error_code"]) for a in r["attempts"]] == [
        ("skipped", "quota_exhausted"),
        ("skipped", "quota_exhausted"),
        ("skipped", "finance_blocked"),
    ]


def test_example_6_scheduled_plain_query_both_exhausted_duckduckgo(keyed: Env) -> None:
    exhaust_stock_analysis(keyed)
    ex = SPEC_EXAMPLES[6]
    fake = FakeBackends(duckduckgo=WEB)
    r = search(keyed, fake, ex.query, ex.agent_id)
    assert spec_view(r, SHAPE_KEYS) == ex.shape
    assert fake.calls == ["duckduckgo"]


def test_a_chain_of_list_apis_falls_through_to_an_answer_style_one(env: Env) -> None:
    """Issue 30: in a chain named by provider_order, the list-style APIs failing hands over to
    Kimi, an answer-style API: its text is the result and its citations come with it."""
    env.environ |= {"GEMINI_API_KEY": "k-g", "BRAVE_API_KEY": "k-b", "TAVILY_API_KEY": "k-t",
                    "KIMI_API_KEY": "k-k"}  # fmt: skip
    env.write_config(base_config(provider_order=["brave", "tavily", "kimi"]))
    cited = [{"title": "NASA", "url": "https://www.nasa.gov/mission/webb/"}]
    fake = FakeBackends(
        brave=errors.ServerError("Brave API error: 500", http_status=500),
        tavily=errors.QuotaExhausted("Tavily API error: 432", http_status=432),
        kimi=FakeAnswer("Webb launched on 25 December 2021.", cited),
    )
    r = search(env, fake, "webb telescope launch date", "tech-news")
    assert fake.calls == ["brave", "tavily", "kimi"]
    assert (r["provider_used"], r["fallback_used"]) == ("kimi", True)
    assert r["results"] == "Webb launched on 25 December 2021." and r["citations"] == cited
    assert [(a["provider"], a["error_code"]) for a in r["attempts"]] == [
        ("brave", "server_error"), ("tavily", "quota_exhausted"), ("kimi", None)]  # fmt: skip
