"""The plugin's resident worker (openclaw-plugin/worker.js, issue 29), driven by Node 24.

A Node driver loads the plugin and runs its providers' `execute` on commands read from stdin (one
JSON line each), answering one JSON line per call. Behind it runs either the real product
(`smart-search mcp` through a shim of this checkout, loopback fakes for Brave) or a fake worker:
a few lines of Python speaking JSON-RPC the way a broken worker would (crash, garbage, hang).
"""

from __future__ import annotations

import json
import os
import queue
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.fakes import FakeServer, Reply, fixture_bytes
from tests.test_openclaw_host import REPO, OpenClaw, host_env, openclaw  # noqa: F401 - fixture

PLUGIN = REPO / "openclaw-plugin"
BRAVE_PATH = "/res/v1/web/search"
BRAVE_KEY = "SENTINEL-BRAVE-KEY-29e1f0"
NEW_KEY = "SENTINEL-BRAVE-KEY-29e1f1"
WAIT_S = 60.0

DRIVER = """
import { pathToFileURL } from "node:url";
import readline from "node:readline";
const [index, worker, configJson] = process.argv.slice(1);
const plugin = await import(pathToFileURL(index).href);
const { workerPids } = await import(pathToFileURL(worker).href);
const config = JSON.parse(configJson);
const search = plugin.createSearchProvider(config);
const fetchTool = plugin.createFetchProvider(config).createTool({});
const controllers = new Map();
const say = (o) => process.stdout.write(JSON.stringify(o) + "\\n");
readline.createInterface({ input: process.stdin }).on("line", async (line) => {
  const cmd = JSON.parse(line);
  if (cmd.op === "pids") return say({ id: cmd.id, pids: Object.values(workerPids()) });
  if (cmd.op === "abort") return controllers.get(cmd.target)?.abort();
  const controller = new AbortController();
  controllers.set(cmd.id, controller);
  try {
    const tool = cmd.op === "fetch" ? fetchTool : search.createTool({ agentDir: cmd.agentDir });
    const args = cmd.op === "fetch" ? { url: cmd.url } : { query: cmd.query };
    say({ id: cmd.id, resolved: await tool.execute(args, { signal: controller.signal }) });
  } catch (err) {
    say({ id: cmd.id, rejected: err.name, message: err.message, code: err.code ?? null,
          stack: err.stack });
  }
});
"""

FAKE_WORKER = r"""
import json, os, sys
mode = os.environ["FAKE_MODE"]
calls = []
def send(msg):
    sys.stdout.write(json.dumps(msg) + "\n"); sys.stdout.flush()
def answer(call):
    query = call["params"]["arguments"].get("query", "")
    product = {"results": [{"title": query, "url": "https://example.org/" + query, "snippet": ""}],
               "provider_used": "fake", "error": None}
    send({"jsonrpc": "2.0", "id": call["id"],
          "result": {"content": [{"type": "text", "text": json.dumps(product)}],
                     "structuredContent": product, "isError": False}})
for line in sys.stdin:
    msg = json.loads(line)
    method = msg.get("method")
    if method == "initialize":
        send({"jsonrpc": "2.0", "id": msg["id"], "result": {"protocolVersion": "2025-06-18",
              "capabilities": {"tools": {}}, "serverInfo": {"name": "fake", "version": "0"}}})
    elif method == "ping" and mode != "hang":
        send({"jsonrpc": "2.0", "id": msg["id"], "result": {}})
    elif method == "tools/call":
        calls.append(msg)
        query = msg["params"]["arguments"].get("query", "")
        if mode == "reverse" and len(calls) == 4:
            for call in reversed(calls):  # answered last first: each call by its own id
                answer(call)
        elif mode == "crash" and len(calls) == 2:
            sys.exit(3)
        elif mode == "garbage":
            sys.stdout.write("Traceback (most recent call last): not JSON\n"); sys.stdout.flush()
        elif mode == "slow" and query != "slow":
            answer(msg)
"""


