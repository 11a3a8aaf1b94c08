"""Redis Sentinel (issue 27 point 4): the `redis+sentinel://` URL, a failover mid-burst, a lost
EXEC reply, and a failover to a replica that lacks the last writes.

Every test runs real processes on loopback: a primary `redis-server`, its replica and one or
three `redis-sentinel` (tests/redis_support.py `SentinelGroup`), and smart-search hosts (state
directories of their own) spending against a fake provider (tests/fakes.py).
"""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from smart_search import errors
from smart_search.host.redis_url import SentinelURL, parse_sentinel
from smart_search.store.redis import masked
from tests.conftest import Env
from tests.fakes import FakeServer, Reply, fixture_bytes
from tests.redis_support import RedisServer, ReplyDropper, SentinelGroup
from tests.test_redis import cli, hosts, run_fleet

SERP = Path(__file__).parent / "fixtures" / "serp"
DDG_PAGE = SERP / "duckduckgo" / "html-results-caffeine.html"
BRAVE = "/res/v1/web/search"


# --- the URL -------------------------------------------------------------------------------------


def test_sentinel_url_parts() -> None:
    assert parse_sentinel("redis+sentinel://h1,h2:26380/mymaster") == SentinelURL(
        sentinels=(("h1", 26379), ("h2", 26380)), service="mymaster"
    )
    full = parse_sentinel(
        "redis+sentinel://app:p%40ss+w@[::1]:26379,10.0.0.2/cache-1/3"
        "?sentinel_password=s%26p+x&sentinel_username=watch"
    )
    assert full == SentinelURL(
        sentinels=(("::1", 26379), ("10.0.0.2", 26379)),
        service="cache-1",
        db=3,
        username="app",
        password="p@ss+w",
        sentinel_username="watch",
        sentinel_password="s&p+x",
    )
    assert parse_sentinel("REDIS+SENTINEL://:only-pw@h/m/").password == "only-pw"


@pytest.mark.parametrize(
    ("url", "why"),
    [
        ("redis+sentinel://:hunter2@/mymaster", "each sentinel must be host or host:port"),
        ("redis+sentinel://:hunter2@h1,,h2/mymaster", "each sentinel must be host or host:port"),
        ("redis+sentinel://:hunter2@h1:port/mymaster", "port is not a number"),
        ("redis+sentinel://:hunter2@h1:70000/mymaster", "port is not a number"),
        ("redis+sentinel://:hunter2@h1", "service name"),
        ("redis+sentinel://:hunter2@h1/my master/0", "service name"),
        ("redis+sentinel://:hunter2@h1/m/zero", "database after the service name"),
        ("redis+sentinel://:pw@h1/m?hunter2", "name=value"),
        ("redis+sentinel://:pw@h1/m?hunter2=1", "an option other than sentinel_password"),
        ("redis+sentinel://h1/m?sentinel_password=a&sentinel_password=hunter2", "more than once"),
    ],
)
def test_a_bad_sentinel_url_is_a_config_error_that_never_quotes_it(
    env: Env, url: str, why: str
) -> None:
    env.write_config({"state_backend": {"kind": "redis", "url": url}})
    result = env.call("search_quota_status")
    assert result["error_code"] == "config_error"
    assert "is not a Sentinel URL (redis+sentinel://host:26379" in result["error"]
    assert why in result["error"]
    assert "hunter2" not in result["error"]


def test_masked_hides_every_password_of_a_sentinel_url() -> None:
    url = "redis+sentinel://app:pw-data@h1:26379,h2:26379/m/0?sentinel_password=pw-sent"
    assert masked(url) == "redis+sentinel://app:***@h1:26379,h2:26379/m/0?sentinel_password=***"
    assert masked("redis+sentinel://h1/m?sentinel_password=x") == (
        "redis+sentinel://h1/m?sentinel_password=***"
    )
    assert masked("redis://:pw@127.0.0.1:6379/0") == "redis://:***@127.0.0.1:6379/0"
    assert masked("redis://127.0.0.1:6379/0") == "redis://127.0.0.1:6379/0"


