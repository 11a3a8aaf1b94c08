"""The Redis state backend: config, the cache contract, many hosts, faults and migration.

Every test here runs against a real `redis-server` started on a free loopback port
(tests/redis_support.py). A "host" is an `Env` of its own (HOME, state directory, openclaw.json,
environment) whose processes run in a process group of their own; hosts share one server and one
key prefix, as machines of one fleet would.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from smart_search import errors
from smart_search.store import CacheEntry
from tests.conftest import Env
from tests.fakes import FakeServer, Reply
from tests.redis_support import RedisServer, free_port

SERP = Path(__file__).parent / "fixtures" / "serp"
DDG_PAGE = SERP / "duckduckgo" / "html-results-caffeine.html"


@pytest.fixture
def server(tmp_path: Path) -> Any:
    """A private server a test may kill, pause or restart (durable: survives a SIGKILL)."""
    srv = RedisServer(tmp_path / "redis", durable=True).start()
    yield srv
    srv.stop()


def hosts(tmp_path: Path, url: str, count: int, config: dict[str, Any]) -> list[Env]:
    """`count` hosts sharing `url` under one prefix, each with its own dirs and environment."""
    made = []
    for i in range(count):
        root = tmp_path / f"host{i}"
        root.mkdir()
        host = Env(root, url)
        host.redis_prefix = "fleet"
        host.write_config(config)
        made.append(host)
    return made


def redis_client(url: str) -> Any:
    import redis

    return redis.Redis.from_url(url)


# --- config --------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("backend", "message"),
    [
        ({"kind": "redis"}, '"state_backend.url" is required'),
        ({"kind": "redis", "url": "http://h:6379"}, "must be a redis:// or rediss:// URL"),
        ({"kind": "redis", "url": "redis://:pw@h:notaport/0"}, "must be a redis:// or rediss://"),
        ({"kind": "redis", "url": "redis://h", "prefix": "a b"}, '"state_backend.prefix" must'),
        ({"kind": "redis", "url": "redis://h", "prefix": ""}, '"state_backend.prefix" must'),
        ({"kind": "memcached"}, '"state_backend.kind" must be "files" or "redis"'),
    ],
)
def test_bad_redis_config_is_a_config_error_that_never_quotes_the_url(
    env: Env, backend: dict[str, Any], message: str
) -> None:
    env.write_config({"state_backend": backend})
    result = env.call("search_quota_status")
    assert result["error_code"] == "config_error"
    assert message in result["error"]
    assert "pw" not in result["error"]


def test_password_comes_from_the_environment_and_is_never_printed(tmp_path: Path) -> None:
    srv = RedisServer(tmp_path / "redis", password="s3cret-pw").start()
    try:
        (tmp_path / "host").mkdir()
        env = Env(tmp_path / "host")
        url = f"redis://:${{REDIS_PW}}@127.0.0.1:{srv.port}/0"
        env.write_config({"state_backend": {"kind": "redis", "url": url}})
        env.environ["REDIS_PW"] = "s3cret-pw"
        settings = env.settings()
        assert settings.state_backend["url"] == f"redis://:s3cret-pw@127.0.0.1:{srv.port}/0"
        assert settings.state_backend["prefix"] == "smart-search"
        from smart_search.store import open_store

        store = open_store(settings)
        assert store.where() == f"redis://:***@127.0.0.1:{srv.port}/0 (prefix smart-search)"
        assert env.call("search_mark_agent_complete", {"agent_id": "general"})["error"] is None
        assert redis_client(srv.url).exists("smart-search:quota") == 1
        # A wrong password: refused, named with the password masked.
        env.environ["REDIS_PW"] = "wrong-pw"
        proc = env.run_cli('{"tool": "search_quota_status"}')
        result = json.loads(proc.stdout)
        assert result["error_code"] == "state_unavailable"
        assert "refused our credentials" in result["error"]
        assert f"redis://:***@127.0.0.1:{srv.port}/0" in result["error"]
        for secret in (b"s3cret-pw", b"wrong-pw"):
            assert secret not in proc.stdout + proc.stderr
    finally:
        srv.stop()


def test_missing_client_package_says_what_to_install(
    env: Env, monkeypatch: pytest.MonkeyPatch
) -> None:
    env.write_config({"state_backend": {"kind": "redis", "url": "redis://127.0.0.1:1/0"}})
    monkeypatch.setitem(sys.modules, "redis", None)  # as if not installed
    result = env.call("search_quota_status")
    assert result["error_code"] == "config_error"
    assert "pip install 'openclaw-smart-search[redis]'" in result["error"]


IMPORTS = """
import os, sys
from smart_search.shell.runner import handle
out = handle(b'{"tool": "search_quota_status"}', os.environ)
assert out["error"] is None, out
print(" ".join(m for m in ("redis", "smart_search.store.lock") if m in sys.modules))
"""


def test_the_client_is_imported_only_when_configured(env: Env, shared_redis: Any) -> None:
    run = [sys.executable, "-c", IMPORTS]
    files = subprocess.run(run, env=env.environ, capture_output=True, check=True)
    assert files.stdout.split() == []  # reads need no lock, and no redis
    env.write_config({"state_backend": env_backend(env, shared_redis.url)})
    shared = subprocess.run(run, env=env.environ, capture_output=True, check=True)
    assert shared.stdout.split() == [b"redis"]  # and never the file lock


def env_backend(env: Env, url: str) -> dict[str, Any]:
    env.redis_url = url
    return env.redis_backend()


# --- the store itself ----------------------------------------------------------------------------


def test_documents_are_prefixed_keys_that_expire(env: Env, shared_redis: Any) -> None:
    env.redis_url = shared_redis.url
    env.write_config({"web_fetch_min_interval_ms": 10})
    env.spend((("general", "gemini", 2),))
    from smart_search.budget.breaker import Breaker
    from smart_search.budget.pacing import wait_for_slot

    s = env.settings()
    Breaker(s).record("gemini", errors.Timeout("t"))
    wait_for_slot(s, "google", time.monotonic() + 5)
    client = redis_client(shared_redis.url)
    p = env.redis_prefix
    ttl = {name: client.ttl(f"{p}:{name}") for name in ("quota", "breaker", "pacing")}
    assert 39 * 86400 < ttl["quota"] <= 40 * 86400
    assert 6 * 86400 < ttl["breaker"] <= 7 * 86400
    assert 0 < ttl["pacing"] <= 86400
    assert json.loads(client.get(f"{p}:quota"))["windows"]["gemini"]["day_used"] == 2
    # Nothing of the shared state is on this host's disk, only its witness of the ledger
    # (RULINGS 8: what tells a Redis that forgot the ledger from a new fleet).
    on_disk = {p.name for p in env.state_dir.iterdir()}
    assert on_disk == {"search-witness-quota.json", "search-witness-quota.json.lock"}


def test_corrupt_quota_key_is_reported_by_name_and_left_alone(env: Env, shared_redis: Any) -> None:
    env.redis_url = shared_redis.url
    env.write_config({})
    client = redis_client(shared_redis.url)
    key = f"{env.redis_prefix}:quota"
    client.set(key, b"{torn")
    result = env.call("smart_search", {"query": "q", "agent_id": "general"})
    assert result["error_code"] == "state_corrupt"
    assert key in result["error"] and "left in place" in result["error"]
    assert client.get(key) == b"{torn"


def test_damaged_advisory_keys_read_as_empty_and_are_rebuilt(env: Env, shared_redis: Any) -> None:
    env.redis_url = shared_redis.url
    env.write_config({"circuit_failure_threshold": 1, "web_fetch_min_interval_ms": 10})
    client = redis_client(shared_redis.url)
    for name in ("breaker", "pacing"):
        client.set(f"{env.redis_prefix}:{name}", b"[]")
    from smart_search.budget.breaker import Breaker
    from smart_search.budget.pacing import wait_for_slot

    s = env.settings()
    b = Breaker(s)
    b.admit("gemini")
    wait_for_slot(s, "google", time.monotonic() + 5)
    b.record("gemini", errors.Timeout("t"))
    with pytest.raises(errors.CircuitOpen):
        b.admit("gemini")
    assert json.loads(client.get(f"{env.redis_prefix}:breaker"))["gemini"]["state"] == "open"


def test_contention_past_lock_timeout_is_lock_timeout(env: Env, shared_redis: Any) -> None:
    """A document rewritten under us on every try: bounded by lock_timeout_ms, never a spin."""
    env.redis_url = shared_redis.url
    env.write_config({"lock_timeout_ms": 300})
    from smart_search.store import open_store

    store = open_store(env.settings())
    other = redis_client(shared_redis.url)
    key = f"{env.redis_prefix}:pacing"
    runs = []

    def meddle(doc: Any) -> Any:
        runs.append(1)
        other.set(key, json.dumps({"google": len(runs)}))  # someone else writes meanwhile
        return {"google": 0}, None

    started = time.monotonic()
    with pytest.raises(errors.LockTimeout, match="stayed busy past lock_timeout_ms"):
        store.update("pacing", meddle)
    assert 0.25 < time.monotonic() - started < 10
    assert len(runs) > 1  # the change was re-run on the new document, never written stale
    assert json.loads(other.get(key)) == {"google": len(runs)}


# --- the cache contract (every backend whose store offers it) ------------------------------------


def cache_backends() -> list[str]:
    from smart_search.store.files import FileStore

    return ["files", "redis"] if hasattr(FileStore, "cache_get") else ["redis"]


@pytest.fixture(params=cache_backends())
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Any:
    if request.param == "files":
        env = Env(tmp_path)
    else:
        env = Env(tmp_path, request.getfixturevalue("shared_redis").url)
    from smart_search.store import open_store

    return open_store(env.settings())


def entry(value: bytes, ttl: float = 60.0) -> CacheEntry:
    at = tick()
    return CacheEntry(value, at, at + ttl)


def tick() -> float:
    """The wall clock, strictly later than at the last tick: the contract runs on real time, so
    a backend may take "now" from the entry, the argument or its own clock alike."""
    time.sleep(0.01)
    return time.time()


def test_cache_get_put_expiry(store: Any) -> None:
    assert store.cache_get("k", tick()) is None
    first = entry(b"v1", 60)
    store.cache_put("k", first, max_entries=10, max_bytes=1000)
    assert store.cache_get("k", tick()) == first
    assert store.cache_get("k", first.expires_at) is None  # expired at its expiry time
    store.cache_put("k", entry(b"v22"), max_entries=10, max_bytes=1000)
    assert store.cache_get("k", tick()).value == b"v22"  # replaced
    assert store.cache_size() == (1, 3)


def test_cache_evicts_least_recently_used_by_count_and_bytes(store: Any) -> None:
    for key in "abc":
        store.cache_put(key, entry(b"x" * 10), max_entries=3, max_bytes=1000)
    assert store.cache_get("a", tick()) is not None  # a is now the most recently used
    store.cache_put("d", entry(b"x" * 10), max_entries=3, max_bytes=1000)
    now = tick()
    assert [k for k in "abcd" if store.cache_get(k, now)] == ["a", "c", "d"]
    store.cache_put("e", entry(b"y" * 25), max_entries=10, max_bytes=40)
    assert store.cache_size() == (2, 35)
    assert store.cache_get("e", tick()) is not None
    assert store.cache_clear() == 2
    assert store.cache_size() == (0, 0)
    assert store.cache_get("e", tick()) is None


def test_expired_entries_go_first(store: Any) -> None:
    store.cache_put("old", entry(b"o", 2.0), max_entries=2, max_bytes=100)
    store.cache_put("new", entry(b"n"), max_entries=2, max_bytes=100)
    assert store.cache_get("old", tick()) is not None  # most recently used, but expiring
    time.sleep(2.2)  # old has expired now
    store.cache_put("third", entry(b"t"), max_entries=2, max_bytes=100)
    now = tick()
    assert store.cache_get("new", now) is not None
    assert store.cache_get("third", now) is not None
    assert store.cache_size() == (2, 2)


def test_leases_single_owner_expiry_release(store: Any) -> None:
    base = time.time()
    assert store.lease_claim("k", "a", 10.0, base)
    assert not store.lease_claim("k", "b", 10.0, base + 5)
    assert store.lease_claim("k", "a", 10.0, base + 5)  # the owner again: still its own
    assert store.lease_holder("k", base + 6) == "a"
    assert store.lease_claim("k", "b", 10.0, base + 16)  # a's lease ran out at base + 15
    store.lease_release("k", "a")  # not a's any more: nothing happens
    assert store.lease_holder("k", base + 17) == "b"
    store.lease_release("k", "b")
    assert store.lease_holder("k", base + 17) is None
    assert store.lease_claim("k", "c", 10.0, base + 17)
    store.cache_clear()  # leases go with the cache
    assert store.lease_holder("k", base + 18) is None


# --- many hosts ----------------------------------------------------------------------------------

# Imports everything, says "ready", waits for the go file, then does its work.
WORKER_HEAD = """
import os, sys, time, json
from smart_search.host.config import load_settings
from smart_search.errors import QuotaExhausted, StateError, CircuitOpen
from smart_search.budget.ledger import Ledger
from smart_search.budget.breaker import Breaker
from smart_search.shell.runner import handle
import smart_search.search.tools, smart_search.search.tiers, smart_search.store.redis
settings = load_settings(os.environ)
print("ready", flush=True)
while not os.path.exists(sys.argv[1]):
    time.sleep(0.002)
