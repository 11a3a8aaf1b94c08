"""The OpenClaw plugin (openclaw-plugin/, issue 21) against the real host: OpenClaw 2026.9.6 from
npm with Node 24, installed as tests/test_openclaw_host.py installs it.

Each test runs OpenClaw with HOME and every OPENCLAW_* variable in a temp dir, the plugin installed
from this checkout (`openclaw plugins install <dir> --force --accept-capabilities`) and selected
for `tools.web.search.provider` and `tools.web.fetch.provider`, a `smart-search` shim for this
checkout on PATH, and loopback fakes for Brave, the web engines and (for agent turns) an
OpenAI-compatible model. Like test_openclaw_host.py, it skips only when npm is missing or its
registry unreachable, never because a test is slow.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from tests.fakes import FakeServer, Reply, fixture_bytes
from tests.test_openclaw_host import REPO, OpenClaw, host_env, openclaw  # noqa: F401 - fixture

PLUGIN = REPO / "openclaw-plugin"
BRAVE_PATH = "/res/v1/web/search"
BRAVE_KEY = "SENTINEL-BRAVE-KEY-21a9c4"
GEMINI_KEY = "SENTINEL-GEMINI-KEY-7d3f55"
MODEL_KEY = "SENTINEL-MODEL-KEY-0b7e11"
GATEWAY_TOKEN = "SENTINEL-GATEWAY-TOKEN-5c2d90"
ENGINES = ("google", "bing", "duckduckgo")
PAGE = (
    b"<!doctype html><html><head><title>Plugin probe page</title></head><body><article>"
    b"<h1>Plugin probe page</h1><p>"
    + b"The smart-search plugin fetched this paragraph through the product. " * 8
    + b"</p></article></body></html>"
)


def brave_ok() -> Reply:
    return Reply(200, fixture_bytes("brave-ok.json"), {"content-type": "application/json"})


def brave_urls() -> list[str]:
    doc = json.loads(fixture_bytes("brave-ok.json"))
    return [row["url"] for row in doc["web"]["results"]]


# --- a loopback OpenAI-compatible model ---------------------------------------------------------


class FakeModel:
    """/v1/chat/completions: a turn with no tool answer yet gets a `web_search` tool call; a turn
    that carries the tool's answer gets a final message quoting it. Streams when asked to."""

    def __init__(self) -> None:
        owner = self
        self.requests: list[dict[str, Any]] = []

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: object) -> None:
                pass

            def do_GET(self) -> None:  # noqa: N802 - http.server's name
                self.send_response(404)
                self.send_header("content-length", "0")
                self.end_headers()

            def do_POST(self) -> None:  # noqa: N802
                length = int(self.headers.get("content-length", "0") or 0)
                body = json.loads(self.rfile.read(length) or b"{}")
                owner.requests.append({"path": self.path, "headers": dict(self.headers), **body})
                owner.answer(self, body)

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/v1"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def __enter__(self) -> FakeModel:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.shutdown()
        self.server.server_close()

    @staticmethod
    def answer(handler: BaseHTTPRequestHandler, body: dict[str, Any]) -> None:
        messages = body.get("messages", [])
        # This turn's tool answers: those after the last prompt ("find it": a session that ran
        # before, in an earlier test, carries its old ones in its history).
        asked = [m.get("role") == "user" and "find it" in json.dumps(m.get("content"))
                 for m in messages]  # fmt: skip
        users = [i for i, yes in enumerate(asked) if yes]
        turn = messages[users[-1] + 1 :] if users else messages
        tool_answers = [m for m in turn if m.get("role") == "tool"]
        if tool_answers:
            content = tool_answers[-1].get("content")
            text = content if isinstance(content, str) else json.dumps(content)
            delta: dict[str, Any] = {"role": "assistant", "content": "TOOL SAID: " + text}
            finish = "stop"
        else:
            call = {"name": "web_search", "arguments": json.dumps({"query": "plugin probe"})}
            delta = {"role": "assistant", "content": None,
                     "tool_calls": [{"index": 0, "id": "call_1", "type": "function",
                                     "function": call}]}  # fmt: skip
            finish = "tool_calls"
        usage = {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2}
        model = body.get("model")
        if body.get("stream"):
            chunks = [
                {"id": "c1", "object": "chat.completion.chunk", "model": model,
                 "choices": [{"index": 0, "delta": delta, "finish_reason": None}]},
                {"id": "c1", "object": "chat.completion.chunk", "model": model,
                 "choices": [{"index": 0, "delta": {}, "finish_reason": finish}], "usage": usage},
            ]  # fmt: skip
            data = b"".join(b"data: " + json.dumps(c).encode() + b"\n\n" for c in chunks)
            data += b"data: [DONE]\n\n"
            content_type = "text/event-stream"
        else:
            message = {k: v for k, v in delta.items() if k != "index"}
            data = json.dumps({"id": "c1", "object": "chat.completion", "model": model,
                               "choices": [{"index": 0, "message": message,
                                            "finish_reason": finish}],
                               "usage": usage}).encode()  # fmt: skip
            content_type = "application/json"
        handler.send_response(200)
        handler.send_header("content-type", content_type)
        handler.send_header("content-length", str(len(data)))
        handler.end_headers()
        handler.wfile.write(data)


