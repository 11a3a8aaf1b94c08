"""OpenClaw's state directory and the config file it reads, as its state-dir.ts and paths.ts
resolve them.

Mirrored from `paths-DehQwyE0.mjs` in the npm package `openclaw@2026.9.6`: `resolveStateDir`,
`resolveConfigPath`, `resolveConfigPathCandidate`, `resolveDefaultConfigCandidates`,
`resolveIncludeRoots`. Its read path (`io.read-helpers-DfFQ-qoh.mjs`) opens
`resolveConfigPath(env, resolveStateDir(env))`. `openclaw --profile NAME`
(`profile-wa21S6WO.mjs`, `profile-utils-D5FwriYc.mjs`) sets OPENCLAW_STATE_DIR=~/.openclaw-NAME
and OPENCLAW_CONFIG_PATH in its own environment (which the commands it runs inherit);
OPENCLAW_PROFILE alone moves nothing.
"""

from __future__ import annotations

import os

from smart_search.host.openclaw.homes import Env, effective_home, home_value, resolve_user_path

CONFIG_FILENAME = "openclaw.json"
LEGACY_CONFIG_FILENAMES = ("clawdbot.json",)
STATE_DIRNAME = ".openclaw"
LEGACY_STATE_DIRNAMES = (".clawdbot",)


def state_dir(env: Env) -> tuple[str, str]:
    """OpenClaw's state directory and why: (path, reason)."""
    override = (env.get("OPENCLAW_STATE_DIR") or "").strip()
    if override:
        return resolve_user_path(override, env), "OPENCLAW_STATE_DIR is set"
    home = effective_home(env)
    home_why = "OPENCLAW_HOME" if home_value(env.get("OPENCLAW_HOME")) else "the home directory"
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
