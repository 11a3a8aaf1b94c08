"""Keys the host holds, written by the real host (issue 30): OpenClaw 2026.9.6's own `config set`
stores a plain key, a file SecretRef and an env SecretRef; `smart-search doctor` reads each from
where OpenClaw put it, and never prints one. Installed and run as tests/test_openclaw_host.py
does (skips only when npm is missing or its registry unreachable)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from tests.test_openclaw_host import REPO, OpenClaw, host_env, openclaw  # noqa: F401 - fixture

PLAIN = "SENTINEL-OC-PLAIN-4b5c6d7e"
IN_FILE = "SENTINEL-OC-FILE-8f9a0b1c"
IN_ENV = "SENTINEL-OC-ENV-2d3e4f5a"


def test_doctor_reads_the_keys_openclaw_config_set_wrote(
    openclaw: OpenClaw,  # noqa: F811
    tmp_path: Path,
) -> None:
    env = host_env(tmp_path, openclaw)
    state = Path(env["HOME"]) / ".openclaw"
    state.mkdir(parents=True)
    secrets = state / "secrets.json"
    secrets.write_text(json.dumps({"brave": {"apiKey": IN_FILE}}))
    secrets.chmod(0o600)
    commands = [
        ["secrets.providers.filemain", "--provider-source", "file",
         "--provider-path", "~/.openclaw/secrets.json", "--provider-mode", "json"],
        ["plugins.entries.brave.config.webSearch.apiKey", "--ref-provider", "filemain",
         "--ref-source", "file", "--ref-id", "/brave/apiKey"],
        ["plugins.entries.exa.config.webSearch.apiKey", "--ref-provider", "default",
         "--ref-source", "env", "--ref-id", "EXA_FROM_HOST"],
        ["plugins.entries.tavily.config.webSearch.apiKey", PLAIN],
    ]  # fmt: skip
    for args in commands:
        proc = openclaw.run(["config", "set", *args], env)
        assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    doctor = subprocess.run(
        [sys.executable, "-m", "smart_search", "doctor", "--json"],
        capture_output=True,
        text=True,
        timeout=120,
        env={**env, "PYTHONPATH": str(REPO), "EXA_FROM_HOST": IN_ENV},
    )
    for secret in (PLAIN, IN_FILE, IN_ENV):
        assert secret not in doctor.stdout + doctor.stderr
    keys = json.loads(doctor.stdout)["api_keys"]
    for provider, value in (("brave", IN_FILE), ("exa", IN_ENV), ("tavily", PLAIN)):
        assert keys[provider]["set"] is True and keys[provider]["length"] == len(value), keys
        where = f"plugins.entries.{provider}.config.webSearch.apiKey (OpenClaw)"
        assert keys[provider]["source"] == where, keys
    assert keys["gemini"]["set"] is False and keys["serper"]["set"] is False