"""

RESERVE = WORKER_HEAD + """
for _ in range(int(sys.argv[2])):
    try:
        Ledger(settings).reserve("agent-%d" % (os.getpid() % 4), "brave")
        print("granted", flush=True)
    except QuotaExhausted:
        print("refused", flush=True)
    except StateError as err:
        print(err.error_code, flush=True)
    time.sleep(float(sys.argv[3]))
"""


def run_fleet(
    fleet: list[Env], per_host: int, code: str, args: list[str], go: Path, timeout: float = 300
) -> list[list[str]]:
    """Start `per_host` processes on each host (one process group per host), release them
    together, and return each one's output lines."""
    procs = []
    for host in fleet:
        leader = None
        for _ in range(per_host):
            proc = subprocess.Popen(
                [sys.executable, "-c", code, str(go), *args],
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                env=host.environ,
                process_group=0 if leader is None else leader,
            )
            leader = leader or proc.pid
            procs.append(proc)
    for proc in procs:
        assert proc.stdout.readline().strip() == b"ready", proc.stderr.read()[-2000:]
    assert len({os.getpgid(p.pid) for p in procs}) == len(fleet)
    go.touch()
    outputs = [p.communicate(timeout=timeout) for p in procs]
    for proc, (_, err) in zip(procs, outputs, strict=True):
        assert proc.returncode == 0 and not err, err.decode()[-2000:]
    return [out.decode().split() for out, _ in outputs]