# --- one host through the sentinels --------------------------------------------------------------


@pytest.fixture
def group(tmp_path: Path) -> Any:
    with SentinelGroup(
        tmp_path / "sentinel", password="pw-data-1", sentinel_password="pw-s-2"
    ) as g:
        yield g.start()


def test_the_ledger_lives_on_the_primary_the_sentinels_name_and_follows_a_failover(
    env: Env, group: SentinelGroup
) -> None:
    """Both passwords are needed and never printed; a primary killed gives state_unavailable at
    once (nothing spent blind), and once a sentinel has promoted the replica the same config
    reaches it, with the ledger the replica received."""
    env.redis_url = group.url
    env.write_config({"lock_timeout_ms": 2000})
    env.spend((("general", "gemini", 3),))
    primary, replica = group.primary, group.replica
    raw = group.client(primary).get(f"{env.redis_prefix}:quota")
    assert json.loads(raw)["windows"]["gemini"]["day_used"] == 3
    from smart_search.store import open_store

    assert open_store(env.settings()).where() == (
        f"redis+sentinel://:***@127.0.0.1:{group.sentinels[0].port}/mymaster/0"
        f"?sentinel_password=*** (prefix {env.redis_prefix})"
    )
    old = group.kill_primary()
    proc = env.run_cli('{"tool": "search_quota_status"}')
    down = json.loads(proc.stdout)
    assert down["error_code"] == "state_unavailable"
    assert "Nothing was spent blind" in down["error"]
    assert "sentinel_password=***" in down["error"]
    new = group.wait_failover(old)
    assert new.port == replica.port
    after = env.call("search_quota_status")
    assert after["error"] is None and after["providers"]["gemini"]["used"] == 3
    env.spend((("general", "gemini", 1),))
    assert (
        json.loads(group.client(new).get(f"{env.redis_prefix}:quota"))["windows"]["gemini"][
            "day_used"
        ]
        == 4
    )
    for secret in (b"pw-data-1", b"pw-s-2"):
        assert secret not in proc.stdout + proc.stderr


def test_wrong_sentinel_password_is_state_unavailable_without_the_password(
    env: Env, group: SentinelGroup
) -> None:
    url = group.url.replace("sentinel_password=pw-s-2", "sentinel_password=wrong-s-3")
    env.write_config({"lock_timeout_ms": 1000, "state_backend": {"kind": "redis", "url": url}})
    proc = env.run_cli('{"tool": "search_quota_status"}')
    result = json.loads(proc.stdout)
    assert result["error_code"] == "state_unavailable"
    assert "no sentinel named its primary" in result["error"]
    exported = cli(env, "state", "export")  # the operator's commands mask it the same way
    assert exported.returncode == 1 and b"sentinel_password=***" in exported.stderr
    for secret in (b"wrong-s-3", b"pw-data-1"):
        assert secret not in proc.stdout + proc.stderr + exported.stdout + exported.stderr


# --- a reply lost after EXEC ---------------------------------------------------------------------


def test_a_lost_exec_reply_is_state_unavailable_never_a_second_hold(
    env: Env, tmp_path: Path
) -> None:
    """The hold's transaction reaches the server and runs; its reply is lost (the connection
    dies, as in a crash or a failover). redis-py calls that a WatchError ("retry"): run again it
    would hold twice; taken as failed, the provider would be asked with no hold. The call gets
    state_unavailable, asks no provider, and the hold that landed stays charged (burned)."""
    server = RedisServer(tmp_path / "redis").start()
    relay = ReplyDropper(server.port)
    try:
        env.redis_url = f"redis://127.0.0.1:{relay.port}/0"
        env.write_config({"lock_timeout_ms": 3000})
        from smart_search.budget.ledger import Ledger

        ledger = Ledger(env.settings())
        relay.drop_reply_to(b"EXEC")
        with pytest.raises(errors.StateUnavailable, match="cannot be reached"):
            ledger.reserve("general", "brave")
        assert relay.dropped == 1 and relay.done.wait(30)
        import redis

        doc = json.loads(redis.Redis(port=server.port).get(f"{env.redis_prefix}:quota"))
        assert doc["windows"]["brave"]["day_used"] == 1  # once: not zero, not twice
    finally:
        relay.close()
        server.stop()


