"""Quota arithmetic (pure) and the file ledger (days, corruption, Node files, locking)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from smart_search.budget import quota
from smart_search.budget.ledger import Ledger
from smart_search.errors import QuotaExhausted
from tests.conftest import Env, charge, idle


def ceilings(limit: int = 10, **allocs: dict[str, int]) -> quota.Ceilings:
    limits = idle({"gemini": limit, "brave": limit})
    return quota.Ceilings(limits, allocs, {"gemini": 5, "brave": 0})


def test_worked_day() -> None:
    """docs/quota.md's worked day: allocation, then pool, then direct, then nothing."""
    c = ceilings(10, alpha={"gemini": 3, "brave": 0}, beta={"gemini": 4, "brave": 0})
    doc = quota.new_day("2026-11-30")
    assert [quota.reserve(doc, c, "alpha", "gemini").source for _ in range(3)] == ["allocation"] * 3
    # alpha's allocation is spent: the pool is empty, so direct headroom (10 - 7 = 3) pays.
    assert quota.reserve(doc, c, "alpha", "gemini").source == "direct"
    assert quota.complete(doc, c, "beta") == idle({"gemini": 4, "brave": 0})
    assert quota.agent_status(doc, c, "beta")["gemini"] == {
        "allocated": 4,
        "used": 0,
        "remaining": 0,
    }
    assert [quota.reserve(doc, c, "alpha", "gemini").source for _ in range(4)] == ["pool"] * 4
    assert [quota.reserve(doc, c, "alpha", "gemini").source for _ in range(2)] == ["direct"] * 2
    with pytest.raises(QuotaExhausted):
        quota.reserve(doc, c, "alpha", "gemini")
    assert quota.total_used(doc, "gemini") == 10
    status = quota.full_status(doc, c)["providers"]["gemini"]
    assert status == {
        "daily_limit": 10,
        "used": 10,
        "remaining": 0,
        "allocated": 7,
        "shared_pool": 0,
        "direct_headroom": 0,
        "in_flight": 0,
    }


def test_completed_agent_draws_only_from_pool_and_direct() -> None:
    c = ceilings(6, alpha={"gemini": 3, "brave": 0}, beta={"gemini": 3, "brave": 0})
    doc = quota.new_day("2026-11-30")
    quota.complete(doc, c, "alpha")
    # alpha's own 3 went to the pool; it may draw them back from there, not from "allocation".
    assert [quota.reserve(doc, c, "alpha", "gemini").source for _ in range(3)] == ["pool"] * 3
    with pytest.raises(QuotaExhausted):
        quota.reserve(doc, c, "alpha", "gemini")
    assert quota.reserve(doc, c, "beta", "gemini").source == "allocation"


def test_refund_returns_the_unit_to_its_source() -> None:
    c = ceilings(10, alpha={"gemini": 1, "brave": 0})
    doc = quota.new_day("2026-11-30")
    hold = quota.reserve(doc, c, "alpha", "gemini")
    assert quota.allocation_remaining(doc, c, "alpha", "gemini") == 0
    assert quota.refund(doc, "alpha", "gemini", hold)
    assert quota.allocation_remaining(doc, c, "alpha", "gemini") == 1
    assert quota.total_used(doc, "gemini") == 0


def test_overcommitted_allocations_cannot_spend_past_the_limit() -> None:
    c = ceilings(5, alpha={"gemini": 4, "brave": 0}, beta={"gemini": 4, "brave": 0})
    doc = quota.new_day("2026-11-30")
    granted = 0
    for agent in ["alpha", "beta"] * 5:
        try:
            quota.reserve(doc, c, agent, "gemini")
            granted += 1
        except QuotaExhausted:
            pass
    assert granted == 5
    assert "exceed the daily limit" in (quota.overcommit_warning(doc, c) or "")


@settings(max_examples=200, deadline=None)
@given(
    limit=st.integers(0, 12),
    allocs=st.lists(st.integers(0, 8), min_size=1, max_size=4),
    ops=st.lists(st.tuples(st.sampled_from("rfc"), st.integers(0, 4)), max_size=60),
)
def test_no_sequence_of_operations_overspends(limit: int, allocs: list[int], ops: list) -> None:
    agents = {f"a{i}": {"gemini": n, "brave": 0} for i, n in enumerate(allocs)}
    c = quota.Ceilings({"gemini": limit, "brave": limit}, agents, {"gemini": 2, "brave": 0})
    doc = quota.new_day("2026-11-30")
    taken: list[tuple[str, quota.Hold]] = []
    for op, who in ops:
        agent = f"a{who}"  # a4 may be unconfigured: registered with the default allocation
        if op == "r":
            try:
                taken.append((agent, quota.reserve(doc, c, agent, "gemini")))
            except QuotaExhausted:
                # Refusal only when no source is left.
                assert quota.pick_source(doc, c, agent, "gemini") is None
        elif op == "f" and taken:
            refunded_agent, hold = taken.pop()
            assert quota.refund(doc, refunded_agent, "gemini", hold)
        elif op == "c" and agent in doc["agents"] and not doc["agents"][agent]["completed"]:
            quota.complete(doc, c, agent)
        assert quota.total_used(doc, "gemini") <= limit
        assert quota.pool_remaining(doc, "gemini") >= 0


