"""What a source declares about itself: the one value each provider and engine module holds as
`SOURCE`, which the registry (`registry.py`) collects. Everything outside a source's own module
learns about it from this value, never from its name.

A plain class with slots rather than a NamedTuple: the registry builds one per source on every
call, and a NamedTuple of this many fields costs more to define than all the sources to load.
It is immutable all the same (assignment after construction raises).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from collections.abc import Callable

# Field -> default; the required ones have none. Kept in one table so __init__, __repr__ and
# equality agree on what a Source is.
_REQUIRED = ("name", "label", "kind", "order", "endpoint")
_DEFAULTS: dict[str, Any] = {
    "key_variable": None,  # the API key's variable (environment, env.vars); an API's default
    # is <NAME>_API_KEY
    "not_configured": None,  # the message when that key is missing; an API's default names it
    "units": ("request",),  # the units it may bill in; the first is the default
    "daily_limit": 0,  # its free allowance: the default windows, on its own clock
    "monthly_limit": 0,
    "reset_timezone": "UTC",
    "default_unit": None,  # Callable[[dict], str]: the unit from other keys (a model)
    "request_settings": (),  # Settings fields that change its answer (the cache key)
    "route_keywords": None,  # the Settings field of the keywords that route a query here
    "described": "",  # how a sentence names what it does; default: the label
    "answers_with_text": False,  # an answer text (with citations) rather than a result list
    "default_route": False,  # where a query no keyword matches goes (`default_provider`)
    # In the chain of APIs a call walks when `provider_order` is unset: the spec's pair. Any other
    # API is asked only when forced, or named in `provider_order` (issue 20: without it,
    # behaviour is exactly what it was before more APIs were registered).
    "default_chain": False,
    "default_allocation": 0,  # an unconfigured agent's allocation of it
    "fit_query": None,  # Callable[[str], (query, warning)]: the query as this API takes it
    # An engine the operator runs (`endpoint=None`): active only when `endpoints.<name>` is
    # configured, then the first web engine of both strategies; plain http to a private host.
    "self_hosted": False,
    "modes": (),  # the search modes it offers (`providers.<p>.mode`), the first the default
    "units_per_call": None,  # Callable[[mode], int]: its worst case, max_units_per_call's default
    # Where OpenClaw may hold its key (issue 30; host/host_keys.py, docs/configuration.md):
    # the OpenClaw plugin whose `plugins.entries.<id>.config.webSearch` carries it (its `apiKey`;
    # a self-hosted engine's `baseUrl`); default: the source's name, for an API or a self-hosted
    # engine; None: OpenClaw holds nothing for it. The legacy `tools.web.search.<name>` is read too.
    "host_plugin": None,
    # Further places OpenClaw documents for it, after those: a dotted openclaw.json path
    # ("models.providers.google.apiKey") or "$VAR" for an environment variable OpenClaw reads.
    "host_keys": (),
    # The contract's answer to `force_provider` naming it while it is not configured (no key,
    # pool or endpoint of the operator's), when the spec fixes one; None: the tier is walked and
    # says it is not configured, as every source's does.
    "forced_unconfigured": None,
}


class Source:
    """One search API (`kind="api"`: keyed and billed) or web engine (`kind="web"`: scraped,
    no key, no units), as its module declares it. `order` is its place among its kind."""

    __slots__ = (*_REQUIRED, *_DEFAULTS)

    name: str
    label: str
    kind: str
    order: int
    endpoint: str | None  # None: no default (a self-hosted engine's is the operator's)
    key_variable: str | None
    not_configured: str | None
    units: tuple[str, ...]
    daily_limit: int
    monthly_limit: int
    reset_timezone: str
    default_unit: Callable[[dict[str, Any]], str] | None
    request_settings: tuple[str, ...]
    route_keywords: str | None
    described: str
    answers_with_text: bool
    default_route: bool
    default_chain: bool
    default_allocation: int
    fit_query: Callable[[str], tuple[str, str | None]] | None
    self_hosted: bool
    modes: tuple[str, ...]
    units_per_call: Callable[[str | None], int] | None
    host_plugin: str | None
    host_keys: tuple[str, ...]
    forced_unconfigured: str | None

    def __init__(self, **fields: Any) -> None:
        missing = [f for f in _REQUIRED if f not in fields]
        unknown = [f for f in fields if f not in _REQUIRED and f not in _DEFAULTS]
        if missing or unknown:
            raise TypeError(f"Source: missing {missing}, unknown {unknown}")
        if fields["kind"] == "api":
            key = fields.setdefault("key_variable", f"{fields['name'].upper()}_API_KEY")
            fields.setdefault(
                "not_configured",
                f"{fields['label']} is not configured. Add {key} to openclaw.json to enable it.",
            )
        if fields["kind"] == "api" or fields.get("self_hosted"):
            fields.setdefault("host_plugin", fields["name"])
        for field in self.__slots__:
            object.__setattr__(self, field, fields.get(field, _DEFAULTS.get(field)))

    def __setattr__(self, field: str, value: Any) -> None:
        raise AttributeError(f"Source is immutable: cannot set {field}")

    def __repr__(self) -> str:
        return f"Source({self.name!r}, {self.kind})"