# --- the host ----------------------------------------------------------------------------------


class Host:
    """One OpenClaw home with the plugin installed and selected; per-test config and state."""

    def __init__(self, oc: OpenClaw, root: Path) -> None:
        self.oc = oc
        self.root = root
        self.env = host_env(root, oc, shim=True)
        self.config_path = Path(self.env["HOME"]) / ".openclaw" / "openclaw.json"
        self.state_dir = Path(self.env["HOME"]) / ".openclaw"

    def run(self, args: list[str], **extra: str) -> subprocess.CompletedProcess:
        return self.oc.run(args, {**self.env, **extra})

    def ok(self, args: list[str], **extra: str) -> subprocess.CompletedProcess:
        proc = self.run(args, **extra)
        assert proc.returncode == 0, f"openclaw {args}: {proc.stdout[-3000:]}{proc.stderr[-3000:]}"
        return proc

    def document(self) -> dict[str, Any]:
        return json.loads(self.config_path.read_text())

    def configure(self, fake: FakeServer, product: dict[str, Any], **top: Any) -> None:
        """smart-search's settings (skills.entries["smart-search"]) pointed at `fake`, plus any
        top-level OpenClaw keys; the plugin's install record and selection are kept."""
        doc = self.document()
        endpoints = {name: fake.url for name in ("gemini", "brave", *ENGINES)}
        config = {"endpoints": endpoints, "cache": {"enabled": False},
                  "web_fetch_min_interval_ms": 0, "retry_base_delay": 10, **product}  # fmt: skip
        doc["skills"] = {
            "entries": {"smart-search": {"config": config, "env": {"BRAVE_API_KEY": BRAVE_KEY}}}
        }
        doc.update(top)
        self.config_path.write_text(json.dumps(doc, indent=2))

    def quota(self, state: Path) -> dict[str, Any]:
        """The full quota object, read by the product itself (search_quota_status)."""
        proc = subprocess.run(
            ["smart-search", "quota"],
            capture_output=True,
            text=True,
            env={**self.env, "SMART_SEARCH_STATE_DIR": str(state)},
            timeout=120,
        )
        return json.loads(proc.stdout)


@pytest.fixture(scope="module")
def host(openclaw: OpenClaw, tmp_path_factory: pytest.TempPathFactory) -> Host:  # noqa: F811
    h = Host(openclaw, tmp_path_factory.mktemp("plugin-host"))
    without = h.run(["plugins", "install", str(PLUGIN), "--force"])
    # Without consent to its capabilities OpenClaw refuses the install (the finding).
    assert without.returncode != 0, without.stdout + without.stderr
    h.ok(["plugins", "install", str(PLUGIN), "--force", "--accept-capabilities"])
    h.ok(["config", "set", "tools.web.search.provider", "smart-search"])
    h.ok(["config", "set", "tools.web.fetch.provider", "smart-search"])
    return h


