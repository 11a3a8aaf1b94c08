"""OpenClaw's secret inputs, resolved as its docs describe them (issue 30).

From the npm package `openclaw@2026.9.6`: docs/gateway/secrets/secretref-contract.md (the
SecretRef object, its sources, id grammars and provider blocks) and
docs/gateway/configuration/environment-variables.md (`${VAR}` in config strings, the `$VAR`
shorthand on secret fields). A secret field holds a string (`"${VAR}"` and `"$${VAR}"` as in any
config string, or the whole string `"$VAR"`) or a SecretRef
`{source: "env" | "file" | "exec" | "store", provider, id}`.

- `env`: the variable, from the environment OpenClaw's process would have (the process
  environment, then the global `.env`, then `env.vars`); the provider's `allowlist` applies.
- `file`: the `secrets.providers.<p>` file (`~` expanded), which must be a private regular file of
  the current user with one link, at most `maxBytes` (1 MiB); `mode: "json"` (the default) reads
  the JSON pointer `id`, `singleValue` the whole file (one trailing newline dropped).
- `exec` and `store` are refused, saying why (docs/configuration.md, **Decision**): smart-search
  never runs a command to learn a key, and OpenClaw's secret store is its private SQLite database.

A failure is `Unresolved`, whose message names the reference and never holds a value.
"""

from __future__ import annotations

import errno
import os
import re
import stat
from collections.abc import Mapping
from typing import Any

from smart_search.host.openclaw.homes import resolve_user_path

_VAR = re.compile(r"\$(\$?)\{([A-Z_][A-Z0-9_]*)\}")
_SHORTHAND = re.compile(r"\$([A-Z][A-Z0-9_]{0,127})")
_ENV_ID = re.compile(r"[A-Z][A-Z0-9_]{0,127}")
_PROVIDER = re.compile(r"[a-z][a-z0-9_-]{0,63}")
DEFAULT_MAX_BYTES = 1024 * 1024


class Unresolved(Exception):
    """A secret input that names a key smart-search cannot read; the message says why."""

    def __init__(self, why: str) -> None:
        super().__init__(why)
        self.why = why


def resolve(
    value: Any, root: Mapping[str, Any], env: Mapping[str, str], read: list[str] | None = None
) -> str | None:
    """The secret `value` stands for, stripped; None when it is empty. `env` is the environment
    OpenClaw would see (see `host_keys.HostEnv`); `root` the whole openclaw.json; a file it reads
    (or tries to) is appended to `read` (a long-running server watches it)."""
    if isinstance(value, str):
        return _string(value, env)
    if isinstance(value, dict) and "source" in value:
        return _reference(value, root, env, [] if read is None else read)
    raise Unresolved("is neither a string nor a SecretRef object")


def _string(value: str, env: Mapping[str, str]) -> str | None:
    whole = _SHORTHAND.fullmatch(value.strip())
    if whole:
        return _variable(whole.group(1), env, f"names ${whole.group(1)}")
    if "${" in value:

        def replace(m: re.Match[str]) -> str:
            if m.group(1):
                return "${" + m.group(2) + "}"
            return _variable(m.group(2), env, f"uses ${{{m.group(2)}}}")

        value = _VAR.sub(replace, value)
    return value.strip() or None


def _variable(name: str, env: Mapping[str, str], how: str) -> str:
    found = env.get(name)
    if not isinstance(found, str) or not found.strip():
        raise Unresolved(f"{how}, but the environment variable {name} is not set (or is empty)")
    return found.strip()


