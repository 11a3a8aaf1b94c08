"""`smart-search doctor`: what it reads and why, key sources masked, ledger, breakers, verdict."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

from smart_search.budget.breaker import Breaker
from smart_search.errors import ServerError
from tests.conftest import REPO, charge
from tests.fakes import FakeServer

GEMINI_SENTINEL = "SENTINEL-GEMINI-a1b2c3d4e5"
BRAVE_SENTINEL = "SENTINEL-BRAVE-f6g7h8i9"


def base_env(tmp_path: Path, **extra: str) -> dict[str, str]:
    return {
        "HOME": str(tmp_path / "home"),
        "PATH": os.environ.get("PATH", ""),
        "PYTHONPATH": str(REPO),
        **extra,
    }


def doctor(environ: dict[str, str], *args: str) -> subprocess.CompletedProcess:
    proc = subprocess.run(
        [sys.executable, "-m", "smart_search", "doctor", *args],
        capture_output=True,
        env=environ,
        timeout=120,
    )
    for secret in (GEMINI_SENTINEL, BRAVE_SENTINEL):
        # Never the key, not even a recognisable part of it.
        for part in (secret, secret[-10:], secret[8:18]):
            assert part.encode() not in proc.stdout + proc.stderr
    return proc


def write_config(path: Path, doc: Any) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(doc if isinstance(doc, str) else json.dumps(doc))
    return path


def healthy_doc(fake_url: str = "https://127.0.0.1:9") -> dict[str, Any]:
    return {
        "env": {"vars": {"BRAVE_API_KEY": BRAVE_SENTINEL}},
        "skills": {
            "entries": {
                "smart-search": {
                    "env": {"GEMINI_API_KEY": GEMINI_SENTINEL},
                    "config": {
                        "providers": {"gemini": {"daily_limit": 40}},
                        "agent_allocations": {"tech": {"gemini": 4}},
                        "endpoints": {"gemini": fake_url, "brave": fake_url},
                    },
                }
            }
        },
    }


def test_healthy_install_human_report(tmp_path: Path) -> None:
    state = tmp_path / "oc-state"
    with FakeServer() as fake:
        write_config(state / "openclaw.json", healthy_doc(fake.url))
        proc = doctor(base_env(tmp_path, OPENCLAW_STATE_DIR=str(state)))
        assert fake.requests == []  # never calls a provider
    out = proc.stdout.decode()
    assert proc.returncode == 0, out
    assert f"Config file: {state / 'openclaw.json'} (found)" in out
    assert "OPENCLAW_CONFIG_PATH is not set" in out
    assert f"OpenClaw state dir: {state} (OPENCLAW_STATE_DIR is set)" in out
    assert 'Layout: skills.entries["smart-search"]' in out and "REJECTED" not in out
    assert (
        f"GEMINI_API_KEY: set ({len(GEMINI_SENTINEL)} characters) from "
        'skills.entries["smart-search"].env' in out
    )
    assert f"BRAVE_API_KEY: set ({len(BRAVE_SENTINEL)} characters) from env.vars" in out
    assert f"State dir: {state / 'workspace' / 'shared'}" in out
    assert "Ledger: readable (no ledger file yet)" in out and "gemini 0/40 used" in out
    assert "Circuit breakers: none open" in out
    assert out.rstrip().endswith("Verdict: healthy")
    # Read-only: not even the state directory was created.
    assert not (state / "workspace").exists()


def test_process_environment_key_wins_and_is_reported(tmp_path: Path) -> None:
    path = write_config(tmp_path / "c" / "openclaw.json", healthy_doc())
    environ = base_env(tmp_path, OPENCLAW_CONFIG_PATH=str(path), GEMINI_API_KEY=GEMINI_SENTINEL)
    report = json.loads(doctor(environ, "--json").stdout)
    assert report["api_keys"]["gemini"] == {
        "name": "GEMINI_API_KEY",
        "set": True,
        "source": "environment",
        "length": len(GEMINI_SENTINEL),
        "notes": [],
    }
    assert report["config"]["named_by_variable"] is True


def test_problems_are_listed_and_exit_1(tmp_path: Path) -> None:
    home = tmp_path / "home"
    write_config(
        home / ".openclaw" / "openclaw.json",
        "{ env: { BRAVE_API_KEY: '" + BRAVE_SENTINEL + "' },\n"
        "  skills: { 'smart-search': { retry_max_atempts: 2,\n"
        "    env: { GEMINI_API_KEY: '" + GEMINI_SENTINEL + "' } } } }",
    )
    proc = doctor(base_env(tmp_path))
    out = proc.stdout.decode()
    assert proc.returncode == 1, out
    assert 'REJECTED BY OPENCLAW: skills["smart-search"]' in out
    assert "REJECTED BY OPENCLAW: env.BRAVE_API_KEY" in out and "env.vars.BRAVE_API_KEY" in out
    assert "from env (legacy, rejected by OpenClaw)" in out
    assert 'from skills["smart-search"].env (legacy)' in out
    assert "Unknown config key: retry_max_atempts (did you mean retry_max_attempts?)" in out
    assert out.rstrip().splitlines()[-1].startswith("Verdict: NOT HEALTHY: 3 problem(s)")


def test_json_report_ledger_usage_and_open_breakers(tmp_path: Path) -> None:
    from smart_search.budget.ledger import Ledger
    from smart_search.host.config import load_settings

    path = write_config(tmp_path / "c" / "openclaw.json", healthy_doc())
    environ = base_env(tmp_path, OPENCLAW_CONFIG_PATH=str(path))
    environ["SMART_SEARCH_STATE_DIR"] = str(tmp_path / "ss")
    settings = load_settings(environ)
    ledger = Ledger(settings)
    for _ in range(3):
        charge(ledger, "tech", "gemini")
    breaker = Breaker(settings)
    for _ in range(settings.circuit_failure_threshold):
        breaker.record("brave", ServerError("Brave API error: 503"))
    before = (tmp_path / "ss" / "search-quota.json").read_bytes()
    proc = doctor(environ, "--json")
    assert proc.returncode == 1  # an open breaker needs attention
    report = json.loads(proc.stdout)
    assert report["state_dir"]["path"] == str(tmp_path / "ss")
    assert report["state_dir"]["why"] == "SMART_SEARCH_STATE_DIR is set"
    ledger_report = report["ledger"]
    assert ledger_report["readable"] is True and ledger_report["day"] == ledger.today
    assert ledger_report["providers"]["gemini"] == {"used": 3, "daily_limit": 40}
    assert ledger_report["providers"]["brave"]["used"] == 0
    (open_breaker,) = report["breakers"]
    assert open_breaker["name"] == "brave" and open_breaker["state"] == "open"
    assert report["healthy"] is False and "brave circuit is open" in report["verdict"] + "".join(
        report["problems"]
    )
    # Doctor spent nothing and rewrote nothing.
    assert (tmp_path / "ss" / "search-quota.json").read_bytes() == before


def test_corrupt_ledger_and_broken_config(tmp_path: Path) -> None:
    path = write_config(tmp_path / "c" / "openclaw.json", healthy_doc())
    state = tmp_path / "ss"
    state.mkdir()
    (state / "search-quota.json").write_text("{not json")
    environ = base_env(tmp_path, OPENCLAW_CONFIG_PATH=str(path), SMART_SEARCH_STATE_DIR=str(state))
    proc = doctor(environ)
    assert proc.returncode == 1 and b"Ledger: UNREADABLE" in proc.stdout
    assert (state / "search-quota.json").read_text() == "{not json"
    path.write_text('{"skills": {"entries": {"smart-search": {"config": {"lock_timeout_ms": "x"}}')
    proc = doctor(environ)
    out = proc.stdout.decode()
    assert proc.returncode == 1 and "ERROR: openclaw.json is not valid JSON5" in out
    assert "OPENCLAW_CONFIG_PATH is set" in out


def test_includes_are_listed(tmp_path: Path) -> None:
    cfg = tmp_path / "c"
    write_config(cfg / "keys.json5", {"env": {"vars": {"BRAVE_API_KEY": BRAVE_SENTINEL}}})
    path = write_config(cfg / "openclaw.json", {"$include": "./keys.json5"})
    proc = doctor(base_env(tmp_path, OPENCLAW_CONFIG_PATH=str(path)))
    out = proc.stdout.decode()
    assert proc.returncode == 0, out
    assert f"included: {cfg / 'keys.json5'}" in out and "from env.vars" in out


def test_bad_arguments_exit_2(tmp_path: Path) -> None:
    proc = doctor(base_env(tmp_path), "--jsn")
    assert (
        proc.returncode == 2 and proc.stdout == b"" and b"usage: smart-search doctor" in proc.stderr
    )


def test_the_result_cache_is_shown(tmp_path: Path) -> None:
    """Issue 11: doctor shows the cache: its size now and today's hits, misses and savings."""
    import time

    from smart_search.host.config import load_settings
    from smart_search.store import CacheEntry
    from smart_search.store.files import FileStore

    path = write_config(tmp_path / "c" / "openclaw.json", healthy_doc())
    environ = base_env(tmp_path, OPENCLAW_CONFIG_PATH=str(path))
    environ["SMART_SEARCH_STATE_DIR"] = str(tmp_path / "ss")
    settings = load_settings(environ)
    store = FileStore(settings.state_dir, settings.lock_timeout_ms)
    now = time.time()
    store.cache_put("k", CacheEntry(b'{"answer": 1}', now, now + 600), max_entries=10,
                    max_bytes=10_000)  # fmt: skip
    proc = doctor(environ, "--json")
    cache = json.loads(proc.stdout)["cache"]
    assert cache["ok"] is True and (cache["entries"], cache["bytes"]) == (1, 13)
    assert cache["hits_today"] == 0 and cache["config"]["enabled"] is True
    text = doctor(environ).stdout.decode()
    assert "Cache: 1 entries, 13 bytes; today 0 hits, 0 misses, 0 units saved" in text
    write_config(path, {"skills": {"entries": {"smart-search": {"config": {
        "cache": {"enabled": False}}}}}})  # fmt: skip
    assert "Cache: off (cache.enabled is false)" in doctor(environ).stdout.decode()
