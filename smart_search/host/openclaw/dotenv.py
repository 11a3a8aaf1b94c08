"""OpenClaw's global `.env` (`$OPENCLAW_STATE_DIR/.env`, by default `~/.openclaw/.env`): where
OpenClaw's docs tell an operator to put provider API keys for a gateway install (docs/tools/web.md,
docs/help/environment.md in `openclaw@2026.9.6`). The gateway loads it without overriding its
process environment; smart-search reads it the same way, for the key variables only (issue 30).

The dotenv lines OpenClaw's loader accepts: `KEY=value`, an optional `export `, `#` comments,
values in single or double quotes (double quotes know `\\n`), an unquoted value cut at ` #`.
"""

from __future__ import annotations

import os
import re

from smart_search.host.openclaw.homes import Env
from smart_search.host.openclaw.locations import state_dir

MAX_BYTES = 1024 * 1024
_LINE = re.compile(r"\s*(?:export\s+)?([A-Za-z_][A-Za-z0-9_]*)\s*=\s*(.*)")


def global_env_path(env: Env) -> str:
    return os.path.join(state_dir(env)[0], ".env")


def read_global_env(env: Env, path: str | None = None) -> dict[str, str]:
    """The variables the global `.env` (at `path`, else where it is) sets; {} when it is missing
    or unreadable."""
    try:
        with open(path or global_env_path(env), "rb") as fh:
            raw = fh.read(MAX_BYTES + 1)
    except OSError:
        return {}
    if len(raw) > MAX_BYTES:
        return {}
    return parse(raw.decode("utf-8", "replace"))


def parse(text: str) -> dict[str, str]:
    out: dict[str, str] = {}
    for line in text.splitlines():
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        m = _LINE.fullmatch(line)
        if m is None:
            continue
        name, value = m.group(1), m.group(2).strip()
        if len(value) >= 2 and value[0] == value[-1] and value[0] in "'\"":
            quote, value = value[0], value[1:-1]
            if quote == '"':
                value = value.replace("\\n", "\n")
        else:
            value = re.split(r"\s#", value, maxsplit=1)[0].strip()
        out[name] = value
    return out
