"""openclaw.json → one typed `Settings` object, read afresh on every call (RULINGS §2).

Every config key, its default and its type check lives in `_TUNABLES` / `load_settings` below:
this is the one file to read for "what does key X do and what is its default".
"""

from __future__ import annotations

import os
import re
from typing import Any

from .errors import CANNOT_READ_CONFIG, ConfigError

SKILL_NAME = "smart-search"
# The registries, once: every module names providers and engines through these.
PROVIDERS = ("gemini", "brave")
ENGINES = ("google", "bing", "duckduckgo")
# The chat agent of Strategy B (spec §4), always known, also under strict_agents.
GENERAL_AGENT = "general"

# Spec §5's tables; configurable through finance_keywords / brave_keywords.
DEFAULT_FINANCE_KEYWORDS = (
    "stock",
    "share price",
    "nse",
    "bse",
    "wse",
    "nyse",
    "nasdaq",
    "earnings",
    "ipo",
    "dividend",
    "funding round",
    "acquisition",
    "merger",
    "valuation",
    "competitor",
    "market share",
    "breaking",
    "just announced",
    "today",
    "hours ago",
    "spearfox",
    "fifthspear",
)
DEFAULT_BRAVE_KEYWORDS = ("space", "astronomy", "nasa", "esa", "cosmos")

DEFAULT_ENDPOINTS = {
    "gemini": "https://generativelanguage.googleapis.com",
    "brave": "https://api.search.brave.com",
    "google": "https://www.google.com",
    "bing": "https://www.bing.com",
    "duckduckgo": "https://html.duckduckgo.com",
}

# gemini-2.0-flash (the spec's default) is shut down; this alias follows Google's current flash.
DEFAULT_GEMINI_MODEL = "gemini-flash-latest"
# Free-tier ceilings: Gemini grounding 1500/day, Brave 2000/month ≈ 66/day.
DEFAULT_DAILY_LIMITS = {"gemini": 1500, "brave": 66}
# Monthly free allowances in 2026 (README, "The quota model"): Brave's $5 monthly credit buys about
# 1,000 requests; Gemini 3 grounding includes 5,000 search queries a month. A default install never
# runs into a paid overage.
DEFAULT_MONTHLY_LIMITS = {"gemini": 5000, "brave": 1000}
# Each provider's windows follow its own clock: Gemini's daily counters reset at midnight Pacific.
DEFAULT_RESET_TIMEZONES = {"gemini": "America/Los_Angeles", "brave": "UTC"}
UNITS = ("search_query", "request")
# No count or limit anywhere (config or ledger) may exceed this: 1e30 is a typo, not a budget.
MAX_COUNT = 10**9
# The predecessor skill's allocation for an agent that is not in config.
DEFAULT_ALLOCATION = {"gemini": 5, "brave": 0}

# key: (default, minimum, maximum) for the whole-number tunables.
_TUNABLES: dict[str, tuple[int, int, int | None]] = {
    "retry_max_attempts": (3, 1, 10),
    "retry_base_delay": (500, 0, None),
    "web_fetch_min_interval_ms": (2000, 0, None),
    "circuit_failure_threshold": (3, 1, None),
    "circuit_reset_seconds": (60, 0, None),
    "request_timeout_ms": (10000, 1, None),
    "total_timeout_ms": (30000, 1, None),
    "lock_timeout_ms": (5000, 0, None),
    "log_retention_days": (30, 1, None),
    "max_result_chars": (10000, 100, None),
    "brave_count": (10, 1, 20),
    # Unconfigured agents that may spend per day (strict_agents off): invented ids can't grow the
    # ledger without bound.
    "max_unconfigured_agents": (1000, 0, MAX_COUNT),
}

_VAR = re.compile(r"\$(\$?)\{([A-Z_][A-Z0-9_]*)\}")
_AGENT_ID = re.compile(r"[a-z0-9-]+")
_LOOPBACK_HOSTS = ("localhost", "::1", "[::1]")


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


class Settings:
    """Everything a call needs from config and environment, already checked and defaulted."""

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
    agent_allocations: dict[str, dict[str, int]]
    default_allocation: dict[str, int]
    endpoints: dict[str, str]
    state_dir: str
    timezone: str | None
    api_keys: dict[str, Secret | None]
    state_backend: dict[str, Any]
    max_unconfigured_agents: int
    config_path: str | None

    def __init__(self, **values: Any) -> None:
        self.__dict__.update(values)

    def is_configured_agent(self, agent_id: str) -> bool:
        return agent_id in self.agent_allocations


