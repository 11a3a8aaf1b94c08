"""openclaw.json → one typed `Settings` object, read afresh on every call (RULINGS §2).

What each config key is (its type, default, bounds and one line of docs) is the table in
config_keys.py; this module reads the skill's section (config_entry.py finds it) and checks every
key through the check its kind names, so a key's rules are written once.
"""

from __future__ import annotations

import os
import re
from typing import Any, NamedTuple

import orjson

from . import openclaw
from .config_entry import (
    API_KEY_NAMES,
    api_key_sources,
    find_api_key,
    layout_warnings,
    skill_section,
    substitute_variables,
)
from .config_entry import SKILL_NAME as SKILL_NAME  # re-exported
from .config_entry import configured_key_values as configured_key_values  # re-exported
from .config_keys import (
    DEFAULT_GEMINI_MODEL as DEFAULT_GEMINI_MODEL,  # re-exported
)
from .config_keys import (
    DEFAULT_MONTHLY_LIMITS as DEFAULT_MONTHLY_LIMITS,  # re-exported
)
from .config_keys import (
    DEFAULT_RESET_TIMEZONES as DEFAULT_RESET_TIMEZONES,  # re-exported
)
from .config_keys import (
    MAX_COUNT,
    TOP_LEVEL,
    ConfigKey,
    fields_of,
    unknown_key_warning,
    unknown_keys,
)
from .errors import ConfigError

# The registries, once: every module names providers and engines through these.
PROVIDERS = ("gemini", "brave")
ENGINES = ("google", "bing", "duckduckgo")
# The chat agent of Strategy B (spec §4), always known, also under strict_agents.
GENERAL_AGENT = "general"

# What an API key may hold: printable ASCII. CR/LF would split the header, and httpx sends header
# values as ASCII (anything else raised deep inside the request, with the key in the traceback).
_HEADER_SAFE = re.compile(r"[\x20-\x7e]+")
_AGENT_ID = re.compile(r"[a-z0-9-]+")
_LOOPBACK_HOSTS = ("localhost", "::1", "[::1]")
# Gemini 2.x bills per grounded prompt; Gemini 3 and later per search query the model runs.
_PER_PROMPT_GEMINI = re.compile(r"gemini-(1|2)(\.|-)")


class Secret:
    """An API key that cannot leak by accident: its repr and str never show the value."""

    __slots__ = ("_value",)

    def __init__(self, value: str) -> None:
        self._value = value

    def reveal(self) -> str:
        return self._value

    def __repr__(self) -> str:
        return "Secret('***')"

    __str__ = __repr__


class Settings(NamedTuple):
    """Everything a call needs from config and environment, already checked and defaulted.

    Immutable: one call's view of the config never changes under it (`_replace` makes a
    variant). A NamedTuple rather than a frozen dataclass: no import (`typing` is loaded
    anyway) and no per-field `object.__setattr__` when it is built on every call."""

    gemini_model: str
    default_provider: str
    strict_agents: bool
    retry_max_attempts: int
    retry_base_delay: int
    web_fetch_min_interval_ms: int
    circuit_failure_threshold: int
    circuit_reset_seconds: int
    request_timeout_ms: int
    total_timeout_ms: int
    lock_timeout_ms: int
    log_retention_days: int
    max_result_chars: int
    brave_count: int
    finance_keywords: tuple[str, ...]
    brave_keywords: tuple[str, ...]
    daily_limits: dict[str, int]
    monthly_limits: dict[str, int]
    reset_timezones: dict[str, str]
    units: dict[str, str]
    prices_per_1000: dict[str, float | None]
    max_units_per_call: dict[str, int]
    currencies: dict[str, str]
    agent_allocations: dict[str, dict[str, int]]
    default_allocation: dict[str, int]
    endpoints: dict[str, str]
    state_dir: str
    timezone: str | None
    api_keys: dict[str, Secret | None]
    state_backend: dict[str, Any]
    max_unconfigured_agents: int
    cache: dict[str, Any]
    config_path: str | None
    # Layouts OpenClaw would reject and unknown config keys: every tool result carries them.
    warnings: tuple[str, ...] = ()
    # The per-workspace state dir an earlier release used (merged once into this one), or None.
    legacy_state_dir: str | None = None
    # Every config file read (the main file and its $includes): a long-running server re-reads
    # the config when any of them changes.
    config_files: tuple[str, ...] = ()
    # The MCP server's agent_id for callers that omit it (`smart-search mcp --agent-id` wins).
    mcp_agent_id: str | None = None
    # Deep search (issue 15): the unit budget of one deep call, rank-fusion weights per source,
    # extra tracking parameter names (a trailing `*` makes a prefix).
    deep_max_units: int = 2
    source_weights: dict[str, float] = {}  # never mutated
    tracking_params: tuple[str, ...] = ()

    def is_configured_agent(self, agent_id: str) -> bool:
        return agent_id in self.agent_allocations


