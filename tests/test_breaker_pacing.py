"""The shared circuit breaker and web_fetch pacing, across real processes."""

from __future__ import annotations

import json
import subprocess
import sys
import time

import pytest

from smart_search import errors
from smart_search.budget.breaker import Breaker
from smart_search.budget.pacing import wait_for_slot
from tests.conftest import Env


class Clock:
    def __init__(self, now: float = 1_000_000.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


def test_closed_open_half_open_closed(env: Env) -> None:
    env.write_config({"circuit_failure_threshold": 3, "circuit_reset_seconds": 60})
    clock = Clock()
    b = Breaker(env.settings(), clock=clock)
    for _ in range(2):
        b.admit("gemini")
        b.record("gemini", errors.ServerError("Gemini API error: 500"))
    b.admit("gemini")  # two failures: still closed
    b.record("gemini", errors.Timeout("t"))
    with pytest.raises(errors.CircuitOpen) as info:
        b.admit("gemini")
    assert info.value.message == "Gemini circuit is open. Try again later."
    assert info.value.error_code == "circuit_open"
    clock.now += 59
    with pytest.raises(errors.CircuitOpen):
        b.admit("gemini")
    clock.now += 2
    b.admit("gemini")  # the one half-open trial
    with pytest.raises(errors.CircuitOpen):
        b.admit("gemini")  # nobody else while the trial runs
    b.record("gemini", None)
    b.admit("gemini")
    b.admit("gemini")  # closed again


def test_failed_trial_opens_again(env: Env) -> None:
    env.write_config({"circuit_failure_threshold": 1, "circuit_reset_seconds": 10})
    clock = Clock()
    b = Breaker(env.settings(), clock=clock)
    b.record("bing", errors.Blocked("Bing served a CAPTCHA."))  # a blocked engine counts
    with pytest.raises(errors.CircuitOpen) as info:
        b.admit("bing")
    assert info.value.message == "Bing circuit is open. Try again later."
    clock.now += 11
    b.admit("bing")
    b.record("bing", errors.RateLimited("429"))
    with pytest.raises(errors.CircuitOpen):
        b.admit("bing")
    clock.now += 11
    b.admit("bing")


@pytest.mark.parametrize(
    "error",
    [
        errors.AuthFailed("Gemini API error: 403"),
        errors.NoResults("Gemini returned an empty response."),
        errors.ParseError("odd"),
        errors.QuotaExhausted("per day"),
    ],
)
def test_errors_that_say_nothing_about_health_do_not_count(env: Env, error: Exception) -> None:
    env.write_config({"circuit_failure_threshold": 2})
    b = Breaker(env.settings())
    for _ in range(5):
        b.record("gemini", error)
        b.admit("gemini")


def test_a_healthy_answer_resets_the_consecutive_count(env: Env) -> None:
    env.write_config({"circuit_failure_threshold": 2})
    b = Breaker(env.settings())
    for _ in range(4):
        b.record("brave", errors.Timeout("t"))
        b.record("brave", errors.NoResults("Brave returned no results."))
    b.admit("brave")


TRIAL = """
import os, sys, time
from smart_search.budget.breaker import Breaker
from smart_search.host.config import load_settings
from smart_search.errors import CircuitOpen
b = Breaker(load_settings(os.environ))
start = float(sys.argv[1])
while time.time() < start:
    time.sleep(0.001)
try:
    b.admit("gemini")
    print("trial")
except CircuitOpen:
    print("skipped")
"""


@pytest.mark.multiprocess
@pytest.mark.files_only
def test_exactly_one_half_open_trial_across_processes(env: Env) -> None:
    env.write_config({"circuit_reset_seconds": 60, "lock_timeout_ms": 20000})
    env.state_dir.mkdir(parents=True)
    (env.state_dir / "search-breaker.json").write_text(
        json.dumps({"gemini": {"state": "open", "failures": 3, "opened_at": time.time() - 61}})
    )
    start = time.time() + 1.5
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", TRIAL, str(start)],
            stdout=subprocess.PIPE,
            env=env.environ,
        )
        for _ in range(16)
    ]
    answers = [p.communicate(timeout=60)[0].decode().strip() for p in procs]
    assert sorted(answers) == ["skipped"] * 15 + ["trial"]


def test_breaker_state_is_shared_by_one_shot_cli_calls(env: Env) -> None:
    """The predecessor's in-memory breaker never fired for a CLI; this one does."""
    env.environ["GEMINI_API_KEY"] = "k"
    env.write_config(
        {
            # Nothing listens on port 9: every request is refused.
            "endpoints": {"gemini": "http://127.0.0.1:9", "duckduckgo": "http://127.0.0.1:9"},
            "retry_max_attempts": 1,
            "circuit_failure_threshold": 2,
            "default_provider": "gemini",
            "agent_allocations": {"tech": {"gemini": 5, "brave": 0}},
            "web_fetch_min_interval_ms": 0,
        }
    )
    call = '{"tool": "smart_search", "args": {"query": "plain words", "agent_id": "tech"}}'
    codes = []
    for _ in range(3):
        proc = env.run_cli(call)
        assert proc.returncode == 0 and proc.stderr == b""
        result = json.loads(proc.stdout)
        codes.append(result["attempts"][0]["error_code"])
    assert codes == ["transport_failure", "transport_failure", "circuit_open"]
    assert result["attempts"][0]["error"] == "Gemini circuit is open. Try again later."
    status = json.loads(env.run_cli('{"tool": "search_quota_status"}').stdout)
    assert status["providers"]["gemini"]["used"] == 0  # failed calls were refunded


