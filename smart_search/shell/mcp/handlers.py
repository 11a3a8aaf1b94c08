"""The SDK's side of the server: a low-level `Server` whose four handlers turn MCP requests into
`Service` work (imports the SDK, only when built).

Calls run concurrently in worker threads (the tool code blocks), each with its own deadline
(`total_timeout_ms` from the moment it starts). Cancellation: a client's
`notifications/cancelled` cancels the handler; the handler cancels the call's `http.CancelScope`,
which shuts the socket of the request in flight and makes the call unwind with
`errors.Cancelled` (tiers.py refunds the reserved unit on the way; an answer that arrived first
is kept and its unit stays spent). The handler waits for the unwinding, so the ledger is settled
before the server moves on.
"""

from __future__ import annotations

import threading
from typing import Any

from smart_search.shell.mcp.catalog import (
    SERVER_INSTRUCTIONS,
    STATUS_DESCRIPTION,
    STATUS_URI,
    TOOLS,
    input_schema,
    output_schema,
    tool_description,
)
from smart_search.shell.mcp.identity import EVERY_AGENT, Identity
from smart_search.shell.mcp.service import Service

# Calls served at once; more wait for a thread. Each holds a thread for up to total_timeout_ms.
MAX_CONCURRENT_CALLS = 64
# How long a cancelled call may take to unwind (shut sockets, refund) before the handler stops
# waiting for it.
CANCEL_GRACE_S = 10.0


def build_server(service: Service, *, tokens: bool = False) -> Any:
    """The SDK's low-level `Server` with our handlers (imports the SDK). `tokens`: every request
    carries a verified bearer token (HTTP with `mcp.tokens`), whose identity each call obeys."""
    import anyio
    from mcp.server.lowlevel import Server

    from smart_search import __version__

    handlers = Handlers(service, anyio.CapacityLimiter(MAX_CONCURRENT_CALLS), tokens=tokens)
    return Server(
        "smart-search",
        version=__version__,
        title="smart-search",
        instructions=SERVER_INSTRUCTIONS,
        on_list_tools=handlers.list_tools,
        on_call_tool=handlers.call_tool,
        on_list_resources=handlers.list_resources,
        on_read_resource=handlers.read_resource,
    )


class Handlers:
    """The requests the server answers, over one `Service`. Blocking work runs in worker threads,
    at most MAX_CONCURRENT_CALLS at once (`limiter`)."""

    def __init__(self, service: Service, limiter: Any, *, tokens: bool = False) -> None:
        self.service = service
        self.limiter = limiter
        self.tokens = tokens

    def identity(self) -> Identity | None:
        """The caller's identity; None where no token is asked for (stdio, or HTTP without
        tokens). With tokens, a request that somehow reached us without one acts for no one."""
        if not self.tokens:
            return None
        from smart_search.shell.mcp.auth import current_identity

        return current_identity() or Identity("unauthenticated", ())

    def tools(self) -> list[Any]:
        """The tools as the SDK lists them, with this server's default agent."""
        from mcp import types

        agent = self.service.default_agent()
        return [
            types.Tool(
                name=tool,
                description=tool_description(tool, agent),
                input_schema=input_schema(tool, agent),
                output_schema=output_schema(tool),
                annotations=types.ToolAnnotations(
                    read_only_hint=tool == "search_quota_status",
                    destructive_hint=False,
                    idempotent_hint=tool == "search_quota_status",
                    open_world_hint=tool in ("smart_search", "smart_fetch"),
                ),
            )
            for tool in TOOLS
        ]

    async def list_tools(self, ctx: Any, params: Any) -> Any:
        import anyio.to_thread
        from mcp import types

        return types.ListToolsResult(tools=await anyio.to_thread.run_sync(self.tools))

    async def call_tool(self, ctx: Any, params: Any) -> Any:
        import orjson
        from mcp import types

        from smart_search.errors import Cancelled
        from smart_search.sources.http import CancelScope

        scope = CancelScope()
        identity = self.identity()
        try:
            result = await run_in_worker(
                lambda: self.service.call(params.name, params.arguments, scope, identity),
                scope,
                self.limiter,
            )
        except Cancelled as err:
            # The scope was cancelled with no cancellation of this request (not done today):
            # the call unwound, refunded; say so rather than invent a result object.
            return types.CallToolResult(
                content=[types.TextContent(type="text", text=err.message)], is_error=True
            )
        text = orjson.dumps(result).decode()
        return types.CallToolResult(
            content=[types.TextContent(type="text", text=text)],
            structured_content=result,
            is_error=result.get("error") is not None,
        )

    async def list_resources(self, ctx: Any, params: Any) -> Any:
        from mcp import types

        return types.ListResourcesResult(
            resources=[
                types.Resource(
                    uri=STATUS_URI,
                    name="status",
                    title="smart-search status",
                    description=STATUS_DESCRIPTION,
                    mime_type="application/json",
                )
            ]
        )

    async def read_resource(self, ctx: Any, params: Any) -> Any:
        import anyio.to_thread
        import orjson
        from mcp import types
        from mcp.shared.exceptions import MCPError

        if str(params.uri) != STATUS_URI:
            raise MCPError(code=types.INVALID_PARAMS, message=f"Unknown resource: {params.uri}")
        identity = self.identity()
        if identity is not None and not identity.allows(EVERY_AGENT):
            # The snapshot is the whole ledger: only a token for every agent reads it.
            from smart_search.errors import unknown_agent

            raise MCPError(code=types.INVALID_PARAMS, message=unknown_agent(EVERY_AGENT))
        snapshot = await anyio.to_thread.run_sync(self.service.status, limiter=self.limiter)
        return types.ReadResourceResult(
            contents=[
                types.TextResourceContents(
                    uri=STATUS_URI,
                    mime_type="application/json",
                    text=orjson.dumps(snapshot).decode(),
                )
            ]
        )


async def run_in_worker(work: Any, scope: Any, limiter: Any) -> Any:
    """Run blocking `work` in a worker thread; on cancellation, cancel `scope` and wait
    (shielded, bounded) for the thread to unwind, so its refund is done when we return."""
    import anyio
    import anyio.to_thread

    lock = threading.Lock()
    state = {"started": False, "given_up": False}
    finished = threading.Event()

    def run() -> Any:
        with lock:
            if state["given_up"]:  # cancelled while queued for a thread: never started
                return None
            state["started"] = True
        try:
            return work()
        finally:
            finished.set()

    try:
        return await anyio.to_thread.run_sync(run, abandon_on_cancel=True, limiter=limiter)
    except anyio.get_cancelled_exc_class():
        with lock:
            state["given_up"] = True
            started = state["started"]
        if started:
            scope.cancel()
            with anyio.CancelScope(shield=True), anyio.move_on_after(CANCEL_GRACE_S):
                while not finished.is_set():
                    await anyio.sleep(0.005)
        raise