def load_settings(environ: dict[str, str] | os._Environ[str] | None = None) -> Settings:
    """Read openclaw.json (if any) and the environment into a `Settings`."""
    env = os.environ if environ is None else environ
    path, explicit = _config_path(env)
    try:
        root, files = _read_config_files(path, explicit, env)
        section, skill_env = skill_section(root)
        # Walking every string costs ~3 ms per 10,000 configured agents: skip it when the
        # section holds no `${` at all (one serialisation answers that).
        try:
            has_variables = b"${" in orjson.dumps(section)
        except orjson.JSONEncodeError:  # nested past orjson's depth: the walk reports it
            has_variables = True
        if has_variables:
            section = substitute_variables(section, env, "")
        settings = _build(section, root, skill_env, env, path if root else None)
    except RecursionError:
        # A parser or a walk over a config nested hundreds of levels deep ran out of stack.
        raise ConfigError("openclaw.json is nested too deeply.") from None
    warnings = tuple(layout_warnings(root)) + tuple(
        unknown_key_warning(key, near) for key, near in unknown_keys(section)
    )
    configured = section.get("state_dir")
    return settings._replace(
        warnings=warnings,
        legacy_state_dir=openclaw.legacy_ledger_dir(env, configured, settings.state_dir),
        config_files=tuple(files),
    )


def _config_path(env: Any) -> tuple[str, bool]:
    """The file OpenClaw itself reads, and whether a variable named it (openclaw.py)."""
    location = openclaw.config_location(env)
    return location.path, location.explicit


def _read_config_files(path: str, explicit: bool, env: Any) -> tuple[dict[str, Any], list[str]]:
    """The config object and every file read for it (the main file and its includes)."""
    location = openclaw.ConfigLocation(path, explicit, True, [])
    return openclaw.load_config(location, env)


def _build(
    section: dict[str, Any],
    root: dict[str, Any],
    skill_env: dict[str, Any],
    env: Any,
    config_path: str | None,
) -> Settings:
    """Each key of the table checked in the table's order (the first bad key is the one named)."""
    values: dict[str, Any] = {"config_path": config_path}
    for key in TOP_LEVEL:
        if key.kind == "providers":
            values.update(_providers(section.get(key.name, key.default), values["gemini_model"]))
        else:
            values[key.name] = _CHECKS[key.kind](section.get(key.name, key.default), key.name, key)
    values["state_dir"] = _state_dir(env, values["state_dir"])
    sources = api_key_sources(env, root, skill_env)
    values["api_keys"] = {
        provider: _api_key(name, sources, env)
        for provider, name in zip(PROVIDERS, API_KEY_NAMES, strict=True)
    }
    return Settings(**values)


def _api_key(name: str, sources: Any, env: Any) -> Secret | None:
    found = find_api_key(name, sources, env)
    if found is None:
        return None
    value = found[1]
    # Never the value itself in the message: it is a secret.
    if not _HEADER_SAFE.fullmatch(value):
        raise ConfigError(f"{name} contains characters that cannot be sent in an HTTP header.")
    return Secret(value)


def _either(choices: tuple[str, ...]) -> str:
    return " or ".join(f'"{choice}"' for choice in choices)


# --- one check per kind of key: (value, dotted key, table row) -> the checked value ------------


def _string(value: Any, name: str, key: ConfigKey | None = None) -> str:
    if not isinstance(value, str) or not value:
        raise ConfigError(f'Config key "{name}" must be a non-empty string.')
    return value


def _model(value: Any, name: str, key: ConfigKey) -> str:
    model = _string(value, name)
    if not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9._-]*", model):
        raise ConfigError(f'Config key "{name}" must be a model name like gemini-2.5-flash.')
    return model


def _provider(value: Any, name: str, key: ConfigKey) -> str:
    provider = _string(value, name)
    if provider not in PROVIDERS:
        raise ConfigError(f'Config key "{name}" must be {_either(PROVIDERS)}.')
    return provider


