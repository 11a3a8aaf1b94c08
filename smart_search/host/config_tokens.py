"""`mcp.tokens` (issue 28): who may call the MCP server over HTTP, and as which agents.

Each entry is `{"env": VAR}` or `{"value": TOKEN}`, with `agents` (a list of agent ids, or "*"
for every agent and the whole ledger) and an optional `label` (what the logs call the client).
`check_tokens` is the config table's check of the shape, run on every load; `resolve_tokens`
looks each `env` up where API keys are looked up (config.py calls it only when tokens are set).
A variable that is unset leaves its token unset rather than failing the load: the one-shot CLI
never needs the token, and the MCP server refuses to start while one is unset (`unset_tokens`).

Nothing here ever puts a token's value into a message: errors name the entry's path.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any, NamedTuple

from smart_search.errors import ConfigError
from smart_search.host.config_checks import AGENT_ID

ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,127}")
# A bearer token as RFC 6750 spells one (b64token), long enough not to be guessed.
TOKEN = re.compile(r"[A-Za-z0-9._~+/-]+=*")
MIN_TOKEN_CHARS = 16
MAX_TOKEN_CHARS = 512
MAX_TOKENS = 256
LABEL = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.:@-]{0,63}")
EVERY_AGENT = "*"
_FIELDS = ("env", "value", "agents", "label")


class TokenEntry(NamedTuple):
    """One `mcp.tokens` entry as written (an `env` entry not yet looked up)."""

    path: str  # its config path, for messages and the default label
    env: str | None
    value: str | None
    agents: tuple[str, ...] | None  # None: every agent ("*")
    label: str


class McpToken(NamedTuple):
    """One checked token. `secret` is a config.Secret (its repr hides the value), or None when
    its `env` variable is unset."""

    path: str
    env: str | None  # the variable it was read from
    secret: Any
    agents: tuple[str, ...] | None  # None: every agent, and the whole ledger
    label: str


def check_tokens(value: Any, name: str, key: Any = None) -> tuple[TokenEntry, ...]:
    """The config table's check for `mcp.tokens`: the shape only; () when unset."""
    if value is None or value == ():
        return ()
    if not isinstance(value, list) or len(value) > MAX_TOKENS:
        raise ConfigError(
            f'Config key "{name}" must be an array of at most {MAX_TOKENS} entries '
            '({"env": VAR} or {"value": TOKEN}, each with "agents").'
        )
    entries = tuple(_entry(item, f"{name}[{i}]") for i, item in enumerate(value))
    labels: dict[str, str] = {}
    for entry in entries:
        if entry.label in labels:
            raise ConfigError(
                f'Config key "{entry.path}.label" repeats the label of {labels[entry.label]}.'
            )
        labels[entry.label] = entry.path
    return entries


def _entry(item: Any, path: str) -> TokenEntry:
    if not isinstance(item, dict):
        raise ConfigError(
            f'Config key "{path}" must be an object: {{"env": VAR}} or {{"value": TOKEN}}, '
            'with "agents".'
        )
    if any(k not in _FIELDS for k in item):
        # The field is not named: a misplaced token may be the field's name.
        raise ConfigError(
            f'Config key "{path}" has a field that is not a token field ({", ".join(_FIELDS)}).'
        )
    if ("env" in item) == ("value" in item):
        raise ConfigError(f'Config key "{path}" must hold exactly one of "env" and "value".')
    env = item.get("env")
    if "env" in item and not (isinstance(env, str) and ENV_NAME.fullmatch(env)):
        raise ConfigError(f'Config key "{path}.env" must name an environment variable.')
    value = item.get("value")
    if "value" in item:
        check_token(value, f"{path}.value")
    label = item.get("label", path)
    if "label" in item and not (isinstance(label, str) and LABEL.fullmatch(label)):
        raise ConfigError(
            f'Config key "{path}.label" must be 1 to 64 of letters, digits, `_`, `.`, `:`, `@`, '
            "`-`."
        )
    return TokenEntry(path, env, value, _agents(item.get("agents"), f"{path}.agents"), label)


def _agents(value: Any, path: str) -> tuple[str, ...] | None:
    if value == EVERY_AGENT:
        return None
    if (
        not isinstance(value, list)
        or not value
        or not all(isinstance(a, str) and AGENT_ID.fullmatch(a) and len(a) <= 64 for a in value)
    ):
        raise ConfigError(
            f'Config key "{path}" must be "*" or a non-empty array of agent ids (lowercase '
            "letters, digits and hyphens)."
        )
    return tuple(dict.fromkeys(value))


def check_token(value: Any, path: str) -> str:
    """A token's value, or a config_error that names `path` and never quotes the value."""
    if not (
        isinstance(value, str)
        and MIN_TOKEN_CHARS <= len(value) <= MAX_TOKEN_CHARS
        and TOKEN.fullmatch(value)
    ):
        raise ConfigError(
            f'Config key "{path}" must be a bearer token of {MIN_TOKEN_CHARS} to '
            f"{MAX_TOKEN_CHARS} characters: letters, digits and -._~+/ (= only at the end)."
        )
    return value


def resolve_tokens(
    entries: tuple[TokenEntry, ...],
    lookup: Callable[[str], str | None],
    secret: Callable[[str], Any],
) -> tuple[McpToken, ...]:
    """Each entry's token, its `env` looked up (`lookup(VAR)` walks the API-key sources); a
    token listed twice is a config error (which identity would it be?)."""
    seen: dict[str, str] = {}
    out = []
    for entry in entries:
        value = entry.value
        if entry.env is not None:
            value = lookup(entry.env)
            if value is not None:
                check_token(value, f"{entry.path}.env ({entry.env})")
        if value is not None:
            if value in seen:
                raise ConfigError(f'Config key "{entry.path}" repeats the token of {seen[value]}.')
            seen[value] = entry.path
        held = None if value is None else secret(value)
        out.append(McpToken(entry.path, entry.env, held, entry.agents, entry.label))
    return tuple(out)


def unset_tokens(tokens: tuple[McpToken, ...]) -> list[str]:
    """What the MCP server says before refusing to start: each token whose variable is unset."""
    return [
        f'Config key "{t.path}.env" names {t.env}, which is not set (or is empty).'
        for t in tokens
        if t.secret is None
    ]