# --- the file ledger ----------------------------------------------------------------------


def test_daily_reset_and_clock_moving_back(env: Env) -> None:
    env.write_config({"agent_allocations": {"tech": {"gemini": 2}}})
    s = env.settings()
    day1 = time.mktime((2026, 11, 29, 12, 0, 0, 0, 0, 0)) - time.timezone
    charge(Ledger(s, clock=lambda: day1), "tech", "gemini")
    assert Ledger(s, clock=lambda: day1).agent_status("tech")["gemini"]["used"] == 1
    day2 = day1 + 86400
    # A later day starts fresh ...
    assert Ledger(s, clock=lambda: day2).agent_status("tech")["gemini"]["used"] == 0
    charge(Ledger(s, clock=lambda: day2), "tech", "gemini")
    assert env.quota_doc()["date"] == "2026-11-30"
    # ... an earlier one never resets the file's counters.
    earlier = Ledger(s, clock=lambda: day1)
    assert earlier.agent_status("tech")["gemini"]["used"] == 1
    charge(earlier, "tech", "gemini")
    assert env.quota_doc()["date"] == "2026-11-30"
    assert env.quota_doc()["agents"]["tech"]["gemini"]["allocation"] == 2


def test_timezone_moves_the_day_and_unknown_zone_is_config_error(env: Env) -> None:
    env.write_config({"timezone": "Pacific/Kiritimati"})  # UTC+14
    s = env.settings()
    late_utc = time.mktime((2026, 11, 29, 23, 0, 0, 0, 0, 0)) - time.timezone
    assert Ledger(s, clock=lambda: late_utc).today == "2026-11-30"
    env.write_config({"timezone": "Mars/Olympus"})
    result = env.call("search_quota_status", {})
    assert result["error_code"] == "config_error" and '"timezone"' in result["error"]


@pytest.mark.files_only
@pytest.mark.parametrize(
    "content",
    [
        b"{not json",
        b"",
        b"[1, 2]",
        b'{"format": "smart-search/quota@1", "date": 5}',
        b'{"format": "smart-search/quota@1", "date": "2026-11-30", "providers": {}, "agents": {}}',
        b'{"hello": "world"}',
        b"\x00\x01\x02",
    ],
)
def test_corrupt_file_is_reported_and_left_byte_identical(env: Env, content: bytes) -> None:
    env.state_dir.mkdir(parents=True)
    path = env.state_dir / "search-quota.json"
    path.write_bytes(content)
    for tool, args in (
        ("search_quota_status", {}),
        ("search_quota_status", {"agent_id": "general"}),
        ("search_mark_agent_complete", {"agent_id": "general"}),
        ("smart_search", {"query": "q", "agent_id": "tech"}),
    ):
        result = env.call(tool, args)
        assert result["error_code"] == "state_corrupt", (tool, result)
        assert str(path) in result["error"]
        assert path.read_bytes() == content


def test_status_and_completion_messages(env: Env) -> None:
    env.write_config({"agent_allocations": {"tech-news": {"gemini": 7, "brave": 2}}})
    assert env.call("search_quota_status", {"agent_id": "nobody"})["error"] == (
        "Agent nobody not found in quota."
    )
    assert env.call("search_mark_agent_complete", {"agent_id": "nobody"})["error"] == (
        "Agent nobody not found in quota."
    )
    status = env.call("search_quota_status", {"agent_id": "tech-news"})
    assert status["gemini"] == {"allocated": 7, "used": 0, "remaining": 7}
    assert status["completed"] is False
    done = env.call("search_mark_agent_complete", {"agent_id": "tech-news"})
    assert done["released"] == idle({"gemini": 7, "brave": 2})
    assert done["message"] == (
        "Agent marked complete. 7 Gemini calls and 2 Brave calls released to shared pool."
    )
    again = env.call("search_mark_agent_complete", {"agent_id": "tech-news"})
    assert again["error"] == "Agent tech-news is already marked complete for today."
    full = env.call("search_quota_status")
    assert full["providers"]["gemini"]["shared_pool"] == 7
    assert full["agents"]["tech-news"]["completed"] is True


def test_spec_completion_message_shape() -> None:
    from smart_search.search.tools import completion_message

    assert completion_message({"gemini": 7, "brave": 0}) == (
        "Agent marked complete. 7 Gemini calls released to shared pool."
    )
    assert completion_message({"gemini": 0, "brave": 1}) == (
        "Agent marked complete. 1 Brave call released to shared pool."
    )


