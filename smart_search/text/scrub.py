"""Configured API keys never leave the process: every string bound for stdout or disk is scrubbed.

A provider may echo its key back in a 2xx answer (a URL with `key=...`, an error text quoting the
request); a traceback may quote a header. `scrub` replaces every configured key value, and the
spellings a key takes once escaped (JSON, Python repr, percent-encoding), with `[redacted]` in
every string of a result or record, keys of objects included. It runs on the results before the
size cap (so a cut can never leave half a key), on each whole result at the runner boundary, on
each search-log record and on `internal-errors.log` text.

**Decision.** Keys shorter than `MIN_SCRUBBED_CHARS` are not scrubbed: no provider issues one
(Gemini's are 39 characters, Brave's about 31), and scrubbing a one-letter test key would wreck
every answer that contains that letter.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

REDACTED = "[redacted]"
MIN_SCRUBBED_CHARS = 8


def spellings(value: str) -> set[str]:
    """`value` and the forms it takes when escaped into JSON, a repr or a URL."""
    import orjson

    forms = {
        value,
        orjson.dumps(value).decode("utf-8")[1:-1],
        repr(value)[1:-1],
        repr(value.encode("utf-8", "replace"))[2:-1],
    }
    if not all(c.isascii() and (c.isalnum() or c in "-._~") for c in value):
        # Only then does percent-encoding change it.
        from urllib.parse import quote, quote_plus

        forms |= {quote(value, safe=""), quote_plus(value, safe="")}
    return {form for form in forms if form}


def secret_values(keys: Iterable[str | None]) -> tuple[str, ...]:
    """The strings to scrub for these key values, longest first."""
    out: set[str] = set()
    for key in keys:
        if key and len(key) >= MIN_SCRUBBED_CHARS:
            out |= spellings(key)
    return tuple(sorted(out, key=len, reverse=True))


def settings_secrets(settings: Any) -> tuple[str, ...]:
    """The scrub list for a `Settings` (its configured API keys and MCP tokens)."""
    keys = getattr(settings, "api_keys", None) or {}
    found = [secret.reveal() for secret in keys.values() if secret is not None]
    for pool in (getattr(settings, "key_pools", None) or {}).values():
        found.extend(key.secret.reveal() for key in pool)  # every key of a key pool
    for token in (getattr(settings, "mcp", None) or {}).get("tokens", ()):
        if getattr(token, "secret", None) is not None:  # the MCP server's bearer tokens
            found.append(token.secret.reveal())
    return secret_values(found)


def scrub(value: Any, secrets: tuple[str, ...]) -> Any:
    """`value` with every occurrence of each secret replaced; containers are copied, not changed."""
    if not secrets:
        return value
    if isinstance(value, str):
        for secret in secrets:
            if secret in value:
                value = value.replace(secret, REDACTED)
        return value
    if isinstance(value, dict):
        return {scrub(k, secrets): scrub(v, secrets) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [scrub(v, secrets) for v in value]
    return value
