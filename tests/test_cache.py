"""The shared result cache (issue 11): key, what is stored, TTLs, the bypass, a hit that spends
nothing, single-flight across real processes, storage safety, and visibility.

Providers and engines are loopback fakes (tests/fakes.py); everything else is real: the runner,
the ledger, the SQLite cache file, the logs, and `python -m smart_search` processes."""

from __future__ import annotations

import json
import os
import re
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from smart_search.search import cache, planner
from smart_search.store import CacheEntry
from smart_search.store.files import FileStore
from tests.conftest import Env, assert_valid_result
from tests.fakes import FakeServer, Reply, fixture_bytes, fixture_json

BRAVE_PATH = "/res/v1/web/search"
GEMINI_PATH = "/v1beta/models/gemini-flash-latest:generateContent"
SERP = Path(__file__).parent / "fixtures" / "serp"
CACHE_DB = "search-cache.sqlite3"
ISO_UTC = re.compile(r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}Z$")


def api(name: str, status: int = 200, delay: float = 0.0) -> Reply:
    return Reply(status, fixture_bytes(name), {"content-type": "application/json"}, delay=delay)


def html(name: str) -> Reply:
    return Reply(200, (SERP / name).read_bytes(), {"content-type": "text/html; charset=utf-8"})


def brave_reply(title: str) -> Reply:
    """brave-ok.json with every title replaced, to tell two answers apart."""
    data: Any = fixture_json("brave-ok.json")
    for item in data["web"]["results"]:
        item["title"] = title
    return Reply(200, json=data)


@pytest.fixture
def fake() -> Any:
    with FakeServer() as server:
        yield server


def configure(env: Env, fake: FakeServer, *, keys: tuple[str, ...] = ("brave",), **extra: Any):
    config: dict[str, Any] = {
        "endpoints": {n: fake.url for n in ("gemini", "brave", "google", "bing", "duckduckgo")},
        "web_fetch_min_interval_ms": 0,
        "retry_base_delay": 10,
        "retry_max_attempts": 1,
        "agent_allocations": {
            "cron": {"gemini": 5, "brave": 5},
            "other": {"gemini": 5, "brave": 5},
        },
        "providers": {"gemini": {"unit": "request"}},
    }
    config.update(extra)
    env.write_config(config)
    for name in ("gemini", "brave"):
        env.environ.pop(f"{name.upper()}_API_KEY", None)
        if name in keys:
            env.environ[f"{name.upper()}_API_KEY"] = f"test-{name}-key"


def search(env: Env, query: str = "nasa news", agent: str = "cron", **args: Any) -> dict:
    return env.call("smart_search", {"query": query, "agent_id": agent, **args})


def cli(env: Env, query: str = "nasa news", agent: str = "cron") -> subprocess.CompletedProcess:
    call = {"tool": "smart_search", "args": {"query": query, "agent_id": agent}}
    return env.run_cli(json.dumps(call), timeout=120)


def log_lines(env: Env) -> list[dict[str, Any]]:
    lines: list[dict[str, Any]] = []
    for path in sorted((env.state_dir / "logs").glob("search-*.jsonl")):
        lines += [json.loads(x) for x in path.read_text().splitlines()]
    return lines


def brave_used(env: Env) -> int:
    return int(env.call("search_quota_status")["providers"]["brave"]["used"])


def db_rows(env: Env, sql: str) -> list[tuple]:
    with sqlite3.connect(env.state_dir / CACHE_DB) as db:
        return db.execute(sql).fetchall()


# --- the key -------------------------------------------------------------------------------------


def test_normalize_folds_unicode_case_and_whitespace() -> None:
    assert cache.normalize("  ＮＡＳＡ\u00a0News\t\n TODAY ") == "nasa news today"
    assert cache.normalize("Straße") == cache.normalize("STRASSE")
    assert cache.normalize("ﬁnance") == "finance"  # NFKC unfolds the ligature


def _run(settings: Any, query: str, brave_query: str | None = None) -> Any:
    return SimpleNamespace(
        query=query,
        settings=settings,
        api_query={"gemini": query, "brave": brave_query or query},
    )


