"""Issue 28 part A: `smart-search mcp --http` lets in only who holds a token from `mcp.tokens`,
acting only as the agents that token names.

A real server process on 127.0.0.1 (tests/test_mcp.py's `HttpServer`), the SDK's own Streamable
HTTP client (`streamable_http_client` with `create_mcp_http_client(headers=...)`), the ledger
read back through the CLI. Every token is a sentinel, looked for afterwards in every file the
state dir holds, in the server's stdout and stderr, and in every answer.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import pytest

from smart_search.errors import unknown_agent
from smart_search.shell import mcp as mcp_server
from smart_search.shell.mcp.identity import Identity, find_token, refusal
from tests.conftest import Env
from tests.fakes import FakeServer, Reply
from tests.test_mcp import (
    AGENT,
    BRAVE_KEY,
    BRAVE_PATH,
    CALL_TIMEOUT_S,
    WAIT_S,
    HttpServer,
    brave_ok,
    call,
    configure,
    run,
)

OTHER = "other"  # configure() gives it 1 Brave search a day
TOKEN_A = "SENTINEL-TOKEN-A-7f3c9e1d2b"  # from the environment: acts for AGENT only
TOKEN_ALL = "SENTINEL-TOKEN-ALL-4a8b6c0e"  # in the config: every agent, the whole ledger
TOKEN_WRONG = "SENTINEL-TOKEN-WRONG-91d2e3"
TOKENS = (TOKEN_A, TOKEN_ALL, TOKEN_WRONG)
FETCH_PAGE = b"<html><head><title>Seals</title></head><body><p>" + b"Harbour seals. " * 40


def configure_tokens(env: Env, fake: FakeServer, **config: Any) -> None:
    configure(
        env,
        fake,
        mcp={
            "tokens": [
                {"env": "SS_TEST_TOKEN_A", "agents": [AGENT], "label": "agent-a-box"},
                {"value": TOKEN_ALL, "agents": "*", "label": "ops"},
            ]
        },
        fetch={"allow_private_hosts": True, "min_interval_ms": 0},
        **config,
    )
    env.environ["SS_TEST_TOKEN_A"] = TOKEN_A


def headers(token: str | None) -> dict[str, str]:
    return {} if token is None else {"Authorization": f"Bearer {token}"}


@asynccontextmanager
async def token_session(server: HttpServer, token: str | None) -> AsyncIterator[Any]:
    from mcp import ClientSession
    from mcp.client.streamable_http import streamable_http_client
    from mcp.shared._httpx_utils import create_mcp_http_client

    assert server.url is not None
    async with create_mcp_http_client(headers=headers(token)) as client:
        async with streamable_http_client(server.url, http_client=client) as (read, write):
            async with ClientSession(read, write, read_timeout_seconds=CALL_TIMEOUT_S) as session:
                with anyio.fail_after(WAIT_S):
                    await session.initialize()
                yield session


async def post_initialize(url: str, token: str | None) -> Any:
    """One raw `initialize` POST through the SDK's HTTP client: the response as it came."""
    from mcp.shared._httpx_utils import create_mcp_http_client

    body = {
        "jsonrpc": "2.0", "id": 1, "method": "initialize",
        "params": {"protocolVersion": "2025-06-18", "capabilities": {},
                   "clientInfo": {"name": "test", "version": "1"}},
    }  # fmt: skip
    async with create_mcp_http_client(headers=headers(token)) as client:
        return await client.post(
            url, json=body, headers={"accept": "application/json, text/event-stream"}
        )


def every_text(env: Env, server: HttpServer | None = None) -> str:
    """Everything the installation wrote: each file under the test's root but the config that
    holds the tokens, and the server's stderr."""
    texts = [p.read_bytes().decode(errors="replace") for p in Path(env.root).rglob("*")
             if p.is_file() and p != env.config_path]  # fmt: skip
    if server is not None:
        texts.append("".join(server.stderr))
    return "\n".join(texts)


