"""The check of each kind of config value that needs no list of providers: (value, dotted key,
its row in config_keys.KEYS) -> the checked value, or a ConfigError naming the key.

config.py adds the provider-shaped kinds (`provider`, `providers`, `allocation(s)`, `weights`)
and runs `CHECKS` over the table. The URL rules here are also the HTTP layer's loopback rule.
"""

from __future__ import annotations

import re
from typing import Any

from smart_search.errors import ConfigError
from smart_search.host.config_keys import MAX_COUNT, ConfigKey, fields_of
from smart_search.text.urls import is_allowed_base_url, is_private_base_url

# An agent id: also the key of `agent_allocations` (config.py).
AGENT_ID = re.compile(r"[a-z0-9-]+")


def either(choices: tuple[str, ...]) -> str:
    """`"a" or "b"`; `"a", "b" or "c"` for more."""
    quoted = [f'"{choice}"' for choice in choices]
    return ", ".join(quoted[:-1]) + " or " + quoted[-1] if len(quoted) > 1 else "".join(quoted)


def is_header_safe(value: str) -> bool:
    """Whether `value` (an API key) can be sent in an HTTP header: printable ASCII, not empty.
    CR/LF would split the header, and httpx sends header values as ASCII (anything else raised
    deep inside the request, with the key in the traceback)."""
    return bool(value) and value.isascii() and value.isprintable()


def check_string(value: Any, name: str, key: ConfigKey | None = None) -> str:
    if not isinstance(value, str) or not value:
        raise ConfigError(f'Config key "{name}" must be a non-empty string.')
    return value


def check_model(value: Any, name: str, key: ConfigKey) -> str:
    model = check_string(value, name)
    if not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9._-]*", model):
        raise ConfigError(f'Config key "{name}" must be a model name like gemini-2.5-flash.')
    return model


def check_choice(value: Any, name: str, key: ConfigKey) -> str:
    if value not in key.choices:
        raise ConfigError(f'Config key "{name}" must be {either(key.choices)}.')
    return value


def check_bool(value: Any, name: str, key: ConfigKey) -> bool:
    if not isinstance(value, bool):
        raise ConfigError(f'Config key "{name}" must be true or false.')
    return value


def check_whole(value: Any, name: str, key: ConfigKey) -> int:
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


def check_count(value: Any, name: str, key: ConfigKey | None = None) -> int:
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= MAX_COUNT:
        raise ConfigError(f'Config key "{name}" must be a whole number from 0 to {MAX_COUNT}.')
    return value


def check_keywords(value: Any, name: str, key: ConfigKey) -> tuple[str, ...]:
    if value is None or value is key.default:
        return key.default
    if not isinstance(value, list) or not all(isinstance(k, str) and k.strip() for k in value):
        raise ConfigError(f'Config key "{name}" must be an array of non-empty strings.')
    return tuple(k.strip().lower() for k in value)


def check_zone(value: Any, name: str, key: ConfigKey | None = None) -> str | None:
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


def check_price(value: Any, name: str, key: ConfigKey) -> float | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float) or not 0 <= value <= MAX_COUNT:
        raise ConfigError(f'Config key "{name}" must be a number, 0 or more.')
    return float(value)


def check_currency(value: Any, name: str, key: ConfigKey) -> str:
    if not isinstance(value, str) or not re.fullmatch(r"[A-Z]{3}", value):
        raise ConfigError(f'Config key "{name}" must be a currency code like "USD".')
    return value


def check_endpoints(value: Any, name: str, key: ConfigKey) -> dict[str, str]:
    """`endpoints`: a base URL per source, https (http only to loopback hosts, and for a
    self-hosted engine, which carries no key, to private ones too). A self-hosted engine has no
    default: it is in the result only when configured."""
    from smart_search.sources import registry

    if not isinstance(value, dict):
        raise ConfigError(f'Config key "{name}" must be an object.')
    endpoints = dict(key.default)
    if value is key.default:  # unset: the built-in hosts, nothing to check
        return endpoints
    sources = {s.name: s for s in registry.sources()}
    for source, url in value.items():
        dotted = f"{name}.{source}"
        if source not in sources:
            raise ConfigError(f'Config key "{dotted}" is not one of {", ".join(sources)}.')
        if sources[source].self_hosted:
            if not isinstance(url, str) or not is_private_base_url(url):
                raise ConfigError(
                    f'Config key "{dotted}" must be an https:// URL (http:// only for loopback '
                    "or private hosts)."
                )
        elif not isinstance(url, str) or not is_allowed_base_url(url):
            raise ConfigError(
                f'Config key "{dotted}" must be an https:// URL (http:// only for loopback hosts).'
            )
        endpoints[source] = url.rstrip("/")
    return endpoints


def check_names(value: Any, name: str, key: ConfigKey) -> tuple[str, ...]:
    """`tracking_params`: extra parameter names deep search's merge ignores."""
    if not isinstance(value, list | tuple) or not all(
        isinstance(t, str) and t.strip() and len(t) <= 200 for t in value
    ):
        raise ConfigError(f'Config key "{name}" must be an array of parameter names.')
    return tuple(t.strip() for t in value)


def check_path(value: Any, name: str, key: ConfigKey) -> str | None:
    """`state_dir` as configured (None: unset); `_build` resolves it like OpenClaw would."""
    if value is not None and (not isinstance(value, str) or not value):
        raise ConfigError(f'Config key "{name}" must be a non-empty string.')
    return value


