"""Key pools (issue 20, point 3): several API keys for one provider.

A pool comes from `providers.<p>.keys` (a list whose entries are a key string, `{"env": VAR}` or
`{"value": KEY}`, the objects optionally with `project` and their own `daily_limit` /
`monthly_limit`), else from `<P>_API_KEYS` (comma-separated, looked up where `<P>_API_KEY` is).
Without either, the provider has its one key (`<P>_API_KEY`) and no pool: everything is as it
was. Each key, or each project for keys that share one, is an *account* with its own windows;
a key is named everywhere only by its fingerprint ("…" and its last 4 characters).

Nothing here ever puts a key's value into a message: errors name the key's path.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any, NamedTuple

from smart_search.errors import ConfigError
from smart_search.host.config_checks import check_count, is_header_safe

# A project's name is shown in status and logs as it is: a short plain label.
_PROJECT = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.:-]{0,63}")
_ENV_NAME = re.compile(r"[A-Z_][A-Z0-9_]{0,127}")
# Shorter keys would be mostly shown by their fingerprint (and no real API key is this short).
MIN_KEY_CHARS = 8
MAX_KEYS = 64
_ENTRY_FIELDS = ("env", "value", "project", "daily_limit", "monthly_limit")


class Entry(NamedTuple):
    """One `providers.<p>.keys` entry as written (the key not yet looked up)."""

    path: str  # its config path, for messages
    env: str | None  # {"env": VAR}
    value: str | None  # a string, or {"value": KEY}
    project: str | None
    daily_limit: int | None
    monthly_limit: int | None


class PoolKey(NamedTuple):
    """One key of a pool, checked. `secret` is a config.Secret (its repr hides the value)."""

    fingerprint: str  # "…WXYZ", "…WXYZ#2" when another key of the provider ends the same
    secret: Any
    account: str  # whose windows it spends: its own fingerprint, or its project's name
    daily_limit: int  # its account's limits (the provider's unless the entry set its own)
    monthly_limit: int


def check_entries(value: Any, name: str, key: Any = None) -> tuple[Entry, ...] | None:
    """The config table's check for `providers.<p>.keys`: the shape only (None: unset)."""
    if value is None:
        return None
    if not isinstance(value, list) or not value or len(value) > MAX_KEYS:
        raise ConfigError(
            f'Config key "{name}" must be an array of 1 to {MAX_KEYS} keys (strings, '
            '{"env": VAR} or {"value": KEY}).'
        )
    return tuple(_entry(item, f"{name}[{i}]") for i, item in enumerate(value))


def _entry(item: Any, path: str) -> Entry:
    if isinstance(item, str):
        return Entry(path, None, item, None, None, None)
    if not isinstance(item, dict):
        raise ConfigError(
            f'Config key "{path}" must be a key string, {{"env": VAR}} or {{"value": KEY}}.'
        )
    if any(k not in _ENTRY_FIELDS for k in item):
        # The field is not named: inside a key list, a misplaced key may be the field's name.
        raise ConfigError(
            f'Config key "{path}" has a field that is not a key field '
            f"({', '.join(_ENTRY_FIELDS)})."
        )
    if ("env" in item) == ("value" in item):
        raise ConfigError(f'Config key "{path}" must hold exactly one of "env" and "value".')
    env = item.get("env")
    if env is not None and not (isinstance(env, str) and _ENV_NAME.fullmatch(env)):
        raise ConfigError(f'Config key "{path}.env" must name an environment variable.')
    value = item.get("value")
    if "value" in item and not isinstance(value, str):
        raise ConfigError(f'Config key "{path}.value" must be a string.')
    project = item.get("project")
    if project is not None and not (isinstance(project, str) and _PROJECT.fullmatch(project)):
        raise ConfigError(
            f'Config key "{path}.project" must be 1 to 64 of letters, digits, `.`, `_`, `:`, `-`.'
        )
    limits = [
        None if item.get(f) is None else check_count(item[f], f"{path}.{f}")
        for f in ("daily_limit", "monthly_limit")
    ]
    return Entry(path, env, value, project, limits[0], limits[1])


def env_entries(value: str, variable: str) -> tuple[Entry, ...]:
    """`<P>_API_KEYS`: comma-separated keys (blank items are skipped)."""
    items = [v.strip() for v in value.split(",")]
    return tuple(
        Entry(f"{variable}[{i}]", None, v, None, None, None) for i, v in enumerate(items) if v
    )


def fingerprint(value: str) -> str:
    return "…" + value[-4:]


def build_pool(
    entries: tuple[Entry, ...],
    lookup: Callable[[str], str | None],
    secret: Callable[[str], Any],
    daily_limit: int,
    monthly_limit: int,
) -> tuple[PoolKey, ...]:
    """The checked pool: each entry's key looked up (`lookup(VAR)` walks the API-key sources),
    fingerprinted, and given its account's limits. A project takes its limits from its first
    entry; a later entry of it that sets different ones is a config error."""
    seen: dict[str, str] = {}  # value -> path, to refuse a key listed twice
    prints: dict[str, int] = {}
    projects: dict[str, tuple[int, int, Entry]] = {}
    out = []
    for entry in entries:
        value = entry.value
        if entry.env is not None:
            value = lookup(entry.env)
            if value is None:
                raise ConfigError(
                    f'Config key "{entry.path}.env" names {entry.env}, which is not set '
                    "(or is empty)."
                )
        value = (value or "").strip()
        if len(value) < MIN_KEY_CHARS:
            raise ConfigError(
                f'Config key "{entry.path}" must be an API key of at least {MIN_KEY_CHARS} '
                "characters."
            )
        if not is_header_safe(value):
            raise ConfigError(
                f'Config key "{entry.path}" contains characters that cannot be sent in an HTTP '
                "header."
            )
        if value in seen:
            raise ConfigError(f'Config key "{entry.path}" repeats the key of {seen[value]}.')
        seen[value] = entry.path
        base = fingerprint(value)
        prints[base] = prints.get(base, 0) + 1
        mark = base if prints[base] == 1 else f"{base}#{prints[base]}"
        daily = daily_limit if entry.daily_limit is None else entry.daily_limit
        monthly = monthly_limit if entry.monthly_limit is None else entry.monthly_limit
        account = mark
        if entry.project is not None:
            account = entry.project
            first = projects.setdefault(entry.project, (daily, monthly, entry))
            own = (entry.daily_limit, entry.monthly_limit) != (None, None)
            if own and first[:2] != (daily, monthly):
                raise ConfigError(
                    f'Config key "{entry.path}" sets limits for project "{entry.project}" that '
                    f"differ from {first[2].path}'s: a project's keys share its windows."
                )
            daily, monthly = first[0], first[1]
        out.append(PoolKey(mark, secret(value), account, daily, monthly))
    return tuple(out)


def account_limits(pool: tuple[PoolKey, ...]) -> tuple[int, int]:
    """The pool's windows: the sum of its accounts' limits (a project counted once)."""
    accounts = {k.account: (k.daily_limit, k.monthly_limit) for k in pool}
    return sum(d for d, _ in accounts.values()), sum(m for _, m in accounts.values())
