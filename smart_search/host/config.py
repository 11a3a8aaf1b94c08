"""openclaw.json → one typed `Settings` object, read afresh on every call (RULINGS 2).

What each config key is (its type, default, bounds and one line of docs) is the table in
config_keys.py; this module reads the skill's section (config_entry.py finds it) and checks every
key through the check its kind names (config_checks.py, and below for the provider-shaped kinds),
so a key's rules are written once. A name imported `as` itself is re-exported: the rest of the
package imports it from here.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any

import orjson

from smart_search.errors import ConfigError
from smart_search.host import openclaw
from smart_search.host.config_checks import (
    AGENT_ID,
    CHECKS,
    check_count,
    check_object,
    check_string,
    either,
)
from smart_search.host.config_entry import (
    api_key_sources,
    layout_warnings,
    skill_section,
    substitute_variables,
)
from smart_search.host.config_entry import configured_key_values as configured_key_values
from smart_search.host.config_keys import (
    DEFAULT_ALLOCATION,
    MAX_COUNT,
    TOP_LEVEL,
    ConfigKey,
    fields_of,
    unknown_key_warning,
    unknown_keys,
    worst_case,
)
from smart_search.host.config_keys import DEFAULT_ENDPOINTS as DEFAULT_ENDPOINTS
from smart_search.host.config_keys import DEFAULT_GEMINI_MODEL as DEFAULT_GEMINI_MODEL
from smart_search.host.config_keys import DEFAULT_MONTHLY_LIMITS as DEFAULT_MONTHLY_LIMITS
from smart_search.host.config_keys import DEFAULT_RESET_TIMEZONES as DEFAULT_RESET_TIMEZONES
from smart_search.host.config_secrets import Secret as Secret
from smart_search.host.config_secrets import assign_key_pools, assign_keys, lookup_in
from smart_search.host.config_secrets import find_key as find_key
from smart_search.sources import registry
from smart_search.text.urls import is_allowed_base_url as is_allowed_base_url
from smart_search.text.urls import is_loopback_host as is_loopback_host

if TYPE_CHECKING:
    from smart_search.host.config_pools import PoolKey

# The sources, as the registry declares them (sources/registry.py): search APIs, web engines.
PROVIDERS = registry.api_names()
ENGINES = registry.web_names()


def engines(settings: Settings) -> tuple[str, ...]:
    """The web engines `settings` can reach, in the registry's order: every engine but a
    self-hosted one whose endpoint is not configured (it has no default)."""
    return tuple(e for e in ENGINES if e in settings.endpoints)


def configured_apis(settings: Settings) -> tuple[str, ...]:
    """The search APIs the operator configured, in the registry's order: those with a key (or a
    key pool) or an endpoint of the operator's own (not the source's default)."""
    return tuple(
        p
        for p in PROVIDERS
        if settings.api_keys.get(p) is not None
        or settings.key_pools.get(p)
        or settings.endpoints.get(p, "").rstrip("/") != DEFAULT_ENDPOINTS[p].rstrip("/")
    )


# The chat agent of Strategy B (spec 4), always known, also under strict_agents.
GENERAL_AGENT = "general"


class Settings:
    """Everything a call needs from config and environment, already checked and defaulted.

    Immutable: one call's view of the config never changes under it (`_replace` makes a
    variant). A plain slotted class: a NamedTuple of this many fields costs ~1 ms to define and
    a frozen dataclass more, in every one-shot process; building one costs ~10 us."""

    gemini_model: str
    default_provider: str
    provider_order: tuple[str, ...] | None  # None: the default chain (registry.default_chain)
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
    modes: dict[str, str | None]  # per provider, its search mode (None: it has none)
    currencies: dict[str, str]
    monthly_budgets: dict[str, float | None]  # per provider, in its currency (issue 20, point 4)
    monthly_budget: float | None  # every provider together, in their one currency
    agent_allocations: dict[str, dict[str, int]]
    default_allocation: dict[str, int]
    endpoints: dict[str, str]
    state_dir: str
    timezone: str | None
    api_keys: dict[str, Secret | None]  # with a key pool: its first key
    state_backend: dict[str, Any]
    max_unconfigured_agents: int
    cache: dict[str, Any]
    fetch: dict[str, Any]  # smart_fetch (issue 21): every `fetch.x` field, defaults filled in
    config_path: str | None
    # Layouts OpenClaw would reject and unknown config keys: every tool result carries them.
    warnings: tuple[str, ...]
    # The per-workspace state dir an earlier release used (merged once into this one), or None.
    legacy_state_dir: str | None
    # Every config file read (the main file and its $includes, and since issue 30 the files keys
    # OpenClaw holds came from or would: its global .env, SecretRef files): a long-running server
    # re-reads the config when any of them changes.
    config_files: tuple[str, ...]
    # The MCP server's agent_id for callers that omit it (`smart-search mcp --agent-id` wins).
    mcp_agent_id: str | None
    # Deep search (issue 15): the unit budget of one deep call, rank-fusion weights per source,
    # extra tracking parameter names (a trailing `*` makes a prefix).
    deep_max_units: int
    source_weights: dict[str, float]  # never mutated
    tracking_params: tuple[str, ...]
    # Key pools (issue 20, point 3; config_pools.py): per provider, its keys in config order;
    # () for a provider with its one `<P>_API_KEY` (or none), which is no pool.
    key_pools: dict[str, tuple[PoolKey, ...]]  # never mutated
    # The MCP server over HTTP (issue 28): `tokens`, each a config_tokens.McpToken.
    mcp: dict[str, Any]  # never mutated
    # Issue 30: per source, where its key (a self-hosted engine: its endpoint) was found, for
    # status and doctor (never the value); and, for a source without one, what stood in the way
    # (an OpenClaw SecretRef that cannot be read). Both never mutated.
    key_origins: dict[str, str]
    key_notes: dict[str, tuple[str, ...]]

    __slots__ = tuple(__annotations__)

    def __init__(self, **values: Any) -> None:
        unknown = values.keys() - _SETTINGS_FIELDS
        if unknown:
            raise TypeError(f"Settings: unknown fields {sorted(unknown)}")
        for name in self.__slots__:
            if name in values:
                value = values[name]
            elif name in _SETTINGS_DEFAULTS:
                value = _SETTINGS_DEFAULTS[name]
            else:
                raise TypeError(f"Settings: missing field {name}")
            object.__setattr__(self, name, value)

    def __setattr__(self, name: str, value: object) -> None:
        raise AttributeError(f"Settings is immutable: use _replace to change {name}")

    def __delattr__(self, name: str) -> None:
        raise AttributeError(f"Settings is immutable: cannot delete {name}")

    def _asdict(self) -> dict[str, Any]:
        return {name: getattr(self, name) for name in self.__slots__}

    def _replace(self, **changes: Any) -> Settings:
        return Settings(**{**self._asdict(), **changes})

    def __eq__(self, other: object) -> bool:
        if other.__class__ is not Settings:
            return NotImplemented
        return self._asdict() == other._asdict()  # type: ignore[attr-defined]

    __hash__ = None  # type: ignore[assignment]  # its dicts are not hashable either

    def __repr__(self) -> str:  # keys are Secrets: their repr never shows the value
        return "Settings(" + ", ".join(f"{n}={getattr(self, n)!r}" for n in self.__slots__) + ")"

    def is_configured_agent(self, agent_id: str) -> bool:
        return agent_id in self.agent_allocations

    def allows_agent(self, agent_id: str) -> bool:
        """Whether `agent_id` may call at all: any id, unless `strict_agents` admits only the
        configured ones and the general agent."""
        return (
            not self.strict_agents
            or agent_id == GENERAL_AGENT
            or self.is_configured_agent(agent_id)
        )


# Settings' fields, and the defaults of those a call may leave out.
_SETTINGS_FIELDS = frozenset(Settings.__slots__)
_SETTINGS_DEFAULTS: dict[str, Any] = {
    "warnings": (),
    "legacy_state_dir": None,
    "config_files": (),
    "mcp_agent_id": None,
    "deep_max_units": 4,
    "source_weights": {},
    "tracking_params": (),
    "key_pools": {},
    "mcp": {"tokens": ()},
    "key_origins": {},
    "key_notes": {},
}


def load_settings(environ: dict[str, str] | os._Environ[str] | None = None) -> Settings:
    """Read openclaw.json (if any) and the environment into a `Settings`."""
    env = os.environ if environ is None else environ
    path, explicit = config_file(env)
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
        config_files=tuple(dict.fromkeys((*files, *settings.config_files))),
    )


def config_file(env: Any) -> tuple[str, bool]:
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
            values.update(_providers(section.get(key.name, key.default), values))
        else:
            values[key.name] = _CHECKS[key.kind](section.get(key.name, key.default), key.name, key)
    values["state_dir"] = _state_dir(env, values["state_dir"])
    if "deep_max_units" not in section:  # RULINGS 7: by default a deep call may ask every leg
        chain = values["provider_order"] or registry.default_chain()
        values["deep_max_units"] = sum(values["max_units_per_call"][p] for p in chain)
    sources = api_key_sources(env, root, skill_env)
    assign_keys(values, sources, root, env)
    assign_key_pools(values, sources, env)
    if values["mcp"]["tokens"]:
        from smart_search.host.config_tokens import resolve_tokens

        tokens = resolve_tokens(values["mcp"]["tokens"], lookup_in(sources, env), Secret)
        values["mcp"] = {**values["mcp"], "tokens": tokens}
    _check_budgets(values)
    return Settings(**values)


def _check_keys(value: Any, name: str, key: ConfigKey | None = None) -> Any:
    """`providers.<p>.keys` (config_pools.py, loaded only when a pool is configured)."""
    if value is None:
        return None
    from smart_search.host.config_pools import check_entries

    return check_entries(value, name, key)


def _check_tokens(value: Any, name: str, key: ConfigKey | None = None) -> Any:
    """`mcp.tokens` (config_tokens.py, loaded only when tokens are configured)."""
    if value is None or value == ():
        return ()
    from smart_search.host.config_tokens import check_tokens

    return check_tokens(value, name, key)


def _mcp(value: Any, name: str, key: ConfigKey) -> dict[str, Any]:
    return check_object(value, name, key, _CHECKS)


# --- the kinds whose check needs the provider list (config_checks.py holds the others) --------


def _provider(value: Any, name: str, key: ConfigKey) -> str:
    provider = check_string(value, name)
    if provider not in PROVIDERS:
        raise ConfigError(f'Config key "{name}" must be {either(PROVIDERS)}.')
    return provider


_PROVIDER_KEYS = fields_of("providers.<p>")


def _providers(given: Any, earlier: dict[str, Any]) -> dict[str, dict[str, Any]]:
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
            pick_unit = registry.source(p).default_unit
            if leaf == "unit" and pick_unit is not None:
                default = pick_unit(earlier)  # from the keys read before (a model, say)
            elif leaf == "max_units_per_call":
                default = worst_case(registry.source(p), out["units"][p], out["modes"][p])
            value = _CHECKS[key.kind](entry.get(leaf, default), f"providers.{p}.{leaf}", key)
            out[key.field][p] = value
        out["max_units_per_call"][p] = out["max_units_per_call"][p] or 1
    return out


def _mode(value: Any, name: str, key: ConfigKey) -> str | None:
    """`providers.<p>.mode`: one of the provider's search modes; null for one that has none."""
    if not key.choices:
        if value is None:
            return None
        raise ConfigError(f'Config key "{name}" is not used: this provider has no search modes.')
    if value not in key.choices:
        raise ConfigError(f'Config key "{name}" must be {either(key.choices)}.')
    return value


