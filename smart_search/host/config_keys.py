"""Every key the skill's config block may hold, as one declarative table (RULINGS 2).

`KEYS` is read by the loader (config.py: each row's `kind` picks the check, its default and bounds
feed it), by the unknown-key warning (`unknown_keys`, with a nearest-key hint) and by the docs page
docs/configuration-keys.md, which `markdown()` writes and a test compares with the committed file:

    python3 -m smart_search.host.config_keys --markdown > docs/configuration-keys.md

A key in the config block is a row without a dot. `providers.<p>.x` rows hold for each provider,
`cache.x` and `state_backend.x` rows are the fields of those objects: their parent's check reads
them. Import cost matters (config is read on every call): nothing is imported here but typing.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from smart_search.sources import registry

if TYPE_CHECKING:
    from smart_search.sources.source import Source

# gemini-2.0-flash (the spec's default) is shut down; this alias follows Google's current flash.
DEFAULT_GEMINI_MODEL = "gemini-flash-latest"
# Spec 5's tables; configurable through finance_keywords / brave_keywords.
DEFAULT_FINANCE_KEYWORDS = (
    "stock", "share price", "nse", "bse", "wse", "nyse", "nasdaq", "earnings", "ipo", "dividend",
    "funding round", "acquisition", "merger", "valuation", "competitor", "market share",
    "breaking", "just announced", "today", "hours ago", "spearfox", "fifthspear",
)  # fmt: skip
DEFAULT_BRAVE_KEYWORDS = ("space", "astronomy", "nasa", "esa", "cosmos")
# Every source declares its endpoint, and each API its free allowance (the default windows, so a
# default install never runs into a paid overage), its clock and its units (sources/registry.py).
_APIS = registry.sources("api")
# A self-hosted engine declares none: it joins the plans only once `endpoints.<name>` is set.
DEFAULT_ENDPOINTS = {s.name: s.endpoint for s in registry.sources() if s.endpoint is not None}
DEFAULT_DAILY_LIMITS = {s.name: s.daily_limit for s in _APIS}
DEFAULT_MONTHLY_LIMITS = {s.name: s.monthly_limit for s in _APIS}
DEFAULT_RESET_TIMEZONES = {s.name: s.reset_timezone for s in _APIS}
DEFAULT_UNITS = {s.name: s.units[0] for s in _APIS}
UNIT_CHOICES = {s.name: s.units for s in _APIS}
DEFAULT_MODES = {s.name: (s.modes[0] if s.modes else None) for s in _APIS}
MODE_CHOICES = {s.name: s.modes for s in _APIS}


def worst_case(source: Source, unit: str, mode: str | None) -> int:
    """`max_units_per_call`'s default: what the source says its mode may cost; otherwise 3 for
    a search_query unit (Gemini 3 may run several queries for one prompt), else 1."""
    if source.units_per_call is not None:
        return source.units_per_call(mode)
    return 3 if unit == "search_query" else 1


# Unset, deep_max_units is the sum of the API legs' worst cases (RULINGS 7): the chain's APIs
# (`provider_order`, else the default chain).
DEFAULT_DEEP_MAX_UNITS = sum(
    worst_case(s, s.units[0], DEFAULT_MODES[s.name]) for s in _APIS if s.default_chain
)
# No count or limit anywhere (config or ledger) may exceed this: 1e30 is a typo, not a budget.
MAX_COUNT = 10**9
# The APIs whose module offers a page scrape: what `fetch.fallback` may name.
SCRAPERS = tuple(s.name for s in _APIS if hasattr(registry.module(s.name), "scrape_request"))
# The predecessor skill's allocation for an agent that is not in config.
DEFAULT_ALLOCATION = {s.name: s.default_allocation for s in _APIS}
DEFAULT_PROVIDER = next((s.name for s in _APIS if s.default_route), _APIS[0].name)
# Every duration is at most an hour: larger ones are typos, and 1e13 ms overflows the clock.
MAX_MS = 3_600_000
# The spec's layout (`skills.smart-search`) keeps its env block inside the section: not a typo.
LEGACY_SECTION_KEYS = ("env",)


class ConfigKey:
    """One config key: how it is read, what it is without config, and one line for the docs.
    (A plain slotted class: a NamedTuple costs every call ~0.1 ms to define.)

    `name`: the dotted path (`<p>` stands for each provider); `kind`: the check config.py runs
    (and the type the docs page names); `default`: what the loader reads when the key is absent
    (None: unset; a dict keyed by provider for a `providers.<p>.x` row); `doc`: one line for
    docs/configuration-keys.md; `low`/`high`: a whole number's bounds, both inclusive (None: no
    upper bound); `choices`: the allowed strings (a dict keyed by provider for a per-provider
    rule); `field`: the Settings field a `providers.<p>.x` row fills, one entry per provider;
    `shown`: the docs page's default when the default depends on other keys."""

    __slots__ = ("name", "kind", "default", "doc", "low", "high", "choices", "field", "shown")

    def __init__(
        self,
        name: str,
        kind: str,
        default: Any,
        doc: str,
        low: int | None = None,
        high: int | None = None,
        choices: Any = (),
        field: str = "",
        shown: str = "",
    ) -> None:
        self.name, self.kind, self.default, self.doc = name, kind, default, doc
        self.low, self.high, self.choices, self.field, self.shown = low, high, choices, field, shown

    def _replace(self, **changes: Any) -> ConfigKey:
        return ConfigKey(**{**{f: getattr(self, f) for f in self.__slots__}, **changes})

    def __repr__(self) -> str:
        return f"ConfigKey({self.name!r}, {self.kind!r})"