def _choice(value: Any, name: str, key: ConfigKey) -> str:
    if value not in key.choices:
        raise ConfigError(f'Config key "{name}" must be {_either(key.choices)}.')
    return value


def _bool(value: Any, name: str, key: ConfigKey) -> bool:
    if not isinstance(value, bool):
        raise ConfigError(f'Config key "{name}" must be true or false.')
    return value


def _whole(value: Any, name: str, key: ConfigKey) -> int:
    # bool is an int in Python; `true` is never a number of milliseconds.
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    if isinstance(value, bool) or not isinstance(value, int):
        raise ConfigError(f'Config key "{name}" must be a whole number.')
    low, high = key.low, key.high
    if value < low or (high is not None and value > high):
        bound = f"from {low} to {high}" if high is not None else f"at least {low}"
        raise ConfigError(f'Config key "{name}" must be {bound}.')
    return value


def _count(value: Any, name: str, key: ConfigKey | None = None) -> int:
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= MAX_COUNT:
        raise ConfigError(f'Config key "{name}" must be a whole number from 0 to {MAX_COUNT}.')
    return value


def _keywords(value: Any, name: str, key: ConfigKey) -> tuple[str, ...]:
    if value is None or value is key.default:
        return key.default
    if not isinstance(value, list) or not all(isinstance(k, str) and k.strip() for k in value):
        raise ConfigError(f'Config key "{name}" must be an array of non-empty strings.')
    return tuple(k.strip().lower() for k in value)


def _zone(value: Any, name: str, key: ConfigKey | None = None) -> str | None:
    """An IANA zone name that this machine knows, checked once here (not at every use); an unset
    `timezone` (no default) stays None."""
    if value is None and key is not None and key.default is None:
        return None
    from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

    if not isinstance(value, str) or not value:
        raise ConfigError(f'Config key "{name}" must be an IANA zone name like "Europe/Warsaw".')
    try:
        ZoneInfo(value)
    except (ZoneInfoNotFoundError, ValueError):
        raise ConfigError(f'Config key "{name}" names an unknown zone: "{value[:64]}".') from None
    return value


def _unit(value: Any, name: str, key: ConfigKey) -> str:
    if value not in key.choices:
        raise ConfigError(f'Config key "{name}" must be {_either(key.choices)}.')
    return value


def _price(value: Any, name: str, key: ConfigKey) -> float | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float) or not 0 <= value <= MAX_COUNT:
        raise ConfigError(f'Config key "{name}" must be a number, 0 or more.')
    return float(value)


def _currency(value: Any, name: str, key: ConfigKey) -> str:
    if not isinstance(value, str) or not re.fullmatch(r"[A-Z]{3}", value):
        raise ConfigError(f'Config key "{name}" must be a currency code like "USD".')
    return value


_PROVIDER_KEYS = fields_of("providers.<p>")


def _providers(given: Any, gemini_model: str) -> dict[str, dict[str, Any]]:
    """`providers.<p>`: both budget windows, the window clock, the billing unit and the price;
    each field of the table's `providers.<p>.x` rows becomes a Settings dict keyed by provider."""
    if not isinstance(given, dict):
        raise ConfigError('Config key "providers" must be an object.')
    for name, entry in given.items():
        if name not in PROVIDERS:
            raise ConfigError(
                f'Config key "providers.{name}" is not a provider ({", ".join(PROVIDERS)}).'
            )
        if not isinstance(entry, dict):
            raise ConfigError(f'Config key "providers.{name}" must be an object.')
    out: dict[str, dict[str, Any]] = {key.field: {} for key in _PROVIDER_KEYS}
    for p in PROVIDERS:
        entry = given.get(p, {})
        for key in _PROVIDER_KEYS:
            leaf = key.name.rsplit(".", 1)[1]
            default = key.default[p] if isinstance(key.default, dict) else key.default
            if isinstance(key.choices, dict):
                key = key._replace(choices=key.choices[p])
            if leaf == "unit" and p == "gemini" and _PER_PROMPT_GEMINI.match(gemini_model):
                default = "request"
            elif leaf == "max_units_per_call":
                # Gemini 3 may run several search queries for one prompt; one request is one unit.
                default = 3 if out["units"][p] == "search_query" else 1
            value = _CHECKS[key.kind](entry.get(leaf, default), f"providers.{p}.{leaf}", key)
            out[key.field][p] = value
        out["max_units_per_call"][p] = out["max_units_per_call"][p] or 1
    return out