def test_key_shares_a_route_and_separates_everything_that_changes_the_answer(env: Env) -> None:
    s = env.settings()
    brave, gemini, ddg = (
        planner.Tier(1, "brave"),
        planner.Tier(2, "gemini"),
        planner.Tier(3, "web_fetch", "duckduckgo"),
    )
    key = cache.tier_key(brave, _run(s, "NASA   news"))
    assert key == cache.tier_key(brave, _run(s, "nasa news"))
    assert len({key, cache.tier_key(gemini, _run(s, "nasa news")),
                cache.tier_key(ddg, _run(s, "nasa news"))}) == 3  # fmt: skip
    # The request settings: Brave's count, Gemini's model, the endpoint.
    env.write_config({"brave_count": 5, "gemini_model": "gemini-2.5-pro"})
    s2 = env.settings()
    assert cache.tier_key(brave, _run(s2, "nasa news")) != key
    assert cache.tier_key(gemini, _run(s2, "nasa news")) != cache.tier_key(
        gemini, _run(s, "nasa news")
    )
    env.write_config({"endpoints": {"brave": "http://127.0.0.1:9"}})
    assert cache.tier_key(brave, _run(env.settings(), "nasa news")) != key
    # The finance rule: the same words under a finance keyword list are another entry.
    env.write_config({"finance_keywords": ["nasa"]})
    assert cache.tier_key(brave, _run(env.settings(), "nasa news")) != key
    # The query actually sent: Brave's fitted one, not the one the agent wrote.
    cut = cache.tier_key(brave, _run(s, "long query words", brave_query="long query"))
    assert cut == cache.tier_key(brave, _run(s, "long query"))


# --- a hit spends nothing ----------------------------------------------------------------------


def test_second_identical_search_is_a_hit_that_spends_nothing(env: Env, fake: FakeServer) -> None:
    configure(env, fake)
    fake.route(BRAVE_PATH, api("brave-ok.json"))
    first = search(env)
    assert first["cached"] is False and first["cached_at"] is None
    assert first["provider_used"] == "brave" and first["quota_source"] == "agent_allocation"
    assert first["queries_remaining"] == 4

    again = search(env, "  NASA   News ")  # same question, other spelling
    assert again["cached"] is True and ISO_UTC.match(again["cached_at"])
    assert again["results"] == first["results"]
    assert again["provider_used"] == "brave" and again["web_fetch_engine"] is None
    assert again["quota_source"] == "none"
    assert again["queries_remaining"] == 4  # the agent's real remaining, unchanged
    assert [(a["provider"], a["outcome"], a["units"]) for a in again["attempts"]] == [
        ("cache", "success", 0)
    ]
    other = search(env, agent="other")  # another agent, same route: shares the entry
    assert other["cached"] is True and other["queries_remaining"] == 5
    assert len(fake.requests_to(BRAVE_PATH)) == 1
    assert brave_used(env) == 1

    logs = log_lines(env)
    assert [(x["cached"], x["units_saved"], x["units"]) for x in logs] == [
        (False, 0, 1),
        (True, 1, 0),
        (True, 1, 0),
    ]
    status = env.call("search_quota_status")["cache"]
    assert status["enabled"] is True and status["entries"] == 1 and status["bytes"] > 0
    assert (status["hits_today"], status["misses_today"], status["units_saved_today"]) == (2, 1, 2)


def test_a_hit_answers_an_agent_with_no_units_left(env: Env, fake: FakeServer) -> None:
    configure(
        env,
        fake,
        providers={"gemini": {"unit": "request"}, "brave": {"daily_limit": 10}},
        agent_allocations={"rich": {"gemini": 0, "brave": 10}, "broke": {"gemini": 0, "brave": 0}},
    )
    fake.route(BRAVE_PATH, api("brave-ok.json"))
    assert search(env, agent="rich")["provider_used"] == "brave"
    env.spend((("rich", "brave", 9),))  # no allocation, pool or headroom left for anyone
    hit = search(env, agent="broke")
    assert hit["cached"] is True and hit["provider_used"] == "brave" and hit["error"] is None
    assert hit["queries_remaining"] == 0
    assert len(fake.requests_to(BRAVE_PATH)) == 1 and brave_used(env) == 10


# --- what is stored, and what never is -----------------------------------------------------------


def test_a_failure_is_never_cached(env: Env, fake: FakeServer) -> None:
    configure(env, fake)
    fake.route(BRAVE_PATH, Reply(500, json={"error": "boom"}), api("brave-ok.json"))
    failed = search(env)
    assert failed["error"] is not None and failed["cached"] is False
    answered = search(env)
    assert answered["provider_used"] == "brave" and answered["cached"] is False
    assert search(env)["cached"] is True
    assert len(fake.requests_to(BRAVE_PATH)) == 2


