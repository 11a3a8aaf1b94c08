"""Monthly windows that bind only on a later day, and a provider's newer report surviving an
import (issue 28 B.4): three behaviours whose planted bugs the suite let through.

- the provider's monthly headroom counts the month's units, not the day's;
- a pooled key's own monthly limit counts its month, not its day, while the pool has room;
- `state import --add` of an old backup keeps the provider's newer report.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from calendar import timegm
from pathlib import Path
from typing import Any

import pytest

from smart_search.budget.ledger import Ledger
from smart_search.errors import QuotaExhausted
from tests.conftest import Env

KEY_A = "SENTINEL-BRAVE-KEY-000A"  # fingerprint "…000A"
KEY_B = "SENTINEL-BRAVE-KEY-000B"


def noon(day: int) -> float:
    """Midday UTC on `day` December 2026: the same month, a new day on every clock in use."""
    return float(timegm((2026, 12, day, 12, 0, 0, 0, 0, 0)))


def spend_until_refused(env: Env, when: float, agent: str = "cron") -> list[str | None]:
    """Calls of one unit each at `when` until the ledger refuses one: each call's key (None
    without a pool). A guard stops a ledger that never refuses."""
    ledger = Ledger(env.settings(), clock=lambda: when)
    used: list[str | None] = []
    for _ in range(100):
        try:
            hold, _ = ledger.reserve(agent, "brave")
        except QuotaExhausted:
            return used
        ledger.settle(agent, "brave", [(hold, 1)])
        used.append(hold.key)
    raise AssertionError("the ledger never refused a call")


def brave_status(env: Env, when: float) -> dict[str, Any]:
    """search_quota_status's Brave window as the ledger shows it at `when`."""
    return Ledger(env.settings(), clock=lambda: when).full_status()["windows"]["brave"]


def test_provider_monthly_limit_counts_the_months_units_so_day_two_gets_only_the_rest(
    env: Env,
) -> None:
    # Brave: 8 a day, 10 a month. Day 1 spends its 8; day 2 may spend only the month's last 2
    # (a month counted from the day's units would allow 8 more: 16 in a 10-unit month).
    env.write_config({
        "timezone": "UTC",
        "providers": {"brave": {"daily_limit": 8, "monthly_limit": 10, "max_units_per_call": 1}},
        "agent_allocations": {"cron": {"gemini": 0, "brave": 8}},
    })  # fmt: skip
    assert len(spend_until_refused(env, noon(1))) == 8
    assert len(spend_until_refused(env, noon(2))) == 2
    brave = brave_status(env, noon(2))
    assert (brave["daily"]["used"], brave["monthly"]["used"]) == (2, 10)
    assert brave["headroom"] == 0
    with pytest.raises(QuotaExhausted, match="exhausted for this month"):
        Ledger(env.settings(), clock=lambda: noon(3)).reserve("cron", "brave")


def test_pooled_keys_monthly_limit_counts_its_month_while_the_pool_still_has_room(
    env: Env,
) -> None:
    # Key A: 8 a day, 10 a month. Key B: 8 a day, 1000 a month. Over two days of calls the
    # pool keeps answering (B has room), and A is never sent more than its 10.
    env.write_config({
        "timezone": "UTC",
        "providers": {"brave": {"max_units_per_call": 1, "keys": [
            {"value": KEY_A, "daily_limit": 8, "monthly_limit": 10},
            {"value": KEY_B, "daily_limit": 8, "monthly_limit": 1000},
        ]}},
        "agent_allocations": {"cron": {"gemini": 0, "brave": 16}},
    })  # fmt: skip
    day_one = spend_until_refused(env, noon(1))
    assert (day_one.count("…000A"), day_one.count("…000B")) == (8, 8)
    day_two = spend_until_refused(env, noon(2))
    assert (day_two.count("…000A"), day_two.count("…000B")) == (2, 8)
    accounts = brave_status(env, noon(2))["keys"]
    assert accounts["…000A"]["monthly"] == {"used": 10, "limit": 10}
    assert accounts["…000B"]["monthly"]["used"] == 16


def cli(env: Env, *args: str, stdin: bytes = b"") -> subprocess.CompletedProcess:
    """`smart-search ARGS` (python -m smart_search) in a fresh process with `env`'s config."""
    return subprocess.run(
        [sys.executable, "-m", "smart_search", *args],
        input=stdin,
        capture_output=True,
        env=env.environ,
        cwd=str(env.root),
        timeout=60,
    )


def report(env: Env, when: float, remaining: int, calls: int = 1) -> None:
    """`calls` Brave calls at `when`, the last one answering that `remaining` are left."""
    ledger = Ledger(env.settings(), clock=lambda: when)
    for i in range(calls):
        hold, _ = ledger.reserve("cron", "brave")
        seen = {"remaining": remaining, "limit": 2000} if i == calls - 1 else None
        ledger.settle("cron", "brave", [(hold, 1)], seen)


def test_state_import_add_of_an_old_backup_keeps_the_providers_newer_report(
    tmp_path: Path,
) -> None:
    config = {"timezone": "UTC", "agent_allocations": {"cron": {"gemini": 0, "brave": 50}}}
    (tmp_path / "old").mkdir()
    (tmp_path / "live").mkdir()
    old, live = Env(tmp_path / "old"), Env(tmp_path / "live")
    old.write_config(config)
    live.write_config(config)
    now = time.time()
    # The backup: one call, two seconds ago, when Brave said 90 were left this month.
    report(old, now - 2, remaining=90)
    exported = cli(old, "state", "export")
    assert exported.returncode == 0, exported.stderr
    backup = tmp_path / "backup.json"
    backup.write_bytes(exported.stdout)
    # The live ledger since: 20 calls, the last one told "5 left".
    report(live, now - 1, remaining=5, calls=20)
    before = live.call("search_quota_status")["windows"]["brave"]
    assert before["provider_reported_remaining"] == 5
    imported = cli(live, "state", "import", "--add", str(backup))
    assert imported.returncode == 0, imported.stderr
    assert json.loads(imported.stdout)["imported"][0] == "quota"
    after = live.call("search_quota_status")["windows"]["brave"]
    assert after["monthly"]["used"] == 21  # --add: the backup's one unit counted on top
    # Brave's newer word stands, less the one unit counted since: never "90 left" again.
    assert after["provider_reported_remaining"] == 4
    assert after["headroom"] == 4