def _whole(name: str, default: int, low: int, high: int | None, doc: str) -> ConfigKey:
    return ConfigKey(name, "whole", default, doc, low, high)


def _per_provider(name: str, kind: str, default: Any, doc: str, **more: Any) -> ConfigKey:
    field = more.pop("field", name + "s")
    return ConfigKey(f"providers.<p>.{name}", kind, default, doc, field=field, **more)


# In the order the loader checks them: with two bad keys, the first one here is reported.
KEYS: tuple[ConfigKey, ...] = (
    ConfigKey(
        "gemini_model", "model", DEFAULT_GEMINI_MODEL,
        "Gemini model (the spec's gemini-2.0-flash is shut down; this alias follows Google's "
        "current flash)",
    ),
    ConfigKey(
        "default_provider", "provider", DEFAULT_PROVIDER, "provider when no routing keyword matches"
    ),
    ConfigKey(
        "provider_order", "providers_chain", None,
        "the API providers to try, in order, after the routed one (unset: the default chain, "
        + " and ".join(f"`{n}`" for n in registry.default_chain())
        + "); a provider left out is never asked unless it is the routed one",
        shown="unset",
    ),
    ConfigKey(
        "strict_agents", "bool", False,
        "reject agent ids not in agent_allocations (general is always allowed)",
    ),
    _whole("retry_max_attempts", 3, 1, 10, "attempts per API tier, the first included"),
    _whole("retry_base_delay", 500, 0, 60_000, "backoff base, ms"),
    _whole(
        "web_fetch_min_interval_ms", 2000, 0, MAX_MS,
        "minimum gap between two requests to one engine, across all processes",
    ),
    _whole("circuit_failure_threshold", 3, 1, 1000, "consecutive failures that open a breaker"),
    _whole(
        "circuit_reset_seconds", 60, 0, 86_400, "how long a breaker stays open before one trial"
    ),
    _whole("request_timeout_ms", 10000, 1, MAX_MS, "one HTTP attempt, ms"),
    _whole("total_timeout_ms", 30000, 1, MAX_MS, "the whole call: every tier, retry and wait, ms"),
    _whole("lock_timeout_ms", 5000, 0, MAX_MS, "longest wait for a state file's lock, ms"),
    _whole("log_retention_days", 30, 1, 36_500, "search logs older than this are deleted"),
    _whole("max_result_chars", 10000, 100, 100_000_000, "cap on results as compact JSON"),
    _whole("brave_count", 10, 1, 20, "Brave results per query"),
    # Invented agent ids can't grow the ledger without bound.
    _whole(
        "max_unconfigured_agents", 1000, 0, MAX_COUNT,
        "unconfigured agents that may spend per day (strict_agents off)",
    ),
    # Unset, it is the sum of the API legs' worst cases (RULINGS 7): the loader fills it in.
    ConfigKey(
        "deep_max_units", "whole", DEFAULT_DEEP_MAX_UNITS,
        "most units one deep call may bill (0: web only)", 0, 1000,
        shown="the sum of max_units_per_call over the chain's APIs (provider_order, else the "
        f"default chain: {DEFAULT_DEEP_MAX_UNITS})",
    ),
    ConfigKey(
        "finance_keywords", "keywords", DEFAULT_FINANCE_KEYWORDS,
        "finance routing keywords (replace the built-in list)",
    ),
    ConfigKey(
        "brave_keywords", "keywords", DEFAULT_BRAVE_KEYWORDS,
        "Brave routing keywords (replace the built-in list)",
    ),
    ConfigKey("providers", "providers", {}, "one object per provider, its keys below"),
    _per_provider("daily_limit", "count", DEFAULT_DAILY_LIMITS, "the provider's daily ceiling"),
    _per_provider(
        "monthly_limit", "count", DEFAULT_MONTHLY_LIMITS, "the provider's monthly ceiling"
    ),
    _per_provider(
        "reset_timezone", "zone", DEFAULT_RESET_TIMEZONES, "the clock of the provider's windows"
    ),
    _per_provider(
        "unit", "choice", DEFAULT_UNITS,
        "what one billed unit is (a source may pick it from other keys: gemini-1.x and "
        "gemini-2.x models default to request)",
        choices=UNIT_CHOICES,
    ),
    _per_provider(
        "mode", "mode", DEFAULT_MODES,
        "the search mode of a provider that offers several (its docs page says what each "
        "costs); none for the others",
        choices=MODE_CHOICES,
    ),
    _per_provider(
        "max_units_per_call", "count", None, "most units one call may bill (0 counts as 1)",
        field="max_units_per_call",
        shown="the worst case of the provider's mode where it has modes; else 3 when unit is "
        "search_query, else 1",
    ),
    _per_provider(
        "price_per_1000", "price", None, "price of 1,000 units, for the report's cost column",
        field="prices_per_1000",
    ),
    _per_provider(
        "currency", "currency", "USD", "currency of price_per_1000", field="currencies"
    ),
    _per_provider(
        "monthly_budget", "price", None,
        "most this provider may cost a month, in its currency (needs price_per_1000); enforced "
        "like a window",
        field="monthly_budgets",
    ),
    _per_provider(
        "keys", "keys", None,
        "a key pool (docs/quota.md, Key pools): key strings, {\"env\": VAR} or {\"value\": KEY}, "
        "each object optionally with project, daily_limit, monthly_limit; else <P>_API_KEYS "
        "(comma-separated), else <P>_API_KEY",
        field="key_pools",
    ),
    ConfigKey(
        "monthly_budget", "price", None,
        "most every provider together may cost a month (needs each provider's price_per_1000, "
        "all in one currency); enforced like a window",
    ),
    ConfigKey(
        "agent_allocations", "allocations", {},
        "per-agent daily allocation, `{\"<agent id>\": {"
        + ", ".join(f'"{n}": n' for n in registry.api_names())
        + "}}`",
    ),
    ConfigKey(
        "default_allocation", "allocation", DEFAULT_ALLOCATION,
        "allocation of an agent that searches but is not configured",
    ),
    ConfigKey(
        "endpoints", "endpoints", DEFAULT_ENDPOINTS,
        "base URLs by source (paths are fixed); http:// only for loopback hosts, or private "
        "ones for a self-hosted engine ("
        + ", ".join(f"`{s.name}`" for s in registry.sources() if s.self_hosted)
        + "), which is used only once set",
    ),
    ConfigKey(
        "source_weights", "weights", {},
        "deep mode's rank-fusion weight per source, positive (1.0 each when unset)",
    ),
    ConfigKey(
        "tracking_params", "names", (),
        "extra URL parameters deep mode's merge ignores (a trailing * makes a prefix)",
    ),
    ConfigKey(
        "state_dir", "path", None,
        "where the ledger, breaker, pacing and logs live (SMART_SEARCH_STATE_DIR wins; "
        "unset: `<OpenClaw state dir>/workspace/shared`)",
    ),
    ConfigKey("state_backend", "backend", {}, "where shared state lives, its keys below"),
    ConfigKey(
        "state_backend.kind", "choice", "files", "files in the state dir, or a Redis server",
        choices=("files", "redis"),
    ),
    ConfigKey(
        "state_backend.on_unavailable", "choice", "refuse",
        "when Redis is down: refuse API tiers, or search the web only",
        choices=("refuse", "web_only"),
    ),
    ConfigKey(
        "state_backend.on_state_lost", "choice", "restore",
        "when Redis forgot the ledger (restart without persistence, flush, eviction): restore it "
        "from the hosts' witnesses, or refuse API tiers until `smart-search state restore`",
        choices=("restore", "refuse"),
    ),
    ConfigKey(
        "state_backend.url", "redis_url", None,
        "the Redis server, or its Sentinel group, required for kind redis (`${VAR}` for a "
        "password)",
    ),
    ConfigKey(
        "state_backend.prefix", "redis_prefix", "smart-search", "prefix of every Redis key"
    ),
    ConfigKey(
        "mcp_agent_id", "agent_id", None,
        "the MCP server's agent_id for callers that omit it (--agent-id wins)",
    ),
    ConfigKey("cache", "cache", {}, "the shared result cache, its keys below"),
    ConfigKey("cache.enabled", "bool", True, "serve answers from the cache at all"),
    _whole(
        "cache.ttl_seconds", 6 * 3600, 0, 366 * 86400,
        "how long an answer is served (0: never served)",
    ),
    _whole(
        "cache.finance_ttl_seconds", 300, 0, 366 * 86400,
        "the same for finance and time-sensitive queries",
    ),
    _whole("cache.max_entries", 5000, 0, MAX_COUNT, "entry limit; least recently used go first"),
    _whole("cache.max_bytes", 64 * 1024 * 1024, 0, 1 << 40, "size limit in bytes"),
    ConfigKey("fetch", "fetch", {}, "smart_fetch, the page fetch tool: its keys below"),
    ConfigKey(
        "fetch.allow_private_hosts", "bool", False,
        "fetch private, loopback, link-local and metadata addresses (tests, intranets)",
    ),
    _whole(
        "fetch.daily_allocation", 0, 0, MAX_COUNT,
        "fetches each agent may make per day (0: no limit)",
    ),
    _whole(
        "fetch.min_interval_ms", 1000, 0, MAX_MS,
        "gap between two requests to one host, across processes",
    ),
    _whole(
        "fetch.cache_ttl_seconds", 3600, 0, 366 * 86400,
        "how long a fetched page is served again (0: never)",
    ),
    _whole(
        "fetch.max_bytes", 2 * 1024 * 1024, 4096, 64 * 1024 * 1024,
        "bytes of a page read at most; a larger page is read that far",
    ),
    ConfigKey(
        "fetch.fallback", "choice", "none",
        "a scrape API read when a page has no readable text (JavaScript-rendered), in its units",
        choices=("none", *SCRAPERS),
    ),
    ConfigKey(
        "timezone", "zone", None, "zone whose calendar day the quota and logs follow (unset: UTC)"
    ),
    ConfigKey("mcp", "mcp", {}, "the MCP server over HTTP: its keys below"),
    ConfigKey(
        "mcp.tokens", "tokens", (),
        "bearer tokens `smart-search mcp --http` accepts: `{\"env\": VAR}` or "
        "`{\"value\": TOKEN}`, each with `agents` (ids, or `\"*\"`: all, and the whole ledger) "
        "and an optional `label` (the logs' `client`); set, a request without one is refused",
    ),
)  # fmt: skip


