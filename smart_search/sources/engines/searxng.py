"""SearXNG, a metasearch engine the operator runs, read through its JSON API (issue 20):
`GET {endpoints.searxng}/search?q=...&format=json` (https://docs.searxng.org/dev/search_api).

A web engine like the scraped ones (it answers as `provider_used: "web_fetch"`, costs no units,
is paced and has a circuit breaker), but self-hosted: it has no default endpoint, so it is in
the plans only once `endpoints.searxng` is configured, and then it leads the web tiers of both
strategies (`Source.self_hosted`, read by config and the planner).

Quirks worth knowing:
- The JSON format is off unless the instance lists it under `search.formats` in its
  settings.yml; a format it does not serve is answered with HTTP 403. That 403 is reported as
  such (`blocked`, naming the setting), never as a CAPTCHA.
- The instance's bot limiter, when enabled, refuses clients it does not trust with 429 (or
  403): the request carries a browser's headers, and the operator may exempt our address.
- `results[]` hold `url`, `title` and `content` (the snippet, absent or empty for some
  results); `answers`, `infoboxes` and `suggestions` are not results. An empty `results` with
  `unresponsive_engines` listed means the engines it asks failed (CAPTCHAs, timeouts), not
  that nothing exists: a server error, not `no_results`.
- No parameter sets how many results a page holds: `count` is served by cutting the list.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from smart_search.sources.engines.request import page_request
from smart_search.sources.source import Source

if TYPE_CHECKING:
    from smart_search.host.config import Settings
    from smart_search.sources.http import HttpRequest, HttpResponse

NAME = "searxng"
PATH = "/search"
SOURCE = Source(
    name=NAME, label="SearXNG", kind="web", order=0, endpoint=None, self_hosted=True,
    # With no endpoints.searxng, the instance OpenClaw's searxng plugin names (its
    # webSearch.baseUrl, else SEARXNG_BASE_URL: OpenClaw's docs/tools/searxng-search.md).
    host_keys=("$SEARXNG_BASE_URL",),
)  # fmt: skip
FORMAT_OFF = (
    "SearXNG refused the JSON format (HTTP 403): add json to search.formats in the "
    "instance's settings.yml."
)
# SearXNG's time ranges (its `time_range` parameter) are the freshness values themselves.
_TIME_RANGES = ("day", "week", "month", "year")


def build_request(
    query: str, settings: Settings, *, filters: dict[str, Any] | None = None
) -> HttpRequest:
    """GET /search?q=...&format=json&categories=general: the instance's web results as JSON.
    `filters` (see `filter_params`) set a time range and a language."""
    params = {"q": query, "format": "json", "categories": "general", **filter_params(filters)[0]}
    return page_request(settings, NAME, PATH, params)


def classify_status(resp: HttpResponse) -> None:
    """A non-2xx answer as the engines' error tree (engines/fetch.py), except a 403, which from
    SearXNG means the JSON format is off: a `blocked` whose message names the setting."""
    from smart_search import errors
    from smart_search.sources.engines.fetch import classify_status as engine_status

    if resp.status == 403:
        raise errors.Blocked(FORMAT_OFF, http_status=403)
    engine_status(SOURCE, resp)


def parse(body: bytes) -> list[dict[str, Any]]:
    """The `results[]` of a SearXNG JSON answer as `{title, url, snippet}`, or NoResults (an
    empty list), ServerError (an empty list because its engines failed) or ParseError (not
    JSON, or not SearXNG's shape)."""
    import orjson

    from smart_search import errors

    try:
        data = orjson.loads(body)
    except orjson.JSONDecodeError:
        raise errors.ParseError(
            "SearXNG returned a response that is not JSON (is json in the instance's "
            "search.formats?)."
        ) from None
    found = data.get("results") if isinstance(data, dict) else None
    if not isinstance(found, list):
        raise errors.ParseError("SearXNG returned JSON in an unexpected shape.")
    results = _results(found)
    if results:
        return results
    if found:  # entries, but none with a title and a web link
        raise errors.ParseError("SearXNG returned results without a title and a web link.")
    failed = data.get("unresponsive_engines")
    if isinstance(failed, list) and failed:
        raise errors.ServerError(
            f"SearXNG returned no results: {len(failed)} of its engines did not answer."
        )
    raise errors.NoResults("SearXNG returned no results.")


def _results(found: list[Any]) -> list[dict[str, Any]]:
    from smart_search.text.urls import is_web_url

    results: list[dict[str, Any]] = []
    seen: set[str] = set()
    for entry in found:
        if not isinstance(entry, dict):
            continue
        url, title, content = entry.get("url"), entry.get("title"), entry.get("content")
        url = url.strip() if isinstance(url, str) else ""
        title = " ".join(title.split()) if isinstance(title, str) else ""
        if not title or not is_web_url(url) or url in seen:
            continue
        seen.add(url)
        snippet = " ".join(content.split()) if isinstance(content, str) else ""
        results.append({"title": title, "url": url, "snippet": snippet})
    return results


# --- filters (issue 15) ----------------------------------------------------------------------


def filter_params(filters: dict[str, Any] | None) -> tuple[dict[str, str], list[str]]:
    """SearXNG's query parameters for the search filters, and the filters it cannot honour.

    freshness → `time_range=day|week|month|year`; language → `language=xx`, with a country
    `xx-CC` (SearXNG's locales are a language, optionally in a region). A country without a
    language is unsupported: SearXNG has no region of its own. `count` needs no parameter: the
    caller cuts the list (a page holds what the instance's engines return).
    """
    from smart_search.sources.filters import is_code, normalise, valid_count

    wanted = normalise(filters)
    params: dict[str, str] = {}
    unsupported: list[str] = []
    if "count" in wanted and valid_count(wanted["count"]) is None:
        unsupported.append("count")
    freshness = wanted.get("freshness")
    if freshness is not None:
        if str(freshness) in _TIME_RANGES:
            params["time_range"] = str(freshness)
        else:
            unsupported.append("freshness")
    language, country = wanted.get("language"), wanted.get("country")
    if language is not None:
        if is_code(language):
            params["language"] = f"{language}-{country}" if is_code(country) else language
        else:
            unsupported.append("language")
    if country is not None and not (is_code(country) and "language" in params):
        unsupported.append("country")
    return params, unsupported