def check_agent_id(value: Any, name: str, key: ConfigKey) -> str | None:
    if value is not None and (
        not isinstance(value, str) or not AGENT_ID.fullmatch(value) or len(value) > 64
    ):
        raise ConfigError(
            f'Config key "{name}" must be an agent id '
            "(lowercase letters, digits and hyphens, at most 64 characters)."
        )
    return value


def check_state_backend(value: Any, name: str, key: ConfigKey) -> dict[str, Any]:
    """`state_backend`: where shared state lives. Files in the state directory by default;
    `{"kind": "redis", "url": ..., "prefix": ..., "on_unavailable": "refuse"|"web_only"}` for a
    fleet (store/redis.py checks the rest when it is configured)."""
    if not isinstance(value, dict):
        raise ConfigError(f'Config key "{name}" must be an object.')
    out = {**value}
    for field in _BACKEND_CHOICES:
        leaf = field.name.rsplit(".", 1)[1]
        out[leaf] = check_choice(value.get(leaf, field.default), field.name, field)
    if out["kind"] == "redis":
        out.update(_redis_backend(value))
    return out


_BACKEND_CHOICES = tuple(key for key in fields_of("state_backend") if key.kind == "choice")
_REDIS_PREFIX = next(key for key in fields_of("state_backend") if key.kind == "redis_prefix")


def _check_redis_url(url: str) -> None:
    """A server's URL (redis-py reads it) or a Sentinel group's (host/redis_url.py reads it)."""
    from urllib.parse import urlsplit

    from smart_search.host import redis_url

    if redis_url.is_sentinel(url):
        try:
            redis_url.parse_sentinel(url)
        except ValueError as err:
            raise ConfigError(
                f'Config key "state_backend.url" is not a Sentinel URL ({redis_url.FORM}): {err}.'
            ) from None
        return
    try:
        parts = urlsplit(url)
        parts.port  # noqa: B018 - raises ValueError on a bad port
    except ValueError:
        parts = None
    if parts is None or parts.scheme not in ("redis", "rediss") or not parts.hostname:
        raise ConfigError(
            'Config key "state_backend.url" must be a redis:// or rediss:// URL with a host '
            f"(or {redis_url.FORM})."
        )


def _redis_backend(backend: dict[str, Any]) -> dict[str, Any]:
    """`url` (redis://, rediss:// or redis+sentinel://, required) and `prefix` of a Redis state
    backend. Messages never quote the URL: it may carry a password (`${VAR}` is substituted like
    every string)."""
    url = backend.get("url")
    if not isinstance(url, str) or not url:
        raise ConfigError(
            'Config key "state_backend.url" is required for kind "redis" '
            "(redis://host:6379/0 or rediss://...)."
        )
    _check_redis_url(url)
    prefix = backend.get("prefix", _REDIS_PREFIX.default)
    if not isinstance(prefix, str) or not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9._:-]{0,63}", prefix):
        raise ConfigError(
            'Config key "state_backend.prefix" must be 1-64 letters, digits, ".", "_", ":" or "-".'
        )
    return {"url": url, "prefix": prefix}


def _check_fields(
    value: Any, name: str, fields: tuple[ConfigKey, ...], checks: Any = None
) -> dict[str, Any]:
    """An object key (`cache`, `fetch`): each field by its own row (`checks`: each kind's
    check, CHECKS unless given); unknown keys are refused so a typo never goes unnoticed."""
    checks = CHECKS if checks is None else checks
    if not isinstance(value, dict):
        raise ConfigError(f'Config key "{name}" must be an object.')
    leaves = [field.name.rsplit(".", 1)[1] for field in fields]
    for leaf in value:
        if leaf not in leaves:
            raise ConfigError(
                f'Config key "{name}.{str(leaf)[:64]}" is not one of {", ".join(leaves)}.'
            )
    return {
        leaf: checks[field.kind](value.get(leaf, field.default), field.name, field)
        for leaf, field in zip(leaves, fields, strict=True)
    }


def check_cache(value: Any, name: str, key: ConfigKey) -> dict[str, Any]:
    """`cache`: the shared result cache (cache.py). A TTL of 0, or `enabled: false`, turns off
    serving from it for that class."""
    return _check_fields(value, name, fields_of("cache"))


def check_fetch(value: Any, name: str, key: ConfigKey) -> dict[str, Any]:
    """`fetch`: smart_fetch's settings (search/fetch_tool.py), every field filled in."""
    return _check_fields(value, name, fields_of("fetch"))


def check_object(value: Any, name: str, key: ConfigKey, checks: Any) -> dict[str, Any]:
    """An object key whose fields need checks from above this module (`mcp`: its tokens)."""
    return _check_fields(value, name, fields_of(key.name), checks)


# Each kind of config_keys.KEYS that needs no provider list, and its check.
CHECKS = {
    "model": check_model,
    "bool": check_bool,
    "whole": check_whole,
    "keywords": check_keywords,
    "count": check_count,
    "zone": check_zone,
    "choice": check_choice,
    "price": check_price,
    "currency": check_currency,
    "endpoints": check_endpoints,
    "names": check_names,
    "path": check_path,
    "agent_id": check_agent_id,
    "backend": check_state_backend,
    "cache": check_cache,
    "fetch": check_fetch,
}
