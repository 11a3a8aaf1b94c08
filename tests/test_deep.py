"""Deep mode and the search filters, end to end against loopback fakes (issue 15).

The merge and the ranking are pure and tested on real payloads in test_fusion.py; here the whole
call runs: three legs in parallel, the ledger, the budget, the deadline, the filters on the wire.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import pytest

from smart_search.sources import registry
from tests.conftest import EXAMPLE_ALLOCATIONS, Env
from tests.fakes import FakeServer, Reply, fixture_bytes

SERP = Path(__file__).parent / "fixtures" / "serp"
WARNING = "Result retrieved via web scraping. Quality may be lower than API results."
MODEL = "gemini-flash-latest"
GEMINI_PATH = f"/v1beta/models/{MODEL}:generateContent"
BRAVE_PATH = "/res/v1/web/search"
DDG_PATH = "/html/"
GOOGLE_PATH = "/search"
QUERY = "python httpx timeout"  # no finance or Brave keyword: routed to Brave (the default)
AGENT = "tech-news"  # Strategy A, allocation gemini 3, brave 2
# The APIs beyond the spec's two: no key here, so each deep leg of theirs is skipped.
OTHERS = [name for name in registry.api_names() if name not in ("gemini", "brave")]


def html(name: str, status: int = 200, delay: float = 0.0) -> Reply:
    body = (SERP / name).read_bytes()
    return Reply(status, body, {"content-type": "text/html; charset=utf-8"}, delay=delay)


def api(name: str, status: int = 200, delay: float = 0.0) -> Reply:
    return Reply(status, fixture_bytes(name), {"content-type": "application/json"}, delay=delay)


@pytest.fixture
def fake() -> Any:
    with FakeServer() as server:
        yield server


def configure(env: Env, fake: FakeServer, **config: Any) -> None:
    """Every source on the fake; Gemini billed per search query (Gemini 3: up to 3 a call)."""
    base: dict[str, Any] = {
        "endpoints": {n: fake.url for n in ("gemini", "brave", "google", "bing", "duckduckgo")},
        "web_fetch_min_interval_ms": 0,
        "retry_base_delay": 10,
        "agent_allocations": EXAMPLE_ALLOCATIONS,
        "providers": {"gemini": {"unit": "search_query"}},
    }
    base.update(config)
    env.write_config(base)
    env.environ["GEMINI_API_KEY"] = "SENTINEL-GEMINI-KEY-d33p01"
    env.environ["BRAVE_API_KEY"] = "SENTINEL-BRAVE-KEY-d33p02"


def answer_all(fake: FakeServer, delay: float = 0.0) -> None:
    fake.route(BRAVE_PATH, api("brave-ok.json", delay=delay))
    fake.route(GEMINI_PATH, api("gemini-ok.json", delay=delay))  # ran 2 search queries
    fake.route(DDG_PATH, html("duckduckgo/html-results-caffeine.html", delay=delay))
    fake.route(GOOGLE_PATH, html("google/basic-results-google.html", delay=delay))


def deep(env: Env, query: str = QUERY, agent: str = AGENT, **args: Any) -> dict[str, Any]:
    # env.call validates the result against schemas/smart_search.result.json.
    return env.call("smart_search", {"query": query, "agent_id": agent, "mode": "deep", **args})


def used(env: Env) -> dict[str, int]:
    status = env.call("search_quota_status", {})["providers"]
    return {p: status[p]["used"] for p in ("gemini", "brave")}


def logged_units(env: Env) -> list[int]:
    lines = [
        json.loads(line)
        for path in sorted(env.state_dir.rglob("*.jsonl"))
        for line in path.read_text().splitlines()
        if line.strip()
    ]
    return [line["units"] for line in lines if "units" in line]


def sources_of(result: dict[str, Any]) -> set[str]:
    return {s["source"] for item in result["results"] for s in item["sources"]}


# --- spending: exactly what is reported, never past the budget ---------------------------------


def test_deep_call_spends_exactly_the_units_it_reports(env: Env, fake: FakeServer) -> None:
    # The default budget (RULINGS 7): the legs' worst cases, Brave 1 + Gemini up to 3.
    configure(env, fake)
    answer_all(fake)
    r = deep(env)
    assert r["error"] is None
    by_leg = {(a["provider"], a["engine"]): a for a in r["attempts"]}
    # Without provider_order the legs are the default chain's: no other registered API is a leg.
    assert [a["tier"] for a in r["attempts"]] == [1, 2, 3]
    assert not {name for name, _ in by_leg} & set(OTHERS)
    assert by_leg[("brave", None)]["units"] == 1
    assert by_leg[("gemini", None)]["units"] == 2  # the answer ran two search queries
    assert by_leg[("web_fetch", "duckduckgo")]["units"] == 0
    assert all(a["outcome"] == "success" for a in r["attempts"] if a["provider"] not in OTHERS)
    assert used(env) == {"gemini": 2, "brave": 1}
    assert sum(a["units"] for a in r["attempts"]) == 3 == sum(used(env).values())
    assert logged_units(env) == [3]
    assert len(fake.requests_to(BRAVE_PATH)) == len(fake.requests_to(GEMINI_PATH)) == 1
    # One merged list from all three legs, Gemini's answer kept whole beside it.
    assert sources_of(r) == {"brave", "gemini", "duckduckgo"}
    assert [item["ranking"]["position"] for item in r["results"]] == list(
        range(1, len(r["results"]) + 1)
    )
    assert isinstance(r["answer"], str) and "Webb" in r["answer"]
    assert len(r["citations"]) == 3
    assert (r["provider_used"], r["fallback_used"], r["web_fetch_engine"]) == ("brave", False, None)
    assert r["quota_source"] == "agent_allocation" and r["queries_remaining"] == 1
    spend = "Deep search could spend up to 4 units (Brave 1, Gemini 3; deep_max_units 4)."
    assert spend in r["warning"]
    assert WARNING in r["warning"]  # the DuckDuckGo leg's results are in the list


def test_a_smaller_budget_leaves_out_a_leg_that_could_bill_more(env: Env, fake: FakeServer) -> None:
    configure(env, fake, deep_max_units=2)  # Brave (1) fits, Gemini (up to 3) does not
    answer_all(fake)
    r = deep(env)
    gemini = next(a for a in r["attempts"] if a["provider"] == "gemini")
    assert (gemini["outcome"], gemini["error_code"], gemini["units"]) == (
        "skipped",
        "quota_exhausted",
        0,
    )
    assert gemini["error"] == (
        "Deep search left Gemini out: one call may bill up to 3 units and deep_max_units (2) "
        "leaves 1."
    )
    assert not fake.requests_to(GEMINI_PATH)
    assert used(env) == {"gemini": 0, "brave": 1}
    assert sources_of(r) == {"brave", "duckduckgo"} and r["answer"] is None
    assert "Deep search could spend up to 1 unit (Brave 1; deep_max_units 2)." in r["warning"]


def test_the_default_budget_is_the_sum_of_the_api_legs_worst_cases(env: Env) -> None:
    """RULINGS 7: by default a deep call may ask every leg of the chain; a raised worst case
    raises it. Without provider_order the chain is Gemini (3) and Brave (1); with one, its APIs
    (Tavily's basic search 1, advanced 2)."""
    assert env.settings().deep_max_units == 3 + 1
    env.write_config({"providers": {"gemini": {"max_units_per_call": 5}}})
    assert env.settings().deep_max_units == 5 + 1
    env.write_config({"gemini_model": "gemini-2.5-flash"})  # billed per prompt: 1 each
    assert env.settings().deep_max_units == 1 + 1
    env.write_config({"providers": {"tavily": {"mode": "advanced"}}})  # not in the chain
    assert env.settings().deep_max_units == 3 + 1
    env.write_config(
        {"provider_order": ["brave", "tavily"], "providers": {"tavily": {"mode": "advanced"}}}
    )
    assert env.settings().deep_max_units == 1 + 2
    env.write_config({"deep_max_units": 3})
    assert env.settings().deep_max_units == 3


def test_deep_max_units_zero_is_web_only(env: Env, fake: FakeServer) -> None:
    configure(env, fake, deep_max_units=0)
    answer_all(fake)
    r = deep(env)
    assert not fake.requests_to(BRAVE_PATH) and not fake.requests_to(GEMINI_PATH)
    assert used(env) == {"gemini": 0, "brave": 0}
    assert [(a["provider"], a["outcome"], a["units"]) for a in r["attempts"]] == [
        ("brave", "skipped", 0),
        ("gemini", "skipped", 0),
        ("web_fetch", "success", 0),
    ]
    assert (r["provider_used"], r["web_fetch_engine"], r["quota_source"]) == (
        "web_fetch",
        "duckduckgo",
        "none",
    )
    assert r["fallback_used"] is True and sources_of(r) == {"duckduckgo"}
    assert r["warning"].startswith("Deep search spent no units (deep_max_units 0)")


def test_a_leg_never_retries_past_its_share(env: Env, fake: FakeServer) -> None:
    """Brave's read times out (maybe billed: 1 unit); a retry could bill a second unit past the
    leg's share of 1, so it is not sent, though retry_max_attempts allows it."""
    configure(env, fake, deep_max_units=1, request_timeout_ms=500, retry_max_attempts=3)
    fake.route(BRAVE_PATH, api("brave-ok.json", delay=30))
    fake.route(DDG_PATH, html("duckduckgo/html-results-caffeine.html"))
    r = deep(env)
    brave = r["attempts"][0]
    assert (brave["provider"], brave["outcome"], brave["error_code"]) == (
        "brave",
        "failed",
        "timeout",
    )
    assert brave["retries"] == 0 and len(fake.requests_to(BRAVE_PATH)) == 1
    assert brave["units"] == 1 == used(env)["brave"]
    assert r["provider_used"] == "web_fetch"


# --- finance, failures, the deadline ----------------------------------------------------------


def test_finance_query_from_a_scheduled_agent_never_scrapes(env: Env, fake: FakeServer) -> None:
    configure(env, fake, deep_max_units=4)
    answer_all(fake)
    r = deep(env, "NSE market open today", "stock-analysis")
    assert not fake.requests_to(DDG_PATH) and not fake.requests_to(GOOGLE_PATH)
    web = r["attempts"][-1]
    assert (web["engine"], web["outcome"], web["error_code"]) == (
        "duckduckgo",
        "skipped",
        "finance_blocked",
    )
    assert r["provider_used"] == "gemini"  # finance routes to Gemini
    assert sources_of(r) <= {"gemini", "brave"}


def test_finance_query_fails_as_finance_blocked_when_the_apis_fail(
    env: Env, fake: FakeServer
) -> None:
    configure(env, fake, deep_max_units=4)
    fake.route(BRAVE_PATH, api("brave-422-token.json", 422))
    fake.route(GEMINI_PATH, api("gemini-400-key.json", 400))
    fake.route(DDG_PATH, html("duckduckgo/html-results-caffeine.html"))
    r = deep(env, "NSE market open today", "stock-analysis")
    assert r["error_code"] == "finance_blocked" and r["results"] is None
    assert r["answer"] is None and not fake.requests_to(DDG_PATH)
    assert used(env) == {"gemini": 0, "brave": 0}  # 4xx answers are not billed


def test_every_leg_failing_fails_the_call(env: Env, fake: FakeServer) -> None:
    configure(env, fake, deep_max_units=4)
    fake.route(BRAVE_PATH, api("brave-422-token.json", 422))
    fake.route(GEMINI_PATH, api("gemini-400-key.json", 400))
    fake.route(DDG_PATH, html("duckduckgo/blocked-challenge.html"))
    r = deep(env)
    assert r["error_code"] == "all_exhausted" and r["results"] is None
    assert [a["outcome"] for a in r["attempts"]] == [
        "failed", "failed", "failed"]  # fmt: skip


def test_only_gemini_answering_gives_its_citations_as_the_list(env: Env, fake: FakeServer) -> None:
    configure(env, fake, deep_max_units=4)
    fake.route(BRAVE_PATH, api("brave-422-token.json", 422))
    fake.route(GEMINI_PATH, api("gemini-ok.json"))
    fake.route(DDG_PATH, html("duckduckgo/blocked-challenge.html"))
    r = deep(env)
    assert (r["provider_used"], r["fallback_used"]) == ("gemini", True)
    assert [item["title"] for item in r["results"]] == ["nasa.gov", "esa.int", "wikipedia.org"]
    assert sources_of(r) == {"gemini"} and r["answer"]
    assert r["quota_source"] == "agent_allocation"



def test_an_answer_style_leg_beside_list_legs(env: Env, fake: FakeServer) -> None:
    """Issue 30: Grok (an answer with citations, like Gemini) named in provider_order is a deep
    leg beside the list-style Brave and Exa: its citations join the merged list, its answer is
    kept whole, and it bills the searches it ran from the 3 it held."""
    with FakeServer() as exa:
        exa.route("/search", api("exa-ok.json"))
        configure(env, fake, provider_order=["brave", "exa", "grok"], deep_max_units=10,
                  agent_allocations={AGENT: {"brave": 2, "exa": 2, "grok": 3}},
                  endpoints={"brave": fake.url, "grok": fake.url, "exa": exa.url,
                             "duckduckgo": fake.url})  # fmt: skip
        env.environ |= {"EXA_API_KEY": "SENTINEL-EXA-KEY-d33p03",
                        "XAI_API_KEY": "SENTINEL-XAI-KEY-d33p04"}  # fmt: skip
        answer_all(fake)
        fake.route("/v1/responses", api("grok-ok.json"))  # ran two web searches
        r = deep(env)
    assert r["error"] is None, r
    legs = {a["provider"]: a for a in r["attempts"] if a["engine"] is None}
    assert {p: (legs[p]["outcome"], legs[p]["units"]) for p in ("brave", "exa", "grok")} == {
        "brave": ("success", 1), "exa": ("success", 1), "grok": ("success", 2)}  # fmt: skip
    assert {"brave", "exa", "grok"} <= sources_of(r)
    grok_urls = {i["url"] for i in r["results"] if "grok" in {s["source"] for s in i["sources"]}}
    assert "https://www.nasa.gov/mission/webb/" in grok_urls
    assert "The James Webb Space Telescope launched" in r["answer"]
    status = env.call("search_quota_status", {})["providers"]
    assert (status["brave"]["used"], status["exa"]["used"], status["grok"]["used"]) == (1, 1, 2)
    assert sum(a["units"] for a in r["attempts"]) == 4 == logged_units(env)[0]

def test_a_stalled_leg_does_not_hold_the_call_past_the_deadline(
    env: Env, fake: FakeServer
) -> None:
    total_ms = 3000
    configure(env, fake, deep_max_units=4, total_timeout_ms=total_ms)
    fake.route(BRAVE_PATH, api("brave-ok.json", delay=60))  # stalls
    fake.route(GEMINI_PATH, api("gemini-ok.json"))
    fake.route(DDG_PATH, html("duckduckgo/html-results-caffeine.html"))
    started = time.monotonic()
    r = deep(env)
    elapsed = time.monotonic() - started
    assert elapsed < total_ms / 1000 + 10  # generous margin: a loaded machine, no flakiness
    brave = r["attempts"][0]
    assert (brave["provider"], brave["outcome"], brave["error_code"]) == (
        "brave",
        "failed",
        "timeout",
    )
    assert r["error"] is None and sources_of(r) == {"gemini", "duckduckgo"}
    # The stalled request may have been billed: one unit, reported and in the ledger alike.
    assert sum(a["units"] for a in r["attempts"]) == sum(used(env).values()) == 1 + 2
    assert r["provider_used"] == "gemini" and r["fallback_used"] is True


def test_general_agent_deep_uses_google(env: Env, fake: FakeServer) -> None:
    configure(env, fake, deep_max_units=1)
    answer_all(fake)
    r = deep(env, agent="general")
    assert [(a["provider"], a["engine"]) for a in r["attempts"]] == [
        ("brave", None),
        ("gemini", None),
        ("web_fetch", "google"),
    ]
    assert fake.requests_to(GOOGLE_PATH) and not fake.requests_to(DDG_PATH)
    assert "google" in sources_of(r)


# --- filters on the wire ---------------------------------------------------------------------


FILTERS = {"count": 5, "freshness": "week", "country": "de", "language": "de"}


def test_filters_reach_every_deep_leg(env: Env, fake: FakeServer) -> None:
    configure(env, fake, deep_max_units=4)
    answer_all(fake)
    r = deep(env, **FILTERS)
    (brave,) = fake.requests_to(BRAVE_PATH)
    assert {k: brave.query[k] for k in ("count", "freshness", "country", "search_lang")} == {
        "count": ["5"],
        "freshness": ["pw"],
        "country": ["DE"],
        "search_lang": ["de"],
    }
    (gemini,) = fake.requests_to(GEMINI_PATH)
    body = gemini.json()
    window = body["tools"][0]["google_search"]["timeRangeFilter"]
    assert set(window) == {"startTime", "endTime"}
    assert "code DE" in body["system_instruction"]["parts"][0]["text"]
    (ddg,) = fake.requests_to(DDG_PATH)
    assert (ddg.query["df"], ddg.query["kl"]) == (["w"], ["de-de"])
    # Gemini has no count: said in the warning, never an error; the merged list holds 5.
    assert 'Gemini could not apply these filters: count "5" (searched without them).' in (
        r["warning"]
    )
    assert "Brave could not" not in r["warning"] and "DuckDuckGo could not" not in r["warning"]
    assert r["error"] is None and len(r["results"]) == 5


def test_filters_reach_the_engine_in_first_mode_and_unsupported_ones_are_said(
    env: Env, fake: FakeServer
) -> None:
    configure(env, fake)
    fake.route(GOOGLE_PATH, html("google/basic-results-google.html"))
    args = {"query": QUERY, "agent_id": "general", "count": 3, "freshness": "day",
            "country": "ZZ", "language": "de"}  # fmt: skip
    r = env.call("smart_search", args)
    (google,) = fake.requests_to(GOOGLE_PATH)
    assert {k: google.query[k] for k in ("num", "tbs", "gl", "hl", "lr")} == {
        "num": ["3"],
        "tbs": ["qdr:d"],
        "gl": ["zz"],
        "hl": ["de"],
        "lr": ["lang_de"],
    }
    assert r["provider_used"] == "web_fetch" and len(r["results"]) == 3  # cut to count
    assert "answer" not in r  # first mode: the answer is `results`


def test_unsupported_filters_of_the_answering_tier_are_in_the_warning(
    env: Env, fake: FakeServer
) -> None:
    configure(env, fake)
    fake.route(GOOGLE_PATH, html("google/blocked-sorry.html", 429))  # Google and Bing refuse
    fake.route(BRAVE_PATH, api("brave-ok.json"))
    r = env.call(
        "smart_search", {"query": QUERY, "agent_id": "general", "country": "ZZ", "language": "de"}
    )
    assert r["provider_used"] == "brave"
    assert r["warning"] == (
        'Brave could not apply these filters: country "ZZ" (searched without them).'
    )
    (brave,) = fake.requests_to(BRAVE_PATH)
    assert brave.query["search_lang"] == ["de"] and "country" not in brave.query


def test_no_filters_leave_requests_as_they_were(env: Env, fake: FakeServer) -> None:
    configure(env, fake)
    fake.route(GOOGLE_PATH, html("google/basic-results-google.html"))
    env.call("smart_search", {"query": QUERY, "agent_id": "general"})
    (google,) = fake.requests_to(GOOGLE_PATH)
    assert "tbs" not in google.query and google.query["hl"] == ["en"]


# --- config ------------------------------------------------------------------------------------


def test_source_weights_and_tracking_params_shape_the_merge(env: Env, fake: FakeServer) -> None:
    configure(env, fake, deep_max_units=1, source_weights={"duckduckgo": 5},
              tracking_params=["sessionid"])  # fmt: skip
    payload = json.loads(fixture_bytes("brave-ok.json"))
    first = payload["web"]["results"][0]
    twin = {**first, "url": first["url"] + "?sessionid=abc123"}
    payload["web"]["results"] = [first, twin]
    fake.route(BRAVE_PATH, Reply(200, json=payload))
    fake.route(DDG_PATH, html("duckduckgo/html-results-caffeine.html"))
    r = deep(env)
    # The configured tracking parameter is dropped from the key: Brave's two links are one page.
    (httpx_page,) = [i for i in r["results"] if "brave" in i["ranking"]["contributions"]]
    assert [(s["source"], s["rank"]) for s in httpx_page["sources"]] == [("brave", 1), ("brave", 2)]
    assert httpx_page["ranking"]["contributions"] == {"brave": round(1 / 61, 6)}
    # DuckDuckGo weighs 5: each of its results scores 5 / (60 + its rank) and ranks above Brave's.
    for item in r["results"]:
        if item is httpx_page:
            continue
        (rank,) = [s["rank"] for s in item["sources"]]
        assert item["ranking"]["contributions"] == {"duckduckgo": round(5 / (60 + rank), 6)}
    assert r["results"][-1] is httpx_page or r["results"][-1] == httpx_page


@pytest.mark.parametrize(
    ("config", "message"),
    [
        ({"deep_max_units": -1}, '"deep_max_units" must be from 0 to 1000.'),
        ({"source_weights": {"brave": 0}}, '"source_weights.brave" must be a positive number.'),
        (
            {"source_weights": {"yahoo": 1}},
            '"source_weights.yahoo" is not a source '
            "(gemini, brave, tavily, exa, serper, perplexity, parallel, grok, kimi, minimax, "
            "ollama, firecrawl, searxng, google, parallel_free, bing, duckduckgo, ollama_local, "
            "firecrawl_free).",
        ),
        ({"tracking_params": "utm"}, '"tracking_params" must be an array of parameter names.'),
    ],
)
def test_deep_config_is_checked(env: Env, config: dict[str, Any], message: str) -> None:
    env.write_config(config)
    r = env.call("smart_search", {"query": QUERY, "agent_id": AGENT, "mode": "deep"})
    assert (r["error_code"], r["error"]) == ("config_error", "Config key " + message)


# --- the argument form -------------------------------------------------------------------------


def test_argument_form_carries_mode_and_filters() -> None:
    from smart_search import contract
    from smart_search.shell.argforms import build_request

    argv = ["httpx timeout", "--agent-id", "tech-news", "--mode", "deep", "--count", "5",
            "--freshness", "week", "--country", "de", "--language", "de"]  # fmt: skip
    request = build_request("search", argv)
    assert request == {
        "tool": "smart_search",
        "args": {"query": "httpx timeout", "agent_id": "tech-news", "mode": "deep", "count": 5,
                 "freshness": "week", "country": "de", "language": "de"},
    }  # fmt: skip
    contract.check("smart_search.args.json", request["args"])


def test_argument_form_bad_count_gets_the_contracts_message(env: Env) -> None:
    from smart_search.shell.argforms import build_request

    request = build_request("search", ["q", "--agent-id", "a", "--count", "many"])
    assert request is not None and request["args"]["count"] == "many"
    r = env.call("smart_search", request["args"])
    assert r["error"] == 'Invalid count: "many". Use an integer from 1 to 20.'


# --- concurrent processes -------------------------------------------------------------------------


@pytest.mark.multiprocess
def test_concurrent_deep_calls_never_overspend(env: Env, fake: FakeServer) -> None:
    """Six deep calls as real processes at once, Brave with 2 units left in all (no direct
    headroom, no pool) and Gemini with none: exactly 2 Brave units are spent, and every unit the
    ledger counts is reported by some call's attempts."""
    import concurrent.futures
    import subprocess
    import sys

    configure(
        env,
        fake,
        deep_max_units=4,
        agent_allocations={"tech-news": {"gemini": 0, "brave": 2}},
        providers={"brave": {"daily_limit": 2}, "gemini": {"daily_limit": 0}},
    )
    answer_all(fake, delay=0.05)
    call = json.dumps(
        {"tool": "smart_search", "args": {"query": QUERY, "agent_id": AGENT, "mode": "deep"}}
    ).encode()

    def one(_: int) -> dict[str, Any]:
        proc = subprocess.run(
            [sys.executable, "-m", "smart_search"], input=call, capture_output=True,
            env=env.environ, cwd=str(env.root), timeout=120,
        )  # fmt: skip
        assert proc.returncode == 0 and proc.stderr == b"", proc.stderr[-2000:]
        return json.loads(proc.stdout)

    with concurrent.futures.ThreadPoolExecutor(6) as pool:
        results = list(pool.map(one, range(6)))
    reported = sum(a["units"] for r in results for a in r["attempts"])
    assert used(env) == {"gemini": 0, "brave": 2} and reported == 2
    assert len(fake.requests_to(BRAVE_PATH)) == 2 and not fake.requests_to(GEMINI_PATH)
    assert all(r["error"] is None for r in results)  # the web leg answered every call
