"""Firecrawl: search (`POST /v2/search`) billed in credits, its keyless free tier, and the scrape
(`POST /v2/scrape`) smart_fetch falls back to (docs/sources/firecrawl.md, docs/fetch.md).

Quirks worth knowing (docs.firecrawl.dev: API reference, billing; OpenClaw's
docs/tools/firecrawl.md, read 2026-12):
- The key (`FIRECRAWL_API_KEY`) goes as `Authorization: Bearer`; never in the URL or the body.
- Search bills 2 credits per 10 results (more when results are scraped, which this module never
  asks for), so `limit` is kept at 10 or under: every search costs 2 credits. A scrape bills 1
  credit a page with the basic proxy, which is what this module asks for (`auto` may retry with
  the stealth proxy at 5). An answer may say what it cost (`creditsUsed`), which is read when
  present.
- The search answer is `{"success", "data": {"web": [{"url", "title", "description",
  "position"}]}}`; the scrape answer `{"success", "data": {"markdown", "metadata": {"title",
  "sourceURL", "statusCode", ...}}}`.
- 401 is a refused key, 402 spent credits ("payment required": waiting will not help), 429 the
  rate limit (with `Retry-After`), 408 a timeout, 5xx the server's. Errors are `{"success":
  false, "error": "..."}`; no body text is ever copied into a message.
- The free plan's 500 credits are granted once, not monthly.
- The keyless tier (OpenClaw's "Firecrawl Search (Free)"): the same search without a key, rate
  limited by Firecrawl. Opt-in, as OpenClaw's is: active once `endpoints.firecrawl_free` names
  the host (`https://api.firecrawl.dev`, or a self-hosted instance without auth). No units; paced
  like the scraped engines; a refusal or throttle is `blocked`, never "no results".
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

NAME = "firecrawl"
KEYLESS_NAME = "firecrawl_free"
EMPTY = "Firecrawl returned no results."
PATH = "/v2/search"
SCRAPE_PATH = "/v2/scrape"
MAX_RESULTS = 10  # one bill of 2 credits covers up to 10 results
SEARCH_CREDITS = 2
SCRAPE_CREDITS = 1
_FRESHNESS = {"day": "qdr:d", "week": "qdr:w", "month": "qdr:m", "year": "qdr:y"}

SOURCE = Source(
    name=NAME, label="Firecrawl", kind="api", order=12, endpoint="https://api.firecrawl.dev",
    units=("credit",), units_per_call=lambda mode: SEARCH_CREDITS,
    # The free plan's 500 credits, once (Firecrawl's pricing, read 2026-12): the month window is
    # that grant, the day window a thirtieth of it.
    daily_limit=16, monthly_limit=500, described="the Firecrawl search API",
)  # fmt: skip


def build_request(
    query: str, settings: Settings, *, filters: dict[str, Any] | None = None
) -> HttpRequest:
    """POST the query as JSON with the key in the Authorization header only; `filters` (see
    `filter_params`) add Firecrawl's own body keys."""
    headers = parsing.key_headers(settings, NAME, "Authorization", "Bearer ")
    own = filter_params(filters)[0] if filters else None
    return parsing.json_post(settings, NAME, PATH, _body(query), headers, own)


def _body(query: str) -> dict[str, Any]:
    return {"query": query, "limit": MAX_RESULTS}


def parse_response(resp: HttpResponse, settings: Settings | None) -> Answer:
    """`data.web` as `[{title, url, snippet}]` (the snippet is Firecrawl's `description`), or
    the `errors` class the response stands for."""
    if not 200 <= resp.status < 300:
        raise classify_error(resp)
    data = json_object(SOURCE.label, resp).get("data")
    if not isinstance(data, dict):
        raise shape_error(SOURCE.label, resp)
    web = data.get("web", [])  # a search with nothing on the web may omit the list
    return parsing.results_answer(SOURCE.label, resp, web, _result, EMPTY)


def _result(item: Any) -> dict[str, str] | None:
    url = parsing.item_url(item)
    if url is None:
        return None
    title, snippet = parsing.plain(item.get("title")), parsing.plain(item.get("description"))
    return {"title": title, "url": url, "snippet": snippet}


