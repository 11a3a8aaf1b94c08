"""Serper's Google Search API (`POST /search`): the wire format, both ways
(docs/sources/serper.md).

Quirks worth knowing:
- The key travels in the `X-API-KEY` header; Serper also accepts it as an `apiKey` query
  parameter on GET, which would put it in URLs: never used.
- The answer is a whole results page: `organic` holds the web results (`title`, `link`,
  `snippet`, `position`); `knowledgeGraph`, `peopleAlsoAsk`, ads and the rest are ignored.
- Serper bills credits, only for successful answers: one for a page of up to 10 results (more
  results per page cost more), so `num` is kept at 10 or under. A 2xx may say what it cost in a
  top-level `credits` field, which is read when present.
- Errors are a flat `{"message", "statusCode"}` with no machine-readable code: a bad key is a
  403 ("Unauthorized."), spent credits a 400 or 429 whose message speaks of credits, and a 429
  without that the per-second limit. No `Retry-After` or rate-limit headers are published.
- Messages are matched, never copied: an error body can echo the request.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any

import orjson

from smart_search import errors
from smart_search.sources.providers import parsing
from smart_search.sources.providers.parsing import Answer, json_object, shape_error, status_error
from smart_search.sources.source import Source

if TYPE_CHECKING:
    from smart_search.host.config import Settings
    from smart_search.sources.http import HttpRequest, HttpResponse

NAME = "serper"
EMPTY = "Serper returned no results."
PATH = "/search"
# One credit buys a page of up to 10 results (Serper's pricing page).
MAX_RESULTS = 10
DEFAULT_RESULTS = 10
# "Not enough credits", "out of credits", "insufficient credits", "credits exhausted"...
_NO_CREDITS = r"(?i)\bcredits?\b"
_SPACE = r"\s+"
_FRESHNESS = {"day": "qdr:d", "week": "qdr:w", "month": "qdr:m", "year": "qdr:y"}

SOURCE = Source(
    name=NAME, label="Serper", kind="api", order=5, endpoint="https://google.serper.dev",
    units=("credit",),
    # A new account's 2,500 free credits, once, no card (Serper's pricing page, read 2026-12);
    # there is no daily or monthly allowance. The month window is that grant, the day window
    # a thirtieth of it, so a default install never spends past the grant in one month.
    daily_limit=83, monthly_limit=2500, described="the Serper Google Search API",
)  # fmt: skip


def build_request(
    query: str, settings: Settings, *, filters: dict[str, Any] | None = None
) -> HttpRequest:
    """POST the query as JSON with the key in its header. `filters` (see `filter_params`) add
    Serper's own body keys; None changes nothing."""
    body: dict[str, Any] = {"q": query, "num": DEFAULT_RESULTS}
    headers = parsing.key_headers(settings, NAME, "X-API-KEY")
    own = filter_params(filters)[0] if filters else None
    return parsing.json_post(settings, NAME, PATH, body, headers, own)


def parse_response(resp: HttpResponse, settings: Settings) -> Answer:
    """The `organic` results as `[{title, url, snippet}]`, or the `errors` class the response
    stands for."""
    if not 200 <= resp.status < 300:
        raise classify_error(resp)
    data = json_object(SOURCE.label, resp)
    organic = data.get("organic")
    if organic is None:
        # A page with no web results can omit `organic`; it still echoes its parameters.
        if isinstance(data.get("searchParameters"), dict):
            raise errors.NoResults(EMPTY, http_status=resp.status)
        raise shape_error(SOURCE.label, resp)
    return parsing.results_answer(SOURCE.label, resp, organic, _result, EMPTY)


def classify_error(resp: HttpResponse) -> errors.SearchError:
    """The error for a non-2xx status: spent credits (402, or a 400/429 saying so) exhaust the
    quota; the rest as every provider's (any other 429 the rate limit)."""
    status = resp.status
    message = errors.api_error(SOURCE.label, status)
    if status == 402 or (status in (400, 429) and _says_no_credits(resp.body)):
        return errors.QuotaExhausted(message, http_status=status)
    # 401, 403 ("Unauthorized.") and a 400 for a bad request are refusals (auth_failed).
    return status_error(SOURCE.label, resp)


def _says_no_credits(body: bytes) -> bool:
    """True when the error body's `message` speaks of credits (Serper's only signal)."""
    try:
        data = orjson.loads(body)
    except orjson.JSONDecodeError:
        return False
    text = data.get("message") if isinstance(data, dict) else None
    return isinstance(text, str) and re.search(_NO_CREDITS, text) is not None


def _result(item: Any) -> dict[str, str] | None:
    return parsing.titled(item, url="link")


def billed_units(resp: HttpResponse, settings: Settings) -> int:
    """Credits for a 2xx: the answer's own `credits` when it gives a whole number, else one (a
    page of up to 10 results); nothing for an error status (Serper bills successes only)."""
    if not 200 <= resp.status < 300:
        return 0
    try:
        data = orjson.loads(resp.body)
    except orjson.JSONDecodeError:
        return 1
    credits = data.get("credits") if isinstance(data, dict) else None
    if isinstance(credits, int) and not isinstance(credits, bool) and 0 <= credits <= 100:
        return credits
    return 1


def observation(resp: HttpResponse) -> dict[str, Any] | None:
    """Spent credits exhaust the month; Serper reports no remaining balance on an answer."""
    if resp.status < 400 or not isinstance(classify_error(resp), errors.QuotaExhausted):
        return None
    return {"exhausted": "month", "why": f"Serper {resp.status} (credits exhausted)"}


# --- filters (issue 15) ----------------------------------------------------------------------


def filter_params(filters: dict[str, Any]) -> tuple[dict[str, Any], list[str]]:
    """Serper's body keys for the search filters, and the filters it cannot honour.

    count → `num` (1-10: a bigger page costs more credits), freshness → `tbs` qdr:d/w/m/y,
    country → `gl` (ISO 3166-1 alpha-2, lower case), language → `hl` (ISO 639-1).
    """
    from smart_search.sources.filters import is_code, normalise, valid_count

    wanted = normalise(filters)
    body: dict[str, Any] = {}
    unsupported: list[str] = []
    for name, value in wanted.items():
        if name == "count" and (valid_count(value) or 0) and value <= MAX_RESULTS:
            body["num"] = value
        elif name == "freshness" and str(value) in _FRESHNESS:
            body["tbs"] = _FRESHNESS[value]
        elif name == "country" and is_code(value):
            body["gl"] = value.lower()
        elif name == "language" and is_code(value):
            body["hl"] = value
        else:
            unsupported.append(name)
    return body, unsupported
