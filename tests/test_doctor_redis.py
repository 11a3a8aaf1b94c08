"""`smart-search doctor` on a Redis backend (issue 27 point 5): it says, before a loss, what
could make the server forget the ledger: no persistence, an evicting memory policy, keys
without expiry, no replica; where the server refuses CONFIG GET it says it could not tell.

Each test starts a private `redis-server` with the setting under test (tests/redis_support.py).
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import Env
from tests.redis_support import RedisServer, SentinelGroup


def doctor(env: Env, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "smart_search", "doctor", *args],
        capture_output=True,
        env=env.environ,
        timeout=180,
    )


def redis_report(env: Env) -> tuple[dict[str, Any], str, int]:
    """doctor's Redis facts (--json), its human lines, and its exit status."""
    as_json = doctor(env, "--json")
    text = doctor(env)
    assert as_json.returncode == text.returncode, text.stderr
    return json.loads(as_json.stdout)["redis"], text.stdout.decode(), text.returncode


@pytest.fixture
def start(tmp_path: Path) -> Any:
    """start(**settings) -> an Env on a private server started with those settings."""
    started: list[RedisServer] = []

    def make(durable: bool = False, password: str | None = None, **extra: Any) -> Env:
        args = []
        for name, value in extra.items():  # --name value, or --name a b for a list
            args += [f"--{name.replace('_', '-')}", *([value] if isinstance(value, str) else value)]
        n = len(started)
        server = RedisServer(tmp_path / f"redis{n}", durable=durable, password=password,
                             extra=args).start()  # fmt: skip
        started.append(server)
        (tmp_path / f"host{n}").mkdir()
        env = Env(tmp_path / f"host{n}", server.url)
        env.server = server  # type: ignore[attr-defined]
        env.write_config({"lock_timeout_ms": 1000})
        return env

    yield make
    for server in started:
        server.stop()


def test_no_persistence_and_an_allkeys_policy_are_said_plainly(start: Any) -> None:
    env = start(maxmemory="100mb", maxmemory_policy="allkeys-lru")
    redis, text, code = redis_report(env)
    assert code == 1 and "Verdict: NOT HEALTHY: 2 problem(s) (redis x2)" in text
    assert redis["persistence"] == {
        "appendonly": "no", "appendfsync": None, "save": "", "verdict": "NONE",
    }  # fmt: skip
    assert redis["memory"] == {"maxmemory": 100 * 1024 * 1024, "policy": "allkeys-lru"}
    assert '  persistence: NONE (appendonly no, save "")' in text
    assert "  maxmemory: 104857600 bytes, policy allkeys-lru" in text
    assert (
        "  WARNING: maxmemory-policy allkeys-lru evicts any key when memory runs short, "
        "the ledger too: set maxmemory-policy noeviction"
    ) in text
    assert (
        '  WARNING: no persistence (appendonly no, save ""): a restart forgets the ledger' in text
    )


def test_a_volatile_policy_evicts_our_keys_too_since_each_carries_an_expiry(start: Any) -> None:
    redis, text, code = redis_report(start(durable=True, maxmemory="50mb",
                                           maxmemory_policy="volatile-ttl"))  # fmt: skip
    assert code == 1
    assert redis["problems"] == [
        "redis: maxmemory-policy volatile-ttl evicts keys with an expiry (ours all have one) when "
        "memory runs short, the ledger too: set maxmemory-policy noeviction (or give the "
        "ledger a server of its own)"
    ]


def test_an_allkeys_policy_without_maxmemory_is_a_note_not_a_problem(start: Any) -> None:
    redis, text, code = redis_report(start(durable=True, maxmemory_policy="allkeys-lfu"))
    assert code == 0 and redis["problems"] == []
    assert "    note: allkeys-lfu would evict the ledger once a maxmemory is set" in text


def test_snapshots_alone_are_a_problem(start: Any) -> None:
    redis, text, code = redis_report(start(save="900 1"))
    assert code == 1
    assert redis["persistence"]["verdict"] == "snapshots only (save 900 1)"
    assert "a crash forgets every unit spent since the last snapshot" in text


