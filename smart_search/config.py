"""openclaw.json → one typed `Settings` object, read afresh on every call (RULINGS §2).

Every config key, its default and its type check lives in `_TUNABLES` / `load_settings` below:
this is the one file to read for "what does key X do and what is its default".
"""

from __future__ import annotations

import os
import re
from typing import Any, NamedTuple

import orjson

from . import openclaw
from .errors import ConfigError

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

# Every duration is at most an hour: larger ones are typos, and 1e13 ms overflows the clock.
MAX_MS = 3_600_000
# key: (default, minimum, maximum) for the whole-number tunables.
_TUNABLES: dict[str, tuple[int, int, int | None]] = {
    "retry_max_attempts": (3, 1, 10),
    "retry_base_delay": (500, 0, 60_000),
    "web_fetch_min_interval_ms": (2000, 0, MAX_MS),
    "circuit_failure_threshold": (3, 1, 1000),
    "circuit_reset_seconds": (60, 0, 86_400),
    "request_timeout_ms": (10000, 1, MAX_MS),
    "total_timeout_ms": (30000, 1, MAX_MS),
    "lock_timeout_ms": (5000, 0, MAX_MS),
    "log_retention_days": (30, 1, 36_500),
    "max_result_chars": (10000, 100, 100_000_000),
    "brave_count": (10, 1, 20),
    # Unconfigured agents that may spend per day (strict_agents off): invented ids can't grow the
    # ledger without bound.
    "max_unconfigured_agents": (1000, 0, MAX_COUNT),
    # Units one deep-mode call may spend at most (issue 15); 0 makes deep search web-only.
    "deep_max_units": (2, 0, 1000),
}

_VAR = re.compile(r"\$(\$?)\{([A-Z_][A-Z0-9_]*)\}")
# What an API key may hold: printable ASCII. CR/LF would split the header, and httpx sends header
# values as ASCII (anything else raised deep inside the request, with the key in the traceback).
_HEADER_SAFE = re.compile(r"[\x20-\x7e]+")
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
        section, skill_env = _skill_section(root)
        # Walking every string costs ~3 ms per 10,000 configured agents: skip it when the
        # section holds no `${` at all (one serialisation answers that).
        try:
            has_variables = b"${" in orjson.dumps(section)
        except orjson.JSONEncodeError:  # nested past orjson's depth: the walk reports it
            has_variables = True
        if has_variables:
            section = _substitute(section, env, "")
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


def _read_config(path: str, explicit: bool, env: Any = None) -> dict[str, Any]:
    """The config object with OpenClaw's `$include`s followed; {} for a missing default file."""
    return _read_config_files(path, explicit, env)[0]


def _read_config_files(
    path: str, explicit: bool, env: Any = None
) -> tuple[dict[str, Any], list[str]]:
    """The config object and every file read for it (the main file and its includes)."""
    location = openclaw.ConfigLocation(path, explicit, True, [])
    return openclaw.load_config(location, os.environ if env is None else env)


def _parse_json5(raw: bytes) -> Any:
    return openclaw.parse_config_text(raw, "openclaw.json")


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


# Layouts OpenClaw 2026.9 rejects (its schema is strict outside `config`): still read, never quiet.
LEGACY_SECTION_WARNING = (
    'openclaw.json holds skills["smart-search"], a layout OpenClaw rejects (the whole file fails '
    'its validation): move those settings into skills.entries["smart-search"].config and any '
    'env keys into skills.entries["smart-search"].env.'
)
API_KEY_NAMES = ("GEMINI_API_KEY", "BRAVE_API_KEY")