@pytest.fixture
def fake() -> Iterator[FakeServer]:
    with FakeServer() as server:
        yield server


def infer(host: Host, state: Path, *args: str) -> tuple[dict[str, Any], Any]:
    proc = host.run(["infer", "web", *args, "--json"], SMART_SEARCH_STATE_DIR=str(state))
    try:
        return json.loads(proc.stdout), proc
    except ValueError:
        raise AssertionError(f"infer {args}: {proc.stdout[-2000:]}{proc.stderr[-2000:]}") from None


def log_lines(state: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for f in sorted((state / "logs").glob("search-*.jsonl"))
            for line in f.read_text().splitlines() if line.strip()]  # fmt: skip


def assert_no_key(host: Host, fake: FakeServer, state: Path, *procs: subprocess.CompletedProcess):
    for proc in procs:
        assert BRAVE_KEY not in proc.stdout + proc.stderr
    for request in fake.requests:
        assert BRAVE_KEY not in request.target  # a key never travels in a URL
    for path in [*state.rglob("*"), host.config_path.parent / "agents"]:
        if path.is_file() and path != host.config_path:
            assert BRAVE_KEY.encode() not in path.read_bytes(), path


# --- through the real host ---------------------------------------------------------------------


def test_the_plugin_is_listed_and_selected_for_both_tools(host: Host) -> None:
    listed = json.loads(host.ok(["infer", "web", "providers", "--json"]).stdout)
    search = [p for p in listed["search"] if p["id"] == "smart-search"]
    fetch = [p for p in listed["fetch"] if p["id"] == "smart-search"]
    assert search and search[0]["selected"] is True and search[0]["configured"] is True, listed
    # Issue 30: the variables the product reads keys from, as its registry declares them.
    from smart_search.sources import registry

    assert search[0]["envVars"] == [s.key_variable for s in registry.sources("api")], listed
    assert fetch and fetch[0]["selected"] is True and fetch[0]["configured"] is True, listed


def test_infer_web_search_runs_the_product_and_charges_the_default_agent(
    host: Host, fake: FakeServer, tmp_path: Path
) -> None:
    fake.route(BRAVE_PATH, brave_ok())
    host.configure(fake, {"agent_allocations": {"general": {"gemini": 0, "brave": 2},
                                                "other": {"gemini": 0, "brave": 2}}})  # fmt: skip
    state = tmp_path / "ss"
    out, proc = infer(host, state, "search", "--query", "httpx timeout")
    assert out["ok"] is True and out["provider"] == "smart-search", out
    result = out["outputs"][0]["result"]
    assert [row["url"] for row in result["results"]] == brave_urls()[: len(result["results"])]
    assert result["results"] and all(r["title"] and r["snippet"] for r in result["results"])
    assert result["smartSearch"]["providerUsed"] == "brave"
    # Through the product: one Brave request, the key in its header, the default agent charged.
    (request,) = fake.requests_to(BRAVE_PATH)
    assert request.headers["x-subscription-token"] == BRAVE_KEY
    assert request.query["q"] == ["httpx timeout"]
    status = host.quota(state)
    assert status["agents"]["general"]["brave"]["used"] == 1
    assert status["agents"]["other"]["brave"]["used"] == 0
    assert [line["agent_id"] for line in log_lines(state)] == ["general"]
    assert_no_key(host, fake, state, proc)