def test_a_durable_noeviction_server_is_healthy_and_the_ledger_key_expiry_is_told(
    start: Any,
) -> None:
    env = start(durable=True)
    redis, text, code = redis_report(env)
    assert code == 0, text
    assert redis["persistence"]["verdict"] == "append-only file, appendfsync always"
    assert redis["memory"] == {"maxmemory": 0, "policy": "noeviction"}
    quota = next(k for k in redis["keys"] if k["name"] == "quota")
    assert quota == {"name": "quota", "key": f"{env.redis_prefix}:quota", "renewed_days": 40.0,
                     "exists": False, "expires_in_days": None}  # fmt: skip
    assert f"  quota key {env.redis_prefix}:quota: not there (nothing written yet, or lost)" in text
    assert redis["replicas"] == {"role": "master", "connected": 0}
    env.spend((("general", "gemini", 1),))
    redis, text, _ = redis_report(env)
    quota = next(k for k in redis["keys"] if k["name"] == "quota")
    assert quota["exists"] and 39.9 <= quota["expires_in_days"] <= 40.0
    assert "expires in 40.0 days unless written again (every write renews 40 days)" in text
    import redis as client

    client.Redis(port=env.server.port).persist(f"{env.redis_prefix}:quota")
    redis, text, _ = redis_report(env)
    quota = next(k for k in redis["keys"] if k["name"] == "quota")
    assert quota["exists"] and quota["expires_in_days"] is None
    assert "quota: carries NO expiry" in text


def test_a_renamed_config_command_is_could_not_tell_never_a_guess(start: Any) -> None:
    """Managed services rename or forbid CONFIG: what INFO states is used, the rest is
    "could not tell"; the missing snapshot schedule is never taken as none."""
    redis, text, code = redis_report(start(rename_command=["CONFIG", ""]))
    assert redis["config_get"] == "refused"
    assert redis["persistence"] == {
        "appendonly": "no", "appendfsync": None, "save": None, "verdict": None,
    }  # fmt: skip
    assert redis["memory"] == {"maxmemory": 0, "policy": "noeviction"}  # INFO's own statement
    assert redis["unknown"] == ["its snapshot schedule: the server refused CONFIG GET"]
    assert redis["problems"] == [] and code == 0
    assert "  persistence: appendonly no (INFO)" in text
    assert "  could not tell its snapshot schedule: the server refused CONFIG GET" in text


def test_config_and_info_both_refused_say_could_not_tell_for_each(start: Any) -> None:
    env = start(rename_command=["CONFIG", ""])
    env.server.stop()
    env.server.extra += ["--rename-command", "INFO", ""]
    env.server.start()
    redis, text, code = redis_report(env)
    assert redis["server"] is None and redis["problems"] == [] and code == 0
    assert redis["unknown"] == [
        "whether it persists (appendonly): the server refused CONFIG GET",
        "maxmemory and its policy: the server refused CONFIG GET and INFO",
        "its replicas: the server refused INFO",
    ]
    assert "  persistence: could not tell" in text
    assert "  replicas: could not tell" in text


def test_replicas_from_info_and_from_the_sentinels(tmp_path: Path) -> None:
    # Slow to declare the primary down: no failover here, however loaded the machine.
    slow = {"down_after_ms": 30000, "failover_timeout_ms": 60000}
    with SentinelGroup(tmp_path / "sentinel", password="pw-doctor-1", **slow) as group:
        group.start()
        (tmp_path / "host").mkdir()
        env = Env(tmp_path / "host", group.url)
        env.write_config({"lock_timeout_ms": 2000})
        redis, text, _ = redis_report(env)
        assert redis["replicas"] == {
            "role": "master", "connected": 1, "sentinel_known": 1, "sentinel_healthy": 1,
            "sentinels": 1, "quorum": 1,
        }  # fmt: skip
        assert (
            "  replicas: 1 connected to the master (INFO); 1 healthy of 1 known to the "
            "sentinels (1 sentinels, quorum 1)"
        ) in text
        assert "pw-doctor-1" not in text and "redis+sentinel://:***@127.0.0.1:" in text


@pytest.mark.parametrize("fault", ["down", "hung"])
def test_an_unreachable_server_is_told_within_bounded_time(start: Any, fault: str) -> None:
    env = start(password="pw-doctor-2")
    (env.server.kill if fault == "down" else env.server.pause)()
    started = time.monotonic()
    proc = doctor(env)
    elapsed = time.monotonic() - started
    text = proc.stdout.decode()
    assert proc.returncode == 1
    assert "Redis: UNREACHABLE: State store redis://:***@127.0.0.1:" in text
    why = "it cannot be reached" if fault == "down" else "it did not answer within lock_timeout_ms"
    assert why in text
    assert b"pw-doctor-2" not in proc.stdout + proc.stderr
    # lock_timeout_ms is 1 s: a few bounded waits (ledger, breakers, cache, Redis), not a hang.
    assert elapsed < 90


def test_the_server_is_named_from_info_valkey_included() -> None:
    """Valkey's INFO keeps `redis_version` (the Redis it is compatible with) and adds
    `server_name` and `valkey_version` (valkey.io/commands/info): the Valkey version is told."""
    from smart_search.store.redis_health import _server

    valkey = {"redis_version": "7.2.4", "server_name": "valkey", "valkey_version": "8.0.1"}
    assert _server(valkey) == "valkey 8.0.1"
    assert _server({"redis_version": "7.0.15"}) == "redis 7.0.15"
    assert _server({}) is None
