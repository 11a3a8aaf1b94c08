"""Brave Web Search API: the wire format, both ways.

Quirks worth knowing:
- `q` takes at most 400 characters and 50 words; longer queries are refused, so they are cut at
  a word boundary here and the caller is told (`fit_query`).
- Titles and descriptions carry `<strong>` highlighting and HTML entities (`&#x27;`): results
  are returned as plain text.
- A bad subscription token is a 422, not a 401.
- 429 is either the per-second limit (`RATE_LIMITED`: retry after about a second) or the
  monthly quota (`QUOTA_LIMITED`, or the monthly window of `X-RateLimit-Remaining` at 0):
  waiting will not help. The `X-RateLimit-*` headers list one value per window, per-second first,
  in the order of `X-RateLimit-Policy`; they may be absent.
- Errors come as one `error` object or as an `errors` array; both are read.
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
    # http (socket, logging, zlib) is imported when a request is built: every smart_search call
    # imports this module for `fit_query`, and a cache hit sends no request at all.
    from smart_search.host.config import Settings
    from smart_search.sources.http import HttpRequest, HttpResponse

NAME = "brave"
EMPTY = "Brave returned no results."
PATH = "/res/v1/web/search"
MAX_QUERY_CHARS = 400
MAX_QUERY_WORDS = 50

_TAG = r"<[^>]*>"  # patterns, compiled by `re` on first use
_SPACE = r"\s+"
# The character references Brave's fragments carry. A text with any other `&` goes to
# html.unescape, whose table (html.entities) costs a cold call ~1.7 ms to import.
_COMMON_REFS = {"&amp;": "&", "&lt;": "<", "&gt;": ">", "&quot;": '"', "&#x27;": "'", "&#39;": "'"}
_COMMON_REF = r"&(?:amp|lt|gt|quot|#x27|#39);"
# A window of a day or longer is a quota, not a rate limit.
_QUOTA_WINDOW_S = 86400
_WINDOW = r";\s*w\s*=\s*(\d+)"


def fit_query(query: str) -> tuple[str, str | None]:
    """`query` cut to Brave's 400 characters and 50 words at a word boundary, and a warning
    saying so when it had to be cut (None when it fits as it is)."""
    return parsing.fit_words(query, "Brave", MAX_QUERY_CHARS, MAX_QUERY_WORDS)


SOURCE = Source(
    name=NAME, label="Brave", kind="api", order=2, endpoint="https://api.search.brave.com",
    not_configured=(
        "Brave Search is not configured. Add BRAVE_API_KEY to openclaw.json to enable it."),
    # The Search plan's $5 monthly credit buys about 1,000 requests (Brave's plans page, read
    # 2026-11); a day's share of the legacy 2,000 a month is 66.
    daily_limit=66, monthly_limit=1000,
    request_settings=("brave_count",), route_keywords="brave_keywords", fit_query=fit_query,
    described="the Brave Search API",
    default_route=True,  # spec 8: default_provider "brave"
    default_chain=True,  # spec 4: one of the two APIs every strategy walks
    host_keys=("tools.web.search.apiKey",),  # OpenClaw's legacy key, Brave's before plugins
)  # fmt: skip


def build_request(
    query: str, settings: Settings, *, filters: dict[str, Any] | None = None
) -> HttpRequest:
    """GET with the subscription token in its header; `query` is already fitted to Brave's
    limits (`fit_query`, once, by the tier walk). `filters` (see `filter_params`) add Brave's
    own parameters; None changes nothing."""
    from smart_search.sources.http import HttpRequest

    params = {"q": query, "count": str(settings.brave_count)}
    if filters:
        params.update(filter_params(filters)[0])
    return HttpRequest(
        "GET",
        settings.endpoints[NAME] + PATH,
        params=params,
        headers=parsing.key_headers(settings, NAME, "X-Subscription-Token"),
    )


def parse_response(resp: HttpResponse, settings: Settings) -> Answer:
    """`[{title, url, snippet}]` in plain text, or the `errors` class the response stands for."""
    if not 200 <= resp.status < 300:
        raise classify_error(resp)
    data = json_object(SOURCE.label, resp)
    web = data.get("web")
    if web is None:
        # A search with no web hits omits `web` entirely (see brave-empty.json).
        if data.get("type") == "search" or "query" in data:
            raise errors.NoResults(EMPTY, http_status=resp.status)
        raise shape_error(SOURCE.label, resp)
    raw_results = web.get("results", []) if isinstance(web, dict) else None
    return parsing.results_answer(SOURCE.label, resp, raw_results, _result, EMPTY)


def classify_error(resp: HttpResponse) -> errors.SearchError:
    """The error for a non-2xx status; the body and headers only refine a 429."""
    status = resp.status
    message = errors.api_error(SOURCE.label, status)
    if status == 429:
        if "QUOTA_LIMITED" in _error_codes(resp.body) or _quota_window_spent(resp.headers):
            return errors.QuotaExhausted(message, http_status=status)
        wait = _first_reset(resp.headers)
        if wait is None:
            from smart_search.sources.http import retry_after_seconds

            wait = retry_after_seconds(resp.headers)
        return errors.RateLimited(message, http_status=status, retry_after=wait)
    # 422 SUBSCRIPTION_TOKEN_INVALID, 401, 403 and 400 are refusals (auth_failed).
    return status_error(SOURCE.label, resp)


def plain_text(value: object) -> str:
    """Brave's highlighted HTML fragment as plain text: tags dropped, entities decoded."""
    if not isinstance(value, str):
        return ""
    return re.sub(_SPACE, " ", unescape(re.sub(_TAG, "", value))).strip()


