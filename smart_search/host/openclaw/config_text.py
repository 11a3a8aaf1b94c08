"""A config file's text into a value: the size bound, fast JSON5, the json5 fallback.

OpenClaw reads openclaw.json and its includes as JSON5; the json5 package is slow, so the
common JSON5 features are rewritten to JSON and parsed by orjson first.
"""

from __future__ import annotations

import re
from typing import Any

from smart_search.errors import ConfigError

# Issue 7 item 8: JSON5 parsing is linear but slow; a real openclaw.json is a few KiB. OpenClaw
# itself caps include files at 2 MiB; we refuse anything above 1 MiB, main file and includes.
MAX_CONFIG_BYTES = 1024 * 1024


def read_bounded(path: str, label: str) -> bytes:
    """A config file's bytes, refusing anything above MAX_CONFIG_BYTES (read at most that + 1)."""
    with open(path, "rb") as fh:
        raw = fh.read(MAX_CONFIG_BYTES + 1)
    if len(raw) > MAX_CONFIG_BYTES:
        raise ConfigError(f"{label} is larger than 1 MiB; refusing to parse it ({path}).")
    return raw


def parse_config_text(raw: bytes, label: str) -> Any:
    """JSON first (orjson), then JSON5: comments, trailing commas, unquoted keys, 'strings'.

    The json5 package costs ~25 ms for a 4 KiB file, so the common JSON5 features are first
    rewritten to JSON by `_json5_to_json` (one linear scan) and handed to orjson; anything the
    rewrite does not cover (hex, Infinity, escapes only JSON5 knows...) falls back to json5.
    """
    import orjson

    try:
        return orjson.loads(raw)
    except orjson.JSONDecodeError:
        pass
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        raise ConfigError(f"{label} is not valid UTF-8.") from None
    if text.startswith("\ufeff"):
        text = text[1:]
    rewritten = _json5_to_json(text)
    if rewritten is not None:
        try:
            return orjson.loads(rewritten)
        except orjson.JSONDecodeError:
            pass
    import json5

    try:
        return json5.loads(text)
    except RecursionError:
        raise ConfigError(f"{label} is nested too deeply.") from None
    except ValueError as exc:
        # Name the line only: the parser's own message may quote file content (keys included).
        line = re.search(r":(\d+)", str(exc))
        where = f" near line {line.group(1)}" if line else ""
        raise ConfigError(f"{label} is not valid JSON5{where}.") from None


# The rewrite's tokens, compiled only when a file is not plain JSON (config is read on every call).
_TOKEN = (
    r"""
    (?P<ws>[ \t\r\n]+)
  | (?P<line>//[^\n]*)
  | (?P<block>/\*.*?\*/)
  | (?P<dq>"(?:[^"\\\n]|\\.)*")
  | (?P<sq>'(?:[^'\\\n]|\\.)*')
  | (?P<ident>[A-Za-z_$][A-Za-z0-9_$]*)
  | (?P<punct>[{}\[\]:,])
  | (?P<other>[^\s{}\[\]:,"'/]+)
    """,
    re.X | re.S,
)
_SIMPLE_ESCAPE = r"\\[^\"\\/bfnrtu]"


def _json5_to_json(text: str) -> str | None:
    """Rewrite the JSON5 most files use into JSON; None when something needs the full parser."""
    out: list[str] = []
    pos = 0
    n = len(text)
    match = re.compile(*_TOKEN).match
    simple_escape = re.compile(_SIMPLE_ESCAPE).search
    while pos < n:
        m = match(text, pos)
        if m is None:
            return None
        pos = m.end()
        kind = m.lastgroup
        token = m.group()
        if kind in ("ws", "line", "block"):
            continue
        if kind == "dq":
            if simple_escape(token):
                return None
            out.append(token)
        elif kind == "sq":
            body = token[1:-1]
            if "\\" in body:
                return None
            out.append('"' + body.replace('"', '\\"') + '"')
        elif kind == "ident":
            # An unquoted key when a ':' follows (whitespace and comments allowed between).
            rest = _skip_blank(text, pos)
            if rest < n and text[rest] == ":":
                out.append('"' + token + '"')
            elif token in ("true", "false", "null"):
                out.append(token)
            else:
                return None  # Infinity, NaN, or junk: let json5 decide
        elif kind == "punct":
            if token in "}]" and out and out[-1] == ",":
                out.pop()  # trailing comma
            out.append(token)
        else:
            out.append(token)
    return "".join(out)


def _skip_blank(text: str, pos: int) -> int:
    n = len(text)
    while pos < n:
        ch = text[pos]
        if ch in " \t\r\n":
            pos += 1
        elif text.startswith("//", pos):
            end = text.find("\n", pos)
            pos = n if end < 0 else end
        elif text.startswith("/*", pos):
            end = text.find("*/", pos + 2)
            if end < 0:
                return n
            pos = end + 2
        else:
            break
    return pos
