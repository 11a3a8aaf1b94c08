"""Argument forms of the three tools, for hosts that approve commands by their shape.

OpenClaw's exec allowlist asks a human about any command with a heredoc (`<<`), so a scheduled
agent under an allowlist cannot pipe JSON. These map one to one onto the stdin contract:

    smart-search search QUERY --agent-id ID [--provider gemini|brave]  -> smart_search
    smart-search quota [--agent-id ID]                 -> search_quota_status
    smart-search complete --agent-id ID                -> search_mark_agent_complete

Each builds the same request object and goes through `runner.handle`: same validation, same
error strings, same one line of JSON on stdout, exit 0. Exit 2 (usage on stderr, nothing on
stdout) only when the command line itself cannot be turned into a request.
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

USAGES = {
    "search": "smart-search search QUERY --agent-id ID [--provider gemini|brave]",
    "quota": "smart-search quota [--agent-id ID]",
    "complete": "smart-search complete --agent-id ID",
}


class _UsageError(Exception):
    pass


class _Parser(argparse.ArgumentParser):
    """argparse that never prints or exits on its own: errors become _UsageError."""

    def error(self, message: str) -> Any:  # type: ignore[override]
        raise _UsageError(message)

    def exit(self, status: int = 0, message: str | None = None) -> Any:  # type: ignore[override]
        raise _UsageError(message or "")


def _parser(name: str) -> _Parser:
    parser = _Parser(prog=f"smart-search {name}", usage=USAGES[name], add_help=False)
    parser.add_argument("-h", "--help", action="store_true")
    return parser


def search_main(argv: list[str]) -> int:
    parser = _parser("search")
    # `--` lets a query start with a dash: smart-search search --agent-id a -- "-v flag"
    parser.add_argument("query", nargs="?")
    parser.add_argument("--agent-id", dest="agent_id")
    parser.add_argument("--provider", dest="force_provider")
    return _run("search", parser, argv, "smart_search", ("query", "agent_id", "force_provider"))


def quota_main(argv: list[str]) -> int:
    parser = _parser("quota")
    parser.add_argument("--agent-id", dest="agent_id")
    return _run("quota", parser, argv, "search_quota_status", ("agent_id",))


def complete_main(argv: list[str]) -> int:
    parser = _parser("complete")
    parser.add_argument("--agent-id", dest="agent_id")
    return _run("complete", parser, argv, "search_mark_agent_complete", ("agent_id",))


def _run(name: str, parser: _Parser, argv: list[str], tool: str, fields: tuple[str, ...]) -> int:
    try:
        ns = parser.parse_args(argv)
    except _UsageError as exc:
        return _usage(name, str(exc).strip())
    if ns.help:
        sys.stdout.write(f"usage: {USAGES[name]}\n")
        return 0
    # Only what was given: a missing field is left to the contract's own validation, so the
    # error string is the one the stdin form gives (e.g. "agent_id is required ...").
    args = {f: getattr(ns, f) for f in fields if getattr(ns, f) is not None}
    request: dict[str, Any] = {"tool": tool, "args": args}
    for backend in ("trio", "anyio"):
        sys.modules.setdefault(backend, None)  # type: ignore[arg-type]
    import orjson

    from .runner import dumps, handle

    try:
        raw = orjson.dumps(request)
    except orjson.JSONEncodeError:
        # Bytes that are not UTF-8 on the command line (Python keeps them as lone surrogates):
        # the stdin form rejects the same bytes as invalid JSON, so give the same answer.
        raw = b"\xff"
    out = sys.stdout.buffer
    out.write(dumps(handle(raw)))
    out.flush()
    return 0


def _usage(name: str, message: str) -> int:
    sys.stderr.write(f"usage: {USAGES[name]}\nsmart-search {name}: {message}\n")
    return 2