def assert_no_token(*texts: str) -> None:
    for text in texts:
        for token in TOKENS:
            assert token not in text
            assert token[9:] not in text  # not even without its prefix


def log_lines(env: Env, kind: str) -> list[dict[str, Any]]:
    found = sorted((env.state_dir / "logs").glob(f"{kind}-*.jsonl"))
    return [json.loads(line) for p in found for line in p.read_text().splitlines()]


@pytest.fixture
def fake() -> Any:
    with FakeServer() as server:
        yield server


# --- the transport answers 401 ----------------------------------------------------------------


def test_no_token_or_a_wrong_one_is_401_with_www_authenticate(env: Env, fake: FakeServer) -> None:
    configure_tokens(env, fake)
    server = HttpServer(env)

    async def main() -> None:
        from mcp.shared._httpx_utils import create_mcp_http_client

        assert server.url is not None
        for token in (None, TOKEN_WRONG, TOKEN_A + "x", TOKEN_A[:-1], "Bearer " + TOKEN_A):
            response = await post_initialize(server.url, token)
            assert response.status_code == 401, token
            assert response.headers["www-authenticate"].startswith("Bearer "), token
            assert_no_token(response.text, json.dumps(dict(response.headers)))
        # The SDK's own client cannot open a session without a token either.
        with pytest.raises(Exception) as caught:  # noqa: PT011 - whatever the SDK raises
            async with token_session(server, None):
                pass
        assert_no_token(repr(caught.value))
        # ...and can with one: the same request, authorized.
        response = await post_initialize(server.url, TOKEN_A)
        assert response.status_code == 200
        # The SDK binds the session to the token that opened it: another token cannot use it.
        session_id = response.headers["mcp-session-id"]
        listing = {"jsonrpc": "2.0", "id": 2, "method": "tools/list", "params": {}}
        for token, expected in ((TOKEN_ALL, 404), (None, 401), (TOKEN_A, 200)):
            async with create_mcp_http_client(headers=headers(token)) as client:
                sent = {
                    "accept": "application/json, text/event-stream",
                    "mcp-session-id": session_id,
                    "mcp-protocol-version": "2025-06-18",
                }
                reuse = await client.post(server.url, json=listing, headers=sent)
            assert reuse.status_code == expected, reuse.text

    try:
        run(main)
    finally:
        server.close()
    assert fake.requests == []
    assert_no_token(every_text(env, server))


# --- identity: a token acts only for the agents it names -------------------------------------


def test_a_token_for_one_agent_cannot_spend_another_agents_allocation(
    env: Env, fake: FakeServer
) -> None:
    configure_tokens(env, fake)
    fake.route(BRAVE_PATH, brave_ok())
    server = HttpServer(env)

    async def main() -> None:
        async with token_session(server, TOKEN_A) as session:
            refused, res = await call(session, "smart_search",
                                      {"query": "space probe", "agent_id": OTHER})  # fmt: skip
            assert res.is_error
            assert refused["error_code"] == "unknown_agent"
            assert refused["error"] == unknown_agent(OTHER)
            assert refused["results"] is None and refused["attempts"] == []
            done, res = await call(session, "search_mark_agent_complete", {"agent_id": OTHER})
            assert done == {"error": unknown_agent(OTHER), "error_code": "unknown_agent"}
            peek, _ = await call(session, "search_quota_status", {"agent_id": OTHER})
            assert peek["error_code"] == "unknown_agent"
            assert fake.requests == []  # nothing was asked on the other agent's behalf
            # Its own spending works, and is logged with the token's label as the client.
            own, res = await call(session, "smart_search",
                                  {"query": "space news", "agent_id": AGENT})  # fmt: skip
            assert not res.is_error and own["provider_used"] == "brave"
            status, _ = await call(session, "search_quota_status", {"agent_id": AGENT})
            assert status["brave"]["used"] == 1

    try:
        run(main)
    finally:
        server.close()
    # The other agent's allocation, read back through the CLI: untouched, not completed.
    other = env.call("search_quota_status", {"agent_id": OTHER})
    assert other.get("error") is None, other
    assert other["brave"] == {"allocated": 1, "used": 0, "remaining": 1}
    assert env.call("search_quota_status")["agents"][OTHER]["completed"] is False
    assert len(fake.requests_to(BRAVE_PATH)) == 1
    lines = log_lines(env, "search")
    assert [(line["agent_id"], line.get("client")) for line in lines] == [(AGENT, "agent-a-box")]
    assert_no_token(every_text(env, server))


