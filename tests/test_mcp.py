"""`smart-search mcp`: the MCP server, driven by the SDK's own client over stdio and over HTTP.

The server runs as a real subprocess (`python -m smart_search mcp`) against loopback fakes; the
client is `mcp.ClientSession` over `stdio_client` or `streamable_http_client`. Pure parts (served
schemas, the cancel hook in http.py, the settings cache) are tested in-process.
"""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import threading
import time
import tomllib
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import Any

import anyio
import orjson
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from smart_search import errors
from smart_search.shell import mcp as mcp_server
from smart_search.sources import http
from tests.conftest import REPO, SCHEMAS, Env, _registry, assert_valid_result, idle, other_apis
from tests.fakes import FakeServer, Reply, fixture_bytes
from tests.test_contract import arg_objects, json_values

BRAVE_PATH = "/res/v1/web/search"
AGENT = "mcp-agent"
BRAVE_KEY = "SENTINEL-BRAVE-KEY-3e9a41"
GEMINI_KEY = "SENTINEL-GEMINI-KEY-77c0d2"
# Generous: the machine is loaded and shared; nothing here measures speed.
CALL_TIMEOUT_S = 120.0
WAIT_S = 60.0
TRANSPORTS = ["stdio", "http"]


# --- fakes ------------------------------------------------------------------------------------


class GatedServer(FakeServer):
    """Holds every reply until `count` requests have arrived: only a server that has them all in
    flight at once can answer any of them."""

    def __init__(self, count: int) -> None:
        super().__init__()
        self.count = count
        self.gate = threading.Event()

    def _respond(self, conn: Any, reply: Reply) -> None:
        with self._lock:
            if len(self.requests) >= self.count:
                self.gate.set()
        if self.gate.wait(WAIT_S):
            super()._respond(conn, reply)


class HangingServer(FakeServer):
    """Never answers; records which requests the client hung up on (its socket shut) while
    waiting. It waits longer than any client timeout here, so a hang-up is the client's doing."""

    def __init__(self) -> None:
        super().__init__()
        self.hung_up = threading.Event()
        self.hangups: list[str] = []

    def _respond(self, conn: Any, reply: Reply) -> None:
        with self._lock:
            path = self.requests[-1].path
        conn.settimeout(3 * CALL_TIMEOUT_S)
        try:
            closed = conn.recv(1) == b""
        except TimeoutError:
            closed = False
        except OSError:
            closed = True  # reset by the client
        if closed:
            with self._lock:
                self.hangups.append(path)
            self.hung_up.set()


def configure(env: Env, fake: FakeServer, **config: Any) -> None:
    base: dict[str, Any] = {
        "endpoints": {n: fake.url for n in ("gemini", "brave", "google", "bing", "duckduckgo")},
        "web_fetch_min_interval_ms": 0,
        "retry_max_attempts": 1,
        # Longer than any wait in a test: a request that ends early was ended by the test.
        "request_timeout_ms": int(2 * CALL_TIMEOUT_S * 1000),
        "total_timeout_ms": int(2 * CALL_TIMEOUT_S * 1000),
        "agent_allocations": {
            AGENT: {"gemini": 5, "brave": 40},
            "other": {"gemini": 1, "brave": 1},
        },
    }
    base.update(config)
    env.write_config(base)
    env.environ["BRAVE_API_KEY"] = BRAVE_KEY
    env.environ["GEMINI_API_KEY"] = GEMINI_KEY


def brave_ok() -> Reply:
    return Reply(200, fixture_bytes("brave-ok.json"), {"content-type": "application/json"})


@pytest.fixture
def fake() -> Any:
    with FakeServer() as server:
        yield server


# --- connecting the SDK client ---------------------------------------------------------------


@asynccontextmanager
async def stdio_session(env: Env, *extra: str) -> AsyncIterator[Any]:
    from mcp import ClientSession, StdioServerParameters
    from mcp.client.stdio import stdio_client

    params = StdioServerParameters(
        command=sys.executable,
        args=["-m", "smart_search", "mcp", *extra],
        env=dict(env.environ),
        cwd=str(env.root),
    )
    with open(env.root / "server-stderr.log", "a") as errlog:
        async with stdio_client(params, errlog=errlog) as (read, write):
            async with ClientSession(read, write, read_timeout_seconds=CALL_TIMEOUT_S) as session:
                with anyio.fail_after(WAIT_S):
                    await session.initialize()
                yield session