def _allocations(value: Any, name: str, key: ConfigKey) -> dict[str, dict[str, int]]:
    if not isinstance(value, dict):
        raise ConfigError(f'Config key "{name}" must be an object.')
    out = {}
    for agent_id, entry in value.items():
        if not _AGENT_ID.fullmatch(agent_id):
            raise ConfigError(
                f'Config key "{name}.{agent_id[:64]}" is not a valid agent id '
                "(lowercase letters, numbers and hyphens)."
            )
        out[agent_id] = _allocation(entry, f"{name}.{agent_id}")
    return out


def _allocation(entry: Any, name: str, key: ConfigKey | None = None) -> dict[str, int]:
    if not isinstance(entry, dict):
        raise ConfigError(
            f'Config key "{name}" must be an object like {{"gemini": 5, "brave": 0}}.'
        )
    for provider in entry:
        if provider not in PROVIDERS:
            raise ConfigError(
                f'Config key "{name}.{provider}" is not a provider ({", ".join(PROVIDERS)}).'
            )
    out = {}
    for p in PROVIDERS:
        value = entry.get(p, 0)
        # The common case first, without building the key's name (100,000 agents add up).
        if type(value) is int and 0 <= value <= MAX_COUNT:
            out[p] = value
        else:
            out[p] = _count(value, f"{name}.{p}")
    return out


def _endpoints(value: Any, name: str, key: ConfigKey) -> dict[str, str]:
    if not isinstance(value, dict):
        raise ConfigError(f'Config key "{name}" must be an object.')
    endpoints = dict(key.default)
    if value is key.default:  # unset: the built-in hosts, nothing to check
        return endpoints
    for source, url in value.items():
        dotted = f"{name}.{source}"
        if source not in endpoints:
            raise ConfigError(f'Config key "{dotted}" is not one of {", ".join(key.default)}.')
        if not isinstance(url, str) or not is_allowed_base_url(url):
            raise ConfigError(
                f'Config key "{dotted}" must be an https:// URL (http:// only for loopback hosts).'
            )
        endpoints[source] = url.rstrip("/")
    return endpoints


def _weights(value: Any, name: str, key: ConfigKey) -> dict[str, float]:
    """`source_weights` (source name → positive number) for deep search's merge (issue 15)."""
    from math import isfinite

    if not isinstance(value, dict):
        raise ConfigError(f'Config key "{name}" must be an object.')
    sources = (*PROVIDERS, *ENGINES)
    for source, weight in value.items():
        if source not in sources:
            raise ConfigError(
                f'Config key "{name}.{source[:64]}" is not a source ({", ".join(sources)}).'
            )
        if (
            isinstance(weight, bool)
            or not isinstance(weight, int | float)
            or not isfinite(weight)
            or not 0 < weight <= MAX_COUNT
        ):
            raise ConfigError(f'Config key "{name}.{source}" must be a positive number.')
    return {source: float(w) for source, w in value.items()}


def _names(value: Any, name: str, key: ConfigKey) -> tuple[str, ...]:
    """`tracking_params`: extra parameter names deep search's merge ignores."""
    if not isinstance(value, list | tuple) or not all(
        isinstance(t, str) and t.strip() and len(t) <= 200 for t in value
    ):
        raise ConfigError(f'Config key "{name}" must be an array of parameter names.')
    return tuple(t.strip() for t in value)


def _path(value: Any, name: str, key: ConfigKey) -> str | None:
    """`state_dir` as configured (None: unset); `_build` resolves it like OpenClaw would."""
    if value is not None and (not isinstance(value, str) or not value):
        raise ConfigError(f'Config key "{name}" must be a non-empty string.')
    return value


def _agent_id(value: Any, name: str, key: ConfigKey) -> str | None:
    if value is not None and (
        not isinstance(value, str) or not _AGENT_ID.fullmatch(value) or len(value) > 64
    ):
        raise ConfigError(
            f'Config key "{name}" must be an agent id '
            "(lowercase letters, digits and hyphens, at most 64 characters)."
        )
    return value


def _state_backend(value: Any, name: str, key: ConfigKey) -> dict[str, Any]:
    """`state_backend`: where shared state lives. Files in the state directory by default;
    `{"kind": "redis", "url": ..., "prefix": ..., "on_unavailable": "refuse"|"web_only"}` for a
    fleet (store/redis.py checks the rest when it is configured)."""
    if not isinstance(value, dict):
        raise ConfigError(f'Config key "{name}" must be an object.')
    out = {**value}
    for field in _BACKEND_CHOICES:
        leaf = field.name.rsplit(".", 1)[1]
        out[leaf] = _choice(value.get(leaf, field.default), field.name, field)
    if out["kind"] == "redis":
        out.update(_redis_backend(value))
    return out