def test_three_hosts_of_16_processes_grant_exactly_the_provider_limit(
    tmp_path: Path, shared_redis: Any
) -> None:
    config = {
        "providers": {"brave": {"daily_limit": 20}},
        "agent_allocations": {f"agent-{i}": {"gemini": 0, "brave": 100} for i in range(4)},
        "lock_timeout_ms": 60000,
    }
    fleet = hosts(tmp_path, shared_redis.url, 3, config)
    lines = run_fleet(fleet, 16, RESERVE, ["3", "0"], tmp_path / "go")
    granted = sum(out.count("granted") for out in lines)
    assert granted == 20
    assert sum(out.count("refused") for out in lines) == 48 * 3 - 20
    for host in fleet:  # every host sees the one ledger
        assert host.call("search_quota_status")["providers"]["brave"]["used"] == 20
        assert not (host.state_dir / "search-quota.json").exists()


TRIAL = WORKER_HEAD + """
try:
    Breaker(settings).admit("gemini")
    print("trial")
except CircuitOpen:
    print("skipped")
"""


def test_breaker_opened_on_one_host_is_open_on_the_others(
    tmp_path: Path, shared_redis: Any
) -> None:
    config = {
        # Nothing listens on port 9: every request is refused.
        "endpoints": {"gemini": "http://127.0.0.1:9", "duckduckgo": "http://127.0.0.1:9"},
        "retry_max_attempts": 1,
        "circuit_failure_threshold": 2,
        "circuit_reset_seconds": 3600,
        "default_provider": "gemini",
        "agent_allocations": {"tech": {"gemini": 5, "brave": 0}},
        "web_fetch_min_interval_ms": 0,
    }
    a, b, c = hosts(tmp_path, shared_redis.url, 3, config)
    call = '{"tool": "smart_search", "args": {"query": "plain words", "agent_id": "tech"}}'
    for host in (a, b, c):
        host.environ["GEMINI_API_KEY"] = "k"
    for _ in range(2):
        first = json.loads(a.run_cli(call).stdout)["attempts"][0]
        assert first["error_code"] == "transport_failure"
    for host in (b, c):
        first = json.loads(host.run_cli(call).stdout)["attempts"][0]
        assert first["error_code"] == "circuit_open"
        assert first["error"] == "Gemini circuit is open. Try again later."
        assert not (host.state_dir / "search-breaker.json").exists()


