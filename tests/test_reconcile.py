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


class _KeyedUsage:
    """A fake usage endpoint on 127.0.0.1 answering by the request's bearer key, and counting
    what it was asked (a usage endpoint is free: asking it bills nothing)."""

    def __init__(self, used: dict[str, int], limit: int) -> None:
        import threading
        from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

        self.asked: list[str] = []
        self.paths: list[str] = []
        fake = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:  # noqa: N802 - the http.server API
                key = self.headers.get("Authorization", "").removeprefix("Bearer ")
                fake.asked.append(key)
                fake.paths.append(self.path)
                if key not in used:
                    status, body = 401, {"detail": {"error": "Unauthorized: invalid API key."}}
                else:
                    status = 200
                    body = {"key": {"usage": used[key], "limit": limit}, "account": None}
                data = json.dumps(body).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


def test_a_usage_endpoint_is_asked_once_per_key_and_the_stricter_figure_is_adopted(
    env: Env,
) -> None:
    key_a, key_b = "SENTINEL-TAVILY-KEY-0001", "SENTINEL-TAVILY-KEY-0002"
    usage = _KeyedUsage({key_a: 40, key_b: 3}, limit=50)
    try:
        env.write_config({"endpoints": {"tavily": usage.url}, "cache": {"enabled": False}})
        env.environ["TAVILY_API_KEYS"] = f"{key_a},{key_b}"
        proc = _reconcile(env, "--json")
        text = _reconcile(env)
    finally:
        usage.close()
    assert proc.returncode == 1, proc.stderr  # the provider counted more than the ledger (0)
    rows = [r for r in json.loads(proc.stdout)["providers"] if r["provider"] == "tavily"]
    assert [(r["key"], r["ledger_used"], r["provider_used"], r["drift"]) for r in rows] == [
        ("…0001", 0, 40, 40), ("…0002", 0, 3, 3)]  # fmt: skip
    assert all(r["from"] == "usage endpoint" and r["provider_limit"] == 50 for r in rows)
    assert sorted(usage.asked) == sorted([key_a, key_b] * 2)  # once per key per run
    assert all(p == "/usage" for p in usage.paths)  # the key in a header, never the URL
    # The ledger adopted each key's figure: key A has 10 left of its 50 (stricter than its 33 a
    # day), key B 47 (its day's 33 is stricter).
    keys = env.call("search_quota_status")["windows"]["tavily"]["keys"]
    assert (keys["…0001"]["remaining"], keys["…0002"]["remaining"]) == (10, 33)
    assert "…0001" in text.stdout.decode() and "+40" in text.stdout.decode()
    for out in (proc, text):
        assert b"SENTINEL" not in out.stdout + out.stderr
    for file in env.state_dir.rglob("*"):
        if file.is_file():
            assert b"SENTINEL" not in file.read_bytes(), file


def test_a_usage_endpoint_refusing_the_key_is_a_row_of_its_own(env: Env) -> None:
    usage = _KeyedUsage({}, limit=50)
    try:
        env.write_config({"endpoints": {"tavily": usage.url}})
        env.environ["TAVILY_API_KEY"] = "SENTINEL-TAVILY-KEY-0009"
        proc = _reconcile(env, "--json")
    finally:
        usage.close()
    assert proc.returncode == 0, proc.stderr
    row = next(r for r in json.loads(proc.stdout)["providers"] if r["provider"] == "tavily")
    assert row["drift"] is None and row["from"].startswith("usage endpoint failed: ")
    assert b"SENTINEL" not in proc.stdout + proc.stderr
