"""End to end: the real CLI, providers, engines, ledger and state files against loopback fakes."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import (
    EXAMPLE_ALLOCATIONS,
    EXHAUSTED_LIMITS,
    EXHAUSTING_SPEND,
    SHAPE_KEYS,
    SPEC_EXAMPLES,
    SPEC_KEYS,
    Env,
    assert_valid_result,
    spec_view,
)
from tests.fakes import FakeServer, Reply, fixture_bytes

SERP = Path(__file__).parent / "fixtures" / "serp"
GEMINI_PATH_PREFIX = "/v1beta/models/"
BRAVE_PATH = "/res/v1/web/search"
GEMINI_KEY = "SENTINEL-GEMINI-KEY-5c1d9e"
BRAVE_KEY = "SENTINEL-BRAVE-KEY-8a7f20"


def page(name: str) -> bytes:
    return (SERP / name).read_bytes()


def html(name: str, status: int = 200) -> Reply:
    return Reply(status, page(name), {"content-type": "text/html; charset=utf-8"})


def api(name: str, status: int = 200, **headers: str) -> Reply:
    return Reply(status, fixture_bytes(name), {"content-type": "application/json", **headers})


@pytest.fixture
def fake() -> Any:
    with FakeServer() as server:
        yield server


def gemini_path(model: str = "gemini-flash-latest") -> str:
    return f"{GEMINI_PATH_PREFIX}{model}:generateContent"


def configure(env: Env, fake: FakeServer, **config: Any) -> None:
    base = {
        "endpoints": {
            name: fake.url for name in ("gemini", "brave", "google", "bing", "duckduckgo")
        },
        "web_fetch_min_interval_ms": 0,
        "retry_base_delay": 10,
        "agent_allocations": EXAMPLE_ALLOCATIONS,
    }
    base.update(config)
    # The spec's examples count one unit per search: Gemini billed per grounded prompt, as the
    # 2.x models were (the fixture's answer ran two search queries; test_billing covers that).
    providers = base.setdefault("providers", {})
    providers["gemini"] = {"unit": "request", **providers.get("gemini", {})}
    env.write_config(base)
    env.environ["GEMINI_API_KEY"] = GEMINI_KEY
    env.environ["BRAVE_API_KEY"] = BRAVE_KEY


def cli_search(env: Env, query: str, agent: str, **extra: Any) -> dict[str, Any]:
    call = {"tool": "smart_search", "args": {"query": query, "agent_id": agent, **extra}}
    proc = env.run_cli(json.dumps(call))
    assert proc.returncode == 0 and proc.stderr == b"", proc.stderr[-2000:]
    result = json.loads(proc.stdout)
    assert_valid_result("smart_search", result)
    return result


# --- the spec's six worked examples, for real -------------------------------------------------


def test_example_1_google_page_answers_the_general_agent(env: Env, fake: FakeServer) -> None:
    configure(env, fake)
    fake.route("/search", html("google/basic-results-google.html"))
    ex = SPEC_EXAMPLES[1]
    r = cli_search(env, ex.query, ex.agent_id)
    assert spec_view(r, SHAPE_KEYS) == ex.shape
    assert len(r["results"]) == 10
    assert (
        r["results"][0]["title"] == "Google" and r["results"][0]["url"] == "https://www.google.com/"
    )
    assert not fake.requests_to(BRAVE_PATH) and not fake.requests_to(gemini_path())


def test_sitelinks_reach_the_caller_on_their_result_and_from_the_cache(
    env: Env, fake: FakeServer
) -> None:
    # Issue 22: a navigational query's first result carries four sub-pages; through the whole
    # call (sanitizing, the cap, the cache, the schema) they stay on that result.
    configure(env, fake)
    fake.route("/search", html("google/results-with-sitelinks-table.html"))
    first = cli_search(env, "widgetry github", "general")
    assert first["web_fetch_engine"] == "google" and not first["cached"]
    assert [r["title"] for r in first["results"]] == [
        "example-org/widgetry: Small widgets for large dashboards",
        "Widgetry documentation",
        "What is new in widgetry 2.4",
    ]
    titles = [link["title"] for link in first["results"][0]["sitelinks"]]
    assert titles == ["Releases", "Issues", "Wiki", "CHANGELOG.md"]
    again = cli_search(env, "widgetry github", "general")
    assert again["cached"] and again["results"] == first["results"]
    assert len(fake.requests_to("/search")) == 1


def test_example_2_blocked_scrapers_then_gemini(env: Env, fake: FakeServer) -> None:
    configure(env, fake)
    fake.route("/search", html("google/blocked-sorry.html", 429))  # Google and Bing share /search
    fake.route(gemini_path(), api("gemini-ok.json"))
    ex = SPEC_EXAMPLES[2]
    r = cli_search(env, ex.query, ex.agent_id)
    assert spec_view(r, SHAPE_KEYS) == ex.shape
    assert isinstance(r["results"], str) and r["results"]
    assert r["citations"] and all(c["url"].startswith("https://") for c in r["citations"])
    assert [(a["engine"], a["error_code"]) for a in r["attempts"][:2]] == [
        ("google", "blocked"),
        ("bing", "blocked"),
    ]


def test_example_2b_bing_captcha_page_is_blocked_not_results(env: Env, fake: FakeServer) -> None:
    configure(
        env,
        fake,
        endpoints={
            "bing": fake.url + "/bing",
            "google": fake.url,
            "gemini": fake.url,
            "brave": fake.url,
            "duckduckgo": fake.url,
        },
    )
    fake.route("/search", html("google/blocked-sorry.html"))
    fake.route("/bing/search", html("bing/blocked-captcha.html"))
    fake.route(gemini_path(), api("gemini-ok.json"))
    r = cli_search(env, "today AAPL stock price", "general")
    assert r["provider_used"] == "gemini"
    assert [a["error_code"] for a in r["attempts"][:2]] == ["blocked", "blocked"]


def test_example_3_plain_query_from_google(env: Env, fake: FakeServer) -> None:
    configure(env, fake, default_provider="gemini")
    fake.route("/search", html("google/basic-results-google.html"))
    ex = SPEC_EXAMPLES[3]
    r = cli_search(env, ex.query, ex.agent_id)
    assert spec_view(r, SHAPE_KEYS) == ex.shape


def test_example_4_scheduled_finance_query_on_gemini(env: Env, fake: FakeServer) -> None:
    # The spec's example asks the same question four times and pays four times: no cache.
    configure(env, fake, cache={"enabled": False})
    fake.route(gemini_path(), api("gemini-ok.json"))
    ex = SPEC_EXAMPLES[4]
    for _ in range(3):
        cli_search(env, ex.query, ex.agent_id)
    r = cli_search(env, ex.query, ex.agent_id)
    assert spec_view(r, SHAPE_KEYS) == ex.shape
    sent = fake.requests_to(gemini_path())
    assert len(sent) == 4 and sent[0].headers["x-goog-api-key"] == GEMINI_KEY
    assert sent[0].json()["tools"] == [{"google_search": {}}]


def exhaust(env: Env, fake: FakeServer) -> None:
    configure(env, fake, providers=EXHAUSTED_LIMITS)
    fake.route(gemini_path(), api("gemini-ok.json"))
    env.spend(EXHAUSTING_SPEND)


def test_example_5_exhausted_finance_query_is_refused(env: Env, fake: FakeServer) -> None:
    exhaust(env, fake)
    ex = SPEC_EXAMPLES[5]
    r = cli_search(env, ex.query, ex.agent_id)
    assert spec_view(r, SPEC_KEYS) == {"results": None, **ex.shape, "error": ex.error}
    assert fake.requests == []  # nothing was sent anywhere


def test_example_6_exhausted_plain_query_goes_to_duckduckgo(env: Env, fake: FakeServer) -> None:
    exhaust(env, fake)
    fake.route("/html/", html("duckduckgo/html-results-caffeine.html"))
    ex = SPEC_EXAMPLES[6]
    r = cli_search(env, ex.query, ex.agent_id)
    assert spec_view(r, SHAPE_KEYS) == ex.shape
    assert len(r["results"]) == 9
    assert r["results"][0]["url"] == "https://www.sleepfoundation.org/nutrition/caffeine-and-sleep"


def test_duckduckgo_challenge_is_never_results(env: Env, fake: FakeServer) -> None:
    exhaust(env, fake)
    fake.route("/html/", html("duckduckgo/blocked-challenge.html"))
    r = cli_search(env, "latest AI research papers", "tech-news")
    assert r["results"] is None and r["attempts"][-1]["error_code"] == "blocked"


# --- quota flow under real concurrency --------------------------------------------------------


@pytest.mark.multiprocess
def test_24_concurrent_searches_spend_exactly_the_brave_budget(env: Env, fake: FakeServer) -> None:
    configure(
        env,
        fake,
        providers={"brave": {"daily_limit": 10}},
        agent_allocations={"cron": {"gemini": 0, "brave": 5}},
        lock_timeout_ms=60000,
        cache={"enabled": False},  # every process must spend (test_cache: the cached burst)
    )
    env.environ.pop("GEMINI_API_KEY")
    fake.route(BRAVE_PATH, api("brave-ok.json"))
    fake.route("/html/", html("duckduckgo/html-results-caffeine.html"))
    call = json.dumps({"tool": "smart_search", "args": {"query": "nasa news", "agent_id": "cron"}})
    procs = [
        subprocess.Popen(
            [sys.executable, "-m", "smart_search"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env=env.environ,
        )
        for _ in range(24)
    ]
    results = []
    for proc in procs:
        out, err = proc.communicate(call.encode(), timeout=120)
        assert proc.returncode == 0 and err == b""
        results.append(json.loads(out))
    for result in results:
        assert_valid_result("smart_search", result)
    sources = sorted((r["provider_used"], r["quota_source"]) for r in results)
    assert sources.count(("brave", "agent_allocation")) == 5
    assert sources.count(("brave", "provider_direct")) == 5
    assert sources.count(("web_fetch", "none")) == 14
    assert len(fake.requests_to(BRAVE_PATH)) == 10
    status = env.call("search_quota_status")
    assert status["providers"]["brave"]["used"] == 10
    assert status["agents"]["cron"]["brave"] == {"allocated": 5, "used": 10, "remaining": 0}


# --- key safety, end to end -------------------------------------------------------------------


def test_sentinel_keys_never_leak_even_when_echoed(env: Env, fake: FakeServer) -> None:
    configure(env, fake, retry_max_attempts=2)
    echo = {
        "error": {
            "code": 400,
            "message": f"API key not valid: {GEMINI_KEY}",
            "status": "INVALID_ARGUMENT",
        }
    }
    fake.route(gemini_path(), Reply(400, json=echo))
    fake.route(
        BRAVE_PATH,
        Reply(
            422,
            json={
                "error": {"detail": f"bad token {BRAVE_KEY}", "code": "SUBSCRIPTION_TOKEN_INVALID"}
            },
        ),
    )
    fake.route("/html/", Reply(500, f"<html>{GEMINI_KEY} {BRAVE_KEY}</html>"))
    call = json.dumps(
        {
            "tool": "smart_search",
            "args": {"query": "plain words", "agent_id": "a", "force_provider": "gemini"},
        }
    )
    proc = env.run_cli(call)
    result = json.loads(proc.stdout)
    assert result["error_code"] == "all_exhausted"
    assert [a["error"] for a in result["attempts"][:2]] == [
        "Gemini API error: 400",
        "Brave API error: 422",
    ]
    written = b"".join(p.read_bytes() for p in env.state_dir.rglob("*") if p.is_file())
    for key in (GEMINI_KEY, BRAVE_KEY):
        for where in (proc.stdout, proc.stderr, written):
            assert key.encode() not in where
        for request in fake.requests:
            assert key not in request.target
    assert fake.requests_to(gemini_path())[0].headers["x-goog-api-key"] == GEMINI_KEY
    assert fake.requests_to(BRAVE_PATH)[0].headers["x-subscription-token"] == BRAVE_KEY


# --- one deadline -----------------------------------------------------------------------------


@pytest.mark.parametrize("reply", [Reply(200, delay=60), Reply(200, b"x" * 100, trickle_delay=1.0)])
def test_a_stalling_provider_cannot_hold_the_call_past_its_deadline(
    env: Env, fake: FakeServer, reply: Reply
) -> None:
    configure(env, fake, total_timeout_ms=2000, request_timeout_ms=10000)
    env.environ.pop("GEMINI_API_KEY")
    fake.route(BRAVE_PATH, reply)
    fake.route("/html/", reply)
    started = time.monotonic()
    r = env.call("smart_search", {"query": "nasa news", "agent_id": "cron"})
    elapsed = time.monotonic() - started
    # Cut by the 2 s deadline, not by the 10 s request timeout or the 60 s stall (a margin
    # that holds on a loaded machine).
    assert elapsed < 2.0 + 5.0, elapsed
    assert r["error"] is not None and r["attempts"][0]["error_code"] == "timeout"
    # The request left before it stalled: the provider may have answered and billed it, so the
    # unit stays charged (RULINGS 4); a request that never left is refunded (test_billing).
    assert env.call("search_quota_status")["providers"]["brave"]["used"] == 1


# --- pacing, seen by the server ---------------------------------------------------------------


@pytest.mark.multiprocess
def test_engine_requests_are_paced_across_processes(env: Env, fake: FakeServer) -> None:
    configure(
        env, fake, web_fetch_min_interval_ms=1000, lock_timeout_ms=20000, cache={"enabled": False}
    )
    fake.route("/search", html("google/basic-results-google.html"))
    call = json.dumps({"tool": "smart_search", "args": {"query": "pace", "agent_id": "general"}})
    procs = [
        subprocess.Popen(
            [sys.executable, "-m", "smart_search"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            env=env.environ,
        )
        for _ in range(5)
    ]
    for proc in procs:
        out, _ = proc.communicate(call.encode(), timeout=60)
        assert json.loads(out)["web_fetch_engine"] == "google"
    arrivals = sorted(r.arrived for r in fake.requests_to("/search"))
    assert len(arrivals) == 5
    gaps = [b - a for a, b in zip(arrivals, arrivals[1:], strict=False)]
    # Slots are exactly 1 s apart (test_breaker_pacing checks the slots themselves); a request
    # reaches the server a little after its slot, by however long its process took to send it,
    # so a gap may shrink by the earlier one's delay. Without pacing these five requests would
    # arrive within a few hundred milliseconds of one another.
    assert min(gaps) >= 0.5, gaps


def test_attempts_carry_retries_and_each_attempts_latency(env: Env, fake: FakeServer) -> None:
    configure(env, fake, retry_base_delay=50)
    fake.route(gemini_path(), api("gemini-503.json", 503), api("gemini-ok.json"))
    r = cli_search(env, "NSE market open today", "stock-analysis")
    first = r["attempts"][0]
    assert (first["provider"], first["outcome"], first["retries"]) == ("gemini", "success", 1)
    latencies = first["attempt_latencies_ms"]
    assert len(latencies) == 2 and all(t >= 0 for t in latencies)
    assert first["latency_ms"] >= sum(latencies) * 0.9


def test_skipped_tiers_sent_nothing_and_web_tiers_time_their_one_request(
    env: Env, fake: FakeServer
) -> None:
    exhaust(env, fake)
    fake.route("/html/", Reply(200, b"<html><body>nothing here</body></html>"))
    r = cli_search(env, "latest AI research papers", "tech-news")
    skipped, last = r["attempts"][0], r["attempts"][-1]
    assert skipped["outcome"] == "skipped" and skipped["attempt_latencies_ms"] == []
    assert (last["engine"], last["error_code"]) == ("duckduckgo", "parse_error")
    assert len(last["attempt_latencies_ms"]) == 1