def unescape(text: str) -> str:
    """html.unescape(text), without loading its entity table when every `&` in `text` starts
    one of the common references."""
    if "&" not in text:
        return text
    if text.count("&") == len(re.findall(_COMMON_REF, text)):
        return re.sub(_COMMON_REF, lambda ref: _COMMON_REFS[ref.group()], text)
    import html

    return html.unescape(text)


def _result(item: Any) -> dict[str, str] | None:
    url = parsing.item_url(item)
    if url is None:
        return None
    return {
        "title": plain_text(item.get("title")),
        "url": url,
        "snippet": plain_text(item.get("description")),
    }


def _error_codes(body: bytes) -> set[str]:
    """The `code` of the `error` object or of each entry in the `errors` array."""
    try:
        data = orjson.loads(body)
    except orjson.JSONDecodeError:
        return set()
    if not isinstance(data, dict):
        return set()
    entries: list[Any] = [data.get("error")]
    if isinstance(data.get("errors"), list):
        entries.extend(data["errors"])
    return {e["code"] for e in entries if isinstance(e, dict) and isinstance(e.get("code"), str)}


def _header_list(headers: dict[str, str], name: str) -> list[str]:
    value = headers.get(name)
    return [v.strip() for v in value.split(",")] if value else []


def _quota_window_spent(headers: dict[str, str]) -> bool:
    """True when a window of a day or longer (the monthly quota) has nothing remaining."""
    remaining = _header_list(headers, "x-ratelimit-remaining")
    policy = _header_list(headers, "x-ratelimit-policy")
    windows = [re.search(_WINDOW, p) for p in policy]
    for index, value in enumerate(remaining):
        if value != "0":
            continue
        if len(windows) == len(remaining):
            found = windows[index]
            if found and int(found.group(1)) >= _QUOTA_WINDOW_S:
                return True
        elif index >= 1:
            # No usable policy header: Brave's documented order puts the monthly window second.
            return True
    return False


def billed_units(resp: HttpResponse, settings: Settings) -> int:
    """Brave bills one request per 2xx, with or without usable results; nothing otherwise."""
    return 1 if 200 <= resp.status < 300 else 0