def _allocations(value: Any, name: str, key: ConfigKey) -> dict[str, dict[str, int]]:
    if not isinstance(value, dict):
        raise ConfigError(f'Config key "{name}" must be an object.')
    out = {}
    for agent_id, entry in value.items():
        if not AGENT_ID.fullmatch(agent_id):
            raise ConfigError(
                f'Config key "{name}.{agent_id[:64]}" is not a valid agent id '
                "(lowercase letters, numbers and hyphens)."
            )
        out[agent_id] = _allocation(entry, f"{name}.{agent_id}")
    return out


def _allocation(entry: Any, name: str, key: ConfigKey | None = None) -> dict[str, int]:
    if not isinstance(entry, dict):
        # What an allocation looks like, built only for this message: {"gemini": 5, "brave": 0}.
        example = ", ".join(f'"{p}": {n}' for p, n in DEFAULT_ALLOCATION.items())
        raise ConfigError(f'Config key "{name}" must be an object like {{{example}}}.')
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
            out[p] = check_count(value, f"{name}.{p}")
    return out


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


def _provider_chain(value: Any, name: str, key: ConfigKey) -> tuple[str, ...] | None:
    """`provider_order` (issue 20): registered API providers, each at most once; null: unset."""
    if value is None:
        return None
    if not isinstance(value, list) or not value:
        raise ConfigError(f'Config key "{name}" must be a non-empty array of provider names.')
    chain = tuple(_provider(item, f"{name}[{i}]", key) for i, item in enumerate(value))
    if len(set(chain)) != len(chain):
        raise ConfigError(f'Config key "{name}" names a provider twice.')
    return chain


