"""A store that forgot (RULINGS 8, issue 27): notice, restore never refill, refuse, `state restore`.

Every test runs against real `redis-server` processes it starts on loopback (tests/
redis_support.py). A host is an `Env` (its own state directory, where its witness lives); hosts
share one server and one key prefix. The faults are the real ones: a restart of a server without
persistence, FLUSHDB, the quota key deleted, and the key evicted by `maxmemory` with
`allkeys-lru`.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from smart_search.budget.ledger import Ledger
from tests.conftest import Env, charge
from tests.fakes import FakeServer, Reply
from tests.redis_support import RedisServer
from tests.test_redis import hosts

SERP = Path(__file__).parent / "fixtures" / "serp"
DDG_PAGE = SERP / "duckduckgo" / "html-results-caffeine.html"
BRAVE_OK = Path(__file__).parent / "fixtures" / "api" / "brave-ok.json"
FAULTS = ("restart", "flushdb", "delete", "evict")


@pytest.fixture
def server(tmp_path: Path) -> Any:
    """A private server without persistence: a restart forgets everything."""
    srv = RedisServer(tmp_path / "redis").start()
    yield srv
    srv.stop()


def client(url: str) -> Any:
    import redis

    return redis.Redis.from_url(url)


def fleet(
    tmp_path: Path, url: str, count: int, config: dict[str, Any], **backend: Any
) -> list[Env]:
    """`count` hosts of one fleet (test_redis.hosts) with `backend`'s extra state_backend keys."""
    made = hosts(tmp_path, url, count, config)
    for host in made:
        host.write_config({**config, "state_backend": host.redis_backend(**backend)})
    return made


def forget(server: RedisServer, fault: str, prefix: str = "fleet", *, idle: bool = True) -> None:
    """Make the server forget the ledger the way `fault` does (`idle`: no host is running, so
    the ledger is still gone afterwards)."""
    c = client(server.url)
    if fault == "restart":
        server.restart()  # --save "" --appendonly no: nothing survives
    elif fault == "flushdb":
        c.flushdb()
    elif fault == "delete":
        c.delete(f"{prefix}:quota", f"{prefix}:fetch_counts")
    elif fault == "evict":
        # A tiny maxmemory with allkeys-lru: the next write evicts keys until the server fits
        # (it never does: every key goes, the ledger's too, and writes fail with OOM meanwhile).
        import redis

        c.config_set("maxmemory-policy", "allkeys-lru")
        c.config_set("maxmemory", "1")
        evicted, deadline = False, time.monotonic() + 30
        while not evicted and time.monotonic() < deadline:
            try:
                c.set("filler", b"x" * 1000)
            except redis.ResponseError:
                pass  # OOM: nothing fits
            evicted = c.get(f"{prefix}:quota") is None
        c.config_set("maxmemory", "0")
        assert evicted, "the ledger key was not evicted"
    else:
        raise AssertionError(fault)
    assert not idle or c.get(f"{prefix}:quota") is None


CONFIG = {
    "providers": {"brave": {"daily_limit": 30}},
    "agent_allocations": {"a": {"gemini": 0, "brave": 5}, "b": {"gemini": 0, "brave": 5}},
    "max_units_per_call": {"brave": 1},
}


def brave(status: dict[str, Any]) -> tuple[int, int]:
    """(used, remaining) of an agent's Brave allocation (`Ledger.agent_status`)."""
    return status["brave"]["used"], status["brave"]["remaining"]


@pytest.mark.parametrize("fault", FAULTS)
def test_each_fault_is_noticed_and_the_ledger_restored_never_refilled(
    tmp_path: Path, server: RedisServer, fault: str
) -> None:
    one, two = fleet(tmp_path, server.url, 2, CONFIG)
    for _ in range(3):
        charge(Ledger(one.settings()), "a", "brave")
    charge(Ledger(two.settings()), "b", "brave")
    forget(server, fault)
    # Host one's next call notices, restores from its witness, and says so.
    ledger = Ledger(one.settings())
    status = ledger.agent_status("a")
    assert brave(status) == (3, 2)  # not "used 0, remaining 5"
    [note] = ledger.restored
    assert note["action"] == "restored" and note["why"] == "missing"
    assert note["host"].endswith("/" + note["host"].rsplit("/", 1)[1])
    # Host two folds its own witness in on its next call: b's unit comes back too.
    ledger_two = Ledger(two.settings())
    assert brave(ledger_two.agent_status("b"))[0] == 1
    assert [n["action"] for n in ledger_two.restored] == ["folded"]
    # The whole ledger is the merge of the two witnesses: 4 units of the daily window.
    full = Ledger(one.settings()).full_status()
    assert full["windows"]["brave"]["daily"]["used"] == 4
    # And nothing happens twice: the next calls of both hosts find the store as they left it.
    again = Ledger(two.settings())
    again.full_status()
    assert again.restored == []