def test_exactly_one_half_open_trial_across_hosts(tmp_path: Path, shared_redis: Any) -> None:
    fleet = hosts(tmp_path, shared_redis.url, 3, {"circuit_reset_seconds": 60})
    opened = {"gemini": {"state": "open", "failures": 3, "opened_at": time.time() - 61}}
    redis_client(shared_redis.url).set("fleet:breaker", json.dumps(opened))
    lines = run_fleet(fleet, 6, TRIAL, [], tmp_path / "go")
    assert sorted(out[0] for out in lines) == ["skipped"] * 17 + ["trial"]


SEARCH = WORKER_HEAD + """
out = handle(json.dumps({"tool": "smart_search", "args": json.loads(sys.argv[2])}).encode(),
             os.environ)
print(json.dumps([out["provider_used"], out["error_code"], out["web_fetch_engine"]]))
"""


def test_pacing_spaces_one_engine_across_hosts(tmp_path: Path, shared_redis: Any) -> None:
    interval = 1.0
    with FakeServer() as fake:
        fake.route("/html/", Reply(200, body=DDG_PAGE.read_bytes()))
        config = {
            "endpoints": {"duckduckgo": fake.url},
            "web_fetch_min_interval_ms": int(interval * 1000),
            "total_timeout_ms": 120000,
            "retry_max_attempts": 1,
            "lock_timeout_ms": 30000,
            # Six hosts asking the same question would share one cached answer: pacing is tested.
            "cache": {"enabled": False},
        }
        fleet = hosts(tmp_path, shared_redis.url, 3, config)
        args = json.dumps({"query": "plain words", "agent_id": "tech"})
        lines = run_fleet(fleet, 2, SEARCH, [args], tmp_path / "go")
        arrivals = sorted(r.arrived for r in fake.requests_to("/html/"))
    assert len(arrivals) == 6 and len(lines) == 6
    gaps = [b - a for a, b in zip(arrivals, arrivals[1:], strict=False)]
    # Each request leaves at its slot; a loaded machine may delay one's arrival by some hundreds
    # of ms, shrinking one gap, never all of them. Unpaced, all six arrive within a blink.
    assert min(gaps) > 0.4 * interval, gaps
    assert arrivals[-1] - arrivals[0] > 4.5 * interval, gaps
    for host in fleet:
        assert not (host.state_dir / "search-pacing.json").exists()