def legacy_env_warning(name: str) -> str:
    return (
        f"openclaw.json sets {name} directly in the top-level env block, which OpenClaw rejects "
        f'(the whole file fails its validation): move it to env.vars.{name} or to '
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


# Keys the skill's config block may hold; the last group is read by features landing soon.
_KNOWN_KEYS = (
    "gemini_model", "default_provider", "strict_agents", "finance_keywords", "brave_keywords",
    "providers", "agent_allocations", "default_allocation", "endpoints", "state_dir", "timezone",
    "cache", "state_backend", "deep_max_units", "max_unconfigured_agents", "source_weights",
    "tracking_params", "mcp_agent_id",
)  # fmt: skip
_KNOWN_PROVIDER_KEYS = (
    "daily_limit",
    "monthly_limit",
    "reset_timezone",
    "unit",
    "price_per_1000",
    "currency",
    "max_units_per_call",
)


def known_config_keys() -> tuple[str, ...]:
    return (*_KNOWN_KEYS, *_TUNABLES)


def unknown_keys(section: dict[str, Any]) -> list[tuple[str, str | None]]:
    """(dotted key, nearest known key or None) for every key the config block does not use."""
    import difflib

    def near(key: str, known: tuple[str, ...]) -> str | None:
        found = difflib.get_close_matches(key, known, n=1, cutoff=0.6)
        return found[0] if found else None

    out: list[tuple[str, str | None]] = []
    known = known_config_keys()
    legacy_env = ("env",)  # the spec's layout keeps its env block inside the section
    for key in section:
        if key not in known and key not in legacy_env:
            out.append((key, near(key, known)))
    providers = section.get("providers")
    if isinstance(providers, dict):
        for name, entry in providers.items():
            if isinstance(entry, dict):
                for key in entry:
                    if key not in _KNOWN_PROVIDER_KEYS:
                        guess = near(key, _KNOWN_PROVIDER_KEYS)
                        full = f"providers.{name}.{guess}" if guess else None
                        out.append((f"providers.{name}.{key}", full))
    return out


def unknown_key_warning(key: str, nearest: str | None) -> str:
    hint = f' (did you mean "{nearest}"?)' if nearest else ""
    return f'Unknown config key "{key}"{hint} is ignored.'


def _substitute(value: Any, env: Any, key: str | None = None) -> Any:
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
            k: _substitute(v, env, None if key is None else _join(key, str(k)))
            for k, v in value.items()
        }
    if isinstance(value, list):
        return [
            _substitute(v, env, None if key is None else f"{key}[{i}]") for i, v in enumerate(value)
        ]
    return value


def _join(key: str, name: str) -> str:
    return f"{key}.{name[:64]}" if key else name[:64]


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
    values.update(_deep_config(section))
    state_dir = section.get("state_dir")
    if state_dir is not None and (not isinstance(state_dir, str) or not state_dir):
        raise ConfigError('Config key "state_dir" must be a non-empty string.')
    values["state_dir"] = _state_dir(env, state_dir)
    values["state_backend"] = _state_backend(section)
    mcp_agent = section.get("mcp_agent_id")
    if mcp_agent is not None and (
        not isinstance(mcp_agent, str) or not _AGENT_ID.fullmatch(mcp_agent) or len(mcp_agent) > 64
    ):
        raise ConfigError(
            'Config key "mcp_agent_id" must be an agent id '
            "(lowercase letters, digits and hyphens, at most 64 characters)."
        )
    values["mcp_agent_id"] = mcp_agent
    values["cache"] = _cache(section)
    tz = section.get("timezone")
    values["timezone"] = None if tz is None else _zone(tz, "timezone")
    values["api_keys"] = {
        "gemini": _api_key("GEMINI_API_KEY", env, skill_env, root),
        "brave": _api_key("BRAVE_API_KEY", env, skill_env, root),
    }
    return Settings(**values)


def _deep_config(section: dict[str, Any]) -> dict[str, Any]:
    """`source_weights` (source name → positive number) and `tracking_params` (names) for deep
    search's merge (issue 15); `deep_max_units` is a tunable."""
    from math import isfinite

    weights = section.get("source_weights", {})
    if not isinstance(weights, dict):
        raise ConfigError('Config key "source_weights" must be an object.')
    sources = (*PROVIDERS, *ENGINES)
    for name, weight in weights.items():
        if name not in sources:
            raise ConfigError(
                f'Config key "source_weights.{name[:64]}" is not a source '
                f"({', '.join(sources)})."
            )
        if (
            isinstance(weight, bool)
            or not isinstance(weight, int | float)
            or not isfinite(weight)
            or not 0 < weight <= MAX_COUNT
        ):
            raise ConfigError(f'Config key "source_weights.{name}" must be a positive number.')
    tracking = section.get("tracking_params", [])
    if not isinstance(tracking, list) or not all(
        isinstance(t, str) and t.strip() and len(t) <= 200 for t in tracking
    ):
        raise ConfigError('Config key "tracking_params" must be an array of parameter names.')
    return {
        "source_weights": {name: float(w) for name, w in weights.items()},
        "tracking_params": tuple(t.strip() for t in tracking),
    }


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
        "currencies": {},
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
        currency = entry.get("currency", "USD")
        if not isinstance(currency, str) or not re.fullmatch(r"[A-Z]{3}", currency):
            raise ConfigError(f'Config key "{key}.currency" must be a currency code like "USD".')
        out["currencies"][p] = currency
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
    out = {}
    for p in PROVIDERS:
        value = entry.get(p, 0)
        # The common case first, without building the key's name (100,000 agents add up).
        if type(value) is int and 0 <= value <= MAX_COUNT:
            out[p] = value
        else:
            out[p] = _count(value, f"{key}.{p}")
    return out


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