def test_a_partial_answer_is_shown_but_not_cached(env: Env, fake: FakeServer) -> None:
    configure(env, fake, keys=("gemini",))
    cut = {
        "candidates": [
            {
                "content": {"parts": [{"text": "The index opened at 22,4"}], "role": "model"},
                "finishReason": "MAX_TOKENS",
            }
        ]
    }
    fake.route(GEMINI_PATH, Reply(200, json=cut), api("gemini-ok.json"))
    first = search(env, "AAPL share price")
    assert first["results"] == "The index opened at 22,4" and first["cached"] is False
    second = search(env, "AAPL share price")
    assert second["cached"] is False and second["results"] != first["results"]
    assert search(env, "AAPL share price")["cached"] is True  # the whole answer is kept
    assert len(fake.requests_to(GEMINI_PATH)) == 2


def test_a_blocked_page_is_not_cached_and_the_engine_that_answered_is(
    env: Env, fake: FakeServer
) -> None:
    configure(env, fake, keys=())
    fake.route("/search", html("google/blocked-sorry.html"))
    fake.route("/html/", html("duckduckgo/html-results-caffeine.html"))
    # general: Google (blocked), Bing (unscripted: 404), the API tier (no key), DuckDuckGo.
    first = search(env, "caffeine", "general")
    assert first["web_fetch_engine"] == "duckduckgo" and first["cached"] is False
    again = search(env, "caffeine", "general")
    assert again["cached"] is True and again["web_fetch_engine"] == "duckduckgo"
    assert again["provider_used"] == "web_fetch" and again["results"] == first["results"]
    assert again["attempts"][-1]["provider"] == "cache"
    assert again["attempts"][-1]["engine"] == "duckduckgo"
    # Google's block and Bing's failure (both on /search) were asked again, never served from
    # the cache; DuckDuckGo only once.
    assert len(fake.requests_to("/search")) == 4 and len(fake.requests_to("/html/")) == 1
    assert log_lines(env)[-1]["units_saved"] == 0


def test_a_cut_query_is_stored_under_the_query_actually_sent(env: Env, fake: FakeServer) -> None:
    configure(env, fake)
    fake.route(BRAVE_PATH, api("brave-ok.json"))
    words = [f"w{i}" for i in range(50)]
    first = search(env, " ".join([*words, "tail-one"]))
    second = search(env, " ".join([*words, "tail-two"]))  # Brave is sent the same 50 words
    assert first["warning"] and first["warning"] == second["warning"]
    assert second["cached"] is True and len(fake.requests_to(BRAVE_PATH)) == 1
    (key,) = [k for (k,) in db_rows(env, "SELECT key FROM entries")]
    assert key.endswith("|" + " ".join(words)) and "tail" not in key


def test_fresh_skips_the_read_and_still_writes(env: Env, fake: FakeServer) -> None:
    configure(env, fake)
    fake.route(BRAVE_PATH, brave_reply("old"), brave_reply("new"))
    assert search(env)["results"][0]["title"] == "old"
    fresh = search(env, fresh=True)
    assert fresh["cached"] is False and fresh["results"][0]["title"] == "new"
    assert fresh["quota_source"] == "agent_allocation"
    later = search(env)
    assert later["cached"] is True and later["results"][0]["title"] == "new"
    assert len(fake.requests_to(BRAVE_PATH)) == 2


def test_fresh_must_be_a_boolean(env: Env) -> None:
    r = search(env, fresh="yes")
    assert (r["error"], r["error_code"]) == ("fresh must be true or false.", "invalid_input")
    assert not env.state_dir.exists()


def test_ttl_by_class_from_config(env: Env, fake: FakeServer) -> None:
    configure(env, fake, keys=("gemini", "brave"), cache={"ttl_seconds": 1000,
                                                          "finance_ttl_seconds": 50})  # fmt: skip
    fake.route(BRAVE_PATH, api("brave-ok.json"))
    fake.route(GEMINI_PATH, api("gemini-ok.json"))
    assert search(env, "nasa news")["provider_used"] == "brave"
    assert search(env, "AAPL share price")["provider_used"] == "gemini"  # a finance query
    lifetimes = dict(db_rows(env, "SELECT substr(key, 4, 6), expires_at - stored_at FROM entries"))
    assert lifetimes == {"brave|": 1000, "gemini": 50}