CACHE_AND_LEASE = WORKER_HEAD + """
from smart_search.store import open_store, CacheEntry
store = open_store(settings)
won = store.lease_claim("query-key", "pid-%d" % os.getpid(), 30.0, time.time())
print("leader" if won else "follower")
if won:
    store.cache_put("query-key", CacheEntry(b"answer", time.time(), time.time() + 60),
                    max_entries=100, max_bytes=10000)
"""


def test_cache_entries_and_single_flight_span_hosts(tmp_path: Path, shared_redis: Any) -> None:
    """The store's cache and lease operations across hosts (the tier walk's use of them is the
    cache work's; here, the store contract every host relies on)."""
    from smart_search.store import open_store

    fleet = hosts(tmp_path, shared_redis.url, 3, {})
    lines = run_fleet(fleet, 6, CACHE_AND_LEASE, [], tmp_path / "go")
    assert sorted(out[0] for out in lines) == ["follower"] * 17 + ["leader"]
    for host in fleet:  # written on one host, a hit on every other
        hit = open_store(host.settings()).cache_get("query-key", time.time())
        assert hit is not None and hit.value == b"answer"


# --- faults --------------------------------------------------------------------------------------


def api_fleet_config(env: Env, url: str, fake: FakeServer, **backend: Any) -> None:
    env.redis_url = url
    env.environ["BRAVE_API_KEY"] = "brave-key-123"
    env.write_config(
        {
            "endpoints": {"brave": fake.url, "duckduckgo": fake.url},
            "retry_max_attempts": 1,
            "agent_allocations": {"tech": {"gemini": 0, "brave": 5}},
            "lock_timeout_ms": 500,
            "state_backend": env.redis_backend(**backend),
        }
    )



CALL = '{"tool": "smart_search", "args": {"query": "q", "agent_id": "tech"}}'


@pytest.mark.parametrize("fault", ["down", "hung"])
def test_unreachable_store_refuses_the_call_before_any_request(
    env: Env, server: RedisServer, fault: str
) -> None:
    with FakeServer() as fake:
        fake.route("/res/v1/web/search", Reply(200, json={"web": {"results": []}}))
        fake.route("/html/", Reply(200, body=DDG_PAGE.read_bytes()))
        api_fleet_config(env, server.url, fake)
        (server.kill if fault == "down" else server.pause)()
        try:
            started = time.monotonic()
            proc = env.run_cli(CALL)
            elapsed = time.monotonic() - started
            status = env.call("search_quota_status")
        finally:
            server.resume() if fault == "hung" else None
        result = json.loads(proc.stdout)
        assert result["error_code"] == "state_unavailable"
        assert f"127.0.0.1:{server.port}" in result["error"]
        assert fake.requests == []  # nothing sent: never spends blind
        assert elapsed < 30  # bounded by lock_timeout_ms, not a hang
        assert status["error_code"] == "state_unavailable"