def default_state_dir(env: Any) -> str:
    """The state directory when no config could be read (where an internal fault is logged)."""
    return _state_dir(env, None)


def _state_dir(env: Any, configured: str | None) -> str:
    """SMART_SEARCH_STATE_DIR, else `state_dir`, else <OpenClaw state dir>/workspace/shared."""
    return openclaw.skill_state_dir(env, configured)[0]


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
    out = {**backend, "kind": kind, "on_unavailable": on_unavailable}
    if kind == "redis":
        out.update(_redis_backend(backend))
    return out


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
    prefix = backend.get("prefix", "smart-search")
    if not isinstance(prefix, str) or not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9._:-]{0,63}", prefix):
        raise ConfigError(
            'Config key "state_backend.prefix" must be 1-64 letters, digits, ".", "_", ":" or "-".'
        )
    return {"url": url, "prefix": prefix}


# cache.<key>: (default, minimum, maximum); `cache.enabled` is a boolean (default true).
CACHE_DEFAULTS: dict[str, tuple[int, int, int | None]] = {
    "ttl_seconds": (6 * 3600, 0, 366 * 86400),
    "finance_ttl_seconds": (300, 0, 366 * 86400),
    "max_entries": (5000, 0, MAX_COUNT),
    "max_bytes": (64 * 1024 * 1024, 0, 1 << 40),
}


def _cache(section: dict[str, Any]) -> dict[str, Any]:
    """`cache`: the shared result cache (cache.py). A TTL of 0, or `enabled: false`, turns off
    serving from it for that class; unknown keys are refused so a typo never goes unnoticed."""
    given = section.get("cache", {})
    if not isinstance(given, dict):
        raise ConfigError('Config key "cache" must be an object.')
    for name in given:
        if name != "enabled" and name not in CACHE_DEFAULTS:
            raise ConfigError(
                f'Config key "cache.{str(name)[:64]}" is not one of enabled, '
                f"{', '.join(CACHE_DEFAULTS)}."
            )
    enabled = given.get("enabled", True)
    if not isinstance(enabled, bool):
        raise ConfigError('Config key "cache.enabled" must be true or false.')
    out: dict[str, Any] = {"enabled": enabled}
    for name, (default, low, high) in CACHE_DEFAULTS.items():
        try:
            out[name] = _whole(given, name, default, low, high)
        except ConfigError as err:
            raise ConfigError(err.message.replace(f'"{name}"', f'"cache.{name}"')) from None
    return out


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
                # Never the value itself in the message: it is a secret.
                if not _HEADER_SAFE.fullmatch(value):
                    raise ConfigError(
                        f"{name} contains characters that cannot be sent in an HTTP header."
                    )
                return Secret(value)
    return None


def configured_key_values(env: Any) -> list[str]:
    """Every raw value the API key variables hold (environment and openclaw.json), valid or not,
    for scrubbing an internal error's traceback when `Settings` could not be built. Never raises.
    """
    found: list[str] = []
    try:
        sources: list[Any] = [env]
        try:
            root = _read_config(*_config_path(env))
            _, skill_env = _skill_section(root)
            top_env = root.get("env") if isinstance(root.get("env"), dict) else {}
            top_vars = top_env.get("vars") if isinstance(top_env.get("vars"), dict) else {}
            sources += [skill_env, top_vars, top_env]
        except Exception:  # noqa: BLE001 - best effort: the environment alone then
            pass
        for source in sources:
            for name in ("GEMINI_API_KEY", "BRAVE_API_KEY"):
                value = source.get(name)
                if isinstance(value, str):
                    found += [value, value.strip(), _substitute(value, env).strip()]
    except Exception:  # noqa: BLE001
        pass
    return [value for value in found if value]