def load_settings(environ: dict[str, str] | os._Environ[str] | None = None) -> Settings:
    """Read openclaw.json (if any) and the environment into a `Settings`."""
    env = os.environ if environ is None else environ
    path, explicit = _config_path(env)
    root = _read_config(path, explicit)
    section, skill_env = _skill_section(root)
    section = _substitute(section, env)
    return _build(section, root, skill_env, env, path if root else None)


def _config_path(env: Any) -> tuple[str, bool]:
    explicit = env.get("OPENCLAW_CONFIG_PATH")
    if explicit:
        return os.path.expanduser(explicit), True
    return os.path.join(_home(env), ".openclaw", "openclaw.json"), False


def _home(env: Any) -> str:
    return env.get("HOME") or os.path.expanduser("~")


def _read_config(path: str, explicit: bool) -> dict[str, Any]:
    try:
        with open(path, "rb") as fh:
            raw = fh.read()
    except FileNotFoundError:
        if explicit:
            raise ConfigError(CANNOT_READ_CONFIG) from None
        return {}
    except OSError:
        raise ConfigError(CANNOT_READ_CONFIG) from None
    import orjson

    try:
        root = orjson.loads(raw)
    except orjson.JSONDecodeError:
        root = _parse_json5(raw)
    if not isinstance(root, dict):
        raise ConfigError("openclaw.json must hold a JSON object at the top level.")
    return root


def _parse_json5(raw: bytes) -> Any:
    # Real OpenClaw files carry comments and trailing commas; only they pay for json5's import.
    import json5

    try:
        return json5.loads(raw.decode("utf-8"))
    except (ValueError, UnicodeDecodeError) as exc:
        # Name the line only: the parser's own message may quote file content (keys included).
        line = re.search(r":(\d+)", str(exc))
        where = f" near line {line.group(1)}" if line else ""
        raise ConfigError(f"openclaw.json is not valid JSON5{where}.") from None


def _skill_section(root: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    """OpenClaw's `skills.entries["smart-search"].config`, else the spec's `skills.smart-search`."""
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


def _substitute(value: Any, env: Any) -> Any:
    """Replace `${VAR}` in every string from the environment (`$${VAR}` stays literal)."""
    if isinstance(value, str):
        if "${" not in value:
            return value
        return _VAR.sub(
            lambda m: "${" + m.group(2) + "}" if m.group(1) else env.get(m.group(2), ""), value
        )
    if isinstance(value, dict):
        return {k: _substitute(v, env) for k, v in value.items()}
    if isinstance(value, list):
        return [_substitute(v, env) for v in value]
    return value


def _build(
    section: dict[str, Any],
    root: dict[str, Any],
    skill_env: dict[str, Any],
    env: Any,
    config_path: str | None,
) -> Settings:
    values: dict[str, Any] = {"config_path": config_path}
    values["gemini_model"] = _string(section, "gemini_model", DEFAULT_GEMINI_MODEL)
    if not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9._-]*", values["gemini_model"]):
        raise ConfigError('Config key "gemini_model" must be a model name like gemini-2.5-flash.')
    provider = _string(section, "default_provider", "brave")
    if provider not in PROVIDERS:
        raise ConfigError('Config key "default_provider" must be "gemini" or "brave".')
    values["default_provider"] = provider
    strict = section.get("strict_agents", False)
    if not isinstance(strict, bool):
        raise ConfigError('Config key "strict_agents" must be true or false.')
    values["strict_agents"] = strict
    for key, (default, low, high) in _TUNABLES.items():
        values[key] = _whole(section, key, default, low, high)
    values["finance_keywords"] = _keywords(section, "finance_keywords", DEFAULT_FINANCE_KEYWORDS)
    values["brave_keywords"] = _keywords(section, "brave_keywords", DEFAULT_BRAVE_KEYWORDS)
    values.update(_providers(section, values["gemini_model"]))
    values["agent_allocations"] = _allocations(section)
    default_alloc = section.get("default_allocation", DEFAULT_ALLOCATION)
    values["default_allocation"] = _allocation("default_allocation", default_alloc)
    values["endpoints"] = _endpoints(section)
    state_dir = section.get("state_dir")
    if state_dir is not None and (not isinstance(state_dir, str) or not state_dir):
        raise ConfigError('Config key "state_dir" must be a non-empty string.')
    values["state_dir"] = _state_dir(env, state_dir)
    values["state_backend"] = _state_backend(section)
    tz = section.get("timezone")
    values["timezone"] = None if tz is None else _zone(tz, "timezone")
    values["api_keys"] = {
        "gemini": _api_key("GEMINI_API_KEY", env, skill_env, root),
        "brave": _api_key("BRAVE_API_KEY", env, skill_env, root),
    }
    return Settings(**values)