@pytest.mark.files_only
def test_node_skill_file_carries_todays_counts_over(env: Env) -> None:
    env.write_config(
        {
            "providers": {"gemini": {"daily_limit": 20}, "brave": {"daily_limit": 10}},
            "agent_allocations": {
                "stock-analysis": {"gemini": 15, "brave": 0},
                "tech-news": {"gemini": 3, "brave": 2},
            },
        }
    )
    env.state_dir.mkdir(parents=True)
    today = time.strftime("%Y-%m-%d", time.gmtime())
    node = {
        "date": today,
        "providers": {
            "gemini": {"daily_limit": 20, "remaining": 11, "used": 9, "shared_pool": 1},
            "brave": {"daily_limit": 10, "remaining": 9, "used": 1, "shared_pool": 0},
        },
        "agent_allocations": {
            "stock-analysis": {
                "gemini": 15,
                "brave": 0,
                "gemini_used": 6,
                "brave_used": 0,
                "completed": False,
            },
            "tech-news": {
                "gemini": 3,
                "brave": 2,
                "gemini_used": 1,
                "brave_used": 1,
                "completed": True,
            },
        },
    }
    (env.state_dir / "search-quota.json").write_text(json.dumps(node))
    stock = env.call("search_quota_status", {"agent_id": "stock-analysis"})
    assert stock["gemini"] == {"allocated": 15, "used": 6, "remaining": 9}
    tech = env.call("search_quota_status", {"agent_id": "tech-news"})
    assert tech["completed"] is True and tech["gemini"]["used"] == 1
    full = env.call("search_quota_status")
    # 9 used carries over exactly (6 + 1 by agents, 2 unattributed); tech-news released 2 + 1
    # brave, and the Node pool (1 left of 2 released) says one was drawn already.
    assert full["providers"]["gemini"]["used"] == 9
    assert full["providers"]["gemini"]["shared_pool"] == 1
    assert full["providers"]["brave"]["used"] == 1
    # A write converts the file and keeps every count.
    charge(Ledger(env.settings()), "stock-analysis", "gemini")
    converted = env.quota_doc()
    assert converted["format"] == quota.FORMAT
    assert env.call("search_quota_status")["providers"]["gemini"]["used"] == 10


@pytest.mark.files_only
def test_node_file_from_an_earlier_day_starts_fresh(env: Env) -> None:
    env.state_dir.mkdir(parents=True)
    node = {
        "date": "2020-01-01",
        "providers": {"gemini": {"used": 99}},
        "agent_allocations": {"x": {"gemini": 5, "gemini_used": 5}},
    }
    (env.state_dir / "search-quota.json").write_text(json.dumps(node))
    assert env.call("search_quota_status")["providers"]["gemini"]["used"] == 0


LOCK_HOLDER = """
import fcntl, os, sys, time
fd = os.open(sys.argv[1], os.O_RDWR | os.O_CREAT, 0o600)
fcntl.flock(fd, fcntl.LOCK_EX)  # the lock protocol: a plain exclusive flock on the lock file
print("held", flush=True)
time.sleep(float(sys.argv[2]))
"""


@pytest.mark.multiprocess
@pytest.mark.files_only
def test_lock_held_past_timeout_gives_the_spec_message(env: Env) -> None:
    env.write_config({"lock_timeout_ms": 300, "agent_allocations": {"a": {"gemini": 1}}})
    env.state_dir.mkdir(parents=True)
    holder = subprocess.Popen(
        [sys.executable, "-c", LOCK_HOLDER, str(env.state_dir / "search-quota.json.lock"), "30"],
        stdout=subprocess.PIPE,
    )
    try:
        assert holder.stdout.readline().strip() == b"held"
        started = time.monotonic()
        result = env.call("search_mark_agent_complete", {"agent_id": "a"})
        waited = time.monotonic() - started
        assert (result["error"], result["error_code"]) == (
            "Quota file is locked. Try again.",
            "lock_timeout",
        )
        assert 0.25 < waited < 3
        assert not (env.state_dir / "search-quota.json").exists()
    finally:
        holder.kill()
        holder.wait()
    # The kernel dropped the dead holder's lock: the next call goes through.
    assert env.call("search_mark_agent_complete", {"agent_id": "a"})["released"]["gemini"] == 1


@pytest.mark.files_only
def test_state_dir_is_created_private(env: Env) -> None:
    env.call("search_mark_agent_complete", {"agent_id": "general"})
    assert os.stat(env.state_dir).st_mode & 0o777 == 0o700
    assert os.stat(env.state_dir / "search-quota.json").st_mode & 0o777 == 0o600


def test_reads_need_no_lock_and_do_not_create_files(env: Env, tmp_path: Path) -> None:
    assert env.call("search_quota_status")["agents"] == {}
    assert not env.state_dir.exists()