def test_a_gemini_answer_comes_back_as_an_answer_with_its_citations(
    host: Host, fake: FakeServer, tmp_path: Path
) -> None:
    gemini_path = "/v1beta/models/gemini-flash-latest:generateContent"
    fake.route(gemini_path, Reply(200, fixture_bytes("gemini-ok.json"),
                                  {"content-type": "application/json"}))  # fmt: skip
    host.configure(fake, {"default_provider": "gemini",
                          "providers": {"gemini": {"unit": "request"}},
                          "agent_allocations": {"general": {"gemini": 2, "brave": 0}}})  # fmt: skip
    doc = host.document()
    doc["skills"]["entries"]["smart-search"]["env"]["GEMINI_API_KEY"] = GEMINI_KEY
    host.config_path.write_text(json.dumps(doc))
    state = tmp_path / "ss"
    out, proc = infer(host, state, "search", "--query", "httpx timeout")
    assert out["ok"] is True, out
    result = out["outputs"][0]["result"]
    (line,) = log_lines(state)
    product = json.loads(fixture_bytes("gemini-ok.json"))
    answer = "".join(p["text"] for p in product["candidates"][0]["content"]["parts"])
    assert isinstance(result["content"], str) and result["content"].strip()
    assert result["content"][:40] in answer or answer[:40] in result["content"], result["content"]
    assert result["citations"] and all(c["url"].startswith("http") for c in result["citations"])
    assert result["smartSearch"]["providerUsed"] == "gemini" and line["agent_id"] == "general"
    assert host.quota(state)["agents"]["general"]["gemini"]["used"] == 1
    (request,) = fake.requests_to(gemini_path)
    assert GEMINI_KEY not in request.target and GEMINI_KEY not in proc.stdout + proc.stderr


def test_the_default_agent_is_configurable(host: Host, fake: FakeServer, tmp_path: Path) -> None:
    fake.route(BRAVE_PATH, brave_ok())
    doc = host.document()
    entry = doc["plugins"]["entries"]["smart-search"]
    ours = {**entry, "config": {"defaultAgent": "cron"}}
    plugins = {**doc["plugins"], "entries": {**doc["plugins"]["entries"], "smart-search": ours}}
    host.configure(
        fake, {"agent_allocations": {"cron": {"gemini": 0, "brave": 1}}}, plugins=plugins
    )
    try:
        state = tmp_path / "ss"
        out, _ = infer(host, state, "search", "--query", "httpx timeout")
        assert out["ok"] is True, out
        assert [line["agent_id"] for line in log_lines(state)] == ["cron"]
        assert host.quota(state)["agents"]["cron"]["brave"]["used"] == 1
    finally:
        host.configure(fake, {}, plugins={**doc["plugins"], "entries": {
            **doc["plugins"]["entries"], "smart-search": entry}})  # fmt: skip


def test_exhausted_quota_is_an_error_the_model_reads_and_no_provider_is_asked(
    host: Host, fake: FakeServer, tmp_path: Path
) -> None:
    # Brave's whole day is the other agent's allocation: nothing is left for the default agent.
    host.configure(fake, {"providers": {"brave": {"daily_limit": 1}},
                          "agent_allocations": {"general": {"gemini": 0, "brave": 0},
                                                "other": {"gemini": 0, "brave": 1}}})  # fmt: skip
    state = tmp_path / "ss"
    out, proc = infer(host, state, "search", "--query", "httpx timeout")
    assert out["ok"] is False, out
    result = out["outputs"][0]["result"]
    (line,) = log_lines(state)
    # The product's own message, word for word, and its error class; never a stack trace.
    assert out["error"] == result["error"] == line["error"]
    assert result["code"] == "all_exhausted"
    assert "at " not in out["error"] and "Traceback" not in proc.stdout + proc.stderr
    assert not fake.requests_to(BRAVE_PATH)  # the API was never asked
    assert host.quota(state)["providers"]["brave"]["used"] == 0
    assert_no_key(host, fake, state, proc)