class HttpServer:
    """`smart-search mcp --http 127.0.0.1:0` as a subprocess; `url` from its stderr line."""

    def __init__(self, env: Env, *extra: str, address: str = "127.0.0.1:0") -> None:
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "smart_search", "mcp", "--http", address, *extra],
            env=env.environ,
            cwd=str(env.root),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
        )
        self.stderr: list[str] = []
        self.url: str | None = None
        ready = threading.Event()

        def drain() -> None:
            assert self.proc.stderr is not None
            for raw in self.proc.stderr:
                line = raw.decode(errors="replace")
                self.stderr.append(line)
                if "listening on " in line and self.url is None:
                    self.url = line.split("listening on ", 1)[1].strip()
                    ready.set()
            ready.set()

        threading.Thread(target=drain, daemon=True).start()
        if not ready.wait(WAIT_S) or self.url is None:
            self.close()
            raise AssertionError(f"HTTP server did not start: {''.join(self.stderr)}")

    def close(self) -> None:
        self.proc.terminate()
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


@asynccontextmanager
async def http_session(env: Env, *extra: str) -> AsyncIterator[Any]:
    from mcp import ClientSession
    from mcp.client.streamable_http import streamable_http_client

    server = HttpServer(env, *extra)
    try:
        assert server.url is not None and server.url.startswith("http://127.0.0.1:")
        async with streamable_http_client(server.url) as (read, write):
            async with ClientSession(read, write, read_timeout_seconds=CALL_TIMEOUT_S) as session:
                with anyio.fail_after(WAIT_S):
                    await session.initialize()
                yield session
    finally:
        server.close()


def session_for(transport: str, env: Env, *extra: str) -> Any:
    return stdio_session(env, *extra) if transport == "stdio" else http_session(env, *extra)


async def call(session: Any, tool: str, args: dict[str, Any] | None = None) -> Any:
    """One tools/call; returns (structured result, the CallToolResult)."""
    with anyio.fail_after(CALL_TIMEOUT_S):
        res = await session.call_tool(tool, args)
    assert len(res.content) == 1 and res.content[0].type == "text"
    # Results come twice: as structured content and as the CLI's JSON text.
    assert json.loads(res.content[0].text) == res.structured_content
    assert res.is_error == (res.structured_content.get("error") is not None)
    return res.structured_content, res


async def wait_until(predicate: Callable[[], Any], what: str) -> None:
    with anyio.fail_after(WAIT_S):
        while not predicate():
            await anyio.sleep(0.02)


def run(main: Callable[[], Any]) -> None:
    anyio.run(main)


# --- served schemas are the schema files ------------------------------------------------------


def _file_validator(name: str) -> Any:
    from jsonschema import Draft202012Validator

    return Draft202012Validator(json.loads((SCHEMAS / name).read_text()), registry=_registry())


def _served_validator(schema: dict[str, Any]) -> Any:
    from jsonschema import Draft202012Validator

    Draft202012Validator.check_schema(schema)
    return Draft202012Validator(schema)  # no registry: it must stand alone


def _refs(node: Any) -> list[str]:
    if isinstance(node, dict):
        found = [node["$ref"]] if "$ref" in node else []
        return found + [r for v in node.values() for r in _refs(v)]
    if isinstance(node, list):
        return [r for v in node for r in _refs(v)]
    return []


@pytest.mark.parametrize("tool", mcp_server.TOOLS)
def test_served_schemas_are_self_contained_objects(tool: str) -> None:
    for schema in (mcp_server.input_schema(tool, None), mcp_server.output_schema(tool)):
        assert _refs(schema) == []
        assert schema["type"] == "object"
        assert "$id" not in json.dumps(schema)


@pytest.mark.parametrize("tool", mcp_server.TOOLS)
@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(value=st.one_of(arg_objects, json_values))
def test_served_input_schema_accepts_exactly_what_the_file_accepts(tool: str, value: Any) -> None:
    served = _served_validator(mcp_server.input_schema(tool, None))
    assert served.is_valid(value) == _file_validator(f"{tool}.args.json").is_valid(value), value