def classify_error(resp: HttpResponse) -> errors.SearchError:
    """402 is spent credits (quota); the rest as every provider's (401 refused, 429 the rate
    limit with its `Retry-After`, 408 a timeout, 5xx the server's)."""
    if resp.status == 402:
        return errors.QuotaExhausted(errors.api_error(SOURCE.label, 402), http_status=402)
    return status_error(SOURCE.label, resp)


def billed_units(resp: HttpResponse, settings: Settings) -> int:
    """A search's credits: the answer's `creditsUsed` when it gives a sane whole number, else
    2; nothing for an error status (Firecrawl bills what it served)."""
    return _credits(resp, SEARCH_CREDITS)


def _credits(resp: HttpResponse, price: int) -> int:
    if not 200 <= resp.status < 300:
        return 0
    try:
        data = orjson.loads(resp.body)
    except orjson.JSONDecodeError:
        return price
    found = data.get("creditsUsed") if isinstance(data, dict) else None
    inner = data.get("data") if isinstance(data, dict) else None
    if found is None and isinstance(inner, dict) and isinstance(inner.get("metadata"), dict):
        found = inner["metadata"].get("creditsUsed")  # a scrape reports it in its metadata
    return found if type(found) is int and 0 <= found <= 100 else price


def observation(resp: HttpResponse) -> dict[str, Any] | None:
    """A 402 says the credits are spent: the month is exhausted."""
    if resp.status != 402:
        return None
    return {"exhausted": "month", "why": "Firecrawl 402 (credits exhausted)"}


def filter_params(filters: dict[str, Any] | None) -> tuple[dict[str, Any], list[str]]:
    """Firecrawl's body keys for the search filters, and the filters it cannot honour.

    count → `limit` (1-10: more results cost more credits), freshness → `tbs` qdr:d/w/m/y,
    country → `country` (ISO 3166-1 alpha-2). It has no language parameter.
    """
    from smart_search.sources.filters import is_code, normalise, valid_count

    body: dict[str, Any] = {}
    unsupported: list[str] = []
    for name, value in normalise(filters).items():
        if name == "count" and (valid_count(value) or 0) and value <= MAX_RESULTS:
            body["limit"] = value
        elif name == "freshness" and str(value) in _FRESHNESS:
            body["tbs"] = _FRESHNESS[value]
        elif name == "country" and is_code(value):
            body["country"] = value
        else:
            unsupported.append(name)
    return body, unsupported


# --- scrape: smart_fetch's fallback extractor (`fetch.fallback: "firecrawl"`) ----------------


def scrape_request(settings: Settings, url: str) -> HttpRequest:
    """POST /v2/scrape for `url`'s main content as markdown, with the basic proxy (1 credit),
    the key in the Authorization header only."""
    headers = parsing.key_headers(settings, NAME, "Authorization", "Bearer ")
    body = {"url": url, "formats": ["markdown"], "onlyMainContent": True, "proxy": "basic"}
    return parsing.json_post(settings, NAME, SCRAPE_PATH, body, headers, None)


def parse_scrape(resp: HttpResponse) -> dict[str, Any]:
    """`{"text", "title", "final_url", "status"}` of a scrape answer, or the `errors` class
    the response stands for (no markdown: `no_results`)."""
    if not 200 <= resp.status < 300:
        raise classify_error(resp)
    data = json_object(SOURCE.label, resp).get("data")
    if not isinstance(data, dict):
        raise shape_error(SOURCE.label, resp)
    text = data.get("markdown")
    meta = data.get("metadata") if isinstance(data.get("metadata"), dict) else {}
    if not isinstance(text, str) or not text.strip():
        raise errors.NoResults("Firecrawl found no readable text on the page.", http_status=200)
    final = parsing.item_url(meta, "sourceURL") or parsing.item_url(meta, "url")
    status = meta.get("statusCode")
    return {
        "text": text,
        "title": meta.get("title") if isinstance(meta.get("title"), str) else None,
        "final_url": final,
        "status": status if type(status) is int else None,
    }


def scrape_credits(resp: HttpResponse) -> int:
    """What a scrape cost: its reported `creditsUsed`, else 1; nothing for an error status."""
    return _credits(resp, SCRAPE_CREDITS)


# --- the keyless tier: Firecrawl Search (Free) -----------------------------------------------


KEYLESS = parsing.keyless_tier(
    KEYLESS_NAME,
    "Firecrawl (free)",
    5,
    PATH,
    _body,
    filter_params,
    parse_response,
    host_plugin=None,
)
