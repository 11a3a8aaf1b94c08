"""Exa `POST /search`: the wire format, both ways (docs/sources/exa.md).

Quirks worth knowing:
- The key travels in the `x-api-key` header (Exa also takes `Authorization: Bearer`); never in
  the URL or the body.
- Without `contents` a result is metadata only (title, url, dates): the request asks for
  `highlights`, the query-relevant excerpts that are free for the first 10 results, and the
  snippet is the first highlight (else the start of `text` or `summary`).
- Exa bills per request that returns up to 10 results and per result beyond 10 on top, so
  `numResults` is kept at 10 or under: every call is one request.
- 402 is "credits exhausted or the key's spending budget exceeded" (tags `NO_MORE_CREDITS`,
  `API_KEY_BUDGET_EXCEEDED`): waiting will not help. 429 is the per-second rate limit.
- Error bodies are `{"requestId", "error", "tag"}`; no body text is copied into a message.
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

NAME = "exa"
EMPTY = "Exa returned no results."
PATH = "/search"
# One request bills up to 10 results; each result beyond 10 costs extra (Exa's pricing page).
MAX_RESULTS = 10
DEFAULT_RESULTS = 10
SNIPPET_CHARS = 500
_SPACE = r"\s+"  # a pattern, compiled by `re` on first use

SOURCE = Source(
    name=NAME, label="Exa", kind="api", order=4, endpoint="https://api.exa.ai",
    # The Free Tier's $10 of credits a month at $7 per 1,000 search requests (Exa's pricing
    # page, read 2026-12) buys 1,428 requests; a day's share of them is 46. Exa has no daily
    # allowance: the day window only spreads the month.
    daily_limit=46, monthly_limit=1428, described="the Exa search API",
)  # fmt: skip


def build_request(
    query: str, settings: Settings, *, filters: dict[str, Any] | None = None
) -> HttpRequest:
    """POST the query as JSON with the key in its header. `filters` (see `filter_params`) add
    Exa's own body keys; None changes nothing."""
    body: dict[str, Any] = {
        "query": query,
        "type": "auto",
        "numResults": DEFAULT_RESULTS,
        "contents": {"highlights": True},  # the query-relevant excerpts: the snippets
    }
    headers = parsing.key_headers(settings, NAME, "x-api-key")
    own = filter_params(filters)[0] if filters else None
    return parsing.json_post(settings, NAME, PATH, body, headers, own)


def parse_response(resp: HttpResponse, settings: Settings) -> Answer:
    """`[{title, url, snippet}]`, or the `errors` class the response stands for."""
    if not 200 <= resp.status < 300:
        raise classify_error(resp)
    return parsing.listed_results(SOURCE.label, resp, "results", _result, EMPTY)


def classify_error(resp: HttpResponse) -> errors.SearchError:
    """The error for a non-2xx status: 402 is spent credits (or the key's budget); the rest as
    every provider's (429 the rate limit, 401/403 refusals, 5xx server errors)."""
    status = resp.status
    message = errors.api_error(SOURCE.label, status)
    if status == 402:
        return errors.QuotaExhausted(message, http_status=status)
    return status_error(SOURCE.label, resp)


def _result(item: Any) -> dict[str, str] | None:
    url = parsing.item_url(item)
    if url is None:
        return None
    title = item.get("title")
    return {
        "title": parsing.plain(title),
        "url": url,
        "snippet": _snippet(item),
    }


def _snippet(item: dict[str, Any]) -> str:
    """The first highlight, else the start of the page text or the summary."""
    highlights = item.get("highlights")
    if isinstance(highlights, list):
        for highlight in highlights:
            if isinstance(highlight, str) and highlight.strip():
                return parsing.plain(highlight)[:SNIPPET_CHARS]
    for key in ("text", "summary"):
        value = item.get(key)
        if isinstance(value, str) and value.strip():
            return parsing.plain(value)[:SNIPPET_CHARS]
    return ""


def billed_units(resp: HttpResponse, settings: Settings) -> int:
    """One request per 2xx (Exa bills a request with its results, none or ten); nothing for an
    error status."""
    return 1 if 200 <= resp.status < 300 else 0


def observation(resp: HttpResponse) -> dict[str, Any] | None:
    """A 402 says the credits (or the key's budget) are spent: the month is exhausted. Exa
    reports no remaining balance on a search answer."""
    if resp.status != 402:
        return None
    return {"exhausted": "month", "why": "Exa 402 (credits exhausted)"}


# --- filters (issue 15) ----------------------------------------------------------------------


def filter_params(
    filters: dict[str, Any], *, now: datetime | None = None
) -> tuple[dict[str, Any], list[str]]:
    """Exa's body keys for the search filters, and the filters it cannot honour.

    count → `numResults` (1-10: more would bill extra results), freshness →
    `startPublishedDate` (a day, 7, 30 or 365 days before `now`), country → `userLocation`
    (a two-letter ISO code). Exa has no language filter: language is reported as unsupported.
    """
    from smart_search.sources.filters import (
        FRESHNESS_DAYS,
        is_code,
        normalise,
        utc_now,
        valid_count,
    )

    wanted = normalise(filters)
    body: dict[str, Any] = {}
    unsupported: list[str] = []
    for name, value in wanted.items():
        if name == "count" and (valid_count(value) or 0) and value <= MAX_RESULTS:
            body["numResults"] = value
        elif name == "freshness" and str(value) in FRESHNESS_DAYS:
            start = utc_now(now).replace(microsecond=0) - timedelta(days=FRESHNESS_DAYS[value])
            body["startPublishedDate"] = start.strftime("%Y-%m-%dT%H:%M:%S.000Z")
        elif name == "country" and is_code(value):
            body["userLocation"] = value
        else:
            unsupported.append(name)
    return body, unsupported
