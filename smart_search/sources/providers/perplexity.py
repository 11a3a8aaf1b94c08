"""Perplexity Search API (`POST /search`): raw ranked results, both ways
(docs/sources/perplexity.md).

Quirks worth knowing (docs.perplexity.ai, the Search API reference and Fast Search, read 2026-12):
- The key travels as `Authorization: Bearer <key>`; never in the URL or the body.
- This is the Search API, not Sonar: the answer is `results[]` of `title`, `url`, `snippet`,
  `date`, `last_updated`, no synthesized text.
- Billing counts each successful request, whatever it finds: `search_type: "web"` at $5 per
  1,000, `"fast"` at $1 per 1,000 (`providers.perplexity.mode`). Either is one request.
- `max_results` is 1-20 for web search (above 20 only for people search): the count filter
  stays within it.
- Error bodies are `{"error": {"message", "type", "code"}}`; no body text is copied into a
  message. 401 is a bad key, 429 the rate limit; spent credits are a 402 or an error whose
  type names the quota (`insufficient_quota`), which waiting will not heal.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from smart_search import errors
from smart_search.sources.providers import parsing
from smart_search.sources.providers.parsing import Answer, status_error
from smart_search.sources.source import Source

if TYPE_CHECKING:
    from smart_search.host.config import Settings
    from smart_search.sources.http import HttpRequest, HttpResponse

NAME = "perplexity"
EMPTY = "Perplexity returned no results."
PATH = "/search"
DEFAULT_RESULTS = 10
MAX_RESULTS = 20  # web search's ceiling (the reference: more only for people search)
# Its search types, the first the default: each is one billed request, at different prices.
MODES = ("web", "fast")
_QUOTA_WORDS = ("insufficient_quota", "quota", "credit", "billing")

SOURCE = Source(
    name=NAME, label="Perplexity", kind="api", order=6, endpoint="https://api.perplexity.ai",
    modes=MODES,
    # No free API tier: the $5 of monthly credit a Pro subscription includes buys 1,000 web
    # searches at $5 per 1,000 (pricing page, read 2026-12). The day window is its thirtieth.
    daily_limit=33, monthly_limit=1000,
    request_settings=("modes",), described="the Perplexity Search API",
    # The spec's answer to forcing Perplexity, which stands for the spec's install (no
    # Perplexity key): a configured Perplexity is asked (issue 30; docs/errors.md).
    forced_unconfigured="Perplexity is not yet implemented.",
)  # fmt: skip


def build_request(
    query: str, settings: Settings, *, filters: dict[str, Any] | None = None
) -> HttpRequest:
    """POST the query as JSON in the configured search type; the key in the Authorization
    header only. `filters` (see `filter_params`) add Perplexity's own fields."""
    mode = settings.modes.get(NAME)
    body: dict[str, Any] = {
        "query": query,
        "max_results": DEFAULT_RESULTS,
        "search_type": mode if mode in MODES else MODES[0],
    }
    headers = parsing.key_headers(settings, NAME, "Authorization", "Bearer ")
    own = filter_params(filters)[0] if filters else None
    return parsing.json_post(settings, NAME, PATH, body, headers, own)


def parse_response(resp: HttpResponse, settings: Settings) -> Answer:
    """`[{title, url, snippet}]`, or the `errors` class the response stands for."""
    if not 200 <= resp.status < 300:
        raise classify_error(resp)
    return parsing.listed_results(SOURCE.label, resp, "results", parsing.titled, EMPTY)


def classify_error(resp: HttpResponse) -> errors.SearchError:
    """The error for a non-2xx status: spent credits (402, or an error naming the quota) stop
    the month; the rest as every provider's (429 the rate limit, 401/403 refusals)."""
    if _spent(resp):
        return errors.QuotaExhausted(errors.api_error(SOURCE.label, resp.status),
                                     http_status=resp.status)  # fmt: skip
    return status_error(SOURCE.label, resp)


def _spent(resp: HttpResponse) -> bool:
    if resp.status == 402:
        return True
    if resp.status not in (401, 403, 429):
        return False
    words = parsing.error_words(resp.body)
    return any(w in words for w in _QUOTA_WORDS)


def billed_units(resp: HttpResponse, settings: Settings) -> int:
    """One request per 2xx, in either search type; nothing for an error status."""
    return 1 if 200 <= resp.status < 300 else 0


def observation(resp: HttpResponse) -> dict[str, Any] | None:
    """Spent credits exhaust the month; a search answer never says what is left."""
    if resp.status < 400 or not _spent(resp):
        return None
    return {"exhausted": "month", "why": f"Perplexity {resp.status} (credits exhausted)"}


# --- filters (issue 15) ----------------------------------------------------------------------


def filter_params(filters: dict[str, Any]) -> tuple[dict[str, Any], list[str]]:
    """Perplexity's body fields for the search filters, and the filters it cannot honour.

    count → `max_results` (1-20), freshness → `search_recency_filter` (day, week, month, year),
    country → `country` (ISO 3166-1 alpha-2), language → `search_language_filter` ([ISO 639-1]).
    """
    from smart_search.sources.filters import FRESHNESS, is_code, normalise, valid_count

    body: dict[str, Any] = {}
    unsupported: list[str] = []
    for name, value in normalise(filters).items():
        if name == "count" and (valid_count(value) or 0) and value <= MAX_RESULTS:
            body["max_results"] = value
        elif name == "freshness" and value in FRESHNESS:
            body["search_recency_filter"] = value
        elif name == "country" and is_code(value):
            body["country"] = value.upper()
        elif name == "language" and is_code(value):
            body["search_language_filter"] = [value.lower()]
        else:
            unsupported.append(name)
    return body, unsupported