def test_a_fresh_store_and_a_host_without_witness_is_a_fresh_start(
    tmp_path: Path, server: RedisServer
) -> None:
    (one,) = fleet(tmp_path, server.url, 1, CONFIG)
    ledger = Ledger(one.settings())
    charge(ledger, "a", "brave")
    assert ledger.restored == []
    raw = json.loads(client(server.url).get("fleet:quota"))
    assert raw["_ledger"]["seq"] >= 2 and len(raw["_ledger"]["gen"]) == 16
    witness = json.loads((one.state_dir / "search-witness-quota.json").read_text())
    assert (witness["gen"], witness["seq"]) == (raw["_ledger"]["gen"], raw["_ledger"]["seq"])


def test_a_stale_copy_of_the_same_generation_is_behind_and_restored(
    tmp_path: Path, server: RedisServer
) -> None:
    """A replica promoted before it had the last writes, or an old snapshot reloaded: the same
    generation at a lower seq."""
    (one,) = fleet(tmp_path, server.url, 1, CONFIG)
    c = client(server.url)
    charge(Ledger(one.settings()), "a", "brave")
    stale = c.get("fleet:quota")
    for _ in range(2):
        charge(Ledger(one.settings()), "a", "brave")
    c.set("fleet:quota", stale)
    ledger = Ledger(one.settings())
    assert brave(ledger.agent_status("a"))[0] == 3
    assert ledger.restored[0]["why"] == "behind"


def test_a_fresh_generation_started_on_the_emptied_store_is_added_not_maxed(
    tmp_path: Path, server: RedisServer
) -> None:
    """A host without a witness (new to the fleet) starts afresh on the emptied store; the
    witness's units and the new ones are two histories: the restore sums them."""
    one, newcomer = fleet(tmp_path, server.url, 2, CONFIG)
    for _ in range(3):
        charge(Ledger(one.settings()), "a", "brave")
    client(server.url).flushdb()
    for _ in range(2):
        charge(Ledger(newcomer.settings()), "a", "brave")
    ledger = Ledger(one.settings())
    assert brave(ledger.agent_status("a"))[0] == 5
    assert ledger.restored[0]["why"] == "generation"


def test_holds_in_flight_come_back_as_charged_and_settle_after_the_restore(
    tmp_path: Path, server: RedisServer
) -> None:
    one, two = fleet(tmp_path, server.url, 2, CONFIG)
    ledger = Ledger(one.settings())
    hold, _ = ledger.reserve("a", "brave")  # a call in flight on host one
    client(server.url).flushdb()
    restorer = Ledger(two.settings())  # host two has no witness: a fresh start for it ...
    charge(restorer, "b", "brave")
    # ... and host one's settle finds another generation: it restores (adding both histories)
    # with its hold carried as charged, then settles it to what the provider billed (0).
    ledger.settle("a", "brave", [(hold, 0)])
    assert ledger.restored and ledger.restored[0]["unaccounted"] == 1
    full = Ledger(one.settings()).full_status()
    assert full["windows"]["brave"]["daily"]["used"] == 1  # b's unit; a's hold given back


def test_a_restore_is_recorded_for_doctor_and_in_the_document(
    tmp_path: Path, server: RedisServer
) -> None:
    (one,) = fleet(tmp_path, server.url, 1, CONFIG)
    charge(Ledger(one.settings()), "a", "brave")
    forget(server, "flushdb")
    Ledger(one.settings()).snapshot()
    meta = json.loads(client(server.url).get("fleet:quota"))["_ledger"]
    [record] = meta["restored"]
    assert record["why"] == "missing" and record["restored_units"] == 1
    from smart_search.shell.doctor import last_restore_line

    line = last_restore_line(one.settings())
    assert "Last restore" in line and record["host"] in line and "missing" in line


# --- refuse ----------------------------------------------------------------------------------


