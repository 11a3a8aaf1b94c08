"""smart-search's own state directory (RULINGS 2), and where an earlier release kept its ledger.

The default sits inside OpenClaw's state directory (locations.state_dir).
"""

from __future__ import annotations

import os

from smart_search.host.openclaw.homes import Env, home_value
from smart_search.host.openclaw.locations import state_dir


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
        home = home_value(env.get("HOME")) or os.path.expanduser("~")
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