def observation(resp: HttpResponse) -> dict[str, Any] | None:
    """The monthly window as Brave reports it (`remaining`, `limit`), and `exhausted: "month"`
    on a quota 429. Headers list one value per window in `X-RateLimit-Policy`'s order; without
    a usable policy, Brave's documented order puts the monthly window second."""
    seen: dict[str, Any] = {}
    if resp.status == 429 and isinstance(classify_error(resp), errors.QuotaExhausted):
        seen["exhausted"] = "month"
        seen["why"] = "Brave 429 (monthly quota)"
    remaining = _header_list(resp.headers, "x-ratelimit-remaining")
    limits = _header_list(resp.headers, "x-ratelimit-limit")
    policy = _header_list(resp.headers, "x-ratelimit-policy")
    index = None
    if policy and len(policy) == len(remaining):
        for i, entry in enumerate(policy):
            found = re.search(_WINDOW, entry)
            if found and int(found.group(1)) >= _QUOTA_WINDOW_S:
                index = i
    elif len(remaining) >= 2:
        index = 1
    if index is not None:
        left = _whole(remaining[index])
        if left is not None:
            seen["remaining"] = left
            seen["limit"] = _whole(limits[index]) if index < len(limits) else None
    return seen or None


def _whole(text: str) -> int | None:
    return int(text) if text.isdigit() and len(text) <= 10 else None


def _first_reset(headers: dict[str, str]) -> float | None:
    """Seconds until the per-second window resets (the first `X-RateLimit-Reset` value)."""
    values = _header_list(headers, "x-ratelimit-reset")
    try:
        return max(0.0, float(values[0])) if values else None
    except ValueError:
        return None


# --- filters (issue 15) ----------------------------------------------------------------------

# The countries and search languages Brave's web search documents ("codes" page); anything else
# is refused with a 422, so it is reported as unsupported instead of being sent.
COUNTRIES = frozenset(
    "AR AT AU BE BR CA CH CL CN DE DK ES FI FR GB GR HK ID IN IT JP KR MX MY NL NO NZ PH PL PT "
    "RU SA SE TR TW US ZA".split()
)
SEARCH_LANGS = frozenset(
    "ar bg bn ca cs da de el en en-gb es et eu fi fr gl gu he hi hr hu is it jp kn ko lt lv ml "
    "mr ms nb nl pa pl pt-br pt-pt ro ru sk sl sr sv ta te th tr uk vi zh-hans zh-hant".split()
)
_FRESHNESS = {"day": "pd", "week": "pw", "month": "pm", "year": "py"}


def search_lang(language: str, country: str | None) -> str | None:
    """Brave's `search_lang` for an ISO 639-1 code, or None when Brave has no such language.

    Brave names Japanese `jp`, Norwegian only as Bokmål `nb`, and splits English, Portuguese
    and Chinese by region: the country picks the variant (GB → en-gb, BR → pt-br, TW/HK →
    zh-hant); without one, `en`, `pt-pt` and `zh-hans`.
    """
    if language == "ja":
        return "jp"
    if language == "no":
        return "nb"
    if language == "en":
        return "en-gb" if country == "GB" else "en"
    if language == "pt":
        return "pt-br" if country == "BR" else "pt-pt"
    if language == "zh":
        return "zh-hant" if country in ("TW", "HK") else "zh-hans"
    return language if language in SEARCH_LANGS else None


def filter_params(filters: dict[str, Any]) -> tuple[dict[str, str], list[str]]:
    """Brave's query parameters for the search filters, and the filters it cannot honour.

    count → `count` (Brave allows 1-20), freshness → `freshness` pd/pw/pm/py, country →
    `country` (Brave's list only), language → `search_lang` (see `search_lang`).
    """
    from smart_search.sources.filters import normalise, valid_count

    wanted = normalise(filters)
    params: dict[str, str] = {}
    unsupported: list[str] = []
    country = str(wanted.get("country"))
    for name, value in wanted.items():
        if name == "count":
            count = valid_count(value)
            mapped = None if count is None else str(count)
            key = "count"
        elif name == "freshness":
            mapped, key = _FRESHNESS.get(str(value)), "freshness"
        elif name == "country":
            mapped, key = (value if str(value) in COUNTRIES else None), "country"
        else:
            mapped = search_lang(value, country) if isinstance(value, str) else None
            key = "search_lang"
        if mapped is None:
            unsupported.append(name)
        else:
            params[key] = mapped
    return params, unsupported
