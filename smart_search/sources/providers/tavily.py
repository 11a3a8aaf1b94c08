"""Tavily Search API: the wire format, both ways, and its usage endpoint (for reconciliation).

Quirks worth knowing (docs.tavily.com, read 2026-12):
- `POST /search` with the key as `Authorization: Bearer <key>`; older clients sent `api_key`
  in the JSON body, which this module never does.
- It bills in API credits: a `basic` search costs 1, an `advanced` one 2, whatever it finds.
  The mode is `providers.tavily.mode`, sent explicitly as `search_depth` (never `auto_parameters`,
  which may switch to `advanced` on its own). `include_usage` makes the answer say what it cost.
- Running out of credits is not a 429: 432 is the plan's limit, 433 the pay-as-you-go limit.
  429 is the per-minute rate limit. Errors carry `{"detail": {"error": "..."}}`; no body text
  is ever copied into a message.
- Queries over 400 characters are refused, so they are cut at a word boundary here and the
  caller is told (`fit_query`).
- `GET /usage` reports the key's credits used this billing cycle and its limit (null when the
  key has none); `usage_request` and `parse_usage` read it for reconciliation.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import orjson

from smart_search import errors
from smart_search.sources.providers import parsing
from smart_search.sources.providers.parsing import Answer, json_object, shape_error, status_error
from smart_search.sources.source import Source

if TYPE_CHECKING:
    from smart_search.host.config import Settings
    from smart_search.sources.http import HttpRequest, HttpResponse

NAME = "tavily"
EMPTY = "Tavily returned no results."
PATH = "/search"
USAGE_PATH = "/usage"
MAX_QUERY_CHARS = 400
DEFAULT_COUNT = 10  # results asked for without a `count` filter (Tavily's own default is 5)
# Credits one search costs in each mode (the credits page; the first mode is the default).
MODE_CREDITS = {"basic": 1, "advanced": 2}
_QUOTA_STATUSES = {432: "plan", 433: "pay-as-you-go"}
_UNLIMITED = 2147483647  # what the usage endpoint's `limit` stands for when it is not null


def units_per_call(mode: str | None) -> int:
    """The most credits one search may bill in `mode`: max_units_per_call's default."""
    return MODE_CREDITS.get(mode or "", max(MODE_CREDITS.values()))


def fit_query(query: str) -> tuple[str, str | None]:
    """`query` cut to Tavily's 400 characters at a word boundary, and a warning saying so
    (None when it fits as it is)."""
    return parsing.fit_words(query, "Tavily", MAX_QUERY_CHARS)


SOURCE = Source(
    name=NAME, label="Tavily", kind="api", order=3, endpoint="https://api.tavily.com",
    units=("credit",), modes=tuple(MODE_CREDITS), units_per_call=units_per_call,
    # 1,000 free API credits a month (the credits page, read 2026-12). No daily allowance: the
    # daily window is a day's even share of the month, so the month's credits last the month.
    daily_limit=33, monthly_limit=1000,
    request_settings=("modes",), fit_query=fit_query, described="the Tavily Search API",
)  # fmt: skip


def build_request(
    query: str, settings: Settings, *, filters: dict[str, Any] | None = None
) -> HttpRequest:
    """POST the query (already fitted by `fit_query`) in the configured mode; the key goes in
    the Authorization header only. `filters` (see `filter_params`) add Tavily's own fields."""
    body = {
        "query": query,
        "search_depth": _mode(settings),
        "max_results": DEFAULT_COUNT,
        "include_usage": True,
    }
    headers = parsing.key_headers(settings, NAME, "Authorization", "Bearer ")
    own = filter_params(filters)[0] if filters else None
    return parsing.json_post(settings, NAME, PATH, body, headers, own)


def _mode(settings: Settings) -> str:
    mode = settings.modes.get(NAME)
    return mode if mode in MODE_CREDITS else SOURCE.modes[0]


def parse_response(resp: HttpResponse, settings: Settings) -> Answer:
    """`[{title, url, snippet}]` (the snippet is Tavily's `content`), or the `errors` class the
    response stands for."""
    if not 200 <= resp.status < 300:
        raise classify_error(resp)
    return parsing.listed_results(SOURCE.label, resp, "results", _result, EMPTY)


def _result(item: Any) -> dict[str, str] | None:
    return parsing.titled(item, "content")


def classify_error(resp: HttpResponse) -> errors.SearchError:
    """The error for a non-2xx status: 432/433 are credits used up (the plan's or the
    pay-as-you-go limit); the rest as every provider's (429 the rate limit, 401/403/400 refused,
    5xx the server's)."""
    status = resp.status
    message = errors.api_error(SOURCE.label, status)
    if status in _QUOTA_STATUSES:
        return errors.QuotaExhausted(message, http_status=status)
    return status_error(SOURCE.label, resp)


