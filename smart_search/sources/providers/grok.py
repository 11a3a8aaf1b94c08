"""Grok web search: xAI's Responses API with its server-side `web_search` tool, both ways
(docs/sources/grok.md). An answer with citations, as Gemini's grounding gives.

Quirks worth knowing (docs.x.ai: Tools overview, Tool usage details, Pricing, Cost tracking;
OpenClaw's docs/tools/grok-search.md; read 2026-12):
- `POST /v1/responses` with the key as `Authorization: Bearer <XAI_API_KEY>`; never in the URL.
- The answer is `output[]`: `message` items whose `output_text` parts carry the text and
  `url_citation` annotations; a top-level `citations` list of URLs may come too. `web_search_call`
  items record the searches the model ran. `status: "incomplete"` is a cut-short answer.
- Billing is tokens plus $5 per 1,000 `web_search` invocations; the model decides how many it
  runs. The answer counts them (`usage.server_side_tool_usage_details.web_search_calls`): the
  unit is the search query, as for Gemini 3, and a call holds 3 until it is settled.
- Spent credit or a team spending limit is a 403 (or 429) whose error names credits or the
  limit; a plain 429 is the rate limit. Error bodies (`{"code", "error"}`) can echo the
  request: they are matched, never copied.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from smart_search import errors
from smart_search.sources.providers import parsing
from smart_search.sources.providers.parsing import Answer, json_object, shape_error, status_error
from smart_search.sources.source import Source

if TYPE_CHECKING:
    from smart_search.host.config import Settings
    from smart_search.sources.http import HttpRequest, HttpResponse

NAME = "grok"
EMPTY = "Grok returned an empty response."
PATH = "/v1/responses"
MODEL = "grok-4.7"  # OpenClaw 2026.9's default for Grok web search
_SPENT_WORDS = ("credit", "spending limit", "billing", "quota")

SOURCE = Source(
    name=NAME, label="Grok", kind="api", order=8, endpoint="https://api.x.ai",
    key_variable="XAI_API_KEY", units=("search_query",), host_plugin="xai",
    # No free allowance for tool calls: $5 buys 1,000 web searches (xAI's pricing page, read
    # 2026-12); the defaults spend no more a month, a thirtieth of it a day.
    daily_limit=33, monthly_limit=1000,
    described="Grok web search (xAI)", answers_with_text=True,
)  # fmt: skip


def build_request(
    query: str, settings: Settings, *, filters: dict[str, Any] | None = None
) -> HttpRequest:
    """POST the query with the `web_search` tool on and nothing stored; the key in the
    Authorization header only. `filters` (see `filter_params`) add an instruction."""
    messages: list[dict[str, str]] = [{"role": "user", "content": query}]
    own = filter_params(filters)[0] if filters else {}
    if own:
        messages.insert(0, {"role": "system", "content": own["instructions"]})
    body = {"model": MODEL, "input": messages, "tools": [{"type": "web_search"}], "store": False}
    headers = parsing.key_headers(settings, NAME, "Authorization", "Bearer ")
    return parsing.json_post(settings, NAME, PATH, body, headers, None)


def parse_response(resp: HttpResponse, settings: Settings) -> Answer:
    """The answer text and its citations, or the `errors` class the response stands for."""
    if not 200 <= resp.status < 300:
        raise classify_error(resp)
    data = json_object(SOURCE.label, resp)
    output = data.get("output")
    if not isinstance(output, list):
        raise shape_error(SOURCE.label, resp)
    texts: list[str] = []
    pairs: list[tuple[object, object]] = []
    for part in _text_parts(output):
        texts.append(part["text"])
        notes = part.get("annotations")
        for note in notes if isinstance(notes, list) else []:
            if isinstance(note, dict) and note.get("type") == "url_citation":
                pairs.append((note.get("url"), note.get("title")))
    listed = data.get("citations")
    pairs += [(url, "") for url in (listed if isinstance(listed, list) else [])]
    complete = data.get("status") in (None, "completed")
    return parsing.text_answer(SOURCE.label, resp, "".join(texts), parsing.citations(pairs),
                               EMPTY, complete=complete)  # fmt: skip


def _text_parts(output: list[Any]) -> list[dict[str, Any]]:
    """The `output_text` parts of the `message` items, in order."""
    parts = []
    for item in output:
        if not isinstance(item, dict) or item.get("type") != "message":
            continue
        content = item.get("content")
        for part in content if isinstance(content, list) else []:
            if isinstance(part, dict) and part.get("type") == "output_text":
                if isinstance(part.get("text"), str):
                    parts.append(part)
    return parts


def classify_error(resp: HttpResponse) -> errors.SearchError:
    """The error for a non-2xx status: spent credit or a spending limit stops the month; a 404
    is the model gone; the rest as every provider's (429 the rate limit, 400/401/403 refusals)."""
    if _spent(resp):
        return errors.QuotaExhausted(errors.api_error(SOURCE.label, resp.status),
                                     http_status=resp.status)  # fmt: skip
    if resp.status == 404:
        return errors.ModelUnavailable(f"Grok model {MODEL} is unavailable.", http_status=404)
    return status_error(SOURCE.label, resp)


def _spent(resp: HttpResponse) -> bool:
    if resp.status not in (402, 403, 429):
        return False
    words = parsing.error_words(resp.body)
    return resp.status == 402 or any(w in words for w in _SPENT_WORDS)


def billed_units(resp: HttpResponse, settings: Settings) -> int:
    """The web searches a 2xx ran (its usage's `web_search_calls`, else its `web_search_call`
    items); a 2xx that says neither is charged the call's worst case; nothing for an error."""
    if not 200 <= resp.status < 300:
        return 0
    data = parsing.loose_json(resp.body)
    usage = data.get("usage") if isinstance(data, dict) else None
    details = usage.get("server_side_tool_usage_details") if isinstance(usage, dict) else None
    calls = details.get("web_search_calls") if isinstance(details, dict) else None
    if type(calls) is int and 0 <= calls <= 1000:
        return calls
    output = data.get("output") if isinstance(data, dict) else None
    if isinstance(output, list):
        return sum(1 for i in output if isinstance(i, dict) and i.get("type") == "web_search_call")
    return max(1, settings.max_units_per_call.get(NAME, 1))


def observation(resp: HttpResponse) -> dict[str, Any] | None:
    """Spent credit or a reached spending limit exhausts the month."""
    if not _spent(resp):
        return None
    return {"exhausted": "month", "why": f"Grok {resp.status} (credit or spending limit)"}


# --- filters (issue 15) ----------------------------------------------------------------------


def filter_params(filters: dict[str, Any]) -> tuple[dict[str, Any], list[str]]:
    """An instruction carrying the country and language filters (the `web_search` tool has no
    field for them; the model follows it as best it can), and the filters Grok cannot honour:
    count (an answer, not a list) and freshness."""
    return parsing.instructed(filters)