class Driver:
    """The Node driver: `call(...)` sends a command, `answer(id)` waits for its line."""

    def __init__(self, oc: OpenClaw, env: dict[str, str], config: dict[str, Any]) -> None:
        self.proc = subprocess.Popen(
            [str(oc.node), "--input-type=module", "-e", DRIVER, str(PLUGIN / "index.js"),
             str(PLUGIN / "worker.js"), json.dumps(config)],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
            env=env, cwd=env["HOME"],
        )  # fmt: skip
        self.lines: queue.Queue[str] = queue.Queue()
        self.answers: dict[str, dict[str, Any]] = {}
        self.next = 0
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.lines.put(line)

    def send(self, op: str, **fields: Any) -> str:
        self.next += 1
        cid = f"c{self.next}"
        assert self.proc.stdin is not None
        self.proc.stdin.write(json.dumps({"op": op, "id": cid, **fields}) + "\n")
        self.proc.stdin.flush()
        return cid

    def answer(self, cid: str, timeout: float = WAIT_S) -> dict[str, Any]:
        give_up = time.monotonic() + timeout
        while cid not in self.answers:
            left = give_up - time.monotonic()
            assert left > 0, f"no answer to {cid}: {self.proc.stderr and self.proc.poll()}"
            try:
                got = json.loads(self.lines.get(timeout=left))
            except queue.Empty:
                continue
            self.answers[got["id"]] = got
        return self.answers.pop(cid)

    def search(self, query: str, agent: str | None = None, **extra: Any) -> dict[str, Any]:
        agent_dir = f"/state/agents/{agent}/agent" if agent else None
        return self.answer(self.send("search", query=query, agentDir=agent_dir, **extra))

    def pids(self) -> list[int]:
        return self.answer(self.send("pids"))["pids"]

    def close(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait(timeout=WAIT_S)


def gone(pid: int, within: float = WAIT_S) -> bool:
    """The process `pid` has exited (a zombie of an exited child counts as gone)."""
    give_up = time.monotonic() + within
    while time.monotonic() < give_up:
        try:
            with open(f"/proc/{pid}/stat") as stat:
                if stat.read().split(") ", 1)[1].startswith("Z"):
                    return True
        except (FileNotFoundError, ProcessLookupError):
            return True
        time.sleep(0.05)
    return False


def asked(fake: FakeServer, n: int) -> None:
    """Wait until Brave got its `n`th request."""
    give_up = time.monotonic() + WAIT_S
    while len(fake.requests_to(BRAVE_PATH)) < n:
        assert time.monotonic() < give_up, f"Brave was asked {n - 1} times at most"
        time.sleep(0.02)


@pytest.fixture
def fake() -> Iterator[FakeServer]:
    with FakeServer() as server:
        yield server


def product_env(
    oc: OpenClaw, tmp_path: Path, fake: FakeServer, **config: Any
) -> dict[str, str]:  # fmt: skip
    """A shim of this checkout on PATH, its config pointed at `fake`, a state dir of its own."""
    env = host_env(tmp_path, oc, shim=True, SMART_SEARCH_STATE_DIR=str(tmp_path / "ss"))
    path = Path(env["HOME"]) / ".openclaw" / "openclaw.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    endpoints = {name: fake.url for name in ("gemini", "brave", "google", "bing", "duckduckgo")}
    write_config(path, {"endpoints": endpoints, "cache": {"enabled": False},
                        "retry_max_attempts": 1, "web_fetch_min_interval_ms": 0,
                        **config})  # fmt: skip
    return env


def write_config(path: Path, config: dict[str, Any]) -> None:
    doc = {
        "skills": {
            "entries": {"smart-search": {"config": config, "env": {"BRAVE_API_KEY": BRAVE_KEY}}}
        }
    }
    path.write_text(json.dumps(doc))  # fmt: skip


def quota(env: dict[str, str]) -> dict[str, Any]:
    proc = subprocess.run(["smart-search", "quota"], capture_output=True, text=True, env=env,
                          timeout=120)  # fmt: skip
    return json.loads(proc.stdout)


def brave_ok(delay: float = 0.0) -> Reply:
    return Reply(200, fixture_bytes("brave-ok.json"), {"content-type": "application/json"},
                 delay=delay)  # fmt: skip


def fake_worker_env(oc: OpenClaw, tmp_path: Path, mode: str) -> tuple[dict[str, str], str]:
    env = host_env(tmp_path, oc, FAKE_MODE=mode)
    script = tmp_path / "fake_worker.py"
    script.write_text(FAKE_WORKER)
    command = tmp_path / "fake-smart-search"
    command.write_text(f'#!/bin/sh\nexec {sys.executable} {script} "$@"\n')
    command.chmod(0o755)
    return env, str(command)


# --- against fake workers: the client's own rules ----------------------------------------------


def test_concurrent_calls_are_each_answered_by_their_own_id(
    openclaw: OpenClaw,  # noqa: F811
    tmp_path: Path,
) -> None:
    env, command = fake_worker_env(openclaw, tmp_path, "reverse")
    driver = Driver(openclaw, env, {"command": command})
    try:
        ids = [driver.send("search", query=f"q{i}") for i in range(4)]
        answers = [driver.answer(cid) for cid in ids]
        # The worker answered the fourth call first: each answer still reached its own caller.
        assert [a["resolved"]["results"][0]["title"] for a in answers] == ["q0", "q1", "q2", "q3"]
        assert len(driver.pids()) == 1
    finally:
        driver.close()


@pytest.mark.parametrize(
    ("mode", "message"),
    [
        ("crash", "smart-search worker exited with status 3."),
        ("garbage", "smart-search worker answered something that is not JSON-RPC."),
    ],
)
def test_a_broken_worker_fails_the_calls_in_flight_and_the_next_call_starts_another(
    openclaw: OpenClaw,  # noqa: F811
    tmp_path: Path,
    mode: str,
    message: str,
) -> None:
    env, command = fake_worker_env(openclaw, tmp_path, mode)
    driver = Driver(openclaw, env, {"command": command})
    try:
        first = driver.pids()
        ids = [driver.send("search", query=f"q{i}") for i in range(2)]
        for cid in ids:
            got = driver.answer(cid)["resolved"]
            # web_search returns an error the model reads: the message, no stack trace.
            assert got == {"error": message, "code": "internal", "provider": "smart-search"}
        pid = driver.pids()
        assert first == [] and pid == []  # nothing resident between workers
        driver.send("search", query="again")
        assert len(driver.pids()) == 1  # a new worker for the next call
    finally:
        driver.close()


def test_a_hung_worker_times_out_is_replaced_and_a_slow_call_alone_is_cancelled(
    openclaw: OpenClaw,  # noqa: F811
    tmp_path: Path,
) -> None:
    env, command = fake_worker_env(openclaw, tmp_path, "hang")
    driver = Driver(openclaw, env, {"command": command, "timeoutMs": 1000, "killGraceMs": 500})
    try:
        cid = driver.send("search", query="q")
        time.sleep(0.5)
        (hung,) = driver.pids()
        got = driver.answer(cid)["resolved"]
        assert got["error"] == "smart-search did not answer within 1000 ms."
        assert got["code"] == "timeout"
        assert gone(hung), "the hung worker was left running"  # it answered no ping: killed
    finally:
        driver.close()
    # A worker that still answers (ping) keeps serving: only the slow call failed.
    env, command = fake_worker_env(openclaw, tmp_path, "slow")
    driver = Driver(openclaw, env, {"command": command, "timeoutMs": 1000, "killGraceMs": 500})
    try:
        slow = driver.send("search", query="slow")
        assert driver.answer(slow)["resolved"]["code"] == "timeout"
        (pid,) = driver.pids()
        time.sleep(1.5)  # past the ping's grace
        assert driver.search("fast")["resolved"]["results"][0]["title"] == "fast"
        assert driver.pids() == [pid]
    finally:
        driver.close()


def test_an_install_without_the_mcp_extra_runs_each_call_as_a_process(
    openclaw: OpenClaw,  # noqa: F811
    fake: FakeServer,
    tmp_path: Path,
) -> None:
    env = product_env(openclaw, tmp_path, fake)
    command = tmp_path / "bin" / "smart-search-without-mcp"
    code = ("import sys; sys.modules['mcp'] = None; from smart_search.__main__ import main; "
            "sys.exit(main(sys.argv[1:]))")  # fmt: skip
    command.write_text(f'#!/bin/sh\nPYTHONPATH={REPO} exec {sys.executable} -c "{code}" "$@"\n')
    command.chmod(0o755)
    fake.route(BRAVE_PATH, brave_ok())
    driver = Driver(openclaw, env, {"command": str(command)})
    try:
        first = driver.search("q")["resolved"]
        pids = driver.pids()
        second = driver.search("q2")["resolved"]
    finally:
        driver.close()
    # An install without the `mcp` extra keeps the plugin working: the worker could not start
    # (it said why on stderr), nothing was sent by it, and each call ran as a process of its own.
    assert "error" not in first and "error" not in second, (first, second)
    assert first["smartSearch"]["providerUsed"] == "brave", first
    assert pids == []
    assert len(fake.requests_to(BRAVE_PATH)) == 2


# --- against the real product ------------------------------------------------------------------


def test_one_worker_serves_many_agents_at_once_and_each_is_charged_alone(
    openclaw: OpenClaw,  # noqa: F811
    fake: FakeServer,
    tmp_path: Path,
) -> None:
    fake.route(BRAVE_PATH, brave_ok(delay=0.2))
    agents = [f"agent-{i}" for i in range(4)]
    allocations = {a: {"gemini": 0, "brave": 10} for a in agents}
    env = product_env(openclaw, tmp_path, fake, agent_allocations=allocations)
    driver = Driver(openclaw, env, {"command": "smart-search"})
    try:
        assert "error" not in driver.search("warm", agents[0])["resolved"]
        (pid,) = driver.pids()
        ids = [driver.send("search", query=f"q{i}", agentDir=f"/st/agents/{agents[i % 4]}/agent")
               for i in range(16)]  # fmt: skip
        answers = [driver.answer(cid)["resolved"] for cid in ids]
        assert all(a["smartSearch"]["providerUsed"] == "brave" for a in answers), answers
        assert driver.pids() == [pid]  # every call on the one worker
    finally:
        driver.close()
    status = quota(env)["agents"]
    assert [status[a]["brave"]["used"] for a in agents] == [5, 4, 4, 4]
    assert sorted(r.query["q"][0] for r in fake.requests_to(BRAVE_PATH)) == sorted(
        ["warm", *(f"q{i}" for i in range(16))]
    )
    assert all(r.headers["x-subscription-token"] == BRAVE_KEY for r in fake.requests)


def test_a_worker_killed_mid_call_fails_that_call_and_the_next_call_answers(
    openclaw: OpenClaw,  # noqa: F811
    fake: FakeServer,
    tmp_path: Path,
) -> None:
    fake.route(BRAVE_PATH, brave_ok(delay=120), brave_ok())  # the first never answers
    env = product_env(openclaw, tmp_path, fake,
                      agent_allocations={"alpha": {"gemini": 0, "brave": 5}})  # fmt: skip
    driver = Driver(openclaw, env, {"command": "smart-search"})
    try:
        cid = driver.send("search", query="first", agentDir="/st/agents/alpha/agent")
        asked(fake, 1)
        (pid,) = driver.pids()
        os.kill(pid, signal.SIGKILL)
        got = driver.answer(cid)["resolved"]
        assert got == {"error": "smart-search worker was killed by SIGKILL.", "code": "internal",
                       "provider": "smart-search"}  # fmt: skip
        again = driver.search("second", "alpha")["resolved"]
        assert again["smartSearch"]["providerUsed"] == "brave", again
        (new,) = driver.pids()
        assert new != pid
    finally:
        driver.close()
    assert BRAVE_KEY not in json.dumps([got, again])


def test_an_abort_cancels_the_call_inside_the_worker_and_refunds_what_never_left(
    openclaw: OpenClaw,  # noqa: F811
    fake: FakeServer,
    tmp_path: Path,
) -> None:
    # A 503 (nothing billed), then a 20 s backoff before the retry: the abort comes there.
    fake.route(BRAVE_PATH, Reply(503, b"{}"), brave_ok(delay=120))
    fake.route("/html/", Reply(404, b"no"))
    env = product_env(openclaw, tmp_path, fake, retry_max_attempts=2, retry_base_delay=20_000,
                      agent_allocations={"alpha": {"gemini": 0, "brave": 5}})  # fmt: skip
    driver = Driver(openclaw, env, {"command": "smart-search"})
    try:
        cid = driver.send("search", query="q", agentDir="/st/agents/alpha/agent")
        asked(fake, 1)
        (pid,) = driver.pids()
        time.sleep(1.5)  # the 503 read, inside the 20 s backoff
        driver.send("abort", target=cid)
        got = driver.answer(cid)
        assert got["rejected"] == "AbortError", got
        settled = _wait_settled(env)
        assert (settled["used"], settled["in_flight"]) == (0, 0)  # the hold came back whole
        assert len(fake.requests_to(BRAVE_PATH)) == 1  # the retry never left
        # The request that left: aborted while Brave holds it, its worst case stays charged.
        cid = driver.send("search", query="q2", agentDir="/st/agents/alpha/agent")
        asked(fake, 2)
        driver.send("abort", target=cid)
        assert driver.answer(cid)["rejected"] == "AbortError"
        settled = _wait_settled(env)
        assert (settled["used"], settled["in_flight"]) == (1, 0)
        assert driver.pids() == [pid]  # the worker itself lives on
    finally:
        driver.close()


def _wait_settled(env: dict[str, str]) -> dict[str, Any]:
    """Brave's ledger entry once no hold is in flight (the worker settles after the abort)."""
    give_up = time.monotonic() + WAIT_S
    while True:
        brave = quota(env)["providers"]["brave"]
        if brave["in_flight"] == 0 or time.monotonic() > give_up:
            return brave
        time.sleep(0.1)


def test_a_config_edit_reaches_the_next_call_without_a_restart(
    openclaw: OpenClaw,  # noqa: F811
    fake: FakeServer,
    tmp_path: Path,
) -> None:
    fake.route(BRAVE_PATH, brave_ok())
    fake.route("/html/", Reply(404, b"no"))
    env = product_env(openclaw, tmp_path, fake, providers={"brave": {"daily_limit": 1}},
                      agent_allocations={"alpha": {"gemini": 0, "brave": 1}})  # fmt: skip
    path = Path(env["HOME"]) / ".openclaw" / "openclaw.json"
    driver = Driver(openclaw, env, {"command": "smart-search"})
    try:
        assert driver.search("one", "alpha")["resolved"]["smartSearch"]["providerUsed"] == "brave"
        (pid,) = driver.pids()
        second = driver.search("two", "alpha")["resolved"]
        assert second.get("code") == "all_exhausted", second
        doc = json.loads(path.read_text())
        config = doc["skills"]["entries"]["smart-search"]["config"]
        config["providers"]["brave"]["daily_limit"] = 3
        config["agent_allocations"]["alpha"]["brave"] = 3
        doc["skills"]["entries"]["smart-search"]["env"]["BRAVE_API_KEY"] = NEW_KEY
        path.write_text(json.dumps(doc))
        third = driver.search("three", "alpha")["resolved"]
        assert third["smartSearch"]["providerUsed"] == "brave", third
        assert third["smartSearch"]["queriesRemaining"] == 1
        keys = [r.headers["x-subscription-token"] for r in fake.requests_to(BRAVE_PATH)]
        assert keys == [BRAVE_KEY, NEW_KEY]  # keys, limits and allocations: all re-read
        assert driver.pids() == [pid]
    finally:
        driver.close()


def test_spawn_per_call_runs_a_process_per_call_and_no_worker(
    openclaw: OpenClaw,  # noqa: F811
    fake: FakeServer,
    tmp_path: Path,
) -> None:
    fake.route(BRAVE_PATH, brave_ok())
    env = product_env(openclaw, tmp_path, fake,
                      agent_allocations={"alpha": {"gemini": 0, "brave": 5}})  # fmt: skip
    log = tmp_path / "runs.log"
    command = tmp_path / "bin" / "smart-search-logged"
    command.write_text(f'#!/bin/sh\necho "run:$*" >> {log}\nexec smart-search "$@"\n')
    command.chmod(0o755)
    for per_call, expected in ((True, ["run:"] * 3), (False, ["run:mcp"])):
        log.write_text("")
        driver = Driver(openclaw, env, {"command": str(command), "spawnPerCall": per_call})
        try:
            for i in range(3):
                got = driver.search(f"q{i}", "alpha")["resolved"]
                assert got["smartSearch"]["providerUsed"] == "brave", got
            assert len(driver.pids()) == (0 if per_call else 1)
        finally:
            driver.close()
        assert log.read_text().split() == expected


def test_the_worker_exits_with_its_parent_and_settles_what_was_in_flight(
    openclaw: OpenClaw,  # noqa: F811
    fake: FakeServer,
    tmp_path: Path,
) -> None:
    """The gateway dies (SIGKILL: no exit hook runs): the worker's stdin closes, it cancels the
    call in flight (the retry that never left is refunded) and exits. No orphan."""
    fake.route(BRAVE_PATH, Reply(503, b"{}"), brave_ok())
    fake.route("/html/", Reply(404, b"no"))
    env = product_env(openclaw, tmp_path, fake, retry_max_attempts=2, retry_base_delay=20_000,
                      agent_allocations={"alpha": {"gemini": 0, "brave": 5}})  # fmt: skip
    driver = Driver(openclaw, env, {"command": "smart-search"})
    try:
        driver.send("search", query="q", agentDir="/st/agents/alpha/agent")
        asked(fake, 1)
        (pid,) = driver.pids()
        time.sleep(1.5)  # the 503 read, inside the 20 s backoff
        driver.proc.send_signal(signal.SIGKILL)
        assert gone(pid, 30), "the worker outlived its parent"
    finally:
        driver.close()
    brave = quota(env)["providers"]["brave"]
    assert (brave["used"], brave["in_flight"]) == (0, 0)
    assert len(fake.requests_to(BRAVE_PATH)) == 1
