"""The skill's entry in openclaw.json: its config section, `${VAR}` substitution, the layouts
OpenClaw rejects, and the one walk that finds an API key (RULINGS 2).

config.py builds `Settings` from what this module finds; doctor reports where each API key came
from through the same walk, so the lookup order is written once.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from smart_search.errors import ConfigError
from smart_search.host import openclaw
from smart_search.sources import registry

SKILL_NAME = "smart-search"
ENTRY = f'skills.entries["{SKILL_NAME}"]'
LEGACY_SECTION = f'skills["{SKILL_NAME}"]'
API_KEY_NAMES = tuple(s.key_variable or "" for s in registry.sources("api"))
# Layouts OpenClaw 2026.9 rejects (its schema is strict outside `config`): still read, never quiet.
LEGACY_SECTION_WARNING = (
    'openclaw.json holds skills["smart-search"], a layout OpenClaw rejects (the whole file fails '
    'its validation): move those settings into skills.entries["smart-search"].config and any '
    'env keys into skills.entries["smart-search"].env.'
)

_VAR = re.compile(r"\$(\$?)\{([A-Z_][A-Z0-9_]*)\}")


def skill_section(root: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    """OpenClaw's `skills.entries["smart-search"].config`, else the spec's `skills.smart-search`;
    with the env block beside it."""
    skills = root.get("skills")
    if skills is None:
        return {}, {}
    if not isinstance(skills, dict):
        raise ConfigError('Config key "skills" must be an object.')
    entries = skills.get("entries")
    if isinstance(entries, dict) and isinstance(entries.get(SKILL_NAME), dict):
        entry = entries[SKILL_NAME]
        config = entry.get("config", {})
        if not isinstance(config, dict):
            raise ConfigError(f'Config key "skills.entries.{SKILL_NAME}.config" must be an object.')
        entry_env = entry.get("env", {})
        return config, entry_env if isinstance(entry_env, dict) else {}
    legacy = skills.get(SKILL_NAME)
    if legacy is None:
        return {}, {}
    if not isinstance(legacy, dict):
        raise ConfigError(f'Config key "skills.{SKILL_NAME}" must be an object.')
    legacy_env = legacy.get("env", {})
    return legacy, legacy_env if isinstance(legacy_env, dict) else {}


def legacy_env_warning(name: str) -> str:
    return (
        f"openclaw.json sets {name} directly in the top-level env block, which OpenClaw rejects "
        f"(the whole file fails its validation): move it to env.vars.{name} or to "
        f'skills.entries["smart-search"].env.{name}.'
    )


def layout_warnings(root: dict[str, Any]) -> list[str]:
    """One warning per layout in `root` that smart-search reads but OpenClaw would reject."""
    warnings = []
    skills = root.get("skills")
    if isinstance(skills, dict) and SKILL_NAME in skills:
        warnings.append(LEGACY_SECTION_WARNING)
    top_env = root.get("env")
    if isinstance(top_env, dict):
        warnings.extend(legacy_env_warning(n) for n in API_KEY_NAMES if n in top_env)
    return warnings


def substitute_variables(value: Any, env: Any, key: str | None = None) -> Any:
    """Replace `${VAR}` in every string from the environment (`$${VAR}` stays literal).

    With `key` (the config key path being walked), a variable that is unset or empty is a
    config_error naming it and the key: `"${UNSET}/x"` must not quietly become `"/x"`. Without it
    (API key values), an unset variable leaves the value empty: that key is not configured.
    """
    if isinstance(value, str):
        if "${" not in value:
            return value

        def replace(m: re.Match[str]) -> str:
            if m.group(1):
                return "${" + m.group(2) + "}"
            found = env.get(m.group(2), "")
            if not found and key is not None:
                raise ConfigError(
                    f'Config key "{key}" uses ${{{m.group(2)}}}, but the environment variable '
                    f"{m.group(2)} is not set (or is empty)."
                )
            return found

        return _VAR.sub(replace, value)
    if isinstance(value, dict):
        return {
            k: substitute_variables(v, env, None if key is None else _join(key, str(k)))
            for k, v in value.items()
        }
    if isinstance(value, list):
        return [
            substitute_variables(v, env, None if key is None else f"{key}[{i}]")
            for i, v in enumerate(value)
        ]
    return value


def _join(key: str, name: str) -> str:
    return f"{key}.{name[:64]}" if key else name[:64]


def api_key_sources(
    env: Mapping[str, Any], root: Any, skill_env: Mapping[str, Any]
) -> tuple[tuple[str, Mapping[str, Any]], ...]:
    """Where an API key is looked up, in order, first found wins (RULINGS 2): the process
    environment, the skill entry's env, the top-level env.vars, a key directly in the top-level
    env (older files). Each with the label doctor shows."""
    top_env = root.get("env") if isinstance(root, dict) else None
    top_env = top_env if isinstance(top_env, dict) else {}
    top_vars = top_env.get("vars")
    top_vars = top_vars if isinstance(top_vars, dict) else {}
    skills = root.get("skills") if isinstance(root, dict) else None
    legacy = isinstance(skills, dict) and not (
        isinstance(skills.get("entries"), dict)
        and isinstance(skills["entries"].get(SKILL_NAME), dict)
    )
    return (
        ("environment", env),
        (f"{LEGACY_SECTION}.env (legacy)" if legacy else f"{ENTRY}.env", skill_env),
        ("env.vars", top_vars),
        ("env (legacy, rejected by OpenClaw)", top_env),
    )


def find_api_key(
    name: str, sources: tuple[tuple[str, Mapping[str, Any]], ...], env: Mapping[str, Any]
) -> tuple[str, str] | None:
    """(label of the source, value) of the first non-empty `name` in `sources`, `${VAR}`
    substituted and stripped; None when no source sets it."""
    for label, source in sources:
        value = source.get(name)
        if isinstance(value, str):
            value = substitute_variables(value, env).strip()
            if value:
                return label, value
    return None


def _host_key_values(env: Any, root: dict[str, Any]) -> list[str]:
    """The keys OpenClaw holds for the sources (host_keys.py), each that can be read."""
    from smart_search.host.host_keys import HostEnv, find

    host_env = HostEnv(env, root)
    found = []
    for source in registry.sources("api"):
        try:
            value = find(source, root, host_env).value
        except Exception:  # noqa: BLE001 - best effort, per source
            continue
        if value:
            found.append(value)
    return found


def configured_key_values(env: Any) -> list[str]:
    """Every raw value the API key variables hold (environment and openclaw.json), valid or not,
    for scrubbing an internal error's traceback when `Settings` could not be built. Never raises.
    """
    found: list[str] = []
    try:
        sources: tuple[tuple[str, Mapping[str, Any]], ...] = (("environment", env),)
        try:
            location = openclaw.config_location(env)
            root = openclaw.load_config(location, env)[0]
            sources = api_key_sources(env, root, skill_section(root)[1])
            found += _host_key_values(env, root)
        except Exception:  # noqa: BLE001 - best effort: the environment alone then
            pass
        for _, source in sources:
            for name in (*API_KEY_NAMES, *(n + "S" for n in API_KEY_NAMES if n)):
                value = source.get(name)
                if isinstance(value, str):
                    found += [value, value.strip(), substitute_variables(value, env).strip()]
                    if name not in API_KEY_NAMES:  # a key pool: each of its keys too
                        found += [v.strip() for v in substitute_variables(value, env).split(",")]
    except Exception:  # noqa: BLE001
        pass
    return [value for value in found if value]