def _results_of_every_shape(env: Env, fake: FakeServer) -> dict[str, list[Any]]:
    configure(env, fake)
    fake.route(BRAVE_PATH, brave_ok())
    found = {
        "smart_search": [
            env.call("smart_search", {"query": "space news", "agent_id": AGENT}),
            env.call("smart_search", {"query": "space news", "agent_id": "BAD"}),
        ],
        "search_quota_status": [
            env.call("search_quota_status", {}),
            env.call("search_quota_status", {"agent_id": AGENT}),
            env.call("search_quota_status", {"agent_id": "nobody-here"}),
        ],
        "search_mark_agent_complete": [
            env.call("search_mark_agent_complete", {"agent_id": AGENT}),
            env.call("search_mark_agent_complete", {"agent_id": AGENT}),
        ],
    }
    return found


def _mutations(result: dict[str, Any]) -> list[Any]:
    """Broken variants: a key dropped, a key added, each value replaced by a wrong type."""
    out: list[Any] = [[], "x", {**result, "unexpected": 1}]
    for key in result:
        out.append({k: v for k, v in result.items() if k != key})
        for wrong in (None, 1, "", [], {"a": 1}):
            out.append({**result, key: wrong})
    return out


def test_served_output_schemas_judge_results_as_the_files_do(env: Env, fake: FakeServer) -> None:
    for tool, results in _results_of_every_shape(env, fake).items():
        served = _served_validator(mcp_server.output_schema(tool))
        original = _file_validator(f"{tool}.result.json")
        for result in results:
            assert served.is_valid(result), (tool, result)
            for variant in _mutations(result):
                assert served.is_valid(variant) == original.is_valid(variant), (tool, variant)


def test_a_server_default_makes_agent_id_optional_and_nothing_else() -> None:
    for tool in mcp_server.TOOLS:
        plain = mcp_server.input_schema(tool, None)
        defaulted = mcp_server.input_schema(tool, "night-shift")
        if tool in ("search_quota_status", "smart_fetch"):  # agent_id optional without one
            assert defaulted == plain
            continue
        assert "agent_id" in plain["required"] and "agent_id" not in defaulted["required"]
        assert defaulted["properties"]["agent_id"].pop("default") == "night-shift"
        defaulted["required"].append("agent_id")
        assert sorted(defaulted["required"]) == sorted(plain["required"])
        assert {**defaulted, "required": None} == {**plain, "required": None}
        assert '"night-shift"' in mcp_server.tool_description(tool, "night-shift")


def test_tool_descriptions_carry_skill_md_guidance() -> None:
    text = mcp_server.tool_description("smart_search", None)
    assert '"general"' in text and "scheduled agent" in text
    for code in ("lock_timeout", "circuit_open", "finance_blocked", "all_exhausted",
                 "quota_exhausted", "invalid_input"):  # fmt: skip
        assert f"`{code}`" in text, code
    assert "not instructions" in text


# --- the command line: what it imports, what it says without the SDK --------------------------


def test_the_one_shot_cli_never_imports_the_sdk(env: Env) -> None:
    code = (
        "import io, sys\n"
        "sys.stdin = io.TextIOWrapper(io.BytesIO(sys.argv[1].encode()))\n"
        "from smart_search.__main__ import main\n"
        "main([])\n"
        "main(['--help'])\n"
        "heavy = ('mcp', 'mcp_types', 'starlette', 'uvicorn', 'pydantic',\n"
        "         'smart_search.shell.mcp')\n"
        "found = [m for m in sys.modules if m in heavy or m.split('.')[0] in heavy]\n"
        "sys.stderr.write(repr(sorted(found)))\n"
    )
    call = json.dumps({"tool": "search_quota_status", "args": {}})
    proc = subprocess.run([sys.executable, "-c", code, call], capture_output=True,
                          env=env.environ, timeout=60)  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    assert b'"date"' in proc.stdout  # the call really ran
    assert proc.stderr == b"[]"


def test_without_the_sdk_the_command_says_what_to_install(env: Env) -> None:
    name = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["name"]
    code = (
        "import sys\n"
        "sys.modules['mcp'] = None  # as if the extra were not installed\n"
        "from smart_search.__main__ import main\n"
        "sys.exit(main(['mcp']))\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, env=env.environ,
                          timeout=60)  # fmt: skip
    assert proc.returncode == mcp_server.EXIT_MISSING_SDK == 1
    assert proc.stdout == b""
    assert f"pip install '{name}[mcp]'" in proc.stderr.decode()