def test_entries_are_dated_and_aged_by_the_injected_clock(env: Env) -> None:
    """The run's clock dates an entry and judges its age (a fleet month runs on it); the real
    time of day plays no part."""
    from smart_search.search.tiers import Attempt, Outcome

    env.write_config({"cache": {"ttl_seconds": 100}})
    settings = env.settings()
    store = FileStore(settings.state_dir, settings.lock_timeout_ms)
    now = [1_000.0]
    flight = cache.open_flight(settings, store, "nasa news", "2026-12-01", clock=lambda: now[0])
    assert flight is not None
    found = [{"title": "t", "url": "https://a.example/", "snippet": ""}]
    answer = Outcome(attempts=[], results=found, provider_used="brave")
    attempt = Attempt(1, "brave", None, "success", None, None, None, 0, 1.0, [], "none", 1)
    flight._put("k", attempt, answer)
    entry = store.cache_get("k", 1_050.0)
    assert entry is not None and (entry.stored_at, entry.expires_at) == (1_000.0, 1_100.0)
    now[0] = 1_099.0
    assert flight._get("k") is not None
    now[0] = 1_101.0  # past the TTL on the injected clock, though real time has hardly moved
    assert flight._get("k") is None


def test_disabled_cache_asks_every_time_and_writes_no_file(env: Env, fake: FakeServer) -> None:
    configure(env, fake, cache={"enabled": False})
    fake.route(BRAVE_PATH, api("brave-ok.json"))
    assert search(env)["cached"] is False and search(env)["cached"] is False
    assert len(fake.requests_to(BRAVE_PATH)) == 2
    assert not (env.state_dir / CACHE_DB).exists()
    assert env.call("search_quota_status")["cache"]["enabled"] is False


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ([], 'Config key "cache" must be an object.'),
        ({"ttl": 5}, 'Config key "cache.ttl" is not one of enabled, ttl_seconds,'),
        ({"enabled": "yes"}, 'Config key "cache.enabled" must be true or false.'),
        ({"ttl_seconds": "1h"}, 'Config key "cache.ttl_seconds" must be a whole number.'),
        ({"max_entries": -1}, 'Config key "cache.max_entries" must be from 0 to'),
    ],
)
def test_cache_config_errors_name_the_key(env: Env, value: Any, message: str) -> None:
    env.write_config({"cache": value})
    r = search(env)
    assert r["error_code"] == "config_error" and r["error"].startswith(message), r["error"]


# --- the store: LRU, expiry, leases ------------------------------------------------------------


def entry(value: bytes, at: float, ttl: float = 100.0) -> CacheEntry:
    return CacheEntry(value, at, at + ttl)


def test_store_expires_and_evicts_least_recently_used(tmp_path: Path) -> None:
    store = FileStore(str(tmp_path), 5000)
    for i, name in enumerate("abc"):
        store.cache_put(name, entry(b"x" * 10, 1000.0 + i), max_entries=3, max_bytes=1000)
    assert store.cache_get("a", 1010.0) is not None  # a is now the most recently used
    store.cache_put("d", entry(b"x" * 10, 1020.0), max_entries=3, max_bytes=1000)
    assert store.cache_get("b", 1021.0) is None and store.cache_size() == (3, 30)
    store.cache_put("e", entry(b"y" * 25, 1030.0), max_entries=10, max_bytes=40)
    assert store.cache_size() == (2, 35)  # c and a (older uses) went for the bytes limit
    assert store.cache_get("d", 1031.0) is not None
    assert store.cache_get("d", 1020.0 + 100.0) is None  # expired: never served
    assert store.cache_clear() == 2 and store.cache_size() == (0, 0)


def test_store_leases_are_exclusive_until_released_or_expired(tmp_path: Path) -> None:
    store = FileStore(str(tmp_path), 5000)
    assert store.lease_holder("k", 0.0) is None
    assert store.lease_claim("k", "a", 10.0, 100.0) is True
    assert store.lease_claim("k", "b", 10.0, 105.0) is False
    assert store.lease_claim("k", "a", 10.0, 105.0) is True  # renewal: now until 115
    assert store.lease_holder("k", 114.0) == "a"
    store.lease_release("k", "b")  # not b's to give up
    assert store.lease_holder("k", 114.0) == "a"
    assert store.lease_claim("k", "b", 10.0, 115.5) is True  # a's lease ran out
    store.lease_release("k", "b")
    assert store.lease_holder("k", 116.0) is None