# --- pacing ---------------------------------------------------------------------------------

# Prints the slot it claimed (what the pacing file recorded for it), the seconds it waited, and
# the time it went on: exact values, not a race between processes and the scheduler.
PACER = """
import os, sys, time
from smart_search.budget import pacing
from smart_search.host.config import load_settings
settings = load_settings(os.environ)
from smart_search.store import open_store
store = open_store(settings)
claimed = []
real_update = store.update
def update(name, change):
    slot = real_update(name, change)
    claimed.append(slot)
    return slot
store.update = update
start = float(sys.argv[1])
while time.time() < start:
    time.sleep(0.001)
waited = pacing.wait_for_slot(settings, "google", time.monotonic() + 30, store=store)
print(claimed[0], waited, time.time())
"""


@pytest.mark.multiprocess
def test_pacing_spaces_requests_across_processes(env: Env) -> None:
    env.write_config({"web_fetch_min_interval_ms": 250, "lock_timeout_ms": 20000})
    start = time.time() + 1.5
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", PACER, str(start)],
            stdout=subprocess.PIPE,
            env=env.environ,
        )
        for _ in range(6)
    ]
    rows = sorted(tuple(float(x) for x in p.communicate(timeout=60)[0].split()) for p in procs)
    for slot, _waited, went in rows:
        assert went >= slot  # nobody went before its slot
    for (slot_a, _, _), (slot_b, waited_b, _) in zip(rows, rows[1:], strict=False):
        gap = slot_b - slot_a
        # Exactly one interval apart, or further only when the later process came late and so
        # waited nothing at all: a caller waits for the remainder, never more.
        assert gap == pytest.approx(0.25, abs=1e-6) or (gap > 0.25 and waited_b == 0), rows


@pytest.mark.files_only
def test_pacing_sleeps_until_the_slot_not_for_a_duration_measured_under_the_lock(
    env: Env,
) -> None:
    """The claim's write and fsync take time; a caller that then slept the whole wait it computed
    before them would start late by its own write time, closer than the interval to the next."""
    env.write_config({"web_fetch_min_interval_ms": 500})
    env.state_dir.mkdir(parents=True)
    (env.state_dir / "search-pacing.json").write_text('{"google": 1000.2}')
    # First reading: inside the claim. Second: after the write, which took 30 ms.
    readings = iter([1000.0, 1000.03])
    slept: list[float] = []
    waited = wait_for_slot(
        env.settings(),
        "google",
        time.monotonic() + 10,
        clock=lambda: next(readings),
        sleep=slept.append,
    )
    assert slept == [pytest.approx(0.67)] and waited == pytest.approx(0.67)
    assert json.loads((env.state_dir / "search-pacing.json").read_text())["google"] == (
        pytest.approx(1000.7)
    )


def test_pacing_never_waits_past_the_deadline(env: Env) -> None:
    env.write_config({"web_fetch_min_interval_ms": 5000})
    s = env.settings()
    wait_for_slot(s, "bing", time.monotonic() + 10)
    slept: list[float] = []
    with pytest.raises(errors.Timeout):
        wait_for_slot(s, "bing", time.monotonic() + 1.0, sleep=slept.append)
    assert slept == []  # refused at once, no sleep
    wait_for_slot(s, "google", time.monotonic() + 1.0)  # engines are paced separately


@pytest.mark.files_only
@pytest.mark.parametrize(
    "content",
    [b"{torn", b"[]", b'{"gemini": "open", "google": {"state": "open", "opened_at": "soon"}}'],
)
def test_damaged_advisory_state_never_blocks_a_search(env: Env, content: bytes) -> None:
    """Breaker and pacing state is advisory: damage reads as empty and is rewritten. (The quota
    file, by contrast, is never reset: see test_ledger.)"""
    env.write_config({"circuit_failure_threshold": 1, "web_fetch_min_interval_ms": 10})
    env.state_dir.mkdir(parents=True)
    for name in ("search-breaker.json", "search-pacing.json"):
        (env.state_dir / name).write_bytes(content)
    s = env.settings()
    b = Breaker(s)
    b.admit("gemini")
    b.admit("google")
    wait_for_slot(s, "google", time.monotonic() + 5)
    b.record("gemini", errors.Timeout("t"))
    with pytest.raises(errors.CircuitOpen):
        b.admit("gemini")
    assert json.loads((env.state_dir / "search-breaker.json").read_text())["gemini"]["state"] == (
        "open"
    )
    assert isinstance(
        json.loads((env.state_dir / "search-pacing.json").read_text())["google"], float
    )
