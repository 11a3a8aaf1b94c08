"""The stdio server's own pipe transport (shell/mcp/pipes.py): used when stdin and stdout are
pipes, the SDK's reader kept for anything else; long lines and end of input behave as before."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
WAIT_S = 60.0
INIT = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {
        "protocolVersion": "2025-06-18",
        "capabilities": {},
        "clientInfo": {"name": "test", "version": "0"},
    },
}
INITIALIZED = {"jsonrpc": "2.0", "method": "notifications/initialized"}


def _environ(tmp_path: Path) -> dict[str, str]:
    (tmp_path / "home").mkdir()
    environ = {k: v for k, v in os.environ.items() if not k.startswith("OPENCLAW_")}
    return {
        **environ,
        "HOME": str(tmp_path / "home"),  # no config anywhere: the defaults
        "SMART_SEARCH_STATE_DIR": str(tmp_path / "state"),
        "PYTHONPATH": str(REPO),
    }


def _lines(*messages: dict[str, Any]) -> bytes:
    return b"".join(json.dumps(m).encode() + b"\n" for m in messages)


def _answers(out: bytes) -> dict[Any, dict[str, Any]]:
    return {m.get("id"): m for m in map(json.loads, out.splitlines()) if "id" in m}


def test_a_file_as_stdin_is_still_served_to_its_end(tmp_path: Path) -> None:
    """Not pipes: the SDK's own reader serves a request file and the server ends at its end
    (a request still in flight at the end of input is answered "Connection closed", as ever)."""
    requests = tmp_path / "requests.jsonl"
    requests.write_bytes(_lines(INIT, INITIALIZED))
    out = tmp_path / "out.jsonl"
    with requests.open("rb") as stdin, out.open("wb") as stdout:
        proc = subprocess.run(
            [sys.executable, "-m", "smart_search", "mcp"],
            stdin=stdin,
            stdout=stdout,
            stderr=subprocess.PIPE,
            env=_environ(tmp_path),
            timeout=WAIT_S,
        )
    assert proc.returncode == 0, proc.stderr.decode()
    answers = _answers(out.read_bytes())
    assert answers[1]["result"]["serverInfo"]["name"] == "smart-search"


def test_a_request_line_far_over_64_kib_is_answered_through_pipes(tmp_path: Path) -> None:
    """asyncio's reader stops at 64 KiB a line by default; ours takes the CLI's whole input."""
    query = "q" * 300_000
    call = {
        "jsonrpc": "2.0",
        "id": 2,
        "method": "tools/call",
        "params": {"name": "smart_search", "arguments": {"query": query, "agent_id": "general"}},
    }
    status = {
        "jsonrpc": "2.0",
        "id": 3,
        "method": "tools/call",
        "params": {"name": "search_quota_status", "arguments": {}},
    }
    proc = subprocess.Popen(
        [sys.executable, "-m", "smart_search", "mcp"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        env=_environ(tmp_path),
    )
    try:
        assert proc.stdin is not None and proc.stdout is not None
        proc.stdin.write(_lines(INIT, INITIALIZED, call, status))
        proc.stdin.flush()
        answers: dict[Any, dict[str, Any]] = {}
        while not {2, 3} <= answers.keys():
            line = proc.stdout.readline()
            assert line, "the server ended before answering"
            answers.update(_answers(line))
        proc.stdin.close()
        assert proc.wait(WAIT_S) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
    product = answers[2]["result"]["structuredContent"]
    assert product["error_code"] == "invalid_input", product  # the contract's answer, not a crash
    assert answers[3]["result"]["isError"] is False, answers[3]