# --- storage safety -------------------------------------------------------------------------------


def test_corrupt_cache_is_moved_aside_rebuilt_and_never_touches_quota(
    env: Env, fake: FakeServer
) -> None:
    configure(env, fake)
    fake.route(BRAVE_PATH, api("brave-ok.json"))
    env.state_dir.mkdir(mode=0o700)
    (env.state_dir / CACHE_DB).write_bytes(b"this is not a database " * 200)
    proc = cli(env)
    result = json.loads(proc.stdout)
    assert result["provider_used"] == "brave" and result["cached"] is False
    assert b"moved aside" in proc.stderr and b"Traceback" not in proc.stderr
    assert (env.state_dir / (CACHE_DB + ".corrupt")).read_bytes().startswith(b"this is not")
    again = json.loads(cli(env).stdout)
    assert again["cached"] is True
    assert brave_used(env) == 1 and len(fake.requests_to(BRAVE_PATH)) == 1


def test_a_symlinked_cache_is_refused_not_followed(env: Env, fake: FakeServer, tmp_path: Path):
    configure(env, fake)
    fake.route(BRAVE_PATH, api("brave-ok.json"))
    target = tmp_path / "elsewhere.db"
    target.write_bytes(b"precious")
    env.state_dir.mkdir(mode=0o700)
    (env.state_dir / CACHE_DB).symlink_to(target)
    for _ in range(2):
        proc = cli(env)
        assert json.loads(proc.stdout)["provider_used"] == "brave"
        assert b"symbolic link" in proc.stderr
    assert target.read_bytes() == b"precious" and (env.state_dir / CACHE_DB).is_symlink()
    assert len(fake.requests_to(BRAVE_PATH)) == 2  # nothing cached, nothing served


def test_cache_files_are_private(env: Env, fake: FakeServer) -> None:
    configure(env, fake)
    fake.route(BRAVE_PATH, api("brave-ok.json"))
    search(env)
    for path in env.state_dir.glob(CACHE_DB + "*"):
        assert path.stat().st_mode & 0o777 == 0o600, path


def test_the_quota_call_does_not_import_sqlite3(env: Env) -> None:
    code = (
        "import sys, json\n"
        "from smart_search.shell.runner import handle\n"
        "r = handle(sys.argv[1].encode())\n"
        "print(json.dumps([r['error'], 'sqlite3' in sys.modules]))\n"
    )
    one = json.dumps({"tool": "search_quota_status", "args": {"agent_id": "general"}})
    proc = subprocess.run([sys.executable, "-c", code, one], capture_output=True,
                          env=env.environ, timeout=60, cwd=str(env.root))  # fmt: skip
    assert json.loads(proc.stdout) == [None, False], proc.stderr


# --- visibility: cache clear -------------------------------------------------------------------


def test_cache_clear_command_empties_the_cache(env: Env, fake: FakeServer) -> None:
    configure(env, fake)
    fake.route(BRAVE_PATH, api("brave-ok.json"))
    search(env)
    assert search(env)["cached"] is True
    proc = subprocess.run([sys.executable, "-m", "smart_search", "cache", "clear"],
                          capture_output=True, env=env.environ, timeout=60)  # fmt: skip
    assert proc.returncode == 0 and proc.stdout.startswith(b"Cleared 1 cached answer "), proc
    assert env.call("search_quota_status")["cache"]["entries"] == 0
    assert search(env)["cached"] is False and len(fake.requests_to(BRAVE_PATH)) == 2
    bad = subprocess.run([sys.executable, "-m", "smart_search", "cache", "wipe"],
                         capture_output=True, env=env.environ, timeout=60)  # fmt: skip
    assert bad.returncode == 2 and b"usage" in bad.stderr


def test_doctor_summary(env: Env, fake: FakeServer) -> None:
    configure(env, fake)
    fake.route(BRAVE_PATH, api("brave-ok.json"))
    search(env)
    summary = cache.cache_summary(env.settings())
    assert summary["ok"] is True and summary["entries"] == 1 and summary["misses_today"] == 1
    assert summary["where"] == str(env.state_dir) and summary["config"]["ttl_seconds"] == 21600