_BACKEND_CHOICES = tuple(key for key in fields_of("state_backend") if key.kind == "choice")
_REDIS_PREFIX = next(key for key in fields_of("state_backend") if key.kind == "redis_prefix")


def _redis_backend(backend: dict[str, Any]) -> dict[str, Any]:
    """`url` (redis:// or rediss://, required) and `prefix` of a Redis state backend. Messages
    never quote the URL: it may carry a password (`${VAR}` is substituted like every string)."""
    from urllib.parse import urlsplit

    url = backend.get("url")
    if not isinstance(url, str) or not url:
        raise ConfigError(
            'Config key "state_backend.url" is required for kind "redis" '
            "(redis://host:6379/0 or rediss://...)."
        )
    try:
        parts = urlsplit(url)
        parts.port  # noqa: B018 - raises ValueError on a bad port
    except ValueError:
        parts = None
    if parts is None or parts.scheme not in ("redis", "rediss") or not parts.hostname:
        raise ConfigError(
            'Config key "state_backend.url" must be a redis:// or rediss:// URL with a host.'
        )
    prefix = backend.get("prefix", _REDIS_PREFIX.default)
    if not isinstance(prefix, str) or not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9._:-]{0,63}", prefix):
        raise ConfigError(
            'Config key "state_backend.prefix" must be 1-64 letters, digits, ".", "_", ":" or "-".'
        )
    return {"url": url, "prefix": prefix}


_CACHE_KEYS = fields_of("cache")


def _cache(value: Any, name: str, key: ConfigKey) -> dict[str, Any]:
    """`cache`: the shared result cache (cache.py). A TTL of 0, or `enabled: false`, turns off
    serving from it for that class; unknown keys are refused so a typo never goes unnoticed."""
    if not isinstance(value, dict):
        raise ConfigError(f'Config key "{name}" must be an object.')
    leaves = [field.name.rsplit(".", 1)[1] for field in _CACHE_KEYS]
    for leaf in value:
        if leaf not in leaves:
            raise ConfigError(
                f'Config key "{name}.{str(leaf)[:64]}" is not one of {", ".join(leaves)}.'
            )
    return {
        leaf: _CHECKS[field.kind](value.get(leaf, field.default), field.name, field)
        for leaf, field in zip(leaves, _CACHE_KEYS, strict=True)
    }


# Each kind in config_keys.KEYS, and the check that reads it (`providers` is read by `_providers`).
_CHECKS = {
    "model": _model,
    "provider": _provider,
    "bool": _bool,
    "whole": _whole,
    "keywords": _keywords,
    "count": _count,
    "zone": _zone,
    "unit": _unit,
    "price": _price,
    "currency": _currency,
    "allocations": _allocations,
    "allocation": _allocation,
    "endpoints": _endpoints,
    "weights": _weights,
    "names": _names,
    "path": _path,
    "backend": _state_backend,
    "choice": _choice,
    "agent_id": _agent_id,
    "cache": _cache,
}


def is_allowed_base_url(url: str) -> bool:
    """https anywhere; plain http only to loopback, so a key never crosses a network in clear."""
    from urllib.parse import urlsplit

    try:
        parts = urlsplit(url)
        host = parts.hostname
        parts.port  # noqa: B018 - raises ValueError on a malformed port
    except ValueError:
        return False
    if not host or parts.query or parts.fragment or parts.username or parts.password:
        return False
    if parts.scheme == "https":
        return True
    if parts.scheme != "http":
        return False
    return is_loopback_host(host)


def is_loopback_host(host: str | None) -> bool:
    """127.0.0.0/8, ::1 or localhost: the one loopback rule (config and the HTTP layer)."""
    return host is not None and (host in _LOOPBACK_HOSTS or _is_loopback_ip(host))


def _is_loopback_ip(host: str) -> bool:
    import ipaddress

    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def default_state_dir(env: Any) -> str:
    """The state directory when no config could be read (where an internal fault is logged)."""
    return _state_dir(env, None)


def _state_dir(env: Any, configured: str | None) -> str:
    """SMART_SEARCH_STATE_DIR, else `state_dir`, else <OpenClaw state dir>/workspace/shared."""
    return openclaw.skill_state_dir(env, configured)[0]