def configure_turns(host: Host, fake: FakeServer, model: FakeModel, **top: Any) -> None:
    """Agents alpha, beta and gamma on the fake model, web_search offered directly, 2 Brave units
    each."""
    models = {"providers": {"fake": {
        "baseUrl": model.url, "apiKey": MODEL_KEY, "api": "openai-completions",
        "models": [{"id": "m", "name": "m", "input": ["text"], "contextWindow": 128000,
                    "maxTokens": 1000}]}}}  # fmt: skip
    agents = {"ownership": "explicit",
              "defaults": {"model": {"primary": "fake/m"}, "systemAgent": {"agentId": "alpha"}},
              "entries": {"alpha": {}, "beta": {}, "gamma": {}}}  # fmt: skip
    tools = {**host.document().get("tools", {}), "toolSearch": False}
    names = ("alpha", "beta", "gamma", "general")
    allocations = {name: {"gemini": 0, "brave": 2} for name in names}
    host.configure(fake, {"agent_allocations": allocations}, models=models, agents=agents,
                   tools=tools, **top)  # fmt: skip


def test_agent_turns_of_two_agents_are_charged_to_each(
    host: Host, fake: FakeServer, tmp_path: Path
) -> None:
    fake.route(BRAVE_PATH, brave_ok())
    with FakeModel() as model:
        configure_turns(host, fake, model)
        state = tmp_path / "ss"
        seen = []
        for agent in ("alpha", "beta"):
            turn = ["agent", "--local", "--agent", agent, "--message", "find it", "--json"]
            proc = host.run(turn, SMART_SEARCH_STATE_DIR=str(state))
            assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
            status = host.quota(state)["agents"]
            seen.append({name: status.get(name, {}).get("brave", {}).get("used", 0)
                         for name in ("alpha", "beta", "general")})  # fmt: skip
            # The model was offered web_search, called it, and read the product's results back.
            final = model.requests[-1]
            tool_answer = [m for m in final["messages"] if m.get("role") == "tool"][-1]
            assert brave_urls()[0] in json.dumps(tool_answer["content"]), tool_answer
            assert_no_key(host, fake, state, proc)
    assert seen == [{"alpha": 1, "beta": 0, "general": 0}, {"alpha": 1, "beta": 1, "general": 0}]
    assert [line["agent_id"] for line in log_lines(state)] == ["alpha", "beta"]
    assert len(fake.requests_to(BRAVE_PATH)) == 2


