"""Where OpenClaw keeps things, resolved exactly as OpenClaw 2026.9.6 resolves them (RULINGS §2).

Mirrored from the npm package `openclaw@2026.9.6`, files under its `dist/` (bundled names):

- `paths-DehQwyE0.mjs` (src/config/state-dir.ts, src/config/paths.ts): `resolveStateDir`,
  `resolveConfigPath`, `resolveConfigPathCandidate`, `resolveDefaultConfigCandidates`,
  `resolveIncludeRoots`;
- `home-dir-D0b-ywue.mjs`, `home-dir-BKwhAL2c.mjs` (home-dir.ts): `resolveEffectiveHomeDir`
  (OPENCLAW_HOME, then HOME, USERPROFILE), `resolveHomeRelativePath` (`~` expansion);
- `io.read-helpers-DfFQ-qoh.mjs` (src/config/io.read-helpers.ts): the read path uses
  `resolveConfigPath(env, resolveStateDir(env))` and then `resolveConfigIncludes`;
- `includes-CaaCq-XN.mjs` (src/config/includes.ts): `$include` (a string or an array of strings,
  relative to the including file, confined to the config file's directory or
  OPENCLAW_INCLUDE_ROOTS, symlinks checked by real path, depth at most 10, cycles refused, sibling
  keys deep-merged over the included object, arrays concatenated);
- `profile-wa21S6WO.mjs`, `profile-utils-D5FwriYc.mjs`: `openclaw --profile NAME` sets
  OPENCLAW_STATE_DIR=~/.openclaw-NAME and OPENCLAW_CONFIG_PATH in its own environment (which the
  commands it runs inherit); OPENCLAW_PROFILE alone moves nothing.

Everything here is pure path logic plus file reads: no quota, no network.
"""

from __future__ import annotations

import os
import re
import stat
from collections.abc import Mapping
from typing import Any

from .errors import CANNOT_READ_CONFIG, ConfigError

CONFIG_FILENAME = "openclaw.json"
LEGACY_CONFIG_FILENAMES = ("clawdbot.json",)
STATE_DIRNAME = ".openclaw"
LEGACY_STATE_DIRNAMES = (".clawdbot",)
INCLUDE_KEY = "$include"
MAX_INCLUDE_DEPTH = 10  # OpenClaw: "Maximum include depth (10) exceeded"
MAX_INCLUDE_PATH_LENGTH = 4096
# Issue 7 item 8: JSON5 parsing is linear but slow; a real openclaw.json is a few KiB. OpenClaw
# itself caps include files at 2 MiB; we refuse anything above 1 MiB, main file and includes.
MAX_CONFIG_BYTES = 1024 * 1024

Env = Mapping[str, str]


# -- homes and user paths (home-dir.ts) ------------------------------------------------------


def _home_value(value: str | None) -> str | None:
    value = (value or "").strip()
    return value if value and value not in ("undefined", "null") else None


def _raw_os_home(env: Env) -> str | None:
    found = _home_value(env.get("HOME")) or _home_value(env.get("USERPROFILE"))
    if found:
        return found
    try:
        import pwd

        return _home_value(pwd.getpwuid(os.getuid()).pw_dir)
    except (ImportError, KeyError, OSError):
        return None


def effective_home(env: Env) -> str:
    """OPENCLAW_HOME (its `~` expanded against the OS home), else HOME, USERPROFILE, else cwd."""
    explicit = _home_value(env.get("OPENCLAW_HOME"))
    if explicit:
        if explicit == "~" or explicit.startswith("~/"):
            os_home = _raw_os_home(env)
            if os_home:
                return os.path.abspath(os_home + explicit[1:])
        return os.path.abspath(explicit)
    raw = _raw_os_home(env)
    if raw:
        return os.path.abspath(raw)
    try:
        return os.getcwd()  # OpenClaw's last resort too (tryProcessCwd)
    except OSError:
        return os.sep


def resolve_user_path(value: str, env: Env) -> str:
    """OpenClaw's resolveHomeRelativePath: trim, expand a leading `~`, make absolute."""
    value = value.strip()
    if value == "~" or value.startswith("~/"):
        value = effective_home(env) + value[1:]
    return os.path.abspath(value)


# -- state dir and config path (state-dir.ts, paths.ts) --------------------------------------


def state_dir(env: Env) -> tuple[str, str]:
    """OpenClaw's state directory and why: (path, reason)."""
    override = (env.get("OPENCLAW_STATE_DIR") or "").strip()
    if override:
        return resolve_user_path(override, env), "OPENCLAW_STATE_DIR is set"
    home = effective_home(env)
    home_why = "OPENCLAW_HOME" if _home_value(env.get("OPENCLAW_HOME")) else "the home directory"
    new = os.path.join(home, STATE_DIRNAME)
    if os.path.exists(new):
        return new, f"{STATE_DIRNAME} exists in {home_why}"
    for legacy in LEGACY_STATE_DIRNAMES:
        path = os.path.join(home, legacy)
        if os.path.exists(path):
            return path, f"only the legacy {legacy} exists in {home_why}"
    return new, f"the default {STATE_DIRNAME} in {home_why} (not created yet)"


