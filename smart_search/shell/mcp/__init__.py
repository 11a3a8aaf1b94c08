"""`smart-search mcp`: the three tools over the Model Context Protocol, for any MCP host.

    smart-search mcp                          # stdio (the host starts it as a subprocess)
    smart-search mcp --http 127.0.0.1:8765    # Streamable HTTP at http://127.0.0.1:8765/mcp
    smart-search mcp --agent-id NAME          # agent_id for calls that omit it

A thin shell like the CLI: each `tools/call` becomes the request object the CLI would have read
(`{"tool": ..., "args": ...}`) and goes through `runner.handle_request`, the CLI's own path from
validation to error shaping, so a result is the same object, key for key, that the one-shot CLI
prints. Ledger, breaker, pacing and logs are the same files, under the same locks, as every CLI
process on the host.

What a long-running process adds: imports and config parsing are paid once (the config file is
parsed again only when its stat stamp changes, so an edit is picked up without a restart); calls
run concurrently in worker threads; a client's cancellation reaches the call in flight.

One job per module, imports flowing down this list:
- `cli`: the arguments, the word on a missing SDK, `main`;
- `transports`: stdio and Streamable HTTP;
- `handlers`: the SDK's `Server`, its handlers, worker threads and cancellation;
- `service`: settings cached across calls, calls, the status snapshot (no SDK);
- `catalog`: the tools, their served schemas and descriptions, the status resource (no SDK).

The SDK (PyPI `mcp`) is an optional extra; this package imports it only inside functions that
serve, and the one-shot CLI never imports this package.
"""

from smart_search.shell.mcp.catalog import (
    STATUS_URI,
    TOOLS,
    input_schema,
    output_schema,
    tool_description,
)
from smart_search.shell.mcp.cli import EXIT_MISSING_SDK, main, parse_args
from smart_search.shell.mcp.service import Service

__all__ = [
    "EXIT_MISSING_SDK",
    "STATUS_URI",
    "TOOLS",
    "Service",
    "input_schema",
    "main",
    "output_schema",
    "parse_args",
    "tool_description",
]