def billed_units(resp: HttpResponse, settings: Settings) -> int:
    """What one answer cost: the credits a 2xx reports (`usage.credits`), else its mode's price;
    nothing for an error status (Tavily bills successful searches only)."""
    if not 200 <= resp.status < 300:
        return 0
    try:
        data = orjson.loads(resp.body)
    except orjson.JSONDecodeError:
        data = None
    usage = data.get("usage") if isinstance(data, dict) else None
    credits = usage.get("credits") if isinstance(usage, dict) else None
    if type(credits) is int and 0 <= credits <= 1000:
        return credits
    return MODE_CREDITS[_mode(settings)]


def observation(resp: HttpResponse) -> dict[str, Any] | None:
    """Search answers never say what is left; a 432/433 says this month's credits are gone."""
    if resp.status in _QUOTA_STATUSES:
        return {
            "exhausted": "month",
            "why": f"Tavily {resp.status} ({_QUOTA_STATUSES[resp.status]} credit limit reached)",
        }
    return None


# --- usage (issue 20, point 5: reconciliation) -----------------------------------------------


def usage_request(settings: Settings, key: str) -> HttpRequest:
    """`GET /usage` for API key `key` (in the Authorization header, never the URL): what the key
    has used this billing cycle and its limit."""
    from smart_search.sources.http import HttpRequest

    return HttpRequest(
        "GET",
        settings.endpoints[NAME] + USAGE_PATH,
        headers={"Authorization": f"Bearer {key}", "Accept": "application/json"},
    )


def parse_usage(resp: HttpResponse) -> dict[str, int | None]:
    """`{"used": credits this billing cycle, "limit": the key's limit or None}` from a `/usage`
    answer. The key's own figures (`key.usage`, `key.limit`) come first; a key without a limit
    falls back to the account plan's (`account.plan_limit`), and None means unlimited. Raises
    the `errors` class of an error status or of an answer that is not the documented shape."""
    if not 200 <= resp.status < 300:
        raise classify_error(resp)
    data = json_object(SOURCE.label, resp)
    key, account = data.get("key"), data.get("account")
    if not isinstance(key, dict) or not isinstance(account, dict | None):
        raise shape_error(SOURCE.label, resp)
    used = _count(key.get("usage"))
    raw_limit = key.get("limit")
    if raw_limit is None and account is not None:
        raw_limit = account.get("plan_limit")  # a key without its own limit spends the plan's
    limit = _count(raw_limit)
    if used is None or (raw_limit is not None and limit is None):
        raise shape_error(SOURCE.label, resp)
    return {"used": used, "limit": None if limit == _UNLIMITED else limit}


def _count(value: object) -> int | None:
    return value if type(value) is int and value >= 0 else None


# --- filters (issue 15) ----------------------------------------------------------------------

# ISO 3166 codes → the lowercase English names Tavily's `country` takes (its search reference's
# list); a code not here is reported as unsupported rather than sent.
COUNTRIES = {
    "AR": "argentina", "AT": "austria", "AU": "australia", "BE": "belgium", "BR": "brazil",
    "CA": "canada", "CH": "switzerland", "CL": "chile", "CN": "china", "CO": "colombia",
    "CZ": "czech republic", "DE": "germany", "DK": "denmark", "EG": "egypt", "ES": "spain",
    "FI": "finland", "FR": "france", "GB": "united kingdom", "GR": "greece", "HU": "hungary",
    "ID": "indonesia", "IE": "ireland", "IL": "israel", "IN": "india", "IT": "italy",
    "JP": "japan", "KE": "kenya", "KR": "south korea", "MX": "mexico", "MY": "malaysia",
    "NG": "nigeria", "NL": "netherlands", "NO": "norway", "NZ": "new zealand", "PE": "peru",
    "PH": "philippines", "PK": "pakistan", "PL": "poland", "PT": "portugal", "RO": "romania",
    "SA": "saudi arabia", "SE": "sweden", "SG": "singapore", "TH": "thailand", "TR": "turkey",
    "TW": "taiwan", "UA": "ukraine", "AE": "united arab emirates", "US": "united states",
    "VN": "vietnam", "ZA": "south africa",
}  # fmt: skip


def filter_params(filters: dict[str, Any]) -> tuple[dict[str, Any], list[str]]:
    """Tavily's body fields for the search filters, and the filters it cannot honour.

    count → `max_results` (1-20), freshness → `time_range` day/week/month/year, country →
    `country` (Tavily's names, see COUNTRIES). Tavily has no language field: `language` is
    always unsupported.
    """
    from smart_search.sources.filters import FRESHNESS, normalise, valid_count

    params: dict[str, Any] = {}
    unsupported: list[str] = []
    for name, value in normalise(filters).items():
        mapped: Any = None
        if name == "count":
            mapped, key = valid_count(value), "max_results"
        elif name == "freshness":
            mapped, key = (value if value in FRESHNESS else None), "time_range"
        elif name == "country":
            mapped, key = COUNTRIES.get(str(value)), "country"
        if mapped is None:
            unsupported.append(name)
        else:
            params[key] = mapped
    return params, unsupported