def _reference(
    ref: dict[str, Any], root: Mapping[str, Any], env: Mapping[str, str], read: list[str]
) -> str | None:
    source = ref.get("source")
    ref_id = ref.get("id")
    if source not in ("env", "file", "exec", "store"):
        raise Unresolved("is a SecretRef with an unknown source (env, file, exec or store)")
    if not isinstance(ref_id, str) or not ref_id:
        raise Unresolved(f"is a {source} SecretRef without an id")
    secrets = root.get("secrets") if isinstance(root.get("secrets"), dict) else {}
    providers = secrets.get("providers") if isinstance(secrets.get("providers"), dict) else {}
    defaults = secrets.get("defaults") if isinstance(secrets.get("defaults"), dict) else {}
    alias = ref.get("provider") or defaults.get(source) or "default"
    if not isinstance(alias, str) or not _PROVIDER.fullmatch(alias):
        raise Unresolved(f"is a {source} SecretRef whose provider name is not valid")
    entry = providers.get(alias)
    entry = entry if isinstance(entry, dict) and entry.get("source") == source else None
    if source == "exec":
        raise Unresolved(
            f'is an exec SecretRef (provider "{alias}"): smart-search never runs a command to '
            "read a key; set the key in smart-search's own env instead"
        )
    if source == "store":
        raise Unresolved(
            "is a store SecretRef: smart-search cannot read OpenClaw's secret store; set the key "
            "in smart-search's own env instead"
        )
    if source == "env":
        default_alias = defaults.get("env") or "default"
        if entry is None and alias != default_alias:
            raise Unresolved(f'is an env SecretRef to secrets provider "{alias}", not configured')
        if not _ENV_ID.fullmatch(ref_id):
            raise Unresolved("is an env SecretRef whose id is not a variable name")
        allowed = entry.get("allowlist") if entry is not None else None
        if isinstance(allowed, list) and ref_id not in allowed:
            raise Unresolved(
                f"is an env SecretRef to {ref_id}, not in secrets.providers.{alias}.allowlist"
            )
        return _variable(ref_id, env, f"is an env SecretRef to {ref_id}")
    if entry is None:
        raise Unresolved(f'is a file SecretRef to secrets provider "{alias}", not configured')
    return _file(alias, entry, ref_id, env, read)


def _file(
    alias: str, entry: dict[str, Any], ref_id: str, env: Mapping[str, str], read: list[str]
) -> str | None:
    where = f'is a file SecretRef (provider "{alias}")'
    path = entry.get("path")
    if not isinstance(path, str) or not path.strip():
        raise Unresolved(f"{where} whose secrets.providers.{alias}.path is not set")
    path = resolve_user_path(path, env)
    read.append(path)
    mode = entry.get("mode", "json")
    limit = entry.get("maxBytes")
    limit = limit if isinstance(limit, int) and not isinstance(limit, bool) and limit > 0 else None
    raw = _read_private(path, limit or DEFAULT_MAX_BYTES, where)
    text = raw.decode("utf-8", "replace").removeprefix("\ufeff")
    if mode == "singleValue":
        if ref_id != "value":
            raise Unresolved(f'{where}: a singleValue file is read with id "value"')
        return text.removesuffix("\n").removesuffix("\r").strip() or None
    if mode != "json":
        raise Unresolved(f"{where} whose mode is neither json nor singleValue")
    import orjson

    try:
        found: Any = orjson.loads(text)
    except orjson.JSONDecodeError:
        raise Unresolved(f"{where}: {path} is not valid JSON") from None
    if not isinstance(found, dict) or not ref_id.startswith("/"):
        raise Unresolved(f"{where}: its file holds no JSON object, or its id is no JSON pointer")
    for part in ref_id[1:].split("/"):
        part = part.replace("~1", "/").replace("~0", "~")
        if isinstance(found, dict) and part in found:
            found = found[part]
        elif isinstance(found, list) and part.isdigit() and int(part) < len(found):
            found = found[int(part)]
        else:
            raise Unresolved(f"{where}: {path} holds nothing at {ref_id}")
    if not isinstance(found, str):
        raise Unresolved(f"{where}: {path} holds no string at {ref_id}")
    return found.strip() or None


def _read_private(path: str, limit: int, where: str) -> bytes:
    """The file's bytes, when OpenClaw would read it: a regular file (no link) of this user,
    with one hard link, not readable or writable by others, at most `limit` bytes."""
    try:
        fd = os.open(
            path, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0)
        )
    except FileNotFoundError:
        raise Unresolved(f"{where}: {path} does not exist") from None
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise Unresolved(
                f"{where}: {path} is a symbolic link, which OpenClaw refuses"
            ) from None
        raise Unresolved(f"{where}: {path} cannot be read ({exc.__class__.__name__})") from None
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode) or info.st_nlink != 1:
            raise Unresolved(f"{where}: {path} is not a regular file with one link")
        if info.st_uid != os.getuid() or info.st_mode & 0o077:
            raise Unresolved(
                f"{where}: {path} is not private (it must belong to this user, mode 0600)"
            )
        with os.fdopen(fd, "rb", closefd=False) as fh:
            raw = fh.read(limit + 1)
    except OSError as exc:
        raise Unresolved(f"{where}: {path} cannot be read ({exc.__class__.__name__})") from None
    finally:
        os.close(fd)
    if len(raw) > limit:
        raise Unresolved(f"{where}: {path} is larger than {limit} bytes")
    return raw