def fields_of(parent: str) -> tuple[ConfigKey, ...]:
    """The rows an object key holds: `fields_of("cache")`, `fields_of("providers.<p>")`."""
    prefix = parent + "."
    return tuple(key for key in KEYS if key.name.startswith(prefix))


TOP_LEVEL = tuple(key for key in KEYS if "." not in key.name)
_TOP_LEVEL_NAMES = tuple(key.name for key in TOP_LEVEL)
_PROVIDER_KEY_NAMES = tuple(key.name.rsplit(".", 1)[1] for key in fields_of("providers.<p>"))


def unknown_keys(section: dict[str, Any]) -> list[tuple[str, str | None]]:
    """(dotted key, nearest known key or None) for every key the config block does not use."""

    def near(key: str, known: tuple[str, ...]) -> str | None:
        import difflib  # ~1 ms with heapq: only for a key that needs a hint, not on every call

        found = difflib.get_close_matches(key, known, n=1, cutoff=0.6)
        return found[0] if found else None

    out: list[tuple[str, str | None]] = []
    for key in section:
        if key not in _TOP_LEVEL_NAMES and key not in LEGACY_SECTION_KEYS:
            out.append((key, near(key, _TOP_LEVEL_NAMES)))
    providers = section.get("providers")
    if isinstance(providers, dict):
        for name, entry in providers.items():
            if isinstance(entry, dict):
                for key in entry:
                    if key not in _PROVIDER_KEY_NAMES:
                        guess = near(key, _PROVIDER_KEY_NAMES)
                        full = f"providers.{name}.{guess}" if guess else None
                        out.append((f"providers.{name}.{key}", full))
    return out