def test_a_star_token_reads_the_whole_ledger_and_a_one_agent_token_cannot(
    env: Env, fake: FakeServer
) -> None:
    configure_tokens(env, fake)
    server = HttpServer(env)

    async def main() -> None:
        async with token_session(server, TOKEN_ALL) as session:
            full, res = await call(session, "search_quota_status", {})
            assert not res.is_error and full == env.call("search_quota_status")
            assert {AGENT, OTHER} <= set(full["agents"])
            snapshot = await session.read_resource(mcp_server.STATUS_URI)
            assert json.loads(snapshot.contents[0].text)["quota"] == full
            # "*" acts for any agent too.
            status, res = await call(session, "search_quota_status", {"agent_id": OTHER})
            assert not res.is_error and status["brave"]["allocated"] == 1
        async with token_session(server, TOKEN_A) as session:
            whole, res = await call(session, "search_quota_status", {})
            assert res.is_error
            assert whole == {"error": unknown_agent("*"), "error_code": "unknown_agent"}
            with pytest.raises(Exception) as caught:  # noqa: PT011 - the SDK's MCPError
                await session.read_resource(mcp_server.STATUS_URI)
            assert unknown_agent("*") in str(caught.value)
            own, res = await call(session, "search_quota_status", {"agent_id": AGENT})
            assert not res.is_error and own["brave"]["allocated"] == 40

    try:
        run(main)
    finally:
        server.close()
    assert_no_token(every_text(env, server))


def test_a_defaulted_agent_is_checked_like_a_named_one(env: Env, fake: FakeServer) -> None:
    """A call that leaves agent_id out acts as the server's default (smart_search,
    search_mark_agent_complete) or as "general" (smart_fetch): the token must name that one."""
    configure_tokens(env, fake)
    fake.route(BRAVE_PATH, brave_ok())
    fake.route("/page", Reply(200, FETCH_PAGE, {"content-type": "text/html"}))
    server = HttpServer(env, "--agent-id", OTHER)

    async def main() -> None:
        async with token_session(server, TOKEN_A) as session:
            found, _ = await call(session, "smart_search", {"query": "space"})
            assert found["error"] == unknown_agent(OTHER)
            done, _ = await call(session, "search_mark_agent_complete", {})
            assert done["error"] == unknown_agent(OTHER)
            page, _ = await call(session, "smart_fetch", {"url": fake.url + "/page"})
            assert page == {"error": unknown_agent("general"), "error_code": "unknown_agent"}
            assert fake.requests == []
            # Named explicitly, its own agent works for both tools.
            page, res = await call(session, "smart_fetch",
                                   {"url": fake.url + "/page", "agent_id": AGENT})  # fmt: skip
            assert not res.is_error and "Harbour seals" in page["text"]
        async with token_session(server, TOKEN_ALL) as session:
            found, res = await call(session, "smart_search", {"query": "space telescope"})
            assert not res.is_error and found["provider_used"] == "brave"

    try:
        run(main)
    finally:
        server.close()
    assert env.call("search_quota_status", {"agent_id": OTHER})["brave"]["used"] == 1
    assert [line.get("client") for line in log_lines(env, "search")] == ["ops"]
    fetched = log_lines(env, "fetch")
    assert [(line["agent_id"], line.get("client")) for line in fetched] == [(AGENT, "agent-a-box")]
    assert_no_token(every_text(env, server))