def api_config(host: Env, fake: FakeServer, **backend: Any) -> None:
    host.environ["BRAVE_API_KEY"] = "brave-SENTINEL-key-5f1e"
    host.write_config(
        {
            "endpoints": {"brave": fake.url, "duckduckgo": fake.url},
            "retry_max_attempts": 1,
            "agent_allocations": {"tech": {"gemini": 0, "brave": 5}},
            "max_units_per_call": {"brave": 1},
            "state_backend": host.redis_backend(**backend),
        }
    )


def test_refuse_mode_answers_state_lost_for_api_tiers_and_the_web_still_answers(
    tmp_path: Path, server: RedisServer
) -> None:
    one, two = fleet(tmp_path, server.url, 2, {})
    with FakeServer() as fake:
        fake.route("/res/v1/web/search", Reply(200, body=BRAVE_OK.read_bytes()))
        fake.route("/html/", Reply(200, body=DDG_PAGE.read_bytes()))
        for host in (one, two):
            api_config(host, fake, on_state_lost="refuse")
        first = one.call("smart_search", {"query": "caffeine", "agent_id": "tech"})
        assert first["provider_used"] == "brave"
        forget(server, "flushdb")
        before = len(fake.requests_to("/res/v1/web/search"))
        result = one.call("smart_search", {"query": "caffeine", "agent_id": "tech"})
        assert result["error"] is None and result["web_fetch_engine"] == "duckduckgo"
        api = result["attempts"][0]
        assert (api["outcome"], api["error_code"]) == ("skipped", "state_lost")
        assert f"redis://127.0.0.1:{server.port}/0" in api["error"]
        assert (
            "lost its data after" in api["error"] and "smart-search state restore" in api["error"]
        )
        # The other host, witness or not, refuses too: the store is marked lost.
        other = two.call("smart_search", {"query": "caffeine", "agent_id": "tech"})
        assert other["attempts"][0]["error_code"] == "state_lost"
        assert two.call("search_quota_status", {"agent_id": "tech"})["error_code"] == "state_lost"
        assert len(fake.requests_to("/res/v1/web/search")) == before  # nothing spent
        # The operator restores; the API tier answers again, counting the unit spent before.
        proc = cli(one, "state", "restore")
        assert proc.returncode == 0, proc.stderr
        status = one.call("search_quota_status", {"agent_id": "tech"})
        assert brave(status) == (1, 4)
        again = two.call("smart_search", {"query": "caffeine", "agent_id": "tech"})
        assert again["provider_used"] == "brave"
        assert again["queries_remaining"] == 3


def cli(env: Env, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "smart_search", *args], capture_output=True, env=env.environ,
        timeout=60, text=True,
    )  # fmt: skip


def test_restore_mode_says_so_in_the_warning_and_the_log_line(
    tmp_path: Path, server: RedisServer
) -> None:
    (one,) = fleet(tmp_path, server.url, 1, {})
    with FakeServer() as fake:
        fake.route("/res/v1/web/search", Reply(200, body=BRAVE_OK.read_bytes()))
        api_config(one, fake)
        one.call("smart_search", {"query": "caffeine", "agent_id": "tech"})
        forget(server, "restart")
        result = one.call("smart_search", {"query": "caffeine", "agent_id": "tech"})
    assert result["provider_used"] == "brave" and result["queries_remaining"] == 3
    assert "restored from the witnesses" in result["warning"]
    lines = [
        json.loads(x)
        for x in next((one.state_dir / "logs").glob("search-*.jsonl")).read_text().splitlines()
    ]
    assert "state_restored" not in lines[0]  # only a call that restored carries it
    restored = lines[1]["state_restored"]
    assert restored["action"] == "restored" and restored["why"] == "missing"


def test_no_api_key_in_any_witness_file(tmp_path: Path, server: RedisServer) -> None:
    (one,) = fleet(tmp_path, server.url, 1, {})
    with FakeServer() as fake:
        fake.route("/res/v1/web/search", Reply(200, body=BRAVE_OK.read_bytes()))
        api_config(one, fake)
        one.call("smart_search", {"query": "caffeine", "agent_id": "tech"})
        forget(server, "flushdb")
        one.call("smart_search", {"query": "caffeine", "agent_id": "tech"})
    files = list(one.state_dir.glob("search-witness-*.json"))
    assert files
    for path in files:
        assert "SENTINEL" not in path.read_text()
    assert b"SENTINEL" not in (client(server.url).get("fleet:quota") or b"")


# --- state restore -----------------------------------------------------------------------------


