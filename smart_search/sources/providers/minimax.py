"""MiniMax Token Plan search (`POST /v1/coding_plan/search`): the wire format, both ways
(docs/sources/minimax.md).

Quirks worth knowing (OpenClaw's docs/tools/minimax-search.md and MiniMax's error-code page,
read 2026-12):
- The key is a Token Plan key (`MINIMAX_API_KEY`; an ordinary model key may be refused), sent
  as `Authorization: Bearer`; never in the URL or the body. The body is `{"q": query}`: there is
  no count, freshness, country or language parameter, so `count` is served by cutting the list.
- Global host `https://api.minimax.io`; the mainland China host is `https://api.minimaxi.com`
  (set `endpoints.minimax` to it).
- The answer is `{"organic": [{"title", "link", "snippet", "date"}], "related_searches": [...],
  "base_resp": {"status_code", "status_msg"}}`. A failure may come as HTTP 200 with a non-zero
  `base_resp.status_code`: 1004 and 2049 are a refused key, 1008 and 2056 spent balance or
  plan usage, 1002 and 1039 the rate limit, 1000/1001/1013 the server's. `status_msg` is never
  copied into a message.
- A Token Plan is a subscription whose searches count against its request windows; there is
  no per-search price and no free allowance.
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

NAME = "minimax"
EMPTY = "MiniMax returned no results."
PATH = "/v1/coding_plan/search"
MAX_RESULTS = 10  # what OpenClaw trims to; the API takes no count
# base_resp.status_code → what it means (MiniMax's error-code page).
_AUTH = frozenset({1004, 2049})
_SPENT = frozenset({1008, 2056})
_RATE = frozenset({1002, 1039})

SOURCE = Source(
    name=NAME, label="MiniMax", kind="api", order=10, endpoint="https://api.minimax.io",
    # No free allowance: a Token Plan's searches count against its request windows. The default
    # windows are a cautious share of the smallest plan, for the operator to set to theirs.
    daily_limit=100, monthly_limit=3000, described="MiniMax's Token Plan search API",
)  # fmt: skip


def build_request(
    query: str, settings: Settings, *, filters: dict[str, Any] | None = None
) -> HttpRequest:
    """POST `{"q": query}` with the key in the Authorization header only. MiniMax takes no
    filter parameter: `filters` add nothing to the request."""
    headers = parsing.key_headers(settings, NAME, "Authorization", "Bearer ")
    return parsing.json_post(settings, NAME, PATH, {"q": query}, headers, None)


def parse_response(resp: HttpResponse, settings: Settings) -> Answer:
    """The `organic` results as `[{title, url, snippet}]` (at most 10), or the `errors` class
    the response stands for (a 200 may carry a failure in `base_resp`)."""
    if not 200 <= resp.status < 300:
        raise classify_error(resp)
    data = json_object(SOURCE.label, resp)
    failure = _envelope_error(resp, data)
    if failure is not None:
        raise failure
    organic = data.get("organic")
    if organic is None and isinstance(data.get("base_resp"), dict):
        raise errors.NoResults(EMPTY, http_status=resp.status)
    answer = parsing.results_answer(SOURCE.label, resp, organic, _result, EMPTY)
    return answer._replace(results=answer.results[:MAX_RESULTS])


def _result(item: Any) -> dict[str, str] | None:
    url = parsing.item_url(item, "link")
    if url is None:
        return None
    title, snippet = parsing.plain(item.get("title")), parsing.plain(item.get("snippet"))
    return {"title": title, "url": url, "snippet": snippet}


def _code(data: object) -> int | None:
    """`base_resp.status_code` when it is a failure's (a non-zero whole number)."""
    base = data.get("base_resp") if isinstance(data, dict) else None
    code = base.get("status_code") if isinstance(base, dict) else None
    return code if type(code) is int and code != 0 else None


def _envelope_error(resp: HttpResponse, data: object) -> errors.SearchError | None:
    code = _code(data)
    if code is None:
        return None
    message = f"{errors.api_error(SOURCE.label, resp.status)} (code {code})"
    if code in _AUTH:
        return errors.AuthFailed(message, http_status=resp.status)
    if code in _SPENT:
        return errors.QuotaExhausted(message, http_status=resp.status)
    if code in _RATE:
        return errors.RateLimited(message, http_status=resp.status)
    if code in (1000, 1001, 1013):
        return errors.ServerError(message, http_status=resp.status)
    return shape_error(SOURCE.label, resp)


def classify_error(resp: HttpResponse) -> errors.SearchError:
    """A non-2xx status: its `base_resp` code when the body carries one (spent balance is
    quota, not a refusal), else as every provider's (429 the rate limit, 401/403 refusals)."""
    try:
        data = orjson.loads(resp.body)
    except orjson.JSONDecodeError:
        data = None
    return _envelope_error(resp, data) or status_error(SOURCE.label, resp)


def billed_units(resp: HttpResponse, settings: Settings) -> int:
    """One request for an answer MiniMax served (`base_resp` 0); nothing for a failure, which
    a Token Plan does not count."""
    if not 200 <= resp.status < 300:
        return 0
    try:
        data = orjson.loads(resp.body)
    except orjson.JSONDecodeError:
        return 1
    return 0 if _code(data) is not None else 1


def observation(resp: HttpResponse) -> dict[str, Any] | None:
    """Spent balance or plan usage (1008, 2056) exhausts the day: a Token Plan's windows are
    hours long, so the next day may search again."""
    try:
        code = _code(orjson.loads(resp.body))
    except orjson.JSONDecodeError:
        return None
    if code in _SPENT:
        return {"exhausted": "day", "why": f"MiniMax code {code} (Token Plan usage spent)"}
    return None


def filter_params(filters: dict[str, Any] | None) -> tuple[dict[str, Any], list[str]]:
    """MiniMax takes no filter parameter: every filter is reported unsupported, except a `count`
    of at most 10, which the caller serves by cutting the list."""
    from smart_search.sources.filters import normalise, valid_count

    unsupported = [
        name
        for name, value in normalise(filters).items()
        if not (name == "count" and (valid_count(value) or 0) and value <= MAX_RESULTS)
    ]
    return {}, unsupported
