"""What a search reports about its filters (issue 15): the warning for the filters the source
that answered could not apply, and first mode's answer cut to `count`. Each source says what it
can apply through its own `filter_params`; the filters themselves are `sources` business
(filters.py), this is the search walk's."""

from __future__ import annotations

from typing import Any

from smart_search.sources.filters import normalise, unsupported_warning, valid_count


def source_warning(source: str, filters: dict[str, Any] | None) -> str | None:
    """`unsupported_warning` for `source` (any registered source) under `filters`,
    from that source's own `filter_params`; None when every filter set applies (or none is)."""
    wanted = normalise(filters)
    if not wanted:
        return None
    from smart_search.sources import registry

    unsupported = registry.module(source).filter_params(wanted)[1]
    return unsupported_warning(registry.label(source), unsupported, wanted)


def first_mode(results: Any, source: str, filters: dict[str, Any] | None) -> tuple[Any, str | None]:
    """First mode's answer under `filters`: a list cut to `count` (a web engine's page holds up
    to ten whatever is asked), and the warning for what `source` (the tier that answered: a
    provider or an engine) could not honour."""
    wanted = normalise(filters)
    count = valid_count(wanted.get("count"))
    if count is not None and isinstance(results, list):
        results = results[:count]
    return results, source_warning(source, wanted)