def test_invalid_arguments_get_the_clis_error_not_a_verdict(env: Env, fake: FakeServer) -> None:
    """Only a valid call is judged: a bad agent_id is invalid_input, as on the CLI."""
    configure_tokens(env, fake)
    server = HttpServer(env)

    async def main() -> None:
        async with token_session(server, TOKEN_A) as session:
            bad, _ = await call(session, "smart_search", {"query": "x", "agent_id": "Not Valid"})
            cli = env.call("smart_search", {"query": "x", "agent_id": "Not Valid"})
            assert bad == cli and bad["error_code"] == "invalid_input"

    try:
        run(main)
    finally:
        server.close()


def test_a_token_edit_applies_without_a_restart(env: Env, fake: FakeServer) -> None:
    configure_tokens(env, fake)
    server = HttpServer(env)
    rotated = "SENTINEL-TOKEN-ROTATED-5e6f7a8b"

    async def main() -> None:
        assert server.url is not None
        assert (await post_initialize(server.url, TOKEN_ALL)).status_code == 200
        configure(env, fake, mcp={"tokens": [{"value": rotated, "agents": "*"}]})
        assert (await post_initialize(server.url, TOKEN_ALL)).status_code == 401
        assert (await post_initialize(server.url, rotated)).status_code == 200

    try:
        run(main)
    finally:
        server.close()


def test_stdio_is_unchanged_by_tokens(env: Env, fake: FakeServer) -> None:
    """stdio trusts the harness that started it (the spec's contract): no token, any agent."""
    from tests.test_mcp import stdio_session

    configure_tokens(env, fake)

    async def main() -> None:
        async with stdio_session(env) as session:
            full, res = await call(session, "search_quota_status", {})
            assert not res.is_error and OTHER in full["agents"]

    run(main)


# --- binding: beyond loopback only with tokens, or in writing --------------------------------


def start(env: Env, *argv: str, timeout: float = 60) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run([sys.executable, "-m", "smart_search", "mcp", *argv],
                          capture_output=True, env=env.environ, cwd=str(env.root),
                          stdin=subprocess.DEVNULL, timeout=timeout)  # fmt: skip


def test_beyond_loopback_without_tokens_refuses_to_start(env: Env, fake: FakeServer) -> None:
    configure(env, fake)
    # 192.0.2.1 (TEST-NET-1) is no address of this machine: binding it would fail with a
    # traceback, so exit 2 with the message proves the refusal came before any bind.
    for host in ("192.0.2.1:8765", "0.0.0.0:0", "[2001:db8::1]:8765"):
        proc = start(env, "--http", host)
        assert proc.returncode == 2, proc.stderr
        err = proc.stderr.decode()
        assert "refusing to serve on" in err and "Traceback" not in err
        assert '"mcp": {"tokens": [{"env": ' in err and "--insecure-no-auth" in err
        assert "listening on" not in err and proc.stdout == b""


def test_a_token_whose_variable_is_unset_stops_the_start(env: Env, fake: FakeServer) -> None:
    configure_tokens(env, fake)
    del env.environ["SS_TEST_TOKEN_A"]
    proc = start(env, "--http", "127.0.0.1:0")
    assert proc.returncode == 2
    err = proc.stderr.decode()
    assert 'Config key "mcp.tokens[0].env" names SS_TEST_TOKEN_A, which is not set' in err
    assert "listening on" not in err
    assert_no_token(err, proc.stdout.decode())
    # The one-shot CLI never needs the token: its calls run as before.
    assert env.call("search_quota_status").get("error") is None