def unknown_key_warning(key: str, nearest: str | None) -> str:
    hint = f' (did you mean "{nearest}"?)' if nearest else ""
    return f'Unknown config key "{key}"{hint} is ignored.'


# The docs page's "type" column, by kind.
KIND_TYPES = {
    "model": "model name",
    "provider": "provider name",
    "providers_chain": "array of provider names",
    "bool": "true or false",
    "whole": "whole number",
    "keywords": "array of strings",
    "providers": "object",
    "count": "whole number",
    "zone": "IANA zone name",
    "price": "number or null",
    "currency": "currency code",
    "allocations": "object",
    "allocation": "object",
    "endpoints": "object",
    "weights": "object",
    "names": "array of strings",
    "path": "path",
    "backend": "object",
    "choice": "string",
    "mode": "string",
    "redis_url": "URL",
    "redis_prefix": "string",
    "agent_id": "agent id",
    "cache": "object",
    "keys": "array or null",
    "fetch": "object",
    "mcp": "object",
    "tokens": "array",
}
# The docs page's "allowed" column for kinds without bounds or choices.
KIND_RULES = {
    "keywords": "non-empty strings, matched lowercase",
    "backend": "the keys below",
    "cache": "the keys below",
    "fetch": "the keys below",
    "mcp": "the keys below",
    "tokens": "at most 256 entries; tokens of 16 to 512 of letters, digits, `-._~+/` (`=` at "
    "the end), each listed once; labels unique",
    "provider": " or ".join(f"`{n}`" for n in registry.api_names()),
    "providers_chain": "each of "
    + ", ".join(f"`{n}`" for n in registry.api_names())
    + " at most once; null or absent: unset",
    "providers": ", ".join(f"`{n}`" for n in registry.api_names()) + ", each with the keys below",
    "model": "letters, digits, `.`, `_`, `-`",
    "count": f"0 to {MAX_COUNT}",
    "zone": "a zone this machine knows",
    "price": f"0 to {MAX_COUNT}",
    "currency": "three capital letters",
    "allocations": f"agent ids (a-z, 0-9, `-`) to counts 0 to {MAX_COUNT}",
    "allocation": ", ".join(f"`{n}`" for n in registry.api_names()) + f": 0 to {MAX_COUNT}",
    "endpoints": "https:// URLs (http:// for loopback hosts)",
    "weights": ", ".join(f"`{s.name}`" for s in registry.sources()) + f": above 0 to {MAX_COUNT}",
    "names": "1 to 200 characters each",
    "path": "non-empty; `~` and `${VAR}` expand",
    "redis_url": "`redis://` or `rediss://` with a host; "
    "`redis+sentinel://host:26379[,host:port...]/service[/db]`",
    "redis_prefix": "1 to 64 of letters, digits, `.`, `_`, `:`, `-`",
    "agent_id": "a-z, 0-9, `-`; at most 64 characters",
    "keys": "1 to 64 entries; keys of at least 8 printable ASCII characters, each listed once",
}


