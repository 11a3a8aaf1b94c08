"""Parallel's paid Search API (`POST /v1/search`), both ways (docs/sources/parallel.md). Its
keyless free tier, the Search MCP, is a web engine of its own: `engines/parallel_free.py`.

Quirks worth knowing (docs.parallel.ai: Search quickstart, migration guide, rate limits,
pricing, read 2026-12):
- The key travels in the `x-api-key` header; never in the URL or the body.
- `search_queries` (short keyword queries) is required; `objective` (the question in words)
  adds context. The query is sent as both. `max_results` and `source_policy` go inside
  `advanced_settings`: sent at the top level they are a 422.
- A request is billed per 1,000 requests for up to 10 results, whatever mode (`turbo` $1,
  `basic` and `advanced` $5 per 1,000); each result past 10 costs extra, so `max_results`
  stays at 10 or under and every call is one request. `mode` is `providers.parallel.mode`,
  sent explicitly (Parallel's own default is `advanced`).
- Results are `url`, `title`, `publish_date` and `excerpts[]` (dense, LLM-ranked passages):
  the snippet is the excerpts joined, cut to 500 characters.
- 402 is spent credit, 429 the per-minute limit (600 a minute by default); error bodies are
  `{"error": {"message", ...}}` and are never copied into a message.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any

from smart_search import errors
from smart_search.sources.providers import parsing
from smart_search.sources.providers.parsing import Answer, status_error
from smart_search.sources.source import Source

if TYPE_CHECKING:
    from smart_search.host.config import Settings
    from smart_search.sources.http import HttpRequest, HttpResponse

NAME = "parallel"
EMPTY = "Parallel returned no results."
PATH = "/v1/search"
MAX_RESULTS = 10  # one request bills up to 10 results; more cost extra
SNIPPET_CHARS = 500
MAX_QUERY_CHARS = 200  # one entry of `search_queries`
# Its search modes, the first the default (Parallel's own): each is one billed request.
MODES = ("advanced", "basic", "fast", "turbo")


def fit_query(query: str) -> tuple[str, str | None]:
    """`query` cut at a word boundary to the 200 characters a `search_queries` entry takes."""
    return parsing.fit_words(query, "Parallel", MAX_QUERY_CHARS)


SOURCE = Source(
    name=NAME, label="Parallel", kind="api", order=7, endpoint="https://api.parallel.ai",
    modes=MODES, fit_query=fit_query,
    # $5 of free credit a month at $5 per 1,000 requests (pricing page, read 2026-12): 1,000
    # requests; the day window is a thirtieth of them.
    daily_limit=33, monthly_limit=1000,
    request_settings=("modes",), described="the Parallel Search API",
)  # fmt: skip


def request_body(query: str, filters: dict[str, Any] | None) -> dict[str, Any]:
    """The body both Parallel tiers send for `query` (the free tier's MCP tool takes the same
    `objective` and `search_queries`); `filters` as `filter_params` maps them."""
    own = filter_params(filters)[0] if filters else {}
    advanced = {"max_results": MAX_RESULTS, **own.get("advanced_settings", {})}
    return {"objective": query, "search_queries": [query], "advanced_settings": advanced}


def build_request(
    query: str, settings: Settings, *, filters: dict[str, Any] | None = None
) -> HttpRequest:
    """POST the query as JSON in the configured mode; the key in `x-api-key` only."""
    mode = settings.modes.get(NAME)
    body = {**request_body(query, filters), "mode": mode if mode in MODES else MODES[0]}
    headers = parsing.key_headers(settings, NAME, "x-api-key")
    return parsing.json_post(settings, NAME, PATH, body, headers, None)


def parse_response(resp: HttpResponse, settings: Settings) -> Answer:
    """`[{title, url, snippet}]`, or the `errors` class the response stands for."""
    if not 200 <= resp.status < 300:
        raise classify_error(resp)
    return parsing.listed_results(SOURCE.label, resp, "results", excerpted, EMPTY)


def excerpted(item: object) -> dict[str, str] | None:
    """One Parallel result (either tier) as `{title, url, snippet}`: the snippet is its
    excerpts joined and cut to 500 characters."""
    found = parsing.titled(item)
    if found is None:
        return None
    assert isinstance(item, dict)
    excerpts = item.get("excerpts")
    parts = [parsing.plain(e) for e in excerpts if isinstance(e, str)] if isinstance(
        excerpts, list) else []  # fmt: skip
    found["snippet"] = " … ".join(p for p in parts if p)[:SNIPPET_CHARS]
    return found


def classify_error(resp: HttpResponse) -> errors.SearchError:
    """The error for a non-2xx status: 402 is spent credit; the rest as every provider's (429
    the rate limit, 401/403/422 refusals, 5xx the server's)."""
    if resp.status == 402:
        return errors.QuotaExhausted(errors.api_error(SOURCE.label, 402), http_status=402)
    return status_error(SOURCE.label, resp)


def billed_units(resp: HttpResponse, settings: Settings) -> int:
    """One request per 2xx (up to 10 results, any mode); nothing for an error status."""
    return 1 if 200 <= resp.status < 300 else 0


def observation(resp: HttpResponse) -> dict[str, Any] | None:
    """A 402 says the credit is spent: the month is exhausted."""
    if resp.status != 402:
        return None
    return {"exhausted": "month", "why": "Parallel 402 (credit exhausted)"}


# --- filters (issue 15) ----------------------------------------------------------------------


def filter_params(
    filters: dict[str, Any], *, now: datetime | None = None
) -> tuple[dict[str, Any], list[str]]:
    """Parallel's `advanced_settings` for the search filters, and the filters it cannot honour.

    count → `max_results` (1-10: more would bill extra results), freshness →
    `source_policy.after_date` (a day, 7, 30 or 365 days before `now`). Parallel has no
    country or language field: both are unsupported.
    """
    from smart_search.sources.filters import FRESHNESS_DAYS, normalise, utc_now, valid_count

    advanced: dict[str, Any] = {}
    unsupported: list[str] = []
    for name, value in normalise(filters).items():
        if name == "count" and (valid_count(value) or 0) and value <= MAX_RESULTS:
            advanced["max_results"] = value
        elif name == "freshness" and str(value) in FRESHNESS_DAYS:
            start = utc_now(now) - timedelta(days=FRESHNESS_DAYS[value])
            advanced["source_policy"] = {"after_date": start.strftime("%Y-%m-%d")}
        else:
            unsupported.append(name)
    return ({"advanced_settings": advanced} if advanced else {}), unsupported