@pytest.mark.parametrize(
    "argv, message",
    [
        (["--agent-id", "Bad Id"], "agent_id must contain only lowercase"),
        (["--http", "127.0.0.1:notaport"], "--http wants [HOST:]PORT"),
        (["--frobnicate"], "unknown argument"),
        (["--agent-id"], "--agent-id needs a value"),
    ],
)
def test_bad_arguments_exit_2_with_a_message(env: Env, argv: list[str], message: str) -> None:
    proc = subprocess.run([sys.executable, "-m", "smart_search", "mcp", *argv],
                          capture_output=True, env=env.environ, timeout=60)  # fmt: skip
    assert proc.returncode == 2
    assert message in proc.stderr.decode()


@pytest.mark.parametrize(
    "value, expected",
    [
        ("8765", ("127.0.0.1", 8765)),
        ("127.0.0.1:0", ("127.0.0.1", 0)),
        ("localhost:80", ("localhost", 80)),
        ("[::1]:9000", ("::1", 9000)),
        (":7000", ("127.0.0.1", 7000)),
    ],
)
def test_http_address_defaults_to_loopback(value: str, expected: tuple[str, int]) -> None:
    assert mcp_server.parse_args(["--http", value])["http"] == expected
    assert mcp_server.parse_args([f"--http={value}"])["http"] == expected


# --- http.CancelScope: the hook the server cancels through ------------------------------------


def _send(url: str, scope: http.CancelScope, box: dict[str, Any]) -> None:
    try:
        with http.cancel_scope(scope):
            box["response"] = http.send(
                http.HttpRequest("GET", url), deadline=time.monotonic() + WAIT_S,
                request_timeout_s=WAIT_S,
            )  # fmt: skip
    except BaseException as exc:  # noqa: BLE001 - the test looks at what came out
        box["error"] = exc


def test_cancel_shuts_the_request_in_flight() -> None:
    with HangingServer() as fake:
        scope, box = http.CancelScope(), {}
        worker = threading.Thread(target=_send, args=(fake.url + "/x", scope, box))
        worker.start()
        deadline = time.monotonic() + WAIT_S
        while not fake.requests and time.monotonic() < deadline:
            time.sleep(0.01)
        assert fake.requests, "the request never reached the server"
        scope.cancel()
        worker.join(WAIT_S)
        assert not worker.is_alive()
        assert isinstance(box.get("error"), errors.Cancelled), box
        assert not isinstance(box["error"], errors.SearchError)  # no tier may catch it
        assert fake.hung_up.wait(WAIT_S), "the socket was left open"


def test_a_cancelled_scope_sends_nothing(fake: FakeServer) -> None:
    fake.route("/x", Reply(200, b"ok"))
    scope, box = http.CancelScope(), {}
    scope.cancel()
    _send(fake.url + "/x", scope, box)
    assert isinstance(box.get("error"), errors.Cancelled)
    assert fake.requests == []


def test_an_answer_that_came_first_stands(fake: FakeServer) -> None:
    fake.route("/x", Reply(200, b"ok"))
    scope, box = http.CancelScope(), {}
    _send(fake.url + "/x", scope, box)
    scope.cancel()  # too late: nothing to undo
    assert box["response"].body == b"ok"
    # ...and the same scope now refuses new requests.
    _send(fake.url + "/x", scope, box)
    assert isinstance(box.get("error"), errors.Cancelled)
    assert len(fake.requests) == 1


def _search_until_it_asks(
    env: Env, fake: Any, scope: http.CancelScope, box: dict[str, Any]
) -> threading.Thread:
    """A search on a thread of its own under `scope` (its result or exception lands in `box`),
    returned once its first request reached `fake`."""
    service = mcp_server.Service(env.environ)

    def search() -> None:
        try:
            box["result"] = service.call(
                "smart_search", {"query": "space news", "agent_id": AGENT}, scope
            )
        except BaseException as exc:  # noqa: BLE001
            box["error"] = exc

    worker = threading.Thread(target=search)
    worker.start()
    deadline = time.monotonic() + WAIT_S
    while not fake.requests and time.monotonic() < deadline:
        time.sleep(0.01)
    return worker