# --- a failover mid-burst ------------------------------------------------------------------------

BURST = """
import os, sys, json, time
from smart_search.shell.runner import handle
import smart_search.search.tools, smart_search.search.tiers, smart_search.store.redis
agent, stop = os.environ["BURST_AGENT"], sys.argv[2]
print("ready", flush=True)
while not os.path.exists(sys.argv[1]):
    time.sleep(0.002)
n = 0
while not os.path.exists(stop):
    n += 1
    args = {"query": "%s %d %d" % (agent, os.getpid(), n), "agent_id": agent}
    out = handle(json.dumps({"tool": "smart_search", "args": args}).encode(), os.environ)
    print("%s/%s" % (out["provider_used"], out["error_code"]), flush=True)
    if out["error_code"] or out["provider_used"] == "web_fetch":
        open("%s.saw-%s" % (stop, out["error_code"] or "web_fetch"), "w").close()
    time.sleep(0.02)
"""

ALLOCATION = 10  # three agents: the allocations are the whole day (no direct headroom)
DAILY = 30


@pytest.mark.multiprocess
def test_primary_killed_mid_burst_of_three_hosts_never_overspends(tmp_path: Path) -> None:
    """3 hosts x 3 processes search through three sentinels; the primary is SIGKILLed once
    the fake has billed 6 units. Calls caught in it answer state_unavailable (or succeed);
    once the sentinels promote the replica, calls succeed on it; the units the fake billed stay
    within every allocation and the day's limit, counted before and after the failover."""
    go, stop = tmp_path / "go", tmp_path / "stop"
    agents = [f"agent-{i}" for i in range(3)]
    seen: dict[str, Any] = {}
    with (
        SentinelGroup(tmp_path / "sentinel", sentinels=3) as group,
        FakeServer() as fake,
    ):
        group.start()
        brave = fixture_bytes("brave-ok.json")
        fake.route(BRAVE, Reply(200, brave, {"content-type": "application/json"}))
        fake.route("/html/", Reply(200, body=DDG_PAGE.read_bytes()))
        config = {
            "endpoints": {"brave": fake.url, "duckduckgo": fake.url},
            "providers": {"brave": {"daily_limit": DAILY}},
            "agent_allocations": {a: {"gemini": 0, "brave": ALLOCATION} for a in agents},
            "retry_max_attempts": 1,
            "lock_timeout_ms": 3000,
            "web_fetch_min_interval_ms": 0,
            "cache": {"enabled": False},
        }
        fleet = hosts(tmp_path, group.url, 3, config)
        for host, agent in zip(fleet, agents, strict=True):
            host.environ["BRAVE_API_KEY"] = "sentinel-brave-key"
            host.environ["BURST_AGENT"] = agent  # each host's three processes share its agent

        def billed() -> int:
            return len(fake.requests_to(BRAVE))

        def chaos() -> None:
            try:
                deadline = time.monotonic() + 240
                while billed() < 6 and time.monotonic() < deadline:
                    time.sleep(0.01)
                old = group.kill_primary()
                seen["at_kill"] = billed()
                saw = tmp_path / "stop.saw-state_unavailable"
                while not saw.exists() and time.monotonic() < deadline:
                    time.sleep(0.01)
                group.wait_failover(old)
                seen["at_failover"] = billed()
                # The next calls reach the new primary: spending resumes, up to the limits.
                while billed() <= seen["at_kill"] + 9 and time.monotonic() < deadline:
                    time.sleep(0.05)
                # Until the allocations run out and a search is sent to the web instead.
                refused = tmp_path / "stop.saw-web_fetch"
                while not refused.exists() and time.monotonic() < deadline:
                    time.sleep(0.05)
                time.sleep(0.5)
            finally:
                stop.touch()

        thread = threading.Thread(target=chaos)
        thread.start()
        try:
            procs_out = run_fleet(fleet, 3, BURST, [str(stop)], go)
        finally:
            stop.touch()
            thread.join()
        requests = fake.requests_to(BRAVE)
        status = fleet[0].call("search_quota_status")
    words = [w for out in procs_out for w in out]
    assert set(words) <= {"brave/None", "web_fetch/None", "None/state_unavailable"}, set(words)
    assert "None/state_unavailable" in words, (seen, {w: words.count(w) for w in set(words)})
    # Nine processes hold at most nine units at the kill: more billed after it were held anew,
    # and only the new primary could grant them.
    assert len(requests) > seen["at_kill"] + 9, seen
    per_agent = {a: sum(r.query["q"][0].startswith(a + " ") for r in requests) for a in agents}
    assert all(n <= ALLOCATION for n in per_agent.values()), per_agent
    assert len(requests) <= DAILY
    assert "web_fetch/None" in words  # allocations ran out and were refused, on the new primary
    # The ledger on the new primary counts at least every unit billed (a hold whose reply was
    # lost in the failover is burned, never free).
    assert status["providers"]["brave"]["used"] >= len(requests)
    assert status["providers"]["brave"]["used"] <= DAILY