@pytest.mark.parametrize("fault", ["down", "hung"])
def test_web_only_answers_from_the_web_while_the_store_is_away(
    env: Env, server: RedisServer, fault: str
) -> None:
    with FakeServer() as fake:
        fake.route("/res/v1/web/search", Reply(200, json={"web": {"results": []}}))
        fake.route("/html/", Reply(200, body=DDG_PAGE.read_bytes()))
        api_fleet_config(env, server.url, fake, on_unavailable="web_only")
        (server.kill if fault == "down" else server.pause)()
        try:
            started = time.monotonic()
            result = env.call("smart_search", {"query": "caffeine", "agent_id": "tech"})
            elapsed = time.monotonic() - started
        finally:
            server.resume() if fault == "hung" else None
        assert result["error"] is None and result["web_fetch_engine"] == "duckduckgo"
        brave, gemini = result["attempts"][:2]
        assert (brave["outcome"], brave["error_code"]) == ("skipped", "state_unavailable")
        assert gemini["error_code"] == "not_configured"
        assert fake.requests_to("/res/v1/web/search") == []
        assert result["queries_remaining"] is None
    # A hung server costs a bounded wait (lock_timeout_ms is 0.5 s here), never a hang.
    assert elapsed < 20
    # Pacing and the breaker fell back to this host's own state directory.
    assert (env.state_dir / "search-pacing.json").exists()


SIGKILL_VICTIM = """
import os, sys
from smart_search.shell.runner import handle
handle(b'{"tool": "smart_search", "args": {"query": "q", "agent_id": "tech"}}', os.environ)
"""


def test_sigkill_between_reserve_and_answer_burns_one_unit(env: Env, shared_redis: Any) -> None:
    with FakeServer() as fake:
        fake.route("/res/v1/web/search", Reply(200, json={"web": {"results": []}}, delay=60))
        api_fleet_config(env, shared_redis.url, fake)
        proc = subprocess.Popen([sys.executable, "-c", SIGKILL_VICTIM], env=env.environ)
        deadline = time.monotonic() + 60
        while not fake.requests and time.monotonic() < deadline:
            time.sleep(0.02)
        assert fake.requests, "the provider request never arrived"
        proc.send_signal(signal.SIGKILL)
        proc.wait(10)
    assert env.call("search_quota_status")["providers"]["brave"]["used"] == 1


RESERVE_UNTIL_STOPPED = WORKER_HEAD + """
stop = sys.argv[2]
while not os.path.exists(stop):
    try:
        Ledger(settings).reserve("agent-%d" % (os.getpid() % 4), "brave")
        print("granted", flush=True)
    except QuotaExhausted:
        print("refused", flush=True)
    except StateError as err:
        print(err.error_code, flush=True)
        open(stop + ".saw-" + err.error_code, "w").close()
    time.sleep(0.02)
"""


def test_server_killed_and_restarted_mid_burst_never_overspends(
    tmp_path: Path, server: RedisServer
) -> None:
    config = {
        "providers": {"brave": {"daily_limit": 60}},
        "agent_allocations": {f"agent-{i}": {"gemini": 0, "brave": 100} for i in range(4)},
        "lock_timeout_ms": 2000,
    }
    fleet = hosts(tmp_path, server.url, 3, config)
    go, stop = tmp_path / "go", tmp_path / "stop"
    seen: dict[str, Any] = {}

    def chaos() -> None:
        while not go.exists() or used_now() < 10:  # the burst is under way
            time.sleep(0.01)
        server.kill()  # SIGKILL, mid-burst
        killed_at = time.monotonic()
        # Down until a worker has met the outage (however slow a loaded machine makes them).
        saw = tmp_path / "stop.saw-state_unavailable"
        while not saw.exists() and time.monotonic() < killed_at + 60:
            time.sleep(0.01)
        time.sleep(0.2)
        server.start()  # same port, same append-only file
        seen["after_restart"] = used_now()
        deadline = time.monotonic() + 120
        while used_now() < 60 and time.monotonic() < deadline:
            time.sleep(0.05)
        time.sleep(0.3)  # some refusals after the limit, across the restart
        stop.touch()

    def used_now() -> int:
        raw = redis_client(server.url).get("fleet:quota")
        return 0 if raw is None else json.loads(raw)["windows"]["brave"]["day_used"]

    thread = threading.Thread(target=chaos)
    thread.start()
    try:
        lines = run_fleet(fleet, 6, RESERVE_UNTIL_STOPPED, [str(stop)], go)
    finally:
        stop.touch()
        thread.join()
    words = [w for out in lines for w in out]
    assert set(words) <= {"granted", "refused", "state_unavailable", "lock_timeout"}, set(words)
    assert "state_unavailable" in words, (seen, {w: words.count(w) for w in set(words)})
    # The append-only file kept every acknowledged unit through the SIGKILL.
    assert seen["after_restart"] >= 10
    granted = words.count("granted")
    used = fleet[0].call("search_quota_status")["providers"]["brave"]["used"]
    # A reply lost with the server may leave a unit counted that nobody was told of (burned),
    # never the reverse; and after the restart the ledger still stops at the limit.
    assert granted <= used == 60
    assert "refused" in words