def test_a_cancelled_search_keeps_what_it_sent_charged_and_walks_no_further(env: Env) -> None:
    """The request reached the provider before the cancel: it may have been billed, so its worst
    case stays charged (RULINGS 4); nothing more is asked."""
    with HangingServer() as fake:
        configure(env, fake)
        scope, box = http.CancelScope(), {}
        worker = _search_until_it_asks(env, fake, scope, box)
        assert [r.path for r in fake.requests] == [BRAVE_PATH]
        assert env.call("search_quota_status", {"agent_id": AGENT})["brave"]["used"] == 1
        scope.cancel()
        worker.join(WAIT_S)
        assert isinstance(box.get("error"), errors.Cancelled), box
        assert box["error"].sent
        full = env.call("search_quota_status")
        assert full["providers"]["brave"]["in_flight"] == 0  # settled: no longer held
        assert env.call("search_quota_status", {"agent_id": AGENT})["brave"]["used"] == 1
        assert [r.path for r in fake.requests] == [BRAVE_PATH]  # no Gemini, no DuckDuckGo
        assert fake.hung_up.wait(WAIT_S) and fake.hangups == [BRAVE_PATH]


def test_a_search_cancelled_before_its_request_left_gives_its_hold_back(env: Env) -> None:
    """Cancelled before anything was sent: the provider cannot have billed, so the worst case the
    call held goes back whole, and no request is made."""
    with HangingServer() as fake:
        configure(env, fake)
        service = mcp_server.Service(env.environ)
        scope = http.CancelScope()
        scope.cancel()
        with pytest.raises(errors.Cancelled) as caught:
            service.call("smart_search", {"query": "space news", "agent_id": AGENT}, scope)
        assert not caught.value.sent
        assert fake.requests == []
        full = env.call("search_quota_status")
        assert (full["providers"]["brave"]["used"], full["providers"]["brave"]["in_flight"]) == (
            0,
            0,
        )


def test_a_call_cancelled_in_its_backoff_stops_waiting_and_refunds_the_retry(
    env: Env, fake: FakeServer
) -> None:
    """Per call, what a SIGTERM is to the one-shot CLI (sources/cancel.py): the cancel ends the
    retry's backoff at once, and the retry that never left gives its hold back."""
    configure(env, fake, retry_max_attempts=2, retry_base_delay=20_000)
    fake.route(BRAVE_PATH, Reply(503, b"{}"), Reply(200, fixture_bytes("brave-ok.json")))
    scope, box = http.CancelScope(), {}
    worker = _search_until_it_asks(env, fake, scope, box)
    time.sleep(0.3)  # inside the 20 s backoff
    started = time.monotonic()
    scope.cancel()
    worker.join(WAIT_S)
    assert not worker.is_alive() and time.monotonic() - started < 15  # the backoff was cut
    assert isinstance(box.get("error"), errors.Cancelled) and not box["error"].sent, box
    assert [r.path for r in fake.requests] == [BRAVE_PATH]  # the retry never left
    brave = env.call("search_quota_status")["providers"]["brave"]
    assert (brave["used"], brave["in_flight"]) == (0, 0)  # the hold came back whole


# --- the settings cache -----------------------------------------------------------------------


def test_config_is_parsed_once_until_the_file_changes(env: Env, fake: FakeServer) -> None:
    configure(env, fake, mcp_agent_id="first-agent")
    service = mcp_server.Service(env.environ)
    for _ in range(5):
        assert service.default_agent() == "first-agent"
        service.call("search_quota_status", {})
    assert service.loads == 1
    configure(env, fake, mcp_agent_id="second-agent-with-a-longer-name")
    assert service.default_agent() == "second-agent-with-a-longer-name"
    assert service.loads == 2
    assert mcp_server.Service(env.environ, agent_id="flagged").default_agent() == "flagged"


def test_a_change_in_an_included_file_is_picked_up_without_a_restart(env: Env) -> None:
    """OpenClaw's `$include`: the server watches every file the config was read from."""
    part = env.root / "smart-search.json5"
    part.write_text('{config: {mcp_agent_id: "from-include"}}')
    env.config_path.write_text(
        json.dumps({"skills": {"entries": {"smart-search": {"$include": str(part.name)}}}})
    )
    service = mcp_server.Service(env.environ)
    assert service.default_agent() == "from-include"
    for _ in range(3):
        service.call("search_quota_status", {})
    loads = service.loads
    part.write_text('{config: {mcp_agent_id: "changed-in-the-include"}}')
    assert service.default_agent() == "changed-in-the-include"
    assert service.loads == loads + 1
    # Nothing changed since: no more parsing.
    service.call("search_quota_status", {})
    assert service.loads == loads + 1