def _check_budgets(values: dict[str, Any]) -> None:
    """A budget in money counts units at their price, so it needs the price (and the install's
    budget one currency for every provider). The install's budget needs the price of every
    provider that can spend: one with a key, or one priced anyway (a provider added by an upgrade,
    whose key is not set, does not break a budget written before it existed)."""
    prices = values["prices_per_1000"]
    for p, budget in values["monthly_budgets"].items():
        if budget is not None and prices[p] is None:
            raise ConfigError(
                f'Config key "providers.{p}.monthly_budget" needs providers.{p}.price_per_1000.'
            )
    if values["monthly_budget"] is None:
        return
    keys = values["api_keys"]
    spending = [p for p in PROVIDERS if keys[p] is not None or prices[p] is not None]
    unpriced = [p for p in spending if prices[p] is None]
    if unpriced:
        raise ConfigError(
            f'Config key "monthly_budget" needs providers.{unpriced[0]}.price_per_1000.'
        )
    if len({values["currencies"][p] for p in spending}) > 1:
        raise ConfigError('Config key "monthly_budget" needs every provider in one currency.')


# Every kind in config_keys.KEYS and its check (`providers` is read by `_providers`).
_CHECKS = {
    **CHECKS,
    "provider": _provider,
    "providers_chain": _provider_chain,
    "mode": _mode,
    "allocations": _allocations,
    "allocation": _allocation,
    "weights": _weights,
    "keys": _check_keys,
    "tokens": _check_tokens,
    "mcp": _mcp,
}


def default_state_dir(env: Any) -> str:
    """The state directory when no config could be read (where an internal fault is logged)."""
    return _state_dir(env, None)


def _state_dir(env: Any, configured: str | None) -> str:
    """SMART_SEARCH_STATE_DIR, else `state_dir`, else <OpenClaw state dir>/workspace/shared."""
    return openclaw.skill_state_dir(env, configured)[0]