# --- migration -----------------------------------------------------------------------------------


def cli(env: Env, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "smart_search", *args],
        capture_output=True,
        env=env.environ,
        timeout=60,
    )


def test_moving_a_host_from_files_to_redis_mid_day_loses_no_spend(
    env: Env, shared_redis: Any, tmp_path: Path
) -> None:
    config = {
        "providers": {"brave": {"daily_limit": 10}},
        "agent_allocations": {"tech": {"gemini": 2, "brave": 4}},
    }
    env.write_config(config)
    env.spend((("tech", "brave", 3), ("general", "gemini", 1)))
    env.call("search_mark_agent_complete", {"agent_id": "tech"})
    exported = cli(env, "state", "export")
    assert exported.returncode == 0, exported.stderr
    dump = json.loads(exported.stdout)
    assert dump["backend"] == "files"
    assert dump["documents"]["quota"]["windows"]["brave"]["day_used"] == 3
    path = tmp_path / "state.json"
    path.write_bytes(exported.stdout)
    # The same host, now on Redis, where another host has already spent 2 gemini units.
    env.redis_url = shared_redis.url
    env.write_config(config)
    env.spend((("general", "gemini", 2),))
    before = env.call("search_quota_status")
    imported = cli(env, "state", "import", str(path))
    assert imported.returncode == 0, imported.stderr
    assert json.loads(imported.stdout)["imported"] == ["quota"]
    after = env.call("search_quota_status")
    assert after["providers"]["brave"]["used"] == 3
    assert after["providers"]["gemini"]["used"] == 2  # the larger count, never lowered
    assert before["providers"]["gemini"]["used"] == 2
    assert after["agents"]["tech"]["completed"] is True
    assert cli(env, "state", "import", str(path)).returncode == 0  # idempotent
    assert env.call("search_quota_status")["providers"]["brave"]["used"] == 3
    # Spending continues from there: 10 - 3 units left today, not 10.
    from smart_search.budget.ledger import Ledger

    ledger = Ledger(env.settings())
    granted = 0
    for _ in range(12):
        try:
            ledger.reserve("general", "brave")
            granted += 1
        except errors.QuotaExhausted:
            pass
    assert granted == 7


def test_export_from_redis_imports_into_files_and_add_folds_a_second_ledger(
    env: Env, shared_redis: Any, tmp_path: Path
) -> None:
    env.redis_url = shared_redis.url
    env.write_config({})
    env.spend((("general", "gemini", 4),))
    exported = cli(env, "state", "export")
    assert json.loads(exported.stdout)["where"].startswith(shared_redis.url)
    path = tmp_path / "state.json"
    path.write_bytes(exported.stdout)
    (tmp_path / "files-host").mkdir()
    files = Env(tmp_path / "files-host")
    files.spend((("general", "gemini", 1),))
    assert cli(files, "state", "import", "--add", str(path)).returncode == 0
    assert files.call("search_quota_status")["providers"]["gemini"]["used"] == 5
    bad = tmp_path / "bad.json"
    bad.write_text("[1, 2]")
    refused = cli(files, "state", "import", str(bad))
    assert refused.returncode == 1 and b"neither a state export" in refused.stderr
    bad.write_text(json.dumps({"format": "smart-search/quota@2", "date": 7}))
    refused = cli(files, "state", "import", str(bad))
    assert refused.returncode == 1 and b"damaged or of an unknown version" in refused.stderr
    assert files.call("search_quota_status")["providers"]["gemini"]["used"] == 5
    assert cli(files, "state", "frobnicate").returncode == 2