def test_a_bad_configured_default_is_a_config_error(env: Env, fake: FakeServer) -> None:
    configure(env, fake, mcp_agent_id="Not Valid")
    result = mcp_server.Service(env.environ).call("smart_search", {"query": "space"})
    assert result["error_code"] == "config_error"
    assert "mcp_agent_id" in result["error"]


# --- the real client, over stdio and over HTTP ------------------------------------------------


@pytest.mark.parametrize("transport", TRANSPORTS)
def test_lists_the_three_tools_with_the_served_schemas(env: Env, transport: str) -> None:
    async def main() -> None:
        async with session_for(transport, env) as session:
            listed = await session.list_tools()
            tools = {t.name: t for t in listed.tools}
            assert sorted(tools) == sorted(mcp_server.TOOLS)
            for name, tool in tools.items():
                assert tool.input_schema == mcp_server.input_schema(name, None)
                assert tool.output_schema == mcp_server.output_schema(name)
                assert tool.description == mcp_server.tool_description(name, None)
            resources = await session.list_resources()
            assert [str(r.uri) for r in resources.resources] == [mcp_server.STATUS_URI]

    run(main)


@pytest.mark.parametrize("transport", TRANSPORTS)
def test_each_tool_answers_as_the_cli_does(env: Env, fake: FakeServer, transport: str) -> None:
    configure(env, fake)
    fake.route(BRAVE_PATH, brave_ok())

    async def main() -> None:
        async with session_for(transport, env) as session:
            query = {"query": "space telescope news", "agent_id": AGENT}
            found, res = await call(session, "smart_search", query)
            assert_valid_result("smart_search", found)
            assert found["provider_used"] == "brave" and found["error"] is None
            assert found["results"] and not res.is_error
            assert fake.requests_to(BRAVE_PATH)[0].headers["x-subscription-token"] == BRAVE_KEY

            status, res = await call(session, "search_quota_status", {"agent_id": AGENT})
            assert_valid_result("search_quota_status", status)
            assert status["brave"]["used"] == 1
            # Byte for byte what the CLI prints for the same call on the same state.
            for args in ({"agent_id": AGENT}, {}, {"agent_id": "Bad"}):
                _, res = await call(session, "search_quota_status", args)
                cli = env.run_cli(json.dumps({"tool": "search_quota_status", "args": args}))
                assert res.content[0].text.encode() + b"\n" == cli.stdout

            bad, res = await call(session, "smart_search", {"query": "", "agent_id": AGENT})
            assert res.is_error and bad["error_code"] == "invalid_input"
            assert bad["error"] == "query is required and must be a non-empty string."
            assert_valid_result("smart_search", bad)

            done, res = await call(session, "search_mark_agent_complete", {"agent_id": AGENT})
            assert_valid_result("search_mark_agent_complete", done)
            assert done["released"] == idle({"gemini": 5, "brave": 39}) and not res.is_error
            again, res = await call(session, "search_mark_agent_complete", {"agent_id": AGENT})
            assert res.is_error and again["error_code"] == "invalid_input"

            unknown, res = await call(session, "no_such_tool", {})
            assert res.is_error and unknown == {"error": "Unknown tool: no_such_tool",
                                                "error_code": "unknown_tool"}  # fmt: skip

            read = await session.read_resource(mcp_server.STATUS_URI)
            snapshot = json.loads(read.contents[0].text)
            full, _ = await call(session, "search_quota_status", {})
            assert snapshot["quota"] == full
            assert snapshot["quota"]["agents"][AGENT]["completed"] is True
            assert set(snapshot["breakers"]) == {"gemini", "brave", *other_apis(), "google",
                                                 "bing", "duckduckgo"}  # fmt: skip
            assert snapshot["breakers"]["brave"]["state"] == "closed"

    run(main)


@pytest.mark.parametrize("transport", TRANSPORTS)
def test_the_status_resource_shows_an_open_breaker(env: Env, transport: str) -> None:
    with FakeServer() as fake:
        configure(env, fake, circuit_failure_threshold=1, circuit_reset_seconds=3600)
        fake.route(BRAVE_PATH, Reply(500, b"{}"))

        async def main() -> None:
            async with session_for(transport, env) as session:
                await call(session, "smart_search", {"query": "space", "agent_id": AGENT,
                                                     "force_provider": "brave"})  # fmt: skip
                read = await session.read_resource(mcp_server.STATUS_URI)
                breakers = json.loads(read.contents[0].text)["breakers"]
                assert breakers["brave"]["state"] == "open"
                assert breakers["brave"]["failures"] == 1

        run(main)