def _show(value: Any) -> str:
    if value is None:
        return "none"
    if isinstance(value, bool):
        return "`true`" if value else "`false`"
    if isinstance(value, dict):
        if not value:
            return "`{}`"
        return "; ".join(f"{name}: {_show(v)}" for name, v in value.items())
    if isinstance(value, tuple):
        return ", ".join(f"`{v}`" for v in value) if value else "`[]`"
    return f"`{value}`"


def _allowed(key: ConfigKey) -> str:
    if key.kind in ("whole", "count") and key.low is not None:
        return f"{key.low} to {key.high}" if key.high is not None else f"at least {key.low}"
    if isinstance(key.choices, dict):
        # A provider without choices (no search modes) is left out of the column.
        return "; ".join(f"{p}: {_show(c)}" for p, c in key.choices.items() if c)
    if key.choices:
        return _show(tuple(key.choices))
    return KIND_RULES.get(key.kind, "")


def markdown() -> str:
    """docs/configuration-keys.md, written from `KEYS` (a test keeps the committed page equal)."""
    lines = [
        "# Configuration keys",
        "",
        "<!-- Generated from smart_search/host/config_keys.py; do not edit by hand. Regenerate:",
        "     python3 -m smart_search.host.config_keys --markdown > docs/configuration-keys.md -->",
        "",
        "The skill's settings live in `openclaw.json` under",
        '`skills.entries["smart-search"].config`. `${VAR}` in any string is replaced from the',
        "environment (`$${VAR}` stays literal). A wrong value is a `config_error` naming the key;",
        "an unknown key is ignored with a `warning` naming the nearest known key. `<p>` stands for",
        "each provider (" + ", ".join(f"`{n}`" for n in registry.api_names()) + ").",
        "",
        "| key | type | default | allowed | what it does |",
        "|---|---|---|---|---|",
    ]
    for key in KEYS:
        default = key.shown or _show(key.default)
        cells = (f"`{key.name}`", KIND_TYPES[key.kind], default, _allowed(key), key.doc)
        lines.append("| " + " | ".join(cell.replace("|", "\\|") for cell in cells) + " |")
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    import sys

    if sys.argv[1:] != ["--markdown"]:
        sys.stderr.write("usage: python3 -m smart_search.host.config_keys --markdown\n")
        raise SystemExit(2)
    sys.stdout.write(markdown())
