"""Ollama web search: the hosted API (`OLLAMA_API_KEY`) and, as its keyless tier, an Ollama host
the operator runs (docs/sources/ollama.md).

Quirks worth knowing (docs.ollama.com/capabilities/web-search and OpenClaw's
docs/tools/ollama-search.md, read 2026-12):
- Hosted: `POST https://ollama.com/api/web_search` with `{"query", "max_results"}` (1-10,
  default 5) and the key as `Authorization: Bearer`; never in the URL or the body. A free Ollama
  account may search; Ollama publishes no number of searches for it.
- The answer is `{"results": [{"title", "url", "content"}]}`; `content` is the snippet (it can
  be long: cut here).
- A local or self-hosted Ollama (signed in with `ollama signin`) answers the same request
  without a key at `/api/experimental/web_search` and forwards it to Ollama's cloud: the keyless
  tier `ollama_local`, active once `endpoints.ollama_local` names the host (plain http to a
  private host is fine: no key travels). It costs no units, is paced like the scraped engines,
  and a host that refuses or throttles is `blocked`, never "no results".
- Errors are `{"error": "..."}` with a status: 401/403 a refused key, 429 the rate limit (with
  any `Retry-After`), 5xx the server's. No body text is ever copied into a message.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from smart_search import errors
from smart_search.sources.providers import parsing
from smart_search.sources.providers.parsing import Answer, json_object, status_error
from smart_search.sources.source import Source

if TYPE_CHECKING:
    from smart_search.host.config import Settings
    from smart_search.sources.http import HttpRequest, HttpResponse

NAME = "ollama"
KEYLESS_NAME = "ollama_local"
EMPTY = "Ollama returned no results."
PATH = "/api/web_search"
LOCAL_PATH = "/api/experimental/web_search"
MAX_RESULTS = 10  # the API's own maximum
SNIPPET_CHARS = 500

SOURCE = Source(
    name=NAME, label="Ollama", kind="api", order=11, endpoint="https://ollama.com",
    # Billed per request by a free account's usage limits (Ollama publishes no number for web
    # search): the default windows are a cautious share, for the operator to set to theirs.
    daily_limit=33, monthly_limit=1000, described="Ollama's web search API",
)  # fmt: skip


def build_request(
    query: str, settings: Settings, *, filters: dict[str, Any] | None = None
) -> HttpRequest:
    """POST the query with the key in the Authorization header only; `count` sets
    `max_results`."""
    headers = parsing.key_headers(settings, NAME, "Authorization", "Bearer ")
    own = filter_params(filters)[0] if filters else None
    return parsing.json_post(settings, NAME, PATH, _body(query), headers, own)


def _body(query: str) -> dict[str, Any]:
    return {"query": query, "max_results": MAX_RESULTS}


def parse_response(resp: HttpResponse, settings: Settings | None) -> Answer:
    """`[{title, url, snippet}]` (the snippet is Ollama's `content`, cut), or the `errors` class
    the response stands for."""
    if not 200 <= resp.status < 300:
        raise classify_error(resp)
    data = json_object(SOURCE.label, resp)
    return parsing.results_answer(SOURCE.label, resp, data.get("results"), _result, EMPTY)


def _result(item: Any) -> dict[str, str] | None:
    url = parsing.item_url(item)
    if url is None:
        return None
    snippet = parsing.plain(item.get("content"))[:SNIPPET_CHARS]
    return {"title": parsing.plain(item.get("title")), "url": url, "snippet": snippet}


def classify_error(resp: HttpResponse) -> errors.SearchError:
    """Every status as every provider's: 401/403 refusals, 429 the rate limit with its
    `Retry-After`, 5xx the server's. Ollama documents no status of spent usage of its own."""
    return status_error(SOURCE.label, resp)


def billed_units(resp: HttpResponse, settings: Settings) -> int:
    """One request per 2xx; nothing for an error status."""
    return 1 if 200 <= resp.status < 300 else 0


def observation(resp: HttpResponse) -> dict[str, Any] | None:
    """Ollama's answers say nothing about what is left."""
    return None


def filter_params(filters: dict[str, Any] | None) -> tuple[dict[str, Any], list[str]]:
    """Ollama's body keys for the search filters: only `count` → `max_results` (1-10). It has
    no freshness, country or language: those are reported unsupported."""
    from smart_search.sources.filters import normalise, valid_count

    body: dict[str, Any] = {}
    unsupported: list[str] = []
    for name, value in normalise(filters).items():
        if name == "count" and (valid_count(value) or 0) and value <= MAX_RESULTS:
            body["max_results"] = value
        else:
            unsupported.append(name)
    return body, unsupported


# --- the keyless tier: an Ollama host the operator runs --------------------------------------


KEYLESS = parsing.keyless_tier(
    KEYLESS_NAME,
    "Ollama (local)",
    4,
    LOCAL_PATH,
    _body,
    filter_params,
    parse_response,
    host_plugin=NAME,
)
