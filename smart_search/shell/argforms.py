"""Argument forms of the four tools, for hosts that approve commands by their shape.

OpenClaw's exec allowlist asks a human about any command with a heredoc (`<<`), so a scheduled
agent under an allowlist cannot pipe JSON. These map one to one onto the stdin contract:

    smart-search search QUERY --agent-id ID [--provider P]  -> smart_search
    smart-search quota [--agent-id ID]                 -> search_quota_status
    smart-search complete --agent-id ID                -> search_mark_agent_complete
    smart-search fetch URL [--agent-id ID] [--max-chars N] [--fresh]  -> smart_fetch

Each builds the same request object and goes through `runner.handle`: same validation, same
error strings, same one line of JSON on stdout, exit 0. Exit 2 (usage on stderr, nothing on
stdout) only when the command line itself cannot be turned into a request.
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

from smart_search.host.config import PROVIDERS

USAGES = {
    "search": (
        f"smart-search search QUERY --agent-id ID [--provider {'|'.join(PROVIDERS)}] [--fresh]"
        " [--mode first|deep] [--count N] [--freshness day|week|month|year] [--country CC]"
        " [--language LL]"
    ),
    "quota": "smart-search quota [--agent-id ID]",
    "complete": "smart-search complete --agent-id ID",
    "fetch": "smart-search fetch URL [--agent-id ID] [--max-chars N] [--fresh]",
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


def _search_parser() -> _Parser:
    parser = _parser("search")
    # `--` lets a query start with a dash: smart-search search --agent-id a -- "-v flag"
    parser.add_argument("query", nargs="?")
    parser.add_argument("--agent-id", dest="agent_id")
    parser.add_argument("--provider", dest="force_provider")
    # Deep mode and the search filters (issue 15); the contract checks the values.
    for name in ("mode", "freshness", "country", "language"):
        parser.add_argument(f"--{name}", dest=name)
    parser.add_argument("--count", dest="count", type=_count)
    # The cache bypass (issue 11): `fresh: true`; absent means the cache may answer.
    parser.add_argument("--fresh", dest="fresh", action="store_const", const=True)
    return parser


def _fetch_parser() -> _Parser:
    parser = _parser("fetch")
    parser.add_argument("url", nargs="?")
    parser.add_argument("--agent-id", dest="agent_id")
    parser.add_argument("--max-chars", dest="max_chars", type=_count)
    parser.add_argument("--fresh", dest="fresh", action="store_const", const=True)
    return parser


def _count(text: str) -> int | str:
    """A whole number as a number; anything else as given, for the contract's own message."""
    return int(text) if text.strip().isdigit() else text


def _agent_parser(name: str) -> _Parser:
    parser = _parser(name)
    parser.add_argument("--agent-id", dest="agent_id")
    return parser


# command -> (tool, parser factory, request fields in the spec's parameter order)
COMMANDS = {
    "search": (
        "smart_search",
        _search_parser,
        ("query", "agent_id", "force_provider", "fresh", "mode", "count", "freshness",
         "country", "language"),
    ),
    "quota": ("search_quota_status", lambda: _agent_parser("quota"), ("agent_id",)),
    "complete": ("search_mark_agent_complete", lambda: _agent_parser("complete"), ("agent_id",)),
    "fetch": ("smart_fetch", _fetch_parser, ("url", "agent_id", "max_chars", "fresh")),
}


class UsageError(Exception):
    """The command line cannot be turned into a request (exit 2)."""


def build_request(command: str, argv: list[str]) -> dict[str, Any] | None:
    """The stdin contract's request for `smart-search COMMAND ARGV...`; None for --help."""
    tool, make_parser, fields = COMMANDS[command]
    try:
        ns = make_parser().parse_args(argv)
    except _UsageError as exc:
        raise UsageError(str(exc).strip()) from None
    if ns.help:
        return None
    # Only what was given: a missing field is left to the contract's own validation, so the
    # error string is the one the stdin form gives (e.g. "agent_id is required ...").
    args = {f: getattr(ns, f) for f in fields if getattr(ns, f) is not None}
    return {"tool": tool, "args": args}


def search_main(argv: list[str]) -> int:
    return _run("search", argv)


def quota_main(argv: list[str]) -> int:
    return _run("quota", argv)


def complete_main(argv: list[str]) -> int:
    return _run("complete", argv)


def fetch_main(argv: list[str]) -> int:
    return _run("fetch", argv)


def _run(name: str, argv: list[str]) -> int:
    try:
        request = build_request(name, argv)
    except UsageError as exc:
        return _usage(name, str(exc))
    if request is None:
        sys.stdout.write(f"usage: {USAGES[name]}\n")
        return 0
    for backend in ("trio", "anyio"):
        sys.modules.setdefault(backend, None)  # type: ignore[arg-type]
    import orjson

    from smart_search.shell.runner import dumps, handle

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