class ConfigLocation:
    """The config file OpenClaw would read: path, whether a variable named it, and each step."""

    def __init__(self, path: str, explicit: bool, exists: bool, steps: list[str]) -> None:
        self.path = path
        self.explicit = explicit
        self.exists = exists
        self.steps = steps


def config_location(env: Env) -> ConfigLocation:
    """OpenClaw's resolveConfigPath(env, resolveStateDir(env)): the file its config reader opens."""
    steps: list[str] = []
    override = (env.get("OPENCLAW_CONFIG_PATH") or "").strip()
    if override:
        path = resolve_user_path(override, env)
        steps.append(f"OPENCLAW_CONFIG_PATH is set: {path}")
        return ConfigLocation(path, True, os.path.exists(path), steps)
    steps.append("OPENCLAW_CONFIG_PATH is not set")
    if (env.get("OPENCLAW_PROFILE") or "").strip():
        steps.append(
            "OPENCLAW_PROFILE is set but moves nothing by itself (only `openclaw --profile` "
            "does, by setting OPENCLAW_STATE_DIR and OPENCLAW_CONFIG_PATH)"
        )
    selected, why = state_dir(env)
    steps.append(f"OpenClaw state dir: {selected} ({why})")
    for name in (CONFIG_FILENAME, *LEGACY_CONFIG_FILENAMES):
        candidate = os.path.join(selected, name)
        if os.path.exists(candidate):
            steps.append(f"found {candidate}")
            return ConfigLocation(candidate, False, True, steps)
        steps.append(f"no {candidate}")
    canonical = os.path.join(selected, CONFIG_FILENAME)
    if (env.get("OPENCLAW_STATE_DIR") or "").strip():
        steps.append(f"OPENCLAW_STATE_DIR is set, so the config is {canonical} (missing)")
        return ConfigLocation(canonical, False, False, steps)
    home = effective_home(env)
    for dirname in (STATE_DIRNAME, *LEGACY_STATE_DIRNAMES):
        for name in (CONFIG_FILENAME, *LEGACY_CONFIG_FILENAMES):
            candidate = os.path.join(home, dirname, name)
            if os.path.dirname(candidate) == selected:
                continue  # already looked
            if os.path.exists(candidate):
                steps.append(f"found {candidate}")
                return ConfigLocation(candidate, False, True, steps)
            steps.append(f"no {candidate}")
    steps.append(f"no config file: built-in defaults ({canonical} would be used)")
    return ConfigLocation(canonical, False, False, steps)


def include_roots(env: Env) -> list[str]:
    """OPENCLAW_INCLUDE_ROOTS: extra directories `$include` may reach (`:`-separated)."""
    raw = (env.get("OPENCLAW_INCLUDE_ROOTS") or "").strip()
    roots: list[str] = []
    for entry in raw.split(os.pathsep) if raw else ():
        entry = entry.strip()
        if entry:
            resolved = resolve_user_path(entry, env)
            if resolved not in roots:
                roots.append(resolved)
    return roots


# -- reading: size bound, fast JSON5, $include (includes.ts) ----------------------------------


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


_TOKEN = re.compile(
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
_SIMPLE_ESCAPE = re.compile(r"\\[^\"\\/bfnrtu]")


def _json5_to_json(text: str) -> str | None:
    """Rewrite the JSON5 most files use into JSON; None when something needs the full parser."""
    out: list[str] = []
    pos = 0
    n = len(text)
    match = _TOKEN.match
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
            if _SIMPLE_ESCAPE.search(token):
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


# -- smart-search's own state directory (RULINGS §2) ------------------------------------------


def skill_state_dir(env: Env, configured: str | None) -> tuple[str, str]:
    """SMART_SEARCH_STATE_DIR, else config `state_dir`, else <OpenClaw state dir>/workspace/shared.

    OPENCLAW_WORKSPACE_DIR never moves it: one install keeps one ledger.
    """
    explicit = env.get("SMART_SEARCH_STATE_DIR")
    if explicit:
        return _expand(explicit, env), "SMART_SEARCH_STATE_DIR is set"
    if configured:
        return _expand(configured, env), 'config key "state_dir" is set'
    base, why = state_dir(env)
    why = f"<OpenClaw state dir>/workspace/shared, {why}"
    return os.path.join(base, "workspace", "shared"), why


def _expand(path: str, env: Env) -> str:
    if path == "~" or path.startswith("~/"):
        home = _home_value(env.get("HOME")) or os.path.expanduser("~")
        return home + path[1:]
    return path


def legacy_ledger_dir(env: Env, configured: str | None, chosen: str) -> str | None:
    """The per-workspace state dir an earlier release used, when it differs from `chosen`."""
    if env.get("SMART_SEARCH_STATE_DIR") or configured:
        return None
    workspace = (env.get("OPENCLAW_WORKSPACE_DIR") or "").strip()
    if not workspace:
        return None
    old = os.path.join(os.path.expanduser(workspace), "shared")
    if os.path.abspath(old) == os.path.abspath(chosen):
        return None
    return old
