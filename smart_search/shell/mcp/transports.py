"""The two ways the server is reached: stdio (the host starts it as a subprocess) and Streamable
HTTP on a socket bound here, served by uvicorn. Both import the SDK, only when called.
"""

from __future__ import annotations

import sys
from typing import Any

from smart_search.shell.mcp.handlers import build_server
from smart_search.shell.mcp.service import Service

DEFAULT_HTTP_PATH = "/mcp"


async def serve_stdio(service: Service) -> None:
    from mcp.server.stdio import stdio_server

    from smart_search.shell.mcp.pipes import are_pipes, loop_stdio

    server = build_server(service)
    if not are_pipes():
        async with stdio_server() as (read_stream, write_stream):
            await server.run(read_stream, write_stream, server.create_initialization_options())
        return
    # Pipes (a host spawned us): read and written by the event loop, no thread hop per line.
    async with loop_stdio() as (stdin, stdout), stdio_server(stdin, stdout) as streams:
        await server.run(*streams, server.create_initialization_options())


async def serve_http(service: Service, host: str, port: int, *, tokens: bool = False) -> None:
    """Streamable HTTP on HOST:PORT. `tokens`: require a bearer token from `mcp.tokens` on
    every request, through the SDK's own resource-server auth (auth.py)."""
    import socket

    import uvicorn

    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind((host, port))
    sock.listen(128)
    bound = sock.getsockname()[1]
    shown = f"[{host}]" if ":" in host else host
    origin = f"http://{shown}:{bound}"
    server = build_server(service, tokens=tokens)
    auth: dict[str, Any] = {}
    if tokens:
        from smart_search.shell.mcp.auth import Verifier, auth_settings

        auth = {"auth": auth_settings(origin), "token_verifier": Verifier(service)}
    app = server.streamable_http_app(streamable_http_path=DEFAULT_HTTP_PATH, host=host, **auth)
    if tokens:
        sys.stderr.write("smart-search mcp: every request needs a bearer token (mcp.tokens)\n")
    sys.stderr.write(f"smart-search mcp: listening on {origin}{DEFAULT_HTTP_PATH}\n")
    sys.stderr.flush()
    config = uvicorn.Config(app, log_level="warning", lifespan="on", access_log=False)
    await uvicorn.Server(config).serve(sockets=[sock])
