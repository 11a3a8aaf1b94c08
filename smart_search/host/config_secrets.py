"""The keys of every source (issue 30 beside RULINGS 2): smart-search's own places first
(config_entry.py's walk), then those OpenClaw holds for it (host_keys.py); each provider's key
pool (config_pools.py); and `Secret`, a key whose repr never shows it. `config.load_settings`
fills Settings' `api_keys`, `key_origins`, `key_notes`, `key_pools` and `config_files` here."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from smart_search.errors import ConfigError
from smart_search.host.config_checks import is_header_safe
from smart_search.host.config_entry import API_KEY_NAMES, find_api_key
from smart_search.host.host_keys import HostEnv
from smart_search.host.host_keys import find as find_host_key
from smart_search.sources import registry
from smart_search.text.urls import is_private_base_url

if TYPE_CHECKING:
    from smart_search.host.config_pools import PoolKey

PROVIDERS = registry.api_names()


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


def lookup_in(sources: Any, env: Any) -> Any:
    """A variable's value as an API key's is found (`sources`, in order), or None."""

    def lookup(variable: str) -> str | None:
        found = find_api_key(variable, sources, env)
        return None if found is None else found[1]

    return lookup


def find_key(
    provider: str, sources: Any, root: dict[str, Any], env: Any, host_env: HostEnv
) -> tuple[str | None, str | None, tuple[str, ...]]:
    """The one key walk (issue 30): smart-search's own places (RULINGS 2) first, then the ones
    OpenClaw holds for the provider (host_keys.py). (origin, value, notes); doctor reads it too."""
    found = find_api_key(registry.source(provider).key_variable or "", sources, env)
    if found is not None:
        return found[0], found[1], ()
    held = find_host_key(registry.source(provider), root, host_env)
    return held.origin, held.value, held.notes


def assign_keys(values: dict[str, Any], sources: Any, root: dict[str, Any], env: Any) -> None:
    """Each provider's key, where it came from; a self-hosted engine's endpoint from OpenClaw's
    config when `endpoints` names none."""
    host_env = HostEnv(env, root)
    keys: dict[str, Secret | None] = {}
    origins: dict[str, str] = {}
    notes: dict[str, tuple[str, ...]] = {}
    for provider, name in zip(PROVIDERS, API_KEY_NAMES, strict=True):
        origin, value, why = find_key(provider, sources, root, env, host_env)
        keys[provider] = None if value is None else _secret(name, value, origin)
        if origin is not None:
            origins[provider] = origin
        if why:
            notes[provider] = why
    for engine in registry.sources("web"):
        if engine.self_hosted and engine.name not in values["endpoints"]:
            held = find_host_key(engine, root, host_env)
            if held.value is not None and is_private_base_url(held.value):
                values["endpoints"] = {**values["endpoints"], engine.name: held.value.rstrip("/")}
                origins[engine.name] = held.origin or ""
            elif held.value is not None:
                notes[engine.name] = (
                    f"{held.origin} is not an https:// URL (http:// only for loopback or "
                    "private hosts)",
                )
            elif held.notes:
                notes[engine.name] = held.notes
    values.update(api_keys=keys, key_origins=origins, key_notes=notes)
    values["config_files"] = tuple(dict.fromkeys(host_env.files))


def assign_key_pools(values: dict[str, Any], sources: Any, env: Any) -> None:
    """Each provider's key pool (`providers.<p>.keys`, else `<P>_API_KEYS`): its first key is
    the provider's key, and its windows are the sum of its accounts' (each key's, or each
    project's; a key's limits are the provider's unless its entry sets its own)."""
    lookup = lookup_in(sources, env)
    pools: dict[str, tuple[PoolKey, ...]] = {}
    for p, name in zip(PROVIDERS, API_KEY_NAMES, strict=True):
        entries = values["key_pools"][p]
        listed = lookup(name + "S") if entries is None else None
        if entries is None and listed is None:
            pools[p] = ()  # no pool: nothing of config_pools.py is loaded
            continue
        from smart_search.host.config_pools import account_limits, build_pool, env_entries

        if entries is None:
            entries = env_entries(listed, name + "S")
        pool = build_pool(
            entries, lookup, Secret, values["daily_limits"][p], values["monthly_limits"][p]
        )
        pools[p] = pool
        if pool:
            values["api_keys"][p] = pool[0].secret
            values["key_origins"][p] = f"key pool of {len(pool)}"
            values["daily_limits"][p], values["monthly_limits"][p] = account_limits(pool)
    values["key_pools"] = pools


def _secret(name: str, value: str, origin: str | None) -> Secret:
    # Never the value itself in the message: it is a secret.
    if not is_header_safe(value):
        where = "" if origin is None or "(OpenClaw)" not in origin else f" (from {origin})"
        raise ConfigError(
            f"{name}{where} contains characters that cannot be sent in an HTTP header."
        )
    return Secret(value)