@pytest.mark.files_only
def test_only_the_ledger_pays_for_fsync(env: Env, monkeypatch: pytest.MonkeyPatch) -> None:
    """Quota units must survive an OS crash (file and rename both synced); breaker and pacing
    state may be lost, so their writes skip the fsyncs that would stretch every lock hold."""
    from smart_search.store.statefile import StateFile

    synced: list[int] = []
    real_fsync = os.fsync
    monkeypatch.setattr(os, "fsync", lambda fd: (synced.append(fd), real_fsync(fd))[1])
    for advisory, expected in ((True, 0), (False, 2)):
        synced.clear()
        doc = StateFile(str(env.state_dir), "x.json", 1000, advisory=advisory)
        doc.update(lambda d: ({"n": 1}, None))
        assert len(synced) == expected, advisory
        assert json.loads((env.state_dir / "x.json").read_text()) == {"n": 1}


@pytest.mark.files_only
def test_the_file_is_synced_under_the_lock_and_the_rename_after_it_before_update_returns(
    env: Env, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The temp file's fsync must precede the rename (under the lock); the directory's fsync,
    which makes the rename durable, runs once the lock is let go (a holder asleep in fsync keeps
    every waiter waiting) but before update returns, so no caller acts on an unsynced change."""
    import stat as stat_module

    from smart_search.store.statefile import StateFile
    from tests.conftest import lock_is_free

    def lock_is_held() -> bool:
        return not lock_is_free(env.state_dir / "x.json.lock")

    events: list[tuple[str, bool]] = []
    real_fsync = os.fsync

    def fsync(fd: int) -> None:
        kind = "dir" if stat_module.S_ISDIR(os.fstat(fd).st_mode) else "file"
        events.append((kind, lock_is_held()))
        real_fsync(fd)

    monkeypatch.setattr(os, "fsync", fsync)
    doc = StateFile(str(env.state_dir), "x.json", 1000)
    doc.update(lambda d: ({"n": 1}, None))
    events.append(("returned", lock_is_held()))
    assert events == [("file", True), ("dir", False), ("returned", False)]


@pytest.mark.files_only
def test_a_write_may_skip_its_fsyncs_and_stays_atomic(
    env: Env, monkeypatch: pytest.MonkeyPatch
) -> None:
    from smart_search.store.statefile import StateFile

    synced: list[int] = []
    real_fsync = os.fsync
    monkeypatch.setattr(os, "fsync", lambda fd: (synced.append(fd), real_fsync(fd))[1])
    doc = StateFile(str(env.state_dir), "x.json", 1000, advisory=False)
    doc.update(lambda d: ({"n": 1}, None), durable=False)
    # Only the directory's fsync is skipped: the file's contents reach the disk before a rename
    # that may, so a crash never leaves the name pointing at an unwritten file.
    assert len(synced) == 1
    assert json.loads((env.state_dir / "x.json").read_text()) == {"n": 1}
    assert not (env.state_dir / "x.json.tmp").exists()
    synced.clear()
    doc.update(lambda d: ({"n": (d or {})["n"] + 1}, None))
    assert len(synced) == 2
    assert json.loads((env.state_dir / "x.json").read_text()) == {"n": 2}


@pytest.mark.files_only
@pytest.mark.parametrize(
    ("held", "billed", "settle_synced"),
    [(1, 1, False), (3, 1, False), (3, 0, False), (1, 3, True)],
)
def test_the_hold_is_flushed_and_a_settle_only_when_it_charges_more_than_it_held(
    env: Env, monkeypatch: pytest.MonkeyPatch, held: int, billed: int, settle_synced: bool
) -> None:
    """The hold is what stops over-spend, so it reaches the disk before the request leaves. A
    settle that gives units back (or only clears the hold) may be lost in an OS crash: the worst
    case stays charged. A settle that charges past the hold (the provider billed more than
    max_units_per_call) is flushed: losing it would under-count."""
    from smart_search.budget.ledger import Ledger

    env.write_config({"providers": {"gemini": {"max_units_per_call": held}}})
    s = env.settings()
    ledger = Ledger(s)
    synced: list[int] = []
    real_fsync = os.fsync
    monkeypatch.setattr(os, "fsync", lambda fd: (synced.append(fd), real_fsync(fd))[1])
    hold, _left = ledger.reserve("cron", "gemini")
    assert len(synced) == 2  # the file and its directory
    synced.clear()
    ledger.settle("cron", "gemini", [(hold, billed)])
    assert len(synced) == (2 if settle_synced else 1)  # the file always, its directory maybe
    window = json.loads((env.state_dir / "search-quota.json").read_text())["windows"]["gemini"]
    assert window["day_used"] == billed
    assert window.get("holds", {}) == {}