def workers(state: Path) -> list[int]:
    """Running `smart-search mcp` processes whose state dir is `state` (this test's own)."""
    found = []
    for proc in Path("/proc").iterdir():
        try:
            cmdline = (proc / "cmdline").read_bytes().split(b"\0")
            environ = (proc / "environ").read_bytes().split(b"\0")
            running = (proc / "stat").read_text().split(") ", 1)[1][0] != "Z"
        except (OSError, ValueError, IndexError):
            continue
        if running and b"mcp" in cmdline and f"SMART_SEARCH_STATE_DIR={state}".encode() in environ:
            found.append(int(proc.name))
    return found


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def test_a_gateway_serves_every_turn_from_one_warm_worker_and_leaves_no_process(
    host: Host, fake: FakeServer, tmp_path: Path
) -> None:
    fake.route(BRAVE_PATH, brave_ok())
    state = tmp_path / "ss"
    port = free_port()
    gateway_config = {"mode": "local", "port": port, "bind": "loopback",
                      "auth": {"mode": "token", "token": GATEWAY_TOKEN}}  # fmt: skip
    with FakeModel() as model:
        configure_turns(host, fake, model, gateway=gateway_config)
        env = {**host.env, "SMART_SEARCH_STATE_DIR": str(state)}
        log = (tmp_path / "gateway.log").open("w")
        gateway = subprocess.Popen([str(host.oc.node), str(host.oc.entry), "gateway", "run"],
                                   env=env, cwd=env["HOME"], stdout=log, stderr=log)  # fmt: skip
        try:
            give_up = time.monotonic() + 240
            while True:  # the gateway listens
                assert gateway.poll() is None, (tmp_path / "gateway.log").read_text()[-3000:]
                assert time.monotonic() < give_up, "the gateway never listened"
                with socket.socket() as sock:
                    if sock.connect_ex(("127.0.0.1", port)) == 0:
                        break
                time.sleep(0.5)
            seen, pids = [], []

            def turn(agent: str) -> None:
                proc = host.run(["agent", "--agent", agent, "--message", "find it", "--json"])
                logged = (tmp_path / "gateway.log").read_text()[-4000:]
                assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:] + logged
                final = model.requests[-1]
                tool_answer = [m for m in final["messages"] if m.get("role") == "tool"][-1]
                assert brave_urls()[0] in json.dumps(tool_answer["content"]), tool_answer
                status = host.quota(state)["agents"]
                seen.append({name: status.get(name, {}).get("brave", {}).get("used", 0)
                             for name in ("alpha", "beta", "gamma")})  # fmt: skip
                pids.append(workers(state))

            turn("alpha")
            turn("beta")
            why = (seen, pids, (tmp_path / "gateway.log").read_text()[-3000:])
            assert len(pids[0]) == 1 and pids[1] == pids[0], why  # both turns on one warm worker
            os.kill(pids[0][0], signal.SIGKILL)
            turn("gamma")  # the next turn (a new session) still answers, from a new worker
            assert len(pids[2]) == 1 and pids[2] != pids[0], why
        finally:
            gateway.send_signal(signal.SIGTERM)
            try:
                gateway.wait(timeout=120)
            finally:
                if gateway.poll() is None:
                    gateway.kill()
                log.close()
    give_up = time.monotonic() + 30
    while workers(state) and time.monotonic() < give_up:
        time.sleep(0.1)
    assert workers(state) == []  # the worker stopped with the gateway
    assert seen == [{"alpha": 1, "beta": 0, "gamma": 0}, {"alpha": 1, "beta": 1, "gamma": 0},
                    {"alpha": 1, "beta": 1, "gamma": 1}]  # fmt: skip
    assert [line["agent_id"] for line in log_lines(state)] == ["alpha", "beta", "gamma"]
    assert_no_key(host, fake, state)


# --- web_fetch through smart_fetch -------------------------------------------------------------
# smart_fetch is built on another branch. The error test passes either way (it compares the host's
# error with the product's own answer); the page test is marked xfail while this checkout's
# product does not know the tool, and runs for real (strict) once it does.

PRODUCT_HAS_SMART_FETCH = "smart_fetch" in (REPO / "schemas" / "request.json").read_text()
# The fakes listen on loopback, which smart_fetch refuses unless the operator allows it.
LOOPBACK_FETCH = {"fetch": {"allow_private_hosts": True, "min_interval_ms": 0}}


def product_answer(host: Host, state: Path, call: dict[str, Any]) -> dict[str, Any]:
    proc = subprocess.run(
        ["smart-search"],
        input=json.dumps(call),
        capture_output=True,
        text=True,
        env={**host.env, "SMART_SEARCH_STATE_DIR": str(state)},
        timeout=120,
    )
    return json.loads(proc.stdout)


def test_a_fetch_error_is_the_products_message(
    host: Host, fake: FakeServer, tmp_path: Path
) -> None:
    fake.route(
        "/gone", Reply(404, b"<html><body>gone</body></html>", {"content-type": "text/html"})
    )
    host.configure(fake, LOOPBACK_FETCH)
    state = tmp_path / "ss"
    url = f"{fake.url}/gone"
    out, proc = infer(host, state, "fetch", "--url", url)
    theirs = product_answer(
        host, tmp_path / "ss2", {"tool": "smart_fetch", "args": {"url": url, "agent_id": "general"}}
    )
    assert out["ok"] is False and theirs["error"], (out, theirs)
    # OpenClaw's CLI error carries the product's message, word for word, and no stack trace.
    assert out["error"]["message"] == theirs["error"], (out, theirs)
    assert "    at " not in proc.stdout + proc.stderr and "Traceback" not in proc.stderr
    assert_no_key(host, fake, state, proc)