def _string(section: dict[str, Any], key: str, default: str) -> str:
    value = section.get(key, default)
    if not isinstance(value, str) or not value:
        raise ConfigError(f'Config key "{key}" must be a non-empty string.')
    return value


def _whole(section: dict[str, Any], key: str, default: int, low: int, high: int | None) -> int:
    value = section.get(key, default)
    # bool is an int in Python; `true` is never a number of milliseconds.
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    if isinstance(value, bool) or not isinstance(value, int):
        raise ConfigError(f'Config key "{key}" must be a whole number.')
    if value < low or (high is not None and value > high):
        bound = f"from {low} to {high}" if high is not None else f"at least {low}"
        raise ConfigError(f'Config key "{key}" must be {bound}.')
    return value


def _keywords(section: dict[str, Any], key: str, default: tuple[str, ...]) -> tuple[str, ...]:
    value = section.get(key)
    if value is None:
        return default
    if not isinstance(value, list) or not all(isinstance(k, str) and k.strip() for k in value):
        raise ConfigError(f'Config key "{key}" must be an array of non-empty strings.')
    return tuple(k.strip().lower() for k in value)


def _providers(section: dict[str, Any], gemini_model: str) -> dict[str, dict[str, Any]]:
    """`providers.<p>`: both budget windows, the window clock, the billing unit and the price."""
    providers = section.get("providers", {})
    if not isinstance(providers, dict):
        raise ConfigError('Config key "providers" must be an object.')
    for name, entry in providers.items():
        if name not in PROVIDERS:
            raise ConfigError(f'Config key "providers.{name}" is not a provider (gemini, brave).')
        if not isinstance(entry, dict):
            raise ConfigError(f'Config key "providers.{name}" must be an object.')
    # Gemini 2.x bills per grounded prompt; Gemini 3 and later per search query the model runs.
    legacy_model = re.match(r"gemini-(1|2)(\.|-)", gemini_model) is not None
    default_units = {"gemini": "request" if legacy_model else "search_query", "brave": "request"}
    out: dict[str, dict[str, Any]] = {
        "daily_limits": {},
        "monthly_limits": {},
        "reset_timezones": {},
        "units": {},
        "prices_per_1000": {},
        "max_units_per_call": {},
    }
    for p in PROVIDERS:
        entry = providers.get(p, {})
        key = f"providers.{p}"
        out["daily_limits"][p] = _count(
            entry.get("daily_limit", DEFAULT_DAILY_LIMITS[p]), f"{key}.daily_limit"
        )
        out["monthly_limits"][p] = _count(
            entry.get("monthly_limit", DEFAULT_MONTHLY_LIMITS[p]), f"{key}.monthly_limit"
        )
        zone = entry.get("reset_timezone", DEFAULT_RESET_TIMEZONES[p])
        out["reset_timezones"][p] = _zone(zone, f"{key}.reset_timezone")
        unit = entry.get("unit", default_units[p])
        if unit not in UNITS or (p == "brave" and unit != "request"):
            allowed = '"search_query" or "request"' if p == "gemini" else '"request"'
            raise ConfigError(f'Config key "{key}.unit" must be {allowed}.')
        out["units"][p] = unit
        # Gemini 3 may run several search queries for one prompt; one request is one unit.
        most = 3 if unit == "search_query" else 1
        out["max_units_per_call"][p] = _count(
            entry.get("max_units_per_call", most), f"{key}.max_units_per_call"
        ) or 1
        price = entry.get("price_per_1000")
        if price is not None and (
            isinstance(price, bool)
            or not isinstance(price, int | float)
            or not 0 <= price <= MAX_COUNT
        ):
            raise ConfigError(f'Config key "{key}.price_per_1000" must be a number, 0 or more.')
        out["prices_per_1000"][p] = None if price is None else float(price)
    return out


def _zone(value: Any, key: str) -> str:
    """An IANA zone name that this machine knows, checked once here (not at every use)."""
    from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

    if not isinstance(value, str) or not value:
        raise ConfigError(f'Config key "{key}" must be an IANA zone name like "Europe/Warsaw".')
    try:
        ZoneInfo(value)
    except (ZoneInfoNotFoundError, ValueError):
        raise ConfigError(f'Config key "{key}" names an unknown zone: "{value[:64]}".') from None
    return value