def test_state_restore_folds_an_export_and_dry_run_changes_nothing(
    tmp_path: Path, server: RedisServer
) -> None:
    (one,) = fleet(tmp_path, server.url, 1, CONFIG)
    for _ in range(2):
        charge(Ledger(one.settings()), "a", "brave")
    export = cli(one, "state", "export")
    assert export.returncode == 0
    path = tmp_path / "export.json"
    path.write_text(export.stdout)
    charge(Ledger(one.settings()), "a", "brave")
    forget(server, "flushdb")
    (one.state_dir / "search-witness-quota.json").unlink()  # the host lost its witness too
    dry = cli(one, "state", "restore", "--from", str(path), "--dry-run")
    assert dry.returncode == 0, dry.stderr
    assert "brave" in dry.stdout and "0 -> 2" in dry.stdout
    assert client(server.url).get("fleet:quota") is None  # nothing written
    done = cli(one, "state", "restore", "--from", str(path))
    assert done.returncode == 0, done.stderr
    assert brave(Ledger(one.settings()).agent_status("a"))[0] == 2


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--from", "/nonexistent/export.json"], "Cannot read /nonexistent/export.json"),
        (["--from"], "usage"),
        (["--bogus"], "usage"),
    ],
)
def test_state_restore_refuses_bad_input_and_changes_nothing(
    tmp_path: Path, server: RedisServer, args: list[str], message: str
) -> None:
    (one,) = fleet(tmp_path, server.url, 1, CONFIG)
    charge(Ledger(one.settings()), "a", "brave")
    before = client(server.url).get("fleet:quota")
    proc = cli(one, "state", "restore", *args)
    assert proc.returncode != 0 and message in proc.stderr
    assert client(server.url).get("fleet:quota") == before


def test_state_restore_refuses_a_damaged_export(tmp_path: Path, server: RedisServer) -> None:
    (one,) = fleet(tmp_path, server.url, 1, CONFIG)
    charge(Ledger(one.settings()), "a", "brave")
    before = client(server.url).get("fleet:quota")
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"format": "smart-search/state@1", "documents": {"quota": {"x": 1}}}))
    proc = cli(one, "state", "restore", "--from", str(bad))
    assert proc.returncode == 1 and "damaged" in proc.stderr
    assert client(server.url).get("fleet:quota") == before


def test_the_file_backend_writes_no_witness(env_files: Env) -> None:
    ledger = Ledger(env_files.settings())
    charge(ledger, "a", "brave")
    assert not list(env_files.state_dir.glob("search-witness-*"))
    assert ledger.restored == []


@pytest.fixture
def env_files(tmp_path: Path) -> Env:
    env = Env(tmp_path)
    env.write_config(CONFIG)
    return env


def test_a_fold_adds_what_the_restore_missed_even_after_the_fleet_spent_on_it(
    tmp_path: Path, server: RedisServer
) -> None:
    """Host one's witness lags host two's writes. After the loss host one restores from its
    own (2 units) and spends 4 more; host two's fold must then add the 3 units only it saw: a
    larger-of merge would give 6 and lose them."""
    one, two = fleet(tmp_path, server.url, 2, CONFIG)
    for _ in range(2):
        charge(Ledger(one.settings()), "a", "brave")
    for _ in range(3):
        charge(Ledger(two.settings()), "b", "brave")
    forget(server, "flushdb")
    for _ in range(4):
        charge(Ledger(one.settings()), "a", "brave")
    ledger = Ledger(two.settings())
    assert brave(ledger.agent_status("b"))[0] == 3
    [note] = ledger.restored
    assert (note["action"], note["added"], note["unaccounted"]) == ("folded", 3, 3)
    full = Ledger(one.settings()).full_status()
    assert full["windows"]["brave"]["daily"]["used"] == 9  # 2 + 3 + 4, every unit billed


def test_a_late_witness_of_the_lost_generation_is_folded_in(
    tmp_path: Path, server: RedisServer
) -> None:
    """A process that wrote just before the loss and recorded its witness only after another
    process of its host had restored: its unit is folded in on the host's next call."""
    (one,) = fleet(tmp_path, server.url, 1, CONFIG)
    charge(Ledger(one.settings()), "a", "brave")
    path = one.state_dir / "search-witness-quota.json"
    early = path.read_text()
    charge(Ledger(one.settings()), "a", "brave")
    late = path.read_text()
    path.write_text(early)  # the second write's witness is not there yet ...
    forget(server, "delete")
    assert brave(Ledger(one.settings()).agent_status("a"))[0] == 1  # restored from the first
    path.write_text(late)  # ... and lands now, over the restored generation's witness
    ledger = Ledger(one.settings())
    assert brave(ledger.agent_status("a"))[0] == 2
    assert ledger.restored[0]["action"] == "folded"