@pytest.mark.xfail(
    not PRODUCT_HAS_SMART_FETCH,
    strict=True,
    reason="smart_fetch is not in this checkout's product yet (another branch)",
)
def test_infer_web_fetch_reads_the_page_through_smart_fetch(
    host: Host, fake: FakeServer, tmp_path: Path
) -> None:
    fake.route("/article", Reply(200, PAGE, {"content-type": "text/html; charset=utf-8"}))
    host.configure(fake, LOOPBACK_FETCH)
    state = tmp_path / "ss"
    out, proc = infer(host, state, "fetch", "--url", f"{fake.url}/article")
    assert out["ok"] is True and out["provider"] == "smart-search", out
    result = out["outputs"][0]["result"]
    assert "fetched this paragraph through the product" in result["text"]
    assert result["title"] == "Plugin probe page" and result["extractor"] == "smart-search"
    assert result["finalUrl"] == f"{fake.url}/article" and result["status"] == 200
    assert len(fake.requests_to("/article")) == 1
    assert_no_key(host, fake, state, proc)


# --- the plugin's process handling, driven by Node directly ------------------------------------

DRIVER = """
import { pathToFileURL } from "node:url";
import readline from "node:readline";
const [index, command, agentDir, how] = process.argv.slice(1);
const plugin = await import(pathToFileURL(index).href);
const config = { command, killGraceMs: 1000, spawnPerCall: how === "per-call" };
const tool = plugin.createSearchProvider(config).createTool({ agentDir });
const controller = new AbortController();
readline.createInterface({ input: process.stdin }).on("line", (line) => {
  if (line === "abort") controller.abort();
});
let answer;
try {
  const signal = controller.signal;
  answer = { resolved: await tool.execute({ query: "httpx timeout" }, { signal }) };
} catch (err) {
  answer = { rejected: err.name, message: err.message };
}
console.log(JSON.stringify(answer));
process.exit(0);
"""


def driver(
    oc: OpenClaw, env: dict[str, str], command: str, agent_dir: str, how: str = "worker"
) -> subprocess.Popen:
    return subprocess.Popen(
        [str(oc.node), "--input-type=module", "-e", DRIVER, str(PLUGIN / "index.js"), command,
         agent_dir, how],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env,
        cwd=env["HOME"],
    )  # fmt: skip


def product_env(
    oc: OpenClaw, tmp_path: Path, fake: FakeServer, allocations: dict[str, Any]
) -> dict[str, str]:
    env = host_env(tmp_path, oc, shim=True, SMART_SEARCH_STATE_DIR=str(tmp_path / "ss"))
    config = Path(env["HOME"]) / ".openclaw" / "openclaw.json"
    config.parent.mkdir(parents=True, exist_ok=True)
    endpoints = {name: fake.url for name in ("gemini", "brave", *ENGINES)}
    config.write_text(json.dumps({"skills": {"entries": {"smart-search": {
        "config": {"endpoints": endpoints, "cache": {"enabled": False},
                   "agent_allocations": allocations, "retry_max_attempts": 1},
        "env": {"BRAVE_API_KEY": BRAVE_KEY}}}}}))  # fmt: skip
    return env


