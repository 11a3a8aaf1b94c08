"""Search filters (`count`, `freshness`, `country`, `language`): one reading for every source.

The arguments arrive already checked by `schemas/smart_search.args.json`; this module only puts
them in one form (country upper case, language lower case, unknown keys and `None` dropped) so
each provider's and engine's `filter_params` maps the same values. Each source's own mapping
lives in its module, next to the request it changes; what a source cannot honour is returned
by name, for a `warning`, never as an error (issue 15).
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

FILTER_NAMES = ("count", "freshness", "country", "language")
FRESHNESS = ("day", "week", "month", "year")
# How far back each freshness reaches, for sources that take a date range (Gemini, Bing's year).
FRESHNESS_DAYS = {"day": 1, "week": 7, "month": 30, "year": 365}
MAX_COUNT = 20


def normalise(filters: dict[str, Any] | None) -> dict[str, Any]:
    """The filters that are set, in one form: `country` upper case, `language` lower case.

    Keys outside FILTER_NAMES and values that are None are dropped. A value of the wrong kind
    (which the schema keeps out) is kept as it is, so the source reports it as unsupported.
    """
    out: dict[str, Any] = {}
    for name in FILTER_NAMES:
        value = (filters or {}).get(name)
        if value is None:
            continue
        if name == "country" and isinstance(value, str):
            value = value.upper()
        elif name == "language" and isinstance(value, str):
            value = value.lower()
        elif name == "count" and isinstance(value, float) and value.is_integer():
            value = int(value)  # JSON 5.0 is the integer 5 (the schema accepts it)
        out[name] = value
    return out


def valid_count(value: Any) -> int | None:
    """`value` as a count in 1..MAX_COUNT, or None when it is not one."""
    if isinstance(value, bool) or not isinstance(value, int):
        return None
    return value if 1 <= value <= MAX_COUNT else None


def is_code(value: object) -> bool:
    """A two-letter ASCII code (ISO 3166 country, ISO 639-1 language), in either case."""
    return isinstance(value, str) and len(value) == 2 and value.isascii() and value.isalpha()


def utc_now(now: datetime | None) -> datetime:
    """`now` in UTC (a naive value is taken as UTC); the current time when None."""
    if now is None:
        return datetime.now(UTC)
    return now.replace(tzinfo=UTC) if now.tzinfo is None else now.astimezone(UTC)


def unsupported_warning(label: str, unsupported: list[str], filters: dict[str, Any]) -> str | None:
    """The `warning` sentence for filters the source `label` names could not honour; None when
    there are none.

    e.g. `DuckDuckGo could not apply these filters: language "de" (searched without them).`
    """
    if not unsupported:
        return None
    wanted = normalise(filters)
    shown = ", ".join(f'{name} "{wanted.get(name)}"' for name in unsupported)
    return f"{label} could not apply these filters: {shown} (searched without them)."

