"""Reconciliation (issue 20, point 5): the ledger's month beside what providers report."""

from __future__ import annotations

import json
import subprocess
import sys
from typing import Any

from tests.conftest import Env
from tests.fakes import FakeServer
from tests.test_billing import brave_ok, configure, search


def _reconcile(env: Env, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "smart_search", "reconcile", *args],
        capture_output=True, env=env.environ, cwd=str(env.root), timeout=60,
    )  # fmt: skip


def _rows(proc: subprocess.CompletedProcess) -> dict[str, Any]:
    return {r["provider"]: r for r in json.loads(proc.stdout)["providers"]}


def test_brave_drift_comes_from_its_last_answer_and_spends_nothing(env: Env) -> None:
    with FakeServer() as fake:
        configure(env, fake)
        # The provider has counted 15000 - 14990 = 10 this month; the ledger counts 1.
        fake.route("/res/v1/web/search", brave_ok(remaining=14990))
        assert search(env, "nasa news")["provider_used"] == "brave"
        sent_before = len(fake.requests)
        proc = _reconcile(env, "--json")
        assert len(fake.requests) == sent_before  # no provider was asked, no unit spent
    assert proc.returncode == 1, proc.stderr  # the provider counted more than the ledger
    brave = _rows(proc)["brave"]
    assert (brave["ledger_used"], brave["provider_used"], brave["provider_limit"]) == (1, 10, 15000)
    assert brave["drift"] == 9 and brave["from"] == "last answer"
    gemini = _rows(proc)["gemini"]
    assert gemini["drift"] is None and gemini["from"] == "not reported"
    text = _reconcile(env)
    assert text.returncode == 1
    assert "brave" in text.stdout.decode() and "+9" in text.stdout.decode()
    for out in (proc, text):
        assert b"SENTINEL" not in out.stdout + out.stderr


def test_no_drift_exits_zero_and_doctor_shows_the_same_figure(env: Env) -> None:
    with FakeServer() as fake:
        configure(env, fake)
        fake.route("/res/v1/web/search", brave_ok(remaining=14999))  # 1 counted by both
        search(env, "nasa news")
    proc = _reconcile(env, "--json")
    assert proc.returncode == 0, proc.stdout
    assert _rows(proc)["brave"]["drift"] == 0
    doctor = subprocess.run(
        [sys.executable, "-m", "smart_search", "doctor", "--json"],
        capture_output=True, env=env.environ, cwd=str(env.root), timeout=60,
    )  # fmt: skip
    rows = {r["provider"]: r for r in json.loads(doctor.stdout)["ledger"]["reconcile"]}
    assert rows["brave"]["drift"] == 0 and rows["brave"]["provider_used"] == 1


def test_a_bad_command_line_is_refused_and_changes_nothing(env: Env) -> None:
    proc = _reconcile(env, "--bogus")
    assert proc.returncode == 2 and b"usage: smart-search reconcile" in proc.stderr
    assert not env.state_dir.exists()
