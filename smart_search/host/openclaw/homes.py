"""OpenClaw's home directory and `~` expansion, as its home-dir.ts resolves them.

Mirrored from `home-dir-D0b-ywue.mjs` and `home-dir-BKwhAL2c.mjs` in the npm package
`openclaw@2026.9.6`: `resolveEffectiveHomeDir` (OPENCLAW_HOME, then HOME, USERPROFILE) and
`resolveHomeRelativePath` (`~` expansion).
"""

from __future__ import annotations

import os
from collections.abc import Mapping

# The environment every resolver here reads (os.environ, or a test's dict).
Env = Mapping[str, str]


def home_value(value: str | None) -> str | None:
    """A variable's value as OpenClaw reads a home: None when blank, "undefined" or "null"."""
    value = (value or "").strip()
    return value if value and value not in ("undefined", "null") else None


def _raw_os_home(env: Env) -> str | None:
    found = home_value(env.get("HOME")) or home_value(env.get("USERPROFILE"))
    if found:
        return found
    try:
        import pwd

        return home_value(pwd.getpwuid(os.getuid()).pw_dir)
    except (ImportError, KeyError, OSError):
        return None


def effective_home(env: Env) -> str:
    """OPENCLAW_HOME (its `~` expanded against the OS home), else HOME, USERPROFILE, else cwd."""
    explicit = home_value(env.get("OPENCLAW_HOME"))
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