# --- single-flight across real processes ------------------------------------------------------


def spawn_searches(env: Env, n: int, query: str = "nasa news") -> list[subprocess.Popen]:
    call = json.dumps({"tool": "smart_search", "args": {"query": query, "agent_id": "cron"}})
    procs = []
    for _ in range(n):
        proc = subprocess.Popen([sys.executable, "-m", "smart_search"], stdin=subprocess.PIPE,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env.environ,
                                cwd=str(env.root))  # fmt: skip
        assert proc.stdin is not None
        proc.stdin.write(call.encode())
        proc.stdin.close()
        procs.append(proc)
    return procs


def collect(proc: subprocess.Popen) -> tuple[dict[str, Any] | None, bytes]:
    out, err = proc.stdout.read(), proc.stderr.read()  # type: ignore[union-attr]
    proc.wait(timeout=180)
    return (json.loads(out) if out else None), err


def burst_config(env: Env, fake: FakeServer, **extra: Any) -> None:
    configure(
        env,
        fake,
        providers={"gemini": {"unit": "request"}, "brave": {"daily_limit": 100}},
        agent_allocations={"cron": {"gemini": 0, "brave": 50}},
        total_timeout_ms=150000,
        lock_timeout_ms=60000,
        **extra,
    )


@pytest.mark.multiprocess
def test_32_identical_calls_at_once_send_one_request(env: Env, fake: FakeServer) -> None:
    burst_config(env, fake)
    # A slow answer keeps the leader in flight while the others arrive.
    fake.route(BRAVE_PATH, api("brave-ok.json", delay=1.0))
    procs = spawn_searches(env, 32)
    answers = []
    for proc in procs:
        result, err = collect(proc)
        assert proc.returncode == 0 and err == b"" and result is not None, err[-2000:]
        assert_valid_result("smart_search", result)
        answers.append(result)
    assert len(fake.requests_to(BRAVE_PATH)) == 1
    assert all(r["provider_used"] == "brave" and r["results"] for r in answers)
    assert len({json.dumps(r["results"]) for r in answers}) == 1
    assert sorted(r["cached"] for r in answers) == [False] + [True] * 31
    assert brave_used(env) == 1


@pytest.mark.multiprocess
def test_a_failed_leader_hands_over_to_one_waiter(env: Env, fake: FakeServer) -> None:
    burst_config(env, fake)
    fake.route(BRAVE_PATH, Reply(500, json={"error": "boom"}, delay=1.0), api("brave-ok.json"))
    fake.route("/html/", Reply(404))  # the leader's last resort fails too
    procs = spawn_searches(env, 8)
    results = [collect(p)[0] for p in procs]
    assert len(fake.requests_to(BRAVE_PATH)) == 2
    answered = [r for r in results if r and r["error"] is None]
    assert len(answered) == 7 and sum(not r["cached"] for r in answered) == 1


@pytest.mark.multiprocess
def test_a_killed_leader_is_replaced_by_exactly_one_waiter(env: Env, fake: FakeServer) -> None:
    # The leader's request never gets an answer; a lease outlives a request by at most
    # request_timeout + the margin, so the waiters take over within ~10 s of the kill.
    burst_config(env, fake, request_timeout_ms=8000)
    fake.route(BRAVE_PATH, api("brave-ok.json", delay=600), api("brave-ok.json"))
    procs = spawn_searches(env, 32)
    by_pid = {p.pid: p for p in procs}
    # The signal from the victim: the fake has its request (and it holds the key's lease).
    limit = time.monotonic() + 150
    while not fake.requests_to(BRAVE_PATH):
        assert time.monotonic() < limit, "no process ever asked the fake"
        time.sleep(0.02)
    owners = db_rows(env, "SELECT owner FROM leases")
    assert len(owners) == 1, owners
    leader_pid = int(owners[0][0].split(":")[1])
    assert leader_pid in by_pid
    os.kill(leader_pid, signal.SIGKILL)

    survivors = []
    for proc in procs:
        result, err = collect(proc)
        if proc.pid == leader_pid:
            assert proc.returncode == -signal.SIGKILL  # killed in flight, not finished
            continue
        assert proc.returncode == 0 and err == b"" and result is not None, err[-2000:]
        survivors.append(result)
    assert len(survivors) == 31
    assert all(r["provider_used"] == "brave" and r["results"] for r in survivors)
    assert sorted(r["cached"] for r in survivors) == [False] + [True] * 30
    assert len(fake.requests_to(BRAVE_PATH)) == 2
    # The killed leader's unit stays charged: its request left and may have been billed.
    assert brave_used(env) == 2


