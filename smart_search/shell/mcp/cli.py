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

USAGE = """usage: smart-search mcp [--http [HOST:]PORT] [--agent-id ID]

Serves the tools smart_search, search_quota_status and search_mark_agent_complete, and the
resource smart-search://status, over MCP: on stdin/stdout, or with --http as Streamable HTTP at
http://HOST:PORT/mcp (HOST defaults to 127.0.0.1; PORT 0 picks a free port, printed on stderr).
--agent-id ID is the agent_id used when a call omits it (else config key mcp_agent_id).
"""


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
    options: dict[str, Any] = {"http": None, "agent_id": None}
    rest = list(argv)
    while rest:
        arg = rest.pop(0)
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
            from smart_search.text.urls import is_loopback_host

            if not is_loopback_host(host):
                sys.stderr.write(
                    f"smart-search mcp: warning: serving on {host}, beyond loopback, with no "
                    "authentication: anyone who can reach it spends your search quota.\n"
                )
            anyio.run(serve_http, service, host, port)
    except KeyboardInterrupt:
        pass
    return 0


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
