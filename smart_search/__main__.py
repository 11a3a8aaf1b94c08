"""`smart-search` / `python -m smart_search`: read one JSON call on stdin, print one result.

With a subcommand (`smart-search report ...`), the named module's `main(argv) -> int` runs
instead; each is imported only when named, so the one-shot JSON call pays for none of them.
"""

from __future__ import annotations

import sys

USAGE = """usage: smart-search < call.json
       smart-search search QUERY --agent-id ID [--provider {providers}] [--fresh]
                    [--mode first|deep] [--count N] [--freshness day|week|month|year]
                    [--country CC] [--language LL]
       smart-search quota [--agent-id ID]
       smart-search complete --agent-id ID
       smart-search fetch URL [--agent-id ID] [--max-chars N] [--fresh]
       smart-search doctor [--json]
       smart-search reconcile [--json]
       smart-search report [--days N | --since DATE [--until DATE]] [--agent ID] [--json]
                    [--html FILE] [--state-dir DIR]
       smart-search cache clear [--json]
       smart-search state export | import [--add] FILE
       smart-search mcp [--http [HOST:]PORT] [--agent-id ID]

Reads ONE JSON object {"tool": "<name>", "args": {...}} from stdin and prints ONE JSON object.
Tools: smart_search, search_quota_status, search_mark_agent_complete, smart_fetch.
Options: --help, --version
"""

def usage() -> str:
    """USAGE with the registered API providers filled in."""
    from smart_search.host.config import PROVIDERS

    return USAGE.replace("{providers}", "|".join(PROVIDERS))


# subcommand -> "module:function" inside this package; the function takes the remaining argv.
SUBCOMMANDS = {
    "search": "shell.argforms:search_main",
    "quota": "shell.argforms:quota_main",
    "complete": "shell.argforms:complete_main",
    "fetch": "shell.argforms:fetch_main",
    "doctor": "shell.doctor:main",
    "reconcile": "shell.reconcile:main",
    "report": "report:main",
    "cache": "shell.cache_admin:cache_main",
    "state": "shell.admin:state_main",
    "mcp": "shell.mcp:main",
}


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if args and args[0] in SUBCOMMANDS:
        import importlib

        module, function = SUBCOMMANDS[args[0]].split(":")
        run = getattr(importlib.import_module(f"smart_search.{module}"), function)
        return int(run(args[1:]))
    if args:
        if args in (["--help"], ["-h"]):
            sys.stdout.write(usage())
            return 0
        if args == ["--version"]:
            from smart_search import __version__

            sys.stdout.write(f"smart-search {__version__}\n")
            return 0
        sys.stderr.write(f"smart-search: unknown arguments {' '.join(args)!r}\n{usage()}")
        return 2
    # This process never runs an event loop: keep httpcore from importing its optional async
    # backends (trio ~80 ms when installed, anyio a few ms). Library users are not affected.
    for backend in ("trio", "anyio"):
        sys.modules.setdefault(backend, None)  # type: ignore[arg-type]
    # Asked to stop (SIGTERM: the OpenClaw plugin's abort), the call sends nothing more, cuts off
    # what is in flight and still settles: a hold whose request never left is refunded.
    import signal

    from smart_search.sources import cancel

    signal.signal(signal.SIGTERM, cancel.request_from_signal)
    from smart_search.shell.runner import MAX_INPUT_BYTES, dumps, handle

    try:
        raw = sys.stdin.buffer.read(MAX_INPUT_BYTES + 1)
    except Exception:  # noqa: BLE001 - a closed or broken stdin is just empty input
        raw = b""
    from smart_search.errors import Cancelled

    try:
        result = handle(raw)
    except Cancelled as stopped:
        # The walk has settled (refunded what never left); the caller gave up on the answer.
        sys.stderr.write(f"smart-search: stopped: {stopped}\n")
        return 128 + signal.SIGTERM
    out = sys.stdout.buffer
    out.write(dumps(result))
    out.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main())
