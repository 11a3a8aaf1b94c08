"""`smart-search mcp` on the command line: its arguments, the word on a missing SDK, and `main`,
which picks the transport.
"""

from __future__ import annotations

import sys
from typing import Any

from smart_search import contract
from smart_search.shell.mcp.service import Service
from smart_search.shell.mcp.transports import serve_http, serve_stdio

EXIT_USAGE = 2
EXIT_MISSING_SDK = 1

USAGE = """usage: smart-search mcp [--http [HOST:]PORT [--insecure-no-auth]] [--agent-id ID]

Serves the tools smart_search, search_quota_status and search_mark_agent_complete, and the
resource smart-search://status, over MCP: on stdin/stdout, or with --http as Streamable HTTP at
http://HOST:PORT/mcp (HOST defaults to 127.0.0.1; PORT 0 picks a free port, printed on stderr).
--agent-id ID is the agent_id used when a call omits it (else config key mcp_agent_id).
With config key mcp.tokens set, every HTTP request needs one of its bearer tokens and acts only
for the agents that token names. A HOST beyond loopback needs tokens, or --insecure-no-auth.
"""
# How to add a token, for the refusal to serve beyond loopback without one.
TOKEN_HINT = (
    'add a bearer token to openclaw.json, in skills.entries["smart-search"].config: '
    '"mcp": {"tokens": [{"env": "SMART_SEARCH_MCP_TOKEN", "agents": ["your-agent-id"]}]} '
    "(the variable holding 16 or more of letters, digits and -._~+/), or pass "
    "--insecure-no-auth to accept that anyone who can reach the port spends your quota"
)


def install_hint() -> str:
    """What to run to get the SDK: the extra on this distribution's own name."""
    from smart_search import distribution_name

    name = distribution_name()
    what = f"'{name}[mcp]'" if name else "mcp"
    return (
        "smart-search mcp needs the MCP Python SDK, which is not installed.\n"
        f"Install it with: pip install {what}\n"
    )


def parse_args(argv: list[str]) -> dict[str, Any]:
    """--http [HOST:]PORT and --agent-id ID; raises ValueError with the message to print."""
    options: dict[str, Any] = {"http": None, "agent_id": None, "insecure_no_auth": False}
    rest = list(argv)
    while rest:
        arg = rest.pop(0)
        if arg == "--insecure-no-auth":
            options["insecure_no_auth"] = True
            continue
        name, eq, value = arg.partition("=")
        if name not in ("--http", "--agent-id"):
            raise ValueError(f"unknown argument {arg!r}")
        if not eq:
            if not rest:
                raise ValueError(f"{name} needs a value")
            value = rest.pop(0)
        if name == "--http":
            options["http"] = _host_port(value)
        else:
            from smart_search.errors import SearchError

            try:
                contract.check("search_mark_agent_complete.args.json", {"agent_id": value})
            except SearchError as err:
                raise ValueError(f"--agent-id: {err.message}") from None
            options["agent_id"] = value
    if options["insecure_no_auth"] and options["http"] is None:
        raise ValueError("--insecure-no-auth applies only with --http")
    return options


def _host_port(value: str) -> tuple[str, int]:
    host, sep, port = value.rpartition(":")
    if not sep:
        host, port = "127.0.0.1", value
    host = host.strip("[]") or "127.0.0.1"
    if not port.isdigit() or int(port) > 65535:
        raise ValueError(f"--http wants [HOST:]PORT, got {value!r}")
    return host, int(port)


def main(argv: list[str]) -> int:
    if any(a in ("-h", "--help") for a in argv):
        sys.stdout.write(USAGE)
        return 0
    try:
        options = parse_args(argv)
    except ValueError as err:
        sys.stderr.write(f"smart-search mcp: {err}\n{USAGE}")
        return EXIT_USAGE
    try:
        import mcp.server.lowlevel  # noqa: F401 - the SDK, or a clear word on what to install
    except ImportError:
        sys.stderr.write(install_hint())
        return EXIT_MISSING_SDK
    import anyio

    service = Service(agent_id=options["agent_id"])
    stop_on_sigterm(service)
    try:
        if options["http"] is None:
            anyio.run(serve_stdio, service)
        else:
            host, port = options["http"]
            tokens = http_guard(service, host, options["insecure_no_auth"])
            if tokens is None:
                return EXIT_USAGE
            anyio.run(lambda: serve_http(service, host, port, tokens=tokens))
    except KeyboardInterrupt:
        pass
    return 0


def http_guard(service: Service, host: str, insecure: bool) -> bool | None:
    """Whether HTTP requests need a token (`mcp.tokens` is set), after saying on stderr what is
    wrong: None (do not start) when the config cannot be read (whether tokens are configured
    cannot be told), when a token's variable is unset, or when HOST is beyond loopback with no
    tokens and no --insecure-no-auth. Decided before any socket is bound."""
    from smart_search.errors import SearchError
    from smart_search.text.urls import is_loopback_host

    try:
        tokens = service.settings().mcp["tokens"]
    except SearchError as err:
        sys.stderr.write(f"smart-search mcp: {err.message}\n")
        return None
    if tokens:
        from smart_search.host.config_tokens import unset_tokens

        unset = unset_tokens(tokens)
        for message in unset:
            sys.stderr.write(f"smart-search mcp: {message}\n")
        return None if unset else True
    if is_loopback_host(host):
        return False
    if not insecure:
        sys.stderr.write(
            f"smart-search mcp: refusing to serve on {host}, beyond loopback, without "
            f"authentication: {TOKEN_HINT}.\n"
        )
        return None
    sys.stderr.write(
        f"smart-search mcp: warning: serving on {host}, beyond loopback, with no "
        "authentication (--insecure-no-auth): anyone who can reach it spends your search quota.\n"
    )
    return False


def stop_on_sigterm(service: Service) -> None:
    """SIGTERM (the OpenClaw plugin stopping its worker) stops the server as it stops a one-shot
    call (`sources/cancel.py`): every call in flight sends nothing more and settles (what never
    left is refunded, what left keeps its worst case); then the process exits, 143."""
    import os
    import signal
    import threading

    from smart_search.shell.mcp.handlers import CANCEL_GRACE_S
    from smart_search.sources import cancel

    def stop() -> None:
        cancel.request()
        service.wait_idle(CANCEL_GRACE_S)
        os._exit(128 + signal.SIGTERM)

    def on_signal(signum: int, frame: object) -> None:
        threading.Thread(target=stop, name="smart-search-stop", daemon=True).start()

    signal.signal(signal.SIGTERM, on_signal)
