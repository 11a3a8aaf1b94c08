"""The shared ledger and logs under real concurrent processes and real SIGKILLs."""

from __future__ import annotations

import json
import random
import signal
import subprocess
import sys
import time
from typing import Any

import pytest

from tests.conftest import Env

pytestmark = pytest.mark.multiprocess

# Each worker reserves `count` units for its agent and prints one line per granted unit.
RESERVER = """
import os, sys
from smart_search.config import load_settings
from smart_search.errors import QuotaExhausted
from smart_search.ledger import Ledger
agent, count = sys.argv[1], int(sys.argv[2])
settings = load_settings(os.environ)
for _ in range(count):
    try:
        held, _left = Ledger(settings).reserve(agent, "brave")
        source = held.source
    except QuotaExhausted:
        print("refused", flush=True)
        continue
    print("granted", source, flush=True)
"""


def spawn(env: Env, code: str, *args: str) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "-c", code, *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=env.environ,
    )


def used_brave(env: Env) -> int:
    status = env.call("search_quota_status")
    return status["providers"]["brave"]["used"]


def test_32_processes_50_reservations_grant_exactly_the_daily_limit(env: Env) -> None:
    allocations = {f"agent-{i}": {"gemini": 0, "brave": 100} for i in range(4)}
    env.write_config(
        {
            "providers": {"brave": {"daily_limit": 1000}},
            "agent_allocations": allocations,
            "lock_timeout_ms": 60000,
        }
    )
    procs = [spawn(env, RESERVER, f"agent-{i % 6}", "50") for i in range(32)]
    outputs = [p.communicate(timeout=300) for p in procs]
    assert all(p.returncode == 0 for p in procs), [o[1][-500:] for o in outputs]
    lines = [line for out, _ in outputs for line in out.decode().splitlines()]
    granted = [line for line in lines if line.startswith("granted")]
    assert len(lines) == 32 * 50
    assert len(granted) == 1000
    assert used_brave(env) == 1000
    # Configured agents spent their 100 each from allocation; the rest came from direct headroom
    # (agent-4 and agent-5 are registered with the default allocation, brave 0).
    status = env.call("search_quota_status")
    for i in range(4):
        assert status["agents"][f"agent-{i}"]["brave"]["used"] >= 100
    sources = [line.split()[1] for line in granted]
    assert sources.count("allocation") == 400 and sources.count("direct") == 600


HOLD_AND_DIE = """
import os, sys, time
from smart_search.config import load_settings
from smart_search.ledger import Ledger
from smart_search import quota
settings = load_settings(os.environ)
ledger = Ledger(settings)
def change(raw):
    doc = ledger._current(raw, ledger.clock())
    quota.reserve(doc, ledger.ceilings, "victim", "brave")
    print("holding", flush=True)
    time.sleep(60)
    return doc, None
ledger.store.update("quota", change)
"""

DIE_MID_WRITE = """
import os, sys, time
from smart_search.config import load_settings
from smart_search.ledger import Ledger
settings = load_settings(os.environ)
real_replace = os.replace
def slow_replace(src, dst):
    print("temp written", flush=True)
    time.sleep(60)
    real_replace(src, dst)
os.replace = slow_replace
Ledger(settings).reserve("victim", "brave")
"""


@pytest.mark.files_only
def test_sigkill_while_holding_the_lock_or_mid_write_loses_nothing(env: Env) -> None:
    env.write_config({"providers": {"brave": {"daily_limit": 3}}, "lock_timeout_ms": 10000})
    # One committed unit first, so there is a real file to damage.
    assert (
        json.loads(
            env.run_cli(
                '{"tool": "search_mark_agent_complete", "args": {"agent_id": "general"}}'
            ).stdout
        )["error"]
        is None
    )
    before = (env.state_dir / "search-quota.json").read_bytes()
    for script, ready in ((HOLD_AND_DIE, b"holding"), (DIE_MID_WRITE, b"temp written")):
        proc = spawn(env, script)
        assert proc.stdout.readline().strip() == ready
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        # The file is whole and unchanged: the dead process's unit never became real.
        assert (env.state_dir / "search-quota.json").read_bytes() == before
        assert used_brave(env) == 0
    # The lock died with its holder; three units are still exactly three.
    survivor = spawn(env, RESERVER, "alive", "5")
    out, _ = survivor.communicate(timeout=60)
    assert out.decode().split().count("granted") == 3
    assert used_brave(env) == 3


def test_random_sigkills_never_corrupt_or_overspend(env: Env) -> None:
    env.write_config({"providers": {"brave": {"daily_limit": 150}}, "lock_timeout_ms": 30000})
    rng = random.Random(7)
    printed = 0
    for _round in range(3):
        procs = [spawn(env, RESERVER, f"w{i}", "100") for i in range(8)]
        # Kill only workers that are really at work: each has reported its first answer (a
        # grant, or a refusal once the limit is spent). A loaded machine may take seconds to
        # start them; a kill before any write would test nothing.
        for p in procs:
            first = p.stdout.readline().decode()
            assert first.startswith(("granted", "refused")), p.stderr.read()[-2000:]
            printed += first.count("granted")
        for p in procs:
            time.sleep(rng.uniform(0, 0.05))
            p.send_signal(signal.SIGKILL)
        for p in procs:
            out, _ = p.communicate(timeout=60)
            printed += out.decode().count("granted")
        assert printed > 0
        doc = env.quota_doc()  # parses: never torn
        assert doc["format"] == "smart-search/quota@2"
        used = used_brave(env)
        # A killed process may commit a unit it never printed (under-use), never the reverse.
        assert printed <= used <= 150


LOGGER = """
import os, sys
from smart_search.logs import append_search_log
state, n = sys.argv[1], int(sys.argv[2])
pad = "x" * 3000
for i in range(n):
    append_search_log(state, "2026-11-30", {"writer": os.getpid(), "i": i, "pad": pad}, 30)
"""


@pytest.mark.files_only
def test_32_concurrent_log_writers_keep_every_line_whole(env: Env) -> None:
    procs = [spawn(env, LOGGER, str(env.state_dir), "40") for _ in range(32)]
    for p in procs:
        p.communicate(timeout=120)
        assert p.returncode == 0
    lines = (env.state_dir / "logs" / "search-2026-11-30.jsonl").read_bytes().splitlines()
    assert len(lines) == 32 * 40
    records: list[dict[str, Any]] = [json.loads(line) for line in lines]
    per_writer: dict[int, list[int]] = {}
    for record in records:
        per_writer.setdefault(record["writer"], []).append(record["i"])
    assert len(per_writer) == 32
    assert all(sorted(v) == list(range(40)) for v in per_writer.values())