BURST = """
import json, os, sys, time
from smart_search.shell.runner import handle
import smart_search.search.tools, smart_search.search.tiers, smart_search.store.redis
print("ready", flush=True)
while not os.path.exists(sys.argv[1]):
    time.sleep(0.002)
agent = "a%d" % (os.getpid() % 2)
pause, resume = sys.argv[3], sys.argv[4]
for i in range(int(sys.argv[2])):
    # Calls already sent when the test pauses the burst run on across the fault; the rest wait
    # for the store to have forgotten, so spending goes on after it however fast this machine is.
    while os.path.exists(pause) and not os.path.exists(resume):
        time.sleep(0.002)
    args = {"query": "q %s %d %d" % (agent, os.getpid(), i), "agent_id": agent}
    r = handle(json.dumps({"tool": "smart_search", "args": args}).encode(), os.environ)
    first = r["attempts"][0] if r["attempts"] else {}
    print("%s:%s" % (r["provider_used"], first.get("error_code") or r["error_code"]), flush=True)
    if first.get("error_code") == "quota_exhausted":
        break  # the restored ledger refused this process: what follows would only scrape
    time.sleep(0.005)
"""

LIMIT = 30
BRAVE_PATH = "/res/v1/web/search"


@pytest.mark.multiprocess
@pytest.mark.parametrize("fault", FAULTS)
def test_three_hosts_burst_across_the_fault_and_no_window_passes_its_limit(
    tmp_path: Path, server: RedisServer, fault: str
) -> None:
    """Three hosts of four processes each search without pause; when the fake provider has
    billed 10 units the store forgets the ledger. Counting what the fake billed before AND after
    the fault, no window and no allocation passes its limit (the old code billed up to 40: the
    ledger started again from 0); the ledger ends equal to the merge of the hosts' witnesses."""
    import threading

    from smart_search.budget.quota_merge import merge_quota
    from tests.test_redis import run_fleet

    allocation = {"gemini": 0, "brave": 8}
    config = {"providers": {"brave": {"daily_limit": LIMIT}}, "max_units_per_call": {"brave": 1},
              "agent_allocations": {"a0": allocation, "a1": allocation}, "lock_timeout_ms": 3000,
              "retry_max_attempts": 1, "cache": {"enabled": False},
              "web_fetch_min_interval_ms": 100}  # fmt: skip
    members = fleet(tmp_path, server.url, 3, config)
    with FakeServer() as fake:
        fake.route("/res/v1/web/search", Reply(200, body=BRAVE_OK.read_bytes()))
        fake.route("/html/", Reply(200, body=DDG_PAGE.read_bytes()))
        for host in members:
            host.environ["BRAVE_API_KEY"] = "brave-key-burst"
            host.write_config({**config, "endpoints": {"brave": fake.url, "duckduckgo": fake.url},
                               "state_backend": host.redis_backend()})  # fmt: skip
        go = tmp_path / "go"
        seen: dict[str, int] = {}

        def billed() -> int:
            return len(fake.requests_to(BRAVE_PATH))

        pause, resume = tmp_path / "pause", tmp_path / "resume"

        def chaos() -> None:
            try:
                deadline = time.monotonic() + 240
                while billed() < 10 and time.monotonic() < deadline:
                    time.sleep(0.005)
                pause.touch()  # calls in flight go on; the next ones wait for the fault
                seen["before"] = billed()
                forget(server, fault, idle=False)
                seen["after_fault"] = billed()
            finally:
                resume.touch()

        thread = threading.Thread(target=chaos)
        thread.start()
        try:
            lines = run_fleet(members, 4, BURST, ["12", str(pause), str(resume)], go)
        finally:
            thread.join()
        total = billed()
        per_agent = {
            a: sum(f"q {a} " in r.query.get("q", [""])[0] for r in fake.requests_to(BRAVE_PATH))
            for a in ("a0", "a1")
        }
    words = [w for out in lines for w in out]
    assert seen["before"] >= 10 and total > seen["after_fault"], (seen, total)  # across it
    # Counting every unit the fake billed, before and after the fault: within the window ...
    assert total <= LIMIT, (seen, total, {w: words.count(w) for w in set(words)})
    # ... and the refusals show it was the restored ledger that stopped the fleet.
    assert "web_fetch:quota_exhausted" in words
    # Each agent billed at most its allocation plus the provider-direct headroom (30 - 16).
    assert all(n <= 8 + (LIMIT - 16) for n in per_agent.values()), per_agent
    # The ledger counts every billed unit (nothing refunded that was billed) ...
    raw = json.loads(client(server.url).get("fleet:quota"))
    ledger = Ledger(members[0].settings())
    assert raw["windows"]["brave"]["day_used"] >= total
    # ... and equals the merge of what the hosts' witnesses hold.
    merged = None
    for host in members:
        w = json.loads((host.state_dir / "search-witness-quota.json").read_text())
        doc = ledger.current(w["doc"])
        merged = doc if merged is None else merge_quota(merged, doc)
    assert merged is not None
    assert merged["windows"]["brave"]["day_used"] == raw["windows"]["brave"]["day_used"]
    for a in ("a0", "a1"):
        assert merged["agents"][a]["brave"] == raw["agents"][a]["brave"]
    record = raw["_ledger"]["restored"][0]
    assert record["why"] in ("missing", "generation")