def test_an_abort_kills_the_child_and_the_sent_request_stays_charged(
    openclaw: OpenClaw,  # noqa: F811
    fake: FakeServer,
    tmp_path: Path,
) -> None:
    fake.route(BRAVE_PATH, Reply(200, fixture_bytes("brave-ok.json"), delay=120))  # never answers
    env = product_env(openclaw, tmp_path, fake, {"alpha": {"gemini": 0, "brave": 2}})
    pid_file = tmp_path / "child.pid"
    wrapper = tmp_path / "bin" / "smart-search-pid"
    wrapper.write_text(f'#!/bin/sh\necho $$ > {pid_file}\nexec smart-search "$@"\n')
    wrapper.chmod(0o755)
    agent_dir = str(tmp_path / "st" / "agents" / "alpha" / "agent")
    node = driver(openclaw, env, str(wrapper), agent_dir, "per-call")
    try:
        deadline = time.monotonic() + 120
        while not fake.requests_to(BRAVE_PATH):  # the product's request has reached Brave
            assert node.poll() is None, node.communicate()
            assert time.monotonic() < deadline, "the product never asked Brave"
            time.sleep(0.02)
        assert node.stdin is not None
        node.stdin.write("abort\n")
        node.stdin.flush()
        out, err = node.communicate(timeout=60)
    finally:
        if node.poll() is None:
            node.kill()
    answer = json.loads(out)
    assert answer["rejected"] == "AbortError", (answer, err)
    pid = int(pid_file.read_text())
    with pytest.raises(ProcessLookupError):
        os.kill(pid, 0)  # the child is gone (and reaped) before execute settles
    # The request had left: the product keeps it charged (RULINGS 4), to this agent only.
    quota = subprocess.run(["smart-search", "quota"], capture_output=True, text=True, env=env,
                           timeout=120)  # fmt: skip
    status = json.loads(quota.stdout)
    assert status["agents"]["alpha"]["brave"]["used"] == 1, status
    assert BRAVE_KEY not in out + err


def test_the_command_runs_without_a_shell(
    openclaw: OpenClaw,  # noqa: F811
    fake: FakeServer,
    tmp_path: Path,
) -> None:
    env = product_env(openclaw, tmp_path, fake, {})
    marker = tmp_path / "PWNED"
    for how in ("worker", "per-call"):
        node = driver(openclaw, env, f"smart-search; touch {marker}", "", how)
        out, err = node.communicate(timeout=120)
        answer = json.loads(out)["resolved"]
        assert answer["code"] == "not_configured", answer
        assert "Cannot run smart-search; touch" in answer["error"]
        assert not marker.exists() and not fake.requests


IDENTITY = """
import { pathToFileURL } from "node:url";
const plugin = await import(pathToFileURL(process.argv[1]).href);
const config = { agents: { entries: { ops: { agentDir: "~/custom/ops-dir" }, plain: {} },
                           list: [{ id: "Legacy", agentDir: "/srv/legacy" }] } };
const env = { HOME: "/home/u" };
const cases = [undefined, "", "/state/agents/alpha/agent", "/state/agents/Beta/agent/",
               "/home/u/custom/ops-dir", "/srv/legacy", "/state/agents/alpha", "/tmp/elsewhere"];
const out = cases.map((dir) => {
  try { return plugin.agentFromDir(dir, config, "general", env); }
  catch (err) { return { error: err.message, code: err.code }; }
});
process.stdout.write(JSON.stringify(out));
"""


def test_the_agent_is_the_host_agent_directory_never_a_model_argument(
    openclaw: OpenClaw,  # noqa: F811
    tmp_path: Path,
) -> None:
    env = host_env(tmp_path, openclaw)
    proc = subprocess.run(
        [str(openclaw.node), "--input-type=module", "-e", IDENTITY, str(PLUGIN / "index.js")],
        capture_output=True, text=True, env=env, timeout=60,
    )  # fmt: skip
    got = json.loads(proc.stdout)
    assert got[:6] == ["general", "general", "alpha", "beta", "ops", "legacy"], got
    for odd in got[6:]:  # a directory of another shape names no agent: an error, not a guess
        assert odd["code"] == "invalid_input" and "Cannot tell the agent" in odd["error"], odd
    # The model's arguments never carry the agent: the tool's schema has no such field, and an
    # agent_id the model slips in is not forwarded.
    source = (PLUGIN / "index.js").read_text()
    assert '"agent_id"' not in source.split("const SEARCH_PARAMETERS")[1].split("};")[0]
    assert "agent_id: agentId" in source