def test_beyond_loopback_starts_with_tokens_or_in_writing(env: Env, fake: FakeServer) -> None:
    """Bound to 0.0.0.0 (every local interface, no network needed), reached on 127.0.0.1: with
    tokens it starts and asks for them; without, only with --insecure-no-auth, with a warning."""

    async def status(url: str, token: str | None) -> int:
        return (await post_initialize(url.replace("0.0.0.0", "127.0.0.1"), token)).status_code

    configure_tokens(env, fake)
    server = HttpServer(env, address="0.0.0.0:0")
    try:
        assert server.url is not None and server.url.startswith("http://0.0.0.0:")
        assert anyio.run(status, server.url, None) == 401
        assert anyio.run(status, server.url, TOKEN_ALL) == 200
    finally:
        server.close()
    assert "warning" not in "".join(server.stderr)
    configure(env, fake)
    server = HttpServer(env, "--insecure-no-auth", address="0.0.0.0:0")
    try:
        assert server.url is not None
        assert anyio.run(status, server.url, None) == 200
    finally:
        server.close()
    err = "".join(server.stderr)
    assert "warning" in err and "--insecure-no-auth" in err
    assert_no_token(every_text(env, server))


def test_an_unreadable_config_stops_an_http_start(env: Env, fake: FakeServer) -> None:
    """Whether tokens are configured cannot be told: not even loopback starts unguarded."""
    configure_tokens(env, fake, retry_max_attempts="three")
    for address in ("127.0.0.1:0", "0.0.0.0:0"):
        proc = start(env, "--http", address)
        assert proc.returncode == 2
        err = proc.stderr.decode()
        assert 'Config key "retry_max_attempts"' in err and "listening on" not in err
        assert_no_token(err)


def test_insecure_no_auth_needs_http(env: Env) -> None:
    proc = start(env, "--insecure-no-auth")
    assert proc.returncode == 2
    assert "--insecure-no-auth applies only with --http" in proc.stderr.decode()


# --- the pure parts -------------------------------------------------------------------------


class _Secret:
    def __init__(self, value: str) -> None:
        self.value = value

    def reveal(self) -> str:
        return self.value


def _tokens(env: Env, fake: FakeServer) -> Any:
    configure_tokens(env, fake)
    return env.settings().mcp["tokens"]


def test_find_token_matches_exactly_one_entry(env: Env, fake: FakeServer) -> None:
    tokens = _tokens(env, fake)
    assert find_token(tokens, TOKEN_A).label == "agent-a-box"
    assert find_token(tokens, TOKEN_ALL).agents is None
    for wrong in (TOKEN_WRONG, TOKEN_A[:-1], TOKEN_A + "=", "", TOKEN_A.lower(), "\udcff"):
        assert find_token(tokens, wrong) is None
    # A token whose variable is unset matches nothing, not even an empty string.
    del env.environ["SS_TEST_TOKEN_A"]
    unset = env.settings().mcp["tokens"]
    assert unset[0].secret is None
    assert find_token(unset, TOKEN_A) is None and find_token(unset, "") is None


def test_refusal_judges_the_acting_agent() -> None:
    one = Identity("a", (AGENT,))
    every = Identity("ops", None)

    def judged(identity: Identity, tool: str, args: dict[str, Any]) -> str | None:
        found = refusal(identity, {"tool": tool, "args": args})
        return None if found is None else found.message

    assert judged(one, "smart_search", {"query": "q", "agent_id": AGENT}) is None
    assert judged(one, "smart_search", {"query": "q", "agent_id": OTHER}) == unknown_agent(OTHER)
    assert judged(one, "search_quota_status", {}) == unknown_agent("*")
    assert judged(one, "smart_fetch", {"url": "https://example.org/"}) == unknown_agent("general")
    assert judged(one, "smart_search", {"query": ""}) is None  # invalid: the CLI's error
    assert judged(one, "no_such_tool", {"agent_id": OTHER}) is None  # unknown_tool
    for tool, args in (("search_quota_status", {}), ("smart_search", {"query": "q",
                       "agent_id": OTHER})):  # fmt: skip
        assert judged(every, tool, args) is None
    assert refusal(None, {"tool": "search_quota_status", "args": {}}) is None


GOOD = {"value": TOKEN_ALL, "agents": "*"}