def _allocations(section: dict[str, Any]) -> dict[str, dict[str, int]]:
    allocations = section.get("agent_allocations", {})
    if not isinstance(allocations, dict):
        raise ConfigError('Config key "agent_allocations" must be an object.')
    out = {}
    for agent_id, entry in allocations.items():
        if not _AGENT_ID.fullmatch(agent_id):
            raise ConfigError(
                f'Config key "agent_allocations.{agent_id[:64]}" is not a valid agent id '
                "(lowercase letters, numbers and hyphens)."
            )
        out[agent_id] = _allocation(f"agent_allocations.{agent_id}", entry)
    return out


def _allocation(key: str, entry: Any) -> dict[str, int]:
    if not isinstance(entry, dict):
        raise ConfigError(f'Config key "{key}" must be an object like {{"gemini": 5, "brave": 0}}.')
    for name in entry:
        if name not in PROVIDERS:
            raise ConfigError(f'Config key "{key}.{name}" is not a provider (gemini, brave).')
    return {p: _count(entry.get(p, 0), f"{key}.{p}") for p in PROVIDERS}


def _count(value: Any, key: str) -> int:
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= MAX_COUNT:
        raise ConfigError(f'Config key "{key}" must be a whole number from 0 to {MAX_COUNT}.')
    return value


def _endpoints(section: dict[str, Any]) -> dict[str, str]:
    given = section.get("endpoints", {})
    if not isinstance(given, dict):
        raise ConfigError('Config key "endpoints" must be an object.')
    endpoints = dict(DEFAULT_ENDPOINTS)
    for name, url in given.items():
        key = f"endpoints.{name}"
        if name not in endpoints:
            raise ConfigError(f'Config key "{key}" is not one of {", ".join(DEFAULT_ENDPOINTS)}.')
        if not isinstance(url, str) or not is_allowed_base_url(url):
            raise ConfigError(
                f'Config key "{key}" must be an https:// URL (http:// only for loopback hosts).'
            )
        endpoints[name] = url.rstrip("/")
    return endpoints


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


def _state_dir(env: Any, configured: str | None) -> str:
    explicit = env.get("SMART_SEARCH_STATE_DIR")
    if explicit:
        return os.path.expanduser(explicit)
    if configured:
        return os.path.expanduser(configured)
    workspace = env.get("OPENCLAW_WORKSPACE_DIR")
    if not workspace:
        state = env.get("OPENCLAW_STATE_DIR")
        workspace = (
            os.path.join(state, "workspace")
            if state
            else os.path.join(_home(env), ".openclaw", "workspace")
        )
    return os.path.join(os.path.expanduser(workspace), "shared")


def _state_backend(section: dict[str, Any]) -> dict[str, Any]:
    """`state_backend`: where shared state lives. Files in the state directory by default;
    `{"kind": "redis", "url": ..., "prefix": ..., "on_unavailable": "refuse"|"web_only"}` for a
    fleet (store/redis.py checks the rest when it is configured)."""
    backend = section.get("state_backend", {"kind": "files"})
    if not isinstance(backend, dict):
        raise ConfigError('Config key "state_backend" must be an object.')
    kind = backend.get("kind", "files")
    if kind not in ("files", "redis"):
        raise ConfigError('Config key "state_backend.kind" must be "files" or "redis".')
    on_unavailable = backend.get("on_unavailable", "refuse")
    if on_unavailable not in ("refuse", "web_only"):
        raise ConfigError(
            'Config key "state_backend.on_unavailable" must be "refuse" or "web_only".'
        )
    return {**backend, "kind": kind, "on_unavailable": on_unavailable}


def _api_key(name: str, env: Any, skill_env: dict[str, Any], root: dict[str, Any]) -> Secret | None:
    """First found wins: process env, the skill entry's env, top-level env.vars, top-level env."""
    top_env = root.get("env")
    top_env = top_env if isinstance(top_env, dict) else {}
    top_vars = top_env.get("vars")
    top_vars = top_vars if isinstance(top_vars, dict) else {}
    for source in (env, skill_env, top_vars, top_env):
        value = source.get(name)
        if isinstance(value, str):
            value = _substitute(value, env).strip()
            if value:
                return Secret(value)
    return None