def test_state_restore_takes_a_providers_reported_month_when_larger(
    tmp_path: Path, server: RedisServer
) -> None:
    from tests.test_reconcile import _KeyedUsage

    (one,) = fleet(tmp_path, server.url, 1, CONFIG)
    charge(Ledger(one.settings()), "a", "brave")
    forget(server, "flushdb")
    key = "SENTINEL-TAVILY-KEY-0042"
    usage = _KeyedUsage({key: 40}, limit=50)
    try:
        one.write_config({**CONFIG, "endpoints": {"tavily": usage.url},
                          "state_backend": one.redis_backend()})  # fmt: skip
        one.environ["TAVILY_API_KEY"] = key
        done = cli(one, "state", "restore", "--providers")
    finally:
        usage.close()
    assert done.returncode == 0, done.stderr
    assert "tavily month" in done.stdout and "0 -> 40" in done.stdout
    assert "SENTINEL" not in done.stdout + done.stderr
    full = Ledger(one.settings()).full_status()
    assert full["windows"]["tavily"]["monthly"]["used"] == 40
    assert full["windows"]["brave"]["daily"]["used"] == 1  # this host's witness, folded too
    for path in one.state_dir.glob("search-witness-*.json"):
        assert "SENTINEL" not in path.read_text()


def test_state_restore_on_the_file_backend_only_raises_counters(env_files: Env) -> None:
    ledger = Ledger(env_files.settings())
    charge(ledger, "a", "brave")
    export = env_files.root / "ledger.json"
    doc = json.loads((env_files.state_dir / "search-quota.json").read_text())
    doc["windows"]["brave"]["day_used"] = 5
    export.write_text(json.dumps(doc))
    dry = cli(env_files, "state", "restore", "--from", str(export), "--dry-run")
    assert dry.returncode == 0 and "1 -> 5" in dry.stdout, dry.stderr
    assert Ledger(env_files.settings()).full_status()["windows"]["brave"]["daily"]["used"] == 1
    done = cli(env_files, "state", "restore", "--from", str(export))
    assert done.returncode == 0, done.stderr
    assert Ledger(env_files.settings()).full_status()["windows"]["brave"]["daily"]["used"] == 5


def test_smart_fetchs_daily_counts_are_restored_too(tmp_path: Path, server: RedisServer) -> None:
    from smart_search.budget import fetches
    from smart_search.errors import FetchLimit
    from smart_search.store import open_store

    one, two = fleet(tmp_path, server.url, 2, CONFIG)
    day = "2026-12-04"
    for _ in range(2):
        fetches.reserve_fetch(open_store(one.settings()), day, "a", 3)
    fetches.reserve_fetch(open_store(two.settings()), day, "b", 3)
    forget(server, "delete")
    store = open_store(one.settings())
    assert fetches.reserve_fetch(store, day, "a", 3) == 3  # 2 restored, then this one
    with pytest.raises(FetchLimit):
        fetches.reserve_fetch(store, day, "a", 3)
    assert fetches.fetch_counts(open_store(two.settings()), day) == {"a": 3, "b": 1}
    # Host two folded its count in; its witness now holds the whole day.
    witness = json.loads((two.state_dir / "search-witness-fetch_counts.json").read_text())
    assert witness["doc"]["agents"] == {"a": 3, "b": 1}
