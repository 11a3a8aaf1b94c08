"""Reading openclaw.json as OpenClaw does: the main file, then every `$include` in it.

Mirrored from `includes-CaaCq-XN.mjs` (src/config/includes.ts) in the npm package
`openclaw@2026.9.6`: `$include` is a string or an array of strings, relative to the including
file, confined to the config file's directory or OPENCLAW_INCLUDE_ROOTS, symlinks checked by real
path, depth at most 10, cycles refused, sibling keys deep-merged over the included object, arrays
concatenated.
"""

from __future__ import annotations

import os
import stat
from typing import Any

from smart_search.errors import CANNOT_READ_CONFIG, ConfigError
from smart_search.host.openclaw.config_text import parse_config_text, read_bounded
from smart_search.host.openclaw.homes import Env
from smart_search.host.openclaw.locations import CONFIG_FILENAME, ConfigLocation, include_roots

INCLUDE_KEY = "$include"
MAX_INCLUDE_DEPTH = 10  # OpenClaw: "Maximum include depth (10) exceeded"
MAX_INCLUDE_PATH_LENGTH = 4096


def load_config(location: ConfigLocation, env: Env) -> tuple[dict[str, Any], list[str]]:
    """The config object OpenClaw would see (includes resolved) and every file read."""
    path = location.path
    try:
        raw = read_bounded(path, CONFIG_FILENAME)
    except FileNotFoundError:
        if location.explicit:
            raise ConfigError(CANNOT_READ_CONFIG) from None
        return {}, []
    except IsADirectoryError:
        raise ConfigError(CANNOT_READ_CONFIG) from None
    except OSError:
        raise ConfigError(CANNOT_READ_CONFIG) from None
    root = parse_config_text(raw, CONFIG_FILENAME)
    files = [path]
    if b"$include" in raw and _has_include(root):
        resolver = _Includes(path, include_roots(env), files)
        root = resolver.process(root, os.path.normpath(os.path.abspath(path)), (), 0)
    if not isinstance(root, dict):
        raise ConfigError("openclaw.json must hold a JSON object at the top level.")
    return root, files


def _has_include(value: Any) -> bool:
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, dict):
            if INCLUDE_KEY in item:
                return True
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)
    return False


def _inside(root: str, candidate: str) -> bool:
    rel = os.path.relpath(candidate, root)
    return rel == "." or not (rel == ".." or rel.startswith(".." + os.sep) or os.path.isabs(rel))


class _Includes:
    """OpenClaw's IncludeProcessor: every `$include` anywhere in the tree, recursively."""

    def __init__(self, config_path: str, extra_roots: list[str], files: list[str]) -> None:
        config_dir = os.path.dirname(os.path.abspath(config_path))
        self.roots = [(config_dir, os.path.realpath(config_dir))]
        self.roots += [(r, os.path.realpath(r)) for r in extra_roots]
        self.files = files

    def process(self, obj: Any, base: str, chain: tuple[str, ...], depth: int) -> Any:
        if isinstance(obj, list):
            return [self.process(item, base, chain, depth) for item in obj]
        if not isinstance(obj, dict):
            return obj
        if INCLUDE_KEY not in obj:
            return {k: self.process(v, base, chain, depth) for k, v in obj.items()}
        value = obj[INCLUDE_KEY]
        if isinstance(value, str):
            included = self.load(value, base, chain, depth)
        elif isinstance(value, list):
            included = {}
            for item in value:
                if not isinstance(item, str):
                    raise self.error(base, "has a $include array item that is not a string")
                included = deep_merge(included, self.load(item, base, chain, depth))
        else:
            raise self.error(base, "has a $include that is not a string or an array of strings")
        others = {k: v for k, v in obj.items() if k != INCLUDE_KEY}
        if not others:
            return included
        if not isinstance(included, dict):
            raise self.error(base, "has keys beside $include, but the included file is no object")
        rest = {k: self.process(v, base, chain, depth) for k, v in others.items()}
        return deep_merge(included, rest)

    def load(self, include: str, base: str, chain: tuple[str, ...], depth: int) -> Any:
        if "\0" in include or len(include) >= MAX_INCLUDE_PATH_LENGTH:
            raise self.error(base, "has an unusable $include path")
        target = include if os.path.isabs(include) else os.path.join(os.path.dirname(base), include)
        target = os.path.normpath(target)
        if not any(_inside(lexical, target) for lexical, _ in self.roots):
            raise self.error(base, f'includes "{include}", outside the config directory')
        real = os.path.realpath(target)
        if os.path.exists(target) and not any(_inside(rr, real) for _, rr in self.roots):
            raise self.error(base, f'includes "{include}", a link leading outside the config dir')
        visited = (*chain, base)
        if target in visited:
            cycle = " -> ".join((*visited[visited.index(target) :], target))
            raise ConfigError(f"Config $include cycle: {cycle}.")
        if depth >= MAX_INCLUDE_DEPTH:
            raise self.error(base, f'includes "{include}" deeper than 10 levels')
        try:
            info = os.stat(target)
            if not stat.S_ISREG(info.st_mode) or info.st_nlink > 1:
                # OpenClaw's guard: "regular file, max N bytes, no hardlinks".
                raise ConfigError(
                    f"Config include {target} (from {base}) is not a regular file with one link."
                )
            raw = read_bounded(target, f"Config include {target}")
        except FileNotFoundError:
            raise ConfigError(
                f'Config include {target} (from $include "{include}" in {base}) does not exist.'
            ) from None
        except OSError as exc:
            raise ConfigError(
                f"Config include {target} (from {base}) cannot be read ({exc.__class__.__name__})."
            ) from None
        self.files.append(target)
        parsed = parse_config_text(raw, f"Config include {target}")
        return self.process(parsed, target, visited, depth + 1)

    @staticmethod
    def error(base: str, why: str) -> ConfigError:
        return ConfigError(f"Config file {base} {why}.")


_BLOCKED_KEYS = ("__proto__", "constructor", "prototype")


def deep_merge(base: Any, override: Any) -> Any:
    """OpenClaw's include merge: objects recursively, arrays concatenate, otherwise override."""
    if isinstance(base, list) and isinstance(override, list):
        return [*base, *override]
    if not isinstance(base, dict) or not isinstance(override, dict):
        return override
    merged = {k: v for k, v in base.items() if k not in _BLOCKED_KEYS}
    for key, value in override.items():
        if key in _BLOCKED_KEYS:
            continue
        current = merged.get(key)
        if isinstance(value, dict):
            merged[key] = deep_merge(current, value) if isinstance(current, dict) else value
        elif isinstance(current, list) and isinstance(value, list):
            merged[key] = [*current, *value]
        else:
            merged[key] = value
    return merged