# --- a failover to a replica that lacks the last writes (issue 27 point 1, the fourth fault) -----


def test_a_lagging_replica_promoted_is_restored_from_the_witnesses(tmp_path: Path) -> None:
    """The scenario is real: two hosts spend 4 units, the replica has them; then, while the
    replica is cut off, host b holds 3 more on the primary, the primary dies, and the sentinel
    promotes the replica: the new primary's ledger says 4, not 7. Host b's witness saw 7: its
    next call finds the store behind it and restores the merge of the witnesses, so the day's
    limit of 10 grants 3 more units across both hosts, not 6."""
    from smart_search.budget.ledger import Ledger

    with SentinelGroup(tmp_path / "sentinel") as group:
        group.start()
        config = {"providers": {"brave": {"daily_limit": 10}}, "lock_timeout_ms": 3000}
        a, b = hosts(tmp_path, group.url, 2, config)
        a.spend((("general", "brave", 2),))
        b.spend((("general", "brave", 2),))
        key = f"{a.redis_prefix}:quota"

        def used(node: RedisServer) -> int:
            return json.loads(group.client(node).get(key))["windows"]["brave"]["day_used"]

        def write(primary: RedisServer) -> None:
            b.spend((("general", "brave", 3),))
            assert used(primary) == 7  # acknowledged by the primary

        old = group.primary
        new = group.promote_lagging_replica(write)
        assert new.port != old.port
        assert used(new) == 4  # the 3 units the fleet was told of are gone from the store
        # The witnesses repair what the new primary lacks.
        ledger = Ledger(b.settings())
        full = ledger.full_status()
        assert full["windows"]["brave"]["daily"]["used"] == 7
        [note] = ledger.restored
        assert (note["action"], note["why"]) == ("restored", "behind")
        assert used(new) == 7
        granted = 0
        for host in (a, b, a, b, a, b):
            try:
                Ledger(host.settings()).reserve("general", "brave")
                granted += 1
            except errors.QuotaExhausted:
                pass
        assert granted == 3 and used(new) == 10