@pytest.mark.parametrize("transport", TRANSPORTS)
def test_sixteen_concurrent_searches_spend_exactly_sixteen(env: Env, transport: str) -> None:
    with GatedServer(count=16) as fake:
        configure(env, fake)
        fake.route(BRAVE_PATH, brave_ok())
        results: list[dict[str, Any]] = []

        async def one(i: int, session: Any) -> None:
            found, _ = await call(session, "smart_search",
                                  {"query": f"space probe {i}", "agent_id": AGENT})  # fmt: skip
            results.append(found)

        async def main() -> None:
            async with session_for(transport, env) as session:
                async with anyio.create_task_group() as tg:
                    for i in range(16):
                        tg.start_soon(one, i, session)
                status, _ = await call(session, "search_quota_status", {"agent_id": AGENT})
                assert status["brave"] == {"allocated": 40, "used": 16, "remaining": 24}
                assert status["gemini"]["used"] == 0

        run(main)
        # The gate opened only because all 16 were in flight at once.
        assert fake.gate.is_set()
        assert len(results) == 16
        assert all(r["provider_used"] == "brave" and r["error"] is None for r in results), [
            r["attempts"] for r in results if r["error"]
        ]
        assert sorted(r.query["q"][0] for r in fake.requests) == sorted(
            f"space probe {i}" for i in range(16)
        )
        doc = env.quota_doc()
        assert json.dumps(doc).count('"brave"') >= 1  # the ledger file exists and is shared


@pytest.mark.parametrize("transport", TRANSPORTS)
def test_cancelling_a_search_cancels_its_request_and_keeps_it_charged(
    env: Env, transport: str
) -> None:
    with HangingServer() as fake:
        configure(env, fake)
        outcome: dict[str, Any] = {}

        async def main() -> None:
            async with session_for(transport, env) as session:
                victim = anyio.CancelScope()

                async def search() -> None:
                    with victim:
                        outcome["result"] = await session.call_tool(
                            "smart_search", {"query": "space weather", "agent_id": AGENT}
                        )
                    outcome["cancelled"] = victim.cancelled_caught

                async with anyio.create_task_group() as tg:
                    tg.start_soon(search)
                    await wait_until(lambda: fake.requests, "the search reached the fake")
                    # Served while the search is in flight; its unit is reserved.
                    status, _ = await call(session, "search_quota_status", {"agent_id": AGENT})
                    assert status["brave"]["used"] == 1
                    victim.cancel()
                await wait_until(fake.hung_up.is_set, "the outstanding request was shut")

                async def settled() -> bool:
                    full, _ = await call(session, "search_quota_status", {})
                    return full["providers"]["brave"]["in_flight"] == 0

                with anyio.fail_after(WAIT_S):
                    while not await settled():
                        await anyio.sleep(0.05)
                # The session still serves calls after the cancellation; the request had left,
                # so its unit stays charged (the provider may have billed it).
                status, _ = await call(session, "search_quota_status", {"agent_id": AGENT})
                assert status["brave"] == {"allocated": 40, "used": 1, "remaining": 39}

        run(main)
        assert outcome == {"cancelled": True}  # no result was delivered for the cancelled call
        assert [r.path for r in fake.requests] == [BRAVE_PATH]  # the walk stopped there
        assert fake.hangups == [BRAVE_PATH]


@pytest.mark.parametrize("transport", TRANSPORTS)
def test_the_server_default_agent_fills_in_a_missing_agent_id(
    env: Env, fake: FakeServer, transport: str
) -> None:
    configure(env, fake, mcp_agent_id="other")
    fake.route(BRAVE_PATH, brave_ok())

    async def main() -> None:
        async with session_for(transport, env, "--agent-id", AGENT) as session:
            tools = {t.name: t for t in (await session.list_tools()).tools}
            assert "agent_id" not in tools["smart_search"].input_schema["required"]
            found, _ = await call(session, "smart_search", {"query": "space"})
            assert found["provider_used"] == "brave"
            status, _ = await call(session, "search_quota_status", {"agent_id": AGENT})
            assert status["brave"]["used"] == 1  # the flag beats the config
            # An explicit agent_id is used as given; general keeps its meaning.
            # (Each search here asks something new: the result cache would answer a repeat.)
            await call(session, "smart_search", {"query": "space probe", "agent_id": "other"})
            status, _ = await call(session, "search_quota_status", {"agent_id": "other"})
            assert status["brave"]["used"] == 1

    run(main)