def test_state_commands_name_an_unreachable_store_without_its_password(env: Env) -> None:
    url = f"redis://:hunter2-pw@127.0.0.1:{free_port()}/0"
    env.write_config({"lock_timeout_ms": 500, "state_backend": {"kind": "redis", "url": url}})
    out = cli(env, "state", "export")
    assert out.returncode == 1 and out.stdout == b""
    assert b"(state_unavailable)" in out.stderr and b"redis://:***@127.0.0.1:" in out.stderr
    assert b"hunter2" not in out.stderr


def test_merge_keeps_the_later_window_and_never_lowers() -> None:
    from smart_search.budget import quota
    from smart_search.budget.quota_merge import merge_quota

    old = quota.new_day("2026-11-29")
    old["windows"]["brave"].update(day="2026-11-29", day_used=9, month="2026-11", month_used=50)
    new = quota.new_day("2026-11-30")
    new["windows"]["brave"].update(day="2026-11-30", day_used=2, month="2026-11", month_used=40)
    for merged in (merge_quota(old, new), merge_quota(new, old)):
        window = merged["windows"]["brave"]
        assert merged["date"] == "2026-11-30"
        assert (window["day"], window["day_used"]) == ("2026-11-30", 2)
        assert window["month_used"] == 50


@pytest.mark.multiprocess
def test_a_search_answered_on_one_host_is_a_cached_hit_on_the_others(
    tmp_path: Path, shared_redis: Any
) -> None:
    """The tier walk's cache through Redis: 3 hosts x 4 processes ask the same question at
    once; single-flight lets exactly one ask the provider, and every other process, on every
    host, gets that answer as a hit that spends nothing."""
    with FakeServer() as fake:
        fake.route(
            "/res/v1/web/search",
            Reply(200, (Path(__file__).parent / "fixtures/api/brave-ok.json").read_bytes(),
                  {"content-type": "application/json"}, delay=1.0),
        )  # fmt: skip
        config = {
            "endpoints": {"brave": fake.url, "duckduckgo": fake.url},
            "agent_allocations": {"tech": {"gemini": 0, "brave": 20}},
            "retry_max_attempts": 1,
            "lock_timeout_ms": 30000,
        }
        fleet = hosts(tmp_path, shared_redis.url, 3, config)
        for host in fleet:
            host.environ["BRAVE_API_KEY"] = "sentinel-brave-key"
        args = json.dumps({"query": "nasa news", "agent_id": "tech"})
        lines = run_fleet(fleet, 4, SEARCH, [args], tmp_path / "go")
        assert len(fake.requests_to("/res/v1/web/search")) == 1
    outcomes = [json.loads(" ".join(line)) for line in lines]
    assert len(outcomes) == 12 and all(o == ["brave", None, None] for o in outcomes)
    status = fleet[2].call("search_quota_status", {"agent_id": "tech"})
    assert status["brave"]["used"] == 1  # one unit for twelve answers, across three hosts


def test_a_legacy_workspace_ledger_is_merged_into_the_redis_store(
    tmp_path: Path, shared_redis: Any
) -> None:
    """Issue 18, 8b: under the Redis backend the old per-workspace file's units go to the store
    every host reads, not to a local file nothing reads (then the old file is renamed)."""
    workspace = tmp_path / "ws"
    allocations = {"agent_allocations": {"tech": {"gemini": 5, "brave": 0}}}
    (tmp_path / "old").mkdir()
    old_env = Env(tmp_path / "old")  # the earlier release: a file ledger in the workspace
    old_env.environ["SMART_SEARCH_STATE_DIR"] = str(workspace / "shared")
    old_env.state_dir = workspace / "shared"
    old_env.write_config(allocations)
    old_env.spend((("tech", "gemini", 3), ("other", "gemini", 2)))
    (tmp_path / "new").mkdir()
    env = Env(tmp_path / "new", shared_redis.url)
    del env.environ["SMART_SEARCH_STATE_DIR"]
    env.write_config(allocations)
    env.spend((("tech", "gemini", 1),))
    env.environ["OPENCLAW_WORKSPACE_DIR"] = str(workspace)
    status = env.call("search_quota_status")
    assert status["providers"]["gemini"]["used"] == 6
    assert status["agents"]["tech"]["gemini"]["used"] == 4
    assert env.quota_doc()["windows"]["gemini"]["day_used"] == 6  # in Redis itself
    assert not (workspace / "shared" / "search-quota.json").exists()
    assert (workspace / "shared" / "search-quota.json.merged").exists()
    local = Path(env.settings().state_dir) / "search-quota.json"
    assert not local.exists()  # nothing went to a file no host reads
    assert env.call("search_quota_status")["providers"]["gemini"]["used"] == 6  # merged once