@pytest.mark.multiprocess
def test_a_waiter_gives_up_at_its_deadline_and_spends_nothing(env: Env, fake: FakeServer) -> None:
    configure(env, fake, total_timeout_ms=1500)
    fake.route(BRAVE_PATH, api("brave-ok.json"))
    # Another process holds the key's lease for a long time and never answers.
    key = cache.tier_key(planner.Tier(1, "brave"), _run(env.settings(), "nasa news"))
    FileStore(str(env.state_dir), 5000).lease_claim(key, "elsewhere:1:x", 600.0, time.time())
    r = search(env)
    assert r["error"] is not None and r["cached"] is False
    waited = r["attempts"][0]
    assert (waited["provider"], waited["outcome"], waited["error_code"]) == (
        "brave",
        "skipped",
        "timeout",
    )
    assert "another process" in waited["error"] and waited["units"] == 0
    assert fake.requests == [] and brave_used(env) == 0


def test_the_heartbeat_keeps_a_slow_leaders_lease(
    env: Env, fake: FakeServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A lease of 1.5 s (0.5 s request timeout + 1 s margin), a leader in flight for 4 s.
    configure(env, fake, request_timeout_ms=500)
    monkeypatch.setattr(cache, "LEASE_MARGIN_S", 1.0)
    settings = env.settings()
    store = FileStore(str(env.state_dir), 5000)
    flight = cache.Flight(settings, store, 3600, "2026-12-01")
    run = SimpleNamespace(**vars(_run(settings, "nasa news")), deadline=time.monotonic() + 60)
    key = cache.tier_key(planner.Tier(1, "brave"), run)
    seen = []

    def slow_tier(tier: Any, run: Any, started: float) -> Any:
        for _ in range(8):
            time.sleep(0.5)
            seen.append(FileStore(str(env.state_dir), 5000).lease_holder(key, time.time()))
        return SimpleNamespace(outcome="failed"), None

    flight.walk(slow_tier, planner.Tier(1, "brave"), run, time.monotonic())
    assert seen == [flight.owner] * 8
    assert store.lease_holder(key, time.time()) is None  # given up when the tier ended


def test_search_filters_are_part_of_the_key(env: Env, fake: FakeServer) -> None:
    """The same query with another freshness or count is another question: never a hit."""
    configure(env, fake)
    fake.route(BRAVE_PATH, api("brave-ok.json"))
    base = {"query": "nasa news", "agent_id": "cron"}
    assert env.call("smart_search", base)["cached"] is False
    assert env.call("smart_search", base)["cached"] is True
    week = env.call("smart_search", {**base, "freshness": "week"})
    assert week["cached"] is False
    assert env.call("smart_search", {**base, "freshness": "week"})["cached"] is True
    assert env.call("smart_search", {**base, "count": 3})["cached"] is False
    assert len(fake.requests_to(BRAVE_PATH)) == 3


def test_a_key_a_provider_echoes_never_reaches_the_cache_file(env: Env, fake: FakeServer) -> None:
    """Nothing smart-search writes holds an API key, even when the provider echoes it back: the
    cached answer is scrubbed before it is stored, so a hit cannot replay it either."""
    configure(env, fake)
    key = "SENTINEL-BRAVE-KEY-cache-3f9a71"
    env.environ["BRAVE_API_KEY"] = key
    data: Any = fixture_json("brave-ok.json")
    data["web"]["results"][0]["description"] = f"your token is {key}, keep it safe"
    fake.route(BRAVE_PATH, Reply(200, json=data))
    first = search(env)
    assert first["cached"] is False and key not in json.dumps(first)
    hit = search(env)
    assert hit["cached"] is True and key not in json.dumps(hit)
    assert "[redacted]" in hit["results"][0]["snippet"]
    for path in env.state_dir.rglob("*"):
        if path.is_file():
            assert key.encode() not in path.read_bytes(), path