@pytest.mark.parametrize(
    "tokens, message",
    [
        ({"value": TOKEN_ALL}, 'Config key "mcp.tokens" must be an array'),
        ([TOKEN_ALL], 'Config key "mcp.tokens[0]" must be an object'),
        ([{"value": TOKEN_ALL}], 'Config key "mcp.tokens[0].agents" must be "*" or'),
        ([{**GOOD, "agents": []}], 'Config key "mcp.tokens[0].agents" must be "*" or'),
        ([{**GOOD, "agents": ["Bad Agent"]}], 'Config key "mcp.tokens[0].agents" must be'),
        ([{**GOOD, "env": "X"}], 'must hold exactly one of "env" and "value"'),
        ([{"agents": "*"}], 'must hold exactly one of "env" and "value"'),
        ([{**GOOD, "value": "SENTINEL-short"}], 'Config key "mcp.tokens[0].value" must be a'),
        ([{**GOOD, "value": TOKEN_ALL + " x"}], 'Config key "mcp.tokens[0].value" must be a'),
        ([{**GOOD, "value": 12345678901234567}], 'Config key "mcp.tokens[0].value" must be a'),
        ([{"env": "1BAD", "agents": "*"}], 'Config key "mcp.tokens[0].env" must name an env'),
        ([{**GOOD, "label": "has space"}], 'Config key "mcp.tokens[0].label" must be 1 to 64'),
        ([{**GOOD, TOKEN_WRONG: 1}], 'Config key "mcp.tokens[0]" has a field that is not'),
        (
            [GOOD, {**GOOD, "label": "x"}],
            'Config key "mcp.tokens[1]" repeats the token of mcp.tokens[0]',
        ),  # fmt: skip
        (
            [{**GOOD, "label": "x"}, {"value": TOKEN_A, "agents": "*", "label": "x"}],
            'Config key "mcp.tokens[1].label" repeats the label of mcp.tokens[0]',
        ),  # fmt: skip
    ],
)
def test_a_bad_token_entry_is_a_config_error_that_never_shows_the_token(
    env: Env, fake: FakeServer, tokens: Any, message: str
) -> None:
    configure(env, fake, mcp={"tokens": tokens})
    for tool, args in (("search_quota_status", {}), ("smart_search", {"query": "q",
                       "agent_id": AGENT})):  # fmt: skip
        result = env.call(tool, args)
        assert result["error_code"] == "config_error", result
        assert message in result["error"]
        assert_no_token(json.dumps(result))
    assert fake.requests == []


def test_a_token_from_a_variable_that_breaks_the_rules_is_a_config_error(
    env: Env, fake: FakeServer
) -> None:
    configure_tokens(env, fake)
    env.environ["SS_TEST_TOKEN_A"] = "SENTINEL-TOKEN-A with a space"
    result = env.call("search_quota_status", {})
    assert result["error_code"] == "config_error"
    assert (
        'Config key "mcp.tokens[0].env (SS_TEST_TOKEN_A)" must be a bearer token'
        in (result["error"])
    )
    assert "with a space" not in result["error"]


def test_an_unknown_mcp_field_is_named(env: Env, fake: FakeServer) -> None:
    configure(env, fake, mcp={"token": []})
    result = env.call("search_quota_status", {})
    assert result == {"error": 'Config key "mcp.token" is not one of tokens.',
                      "error_code": "config_error"}  # fmt: skip


def test_tokens_are_scrubbed_like_api_keys(env: Env, fake: FakeServer) -> None:
    """A query that carries a token (pasted by mistake) is logged and answered scrubbed."""
    configure_tokens(env, fake)
    fake.route(BRAVE_PATH, brave_ok())
    result = env.call("smart_search", {"query": f"why {TOKEN_ALL} fails", "agent_id": AGENT})
    assert result.get("provider_used") == "brave", result
    assert_no_token(json.dumps(result), every_text(env))
    assert BRAVE_KEY not in every_text(env)