@pytest.mark.multiprocess
def test_a_burst_across_a_failover_to_a_lagging_replica_never_overspends(tmp_path: Path) -> None:
    """3 hosts x 3 processes search through the sentinel; after 6 billed units the replica is
    cut off, the burst spends at least 6 more on the primary alone, the primary dies, and the
    replica is promoted without them. Counting every unit the fake billed, before, during and
    after: within each allocation and the day; the store's ledger was restored ("behind") from
    the witnesses and ends equal to their merge."""
    from smart_search.budget.ledger import Ledger
    from smart_search.budget.quota_merge import merge_quota

    go, stop = tmp_path / "go", tmp_path / "stop"
    agents = [f"agent-{i}" for i in range(3)]
    seen: dict[str, Any] = {}
    with SentinelGroup(tmp_path / "sentinel") as group, FakeServer() as fake:
        group.start()
        fake.route(BRAVE, Reply(200, fixture_bytes("brave-ok.json"),
                                {"content-type": "application/json"}))  # fmt: skip
        fake.route("/html/", Reply(200, body=DDG_PAGE.read_bytes()))
        config = {
            "endpoints": {"brave": fake.url, "duckduckgo": fake.url},
            "providers": {"brave": {"daily_limit": DAILY}},
            "agent_allocations": {a: {"gemini": 0, "brave": ALLOCATION} for a in agents},
            "max_units_per_call": {"brave": 1},
            "retry_max_attempts": 1,
            "lock_timeout_ms": 3000,
            "web_fetch_min_interval_ms": 0,
            "cache": {"enabled": False},
        }
        fleet = hosts(tmp_path, group.url, 3, config)
        for host, agent in zip(fleet, agents, strict=True):
            host.environ["BRAVE_API_KEY"] = "sentinel-brave-key"
            host.environ["BURST_AGENT"] = agent

        def billed() -> int:
            return len(fake.requests_to(BRAVE))

        def chaos() -> None:
            try:
                deadline = time.monotonic() + 240
                while billed() < 6 and time.monotonic() < deadline:
                    time.sleep(0.01)

                def write(primary: RedisServer) -> None:  # the burst writes to it alone
                    seen["cut"] = billed()
                    while billed() < seen["cut"] + 6 and time.monotonic() < deadline:
                        time.sleep(0.01)
                    seen["killed"] = billed()

                group.promote_lagging_replica(write)
                seen["promoted"] = billed()
                refused = tmp_path / "stop.saw-web_fetch"
                while not refused.exists() and time.monotonic() < deadline:
                    time.sleep(0.05)
                time.sleep(0.5)
            finally:
                stop.touch()

        thread = threading.Thread(target=chaos)
        thread.start()
        try:
            lines = run_fleet(fleet, 3, BURST, [str(stop)], go)
        finally:
            stop.touch()
            thread.join()
        requests = fake.requests_to(BRAVE)
        raw = json.loads(group.client(group.primary).get("fleet:quota"))
    words = [w for out in lines for w in out]
    counts = {w: words.count(w) for w in set(words)}
    assert set(words) <= {"brave/None", "web_fetch/None", "None/state_unavailable"}, counts
    assert seen["killed"] >= seen["cut"] + 6, seen  # units the promoted replica never received
    per_agent = {a: sum(r.query["q"][0].startswith(a + " ") for r in requests) for a in agents}
    assert all(n <= ALLOCATION for n in per_agent.values()), (per_agent, seen, counts)
    assert len(requests) <= DAILY and "web_fetch/None" in words, (seen, counts)
    assert raw["windows"]["brave"]["day_used"] >= len(requests)
    assert any(r["why"] == "behind" for r in raw["_ledger"]["restored"]), raw["_ledger"]
    ledger = Ledger(fleet[0].settings())
    merged = None
    for host in fleet:
        w = json.loads((host.state_dir / "search-witness-quota.json").read_text())
        doc = ledger.current(w["doc"])
        merged = doc if merged is None else merge_quota(merged, doc)
    assert merged is not None
    assert merged["windows"]["brave"]["day_used"] == raw["windows"]["brave"]["day_used"]
    for a in agents:
        assert merged["agents"][a]["brave"] == raw["agents"][a]["brave"]


def test_a_primary_without_a_replica_in_sync_refuses_writes_by_name(
    env: Env, tmp_path: Path
) -> None:
    """`min-replicas-to-write` (operations.md's way to narrow what a failover can lose): with no
    replica in sync the server takes no writes, and a search says why before any request."""
    server = RedisServer(tmp_path / "redis", extra=["--min-replicas-to-write", "1"]).start()
    try:
        env.redis_url = server.url
        env.write_config({"lock_timeout_ms": 2000})
        result = env.call("smart_search", {"query": "q", "agent_id": "general"})
        assert result["error_code"] == "state_unavailable"
        assert "too few replicas are in sync (min-replicas-to-write)" in result["error"]
        assert env.call("search_quota_status")["error"] is None  # reads still answer
    finally:
        server.stop()