def test_a_config_edit_changes_the_default_without_a_restart(env: Env, fake: FakeServer) -> None:
    configure(env, fake, mcp_agent_id="other")
    fake.route(BRAVE_PATH, brave_ok())

    async def main() -> None:
        async with stdio_session(env) as session:
            await call(session, "smart_search", {"query": "space"})
            configure(env, fake, mcp_agent_id=AGENT, brave_count=7)
            await call(session, "smart_search", {"query": "space probe"})
            for agent in ("other", AGENT):
                status, _ = await call(session, "search_quota_status", {"agent_id": agent})
                assert status["brave"]["used"] == 1, agent

    run(main)
    counts = [r.query["count"][0] for r in fake.requests_to(BRAVE_PATH)]
    assert counts == ["10", "7"]  # the edited config reached the second request


def test_api_keys_never_reach_the_protocol(env: Env, fake: FakeServer) -> None:
    configure(env, fake)
    fake.route(BRAVE_PATH, Reply(401, b'{"error": "bad key"}'))

    async def main() -> None:
        async with stdio_session(env) as session:
            texts = []
            for tool, args in (("smart_search", {"query": "space", "agent_id": AGENT}),
                               ("search_quota_status", {})):  # fmt: skip
                _, res = await call(session, tool, args)
                texts.append(res.content[0].text)
            texts.append((await session.read_resource(mcp_server.STATUS_URI)).contents[0].text)
            texts.append(json.dumps([t.model_dump() for t in (await session.list_tools()).tools]))
            for text in texts:
                assert BRAVE_KEY not in text and GEMINI_KEY not in text

    run(main)
    log = (env.root / "server-stderr.log").read_text()
    assert BRAVE_KEY not in log and GEMINI_KEY not in log


def test_the_cli_and_the_server_share_one_ledger(env: Env, fake: FakeServer) -> None:
    configure(env, fake)
    fake.route(BRAVE_PATH, brave_ok())

    async def main() -> None:
        async with stdio_session(env) as session:
            await call(session, "smart_search", {"query": "space", "agent_id": AGENT})
            request = {"tool": "smart_search", "args": {"query": "space probe", "agent_id": AGENT}}
            proc = await anyio.to_thread.run_sync(lambda: env.run_cli(json.dumps(request)))
            assert json.loads(proc.stdout)["provider_used"] == "brave"
            status, _ = await call(session, "search_quota_status", {"agent_id": AGENT})
            assert status["brave"]["used"] == 2

    run(main)


def test_results_are_orjson_text(env: Env) -> None:
    async def main() -> None:
        async with stdio_session(env) as session:
            found, res = await call(session, "search_quota_status", {})
            assert res.content[0].text == orjson.dumps(found).decode()

    run(main)


def test_stdio_server_exits_when_its_client_goes_away(env: Env) -> None:
    proc = subprocess.Popen([sys.executable, "-m", "smart_search", "mcp"], env=env.environ,
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE)  # fmt: skip
    assert proc.stdin is not None
    proc.stdin.close()
    try:
        code = proc.wait(timeout=WAIT_S)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert code == 0
    assert proc.stdout is not None and proc.stdout.read() == b""


def test_sigterm_stops_the_server_as_it_stops_a_one_shot_call(env: Env) -> None:
    """SIGTERM (the OpenClaw plugin stopping its worker): the server settles and exits 143."""
    proc = subprocess.Popen([sys.executable, "-m", "smart_search", "mcp"], env=env.environ,
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE)  # fmt: skip
    try:
        assert proc.stdin is not None and proc.stdout is not None
        hello = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": "2025-06-18", "capabilities": {},
            "clientInfo": {"name": "test", "version": "0"}}}  # fmt: skip
        proc.stdin.write(json.dumps(hello).encode() + b"\n")
        proc.stdin.flush()
        assert json.loads(proc.stdout.readline())["id"] == 1  # serving: the handler is in place
        proc.send_signal(signal.SIGTERM)
        code = proc.wait(timeout=WAIT_S)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert code == 128 + signal.SIGTERM
