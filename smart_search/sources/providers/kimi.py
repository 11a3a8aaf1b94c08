"""Kimi web search: Moonshot's chat completions with its built-in `$web_search` tool, both ways
(docs/sources/kimi.md). An answer with citations, as Gemini's grounding gives.

Quirks worth knowing (Moonshot's "Use the Kimi API's web search" guide, platform.moonshot.cn and
platform.kimi.ai; OpenClaw's docs/tools/kimi-search.md; read 2026-12):
- `POST /v1/chat/completions` with the key as `Authorization: Bearer <KIMI_API_KEY>`. Two
  regions, one key each: `https://api.moonshot.ai` (international, the default) and
  `https://api.moonshot.cn` (`endpoints.kimi`); a key of one region is a 401 on the other.
- The search takes two exchanges: the model first answers `finish_reason: "tool_calls"` with a
  `builtin_function` call to `$web_search`; the client sends that call's `arguments` back as
  the tool's result (Moonshot runs the search itself), and the model then writes the answer.
  `follow_up` builds that second request. Thinking must be off while `$web_search` is on.
- An answer that never called `$web_search` is not grounded ("I cannot browse"): no_results,
  as OpenClaw refuses it too.
- The answer has no structured citations: the pages it names (Markdown links, bare URLs) are.
- Each `$web_search` call is billed (¥0.03 on the .cn platform) on top of tokens: the unit is
  the search query, one per call the model made; a call holds 3 until it is settled.
- Errors are OpenAI-style `{"error": {"type", "message"}}`; `exceeded_current_quota_error`
  (any status) is spent balance, `engine_overloaded_error` an overload, and no body text is
  copied into a message.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any

from smart_search import errors
from smart_search.sources.providers import parsing
from smart_search.sources.providers.parsing import Answer, json_object, shape_error, status_error
from smart_search.sources.source import Source

if TYPE_CHECKING:
    from smart_search.host.config import Settings
    from smart_search.sources.http import HttpRequest, HttpResponse

NAME = "kimi"
EMPTY = "Kimi returned an empty response."
UNGROUNDED = "Kimi answered without searching the web."
PATH = "/v1/chat/completions"
MODEL = "kimi-k2.6"  # OpenClaw 2026.9's default for Kimi web search
SEARCH_TOOL = "$web_search"
TOOLS = [{"type": "builtin_function", "function": {"name": SEARCH_TOOL}}]
_LINK = r"\[([^\]\n]{0,300})\]\((https?://[^\s)]+)\)|(https?://[^\s)\]>\"'<]+)"
_TRAILING = ".,;:!?"

SOURCE = Source(
    name=NAME, label="Kimi", kind="api", order=9, endpoint="https://api.moonshot.ai",
    units=("search_query",), key_variable="KIMI_API_KEY", host_plugin="moonshot",
    host_keys=("$MOONSHOT_API_KEY",),  # OpenClaw reads either variable (docs/tools/kimi.md)
    # No free allowance for $web_search: each call is billed (¥0.03 on the .cn platform, read
    # 2026-12). The defaults allow 1,000 a month, a thirtieth of them a day.
    daily_limit=33, monthly_limit=1000,
    described="Kimi web search (Moonshot)", answers_with_text=True,
)  # fmt: skip


def build_request(
    query: str, settings: Settings, *, filters: dict[str, Any] | None = None
) -> HttpRequest:
    """POST the query with `$web_search` on and thinking off; the key in the Authorization
    header only. `filters` (see `filter_params`) add a system instruction."""
    messages: list[dict[str, Any]] = [{"role": "user", "content": query}]
    own = filter_params(filters)[0] if filters else {}
    if own:
        messages.insert(0, {"role": "system", "content": own["instructions"]})
    body = {"model": MODEL, "messages": messages, "tools": TOOLS,
            "thinking": {"type": "disabled"}}  # fmt: skip
    headers = parsing.key_headers(settings, NAME, "Authorization", "Bearer ")
    return parsing.json_post(settings, NAME, PATH, body, headers, None)


def _message(resp: HttpResponse) -> dict[str, Any] | None:
    """The first choice's message of a 2xx chat completion; None when the answer has none."""
    data = parsing.loose_json(resp.body)
    choices = data.get("choices") if isinstance(data, dict) else None
    first = choices[0] if isinstance(choices, list) and choices else None
    message = first.get("message") if isinstance(first, dict) else None
    return message if isinstance(message, dict) else None


def _searches(message: dict[str, Any] | None) -> list[dict[str, Any]]:
    """The `$web_search` calls a message makes."""
    calls = message.get("tool_calls") if message else None
    return [
        c for c in (calls if isinstance(calls, list) else [])
        if isinstance(c, dict) and isinstance(c.get("function"), dict)
        and c["function"].get("name") == SEARCH_TOOL
    ]  # fmt: skip


def follow_up(request: HttpRequest, resp: HttpResponse, settings: Settings) -> HttpRequest | None:
    """The next request when the model asked for `$web_search`: the conversation so far plus
    each call's `arguments` handed back as its result; None when the answer is written (or an
    error status came back). An answer written without ever searching is `no_results`."""
    if not 200 <= resp.status < 300:
        return None
    message = _message(resp)
    searches = _searches(message)
    body = request.json
    assert isinstance(body, dict)
    if not searches:
        if message is not None and not any(m.get("role") == "tool" for m in body["messages"]):
            raise errors.NoResults(UNGROUNDED, http_status=resp.status)
        return None
    assert message is not None
    replies = [
        {"role": "tool", "tool_call_id": call.get("id"), "name": SEARCH_TOOL,
         "content": call["function"].get("arguments")}
        for call in searches
    ]  # fmt: skip
    later = {**body, "messages": [*body["messages"], message, *replies]}
    from smart_search.sources.http import HttpRequest

    return HttpRequest("POST", request.url, headers=request.headers, json=later)


def parse_response(resp: HttpResponse, settings: Settings) -> Answer:
    """The written answer and the pages it names, or the `errors` class the response stands
    for."""
    if not 200 <= resp.status < 300:
        raise classify_error(resp)
    data = json_object(SOURCE.label, resp)
    if not isinstance(data.get("choices"), list):
        raise shape_error(SOURCE.label, resp)
    message = _message(resp)
    text = message.get("content") if message else None
    text = text if isinstance(text, str) and not _searches(message) else ""
    finish = data["choices"][0].get("finish_reason") if data["choices"] else None
    complete = finish in (None, "stop")
    return parsing.text_answer(SOURCE.label, resp, text, _cited(text), EMPTY, complete=complete)


def _cited(text: str) -> list[dict[str, str]]:
    """The pages an answer links to, Markdown links with their text, bare URLs without."""
    pairs: list[tuple[object, object]] = []
    for found in re.finditer(_LINK, text):
        title, linked, bare = found.groups()
        pairs.append((linked, title) if linked else (bare.rstrip(_TRAILING), ""))
    return parsing.citations(pairs)


def classify_error(resp: HttpResponse) -> errors.SearchError:
    """The error for a non-2xx status, by Moonshot's error type where it says more than the
    status: spent balance stops the month, an overloaded engine heals, a 404 is the model gone."""
    status = resp.status
    words = parsing.error_words(resp.body)
    message = errors.api_error(SOURCE.label, status)
    if "exceeded_current_quota" in words:
        return errors.QuotaExhausted(message, http_status=status)
    if status == 429 and "engine_overloaded" in words:
        from smart_search.sources.http import retry_after_seconds

        wait = retry_after_seconds(resp.headers)
        return errors.ProviderOverloaded(message, http_status=status, retry_after=wait)
    if status == 404:
        return errors.ModelUnavailable(f"Kimi model {MODEL} is unavailable.", http_status=404)
    return status_error(SOURCE.label, resp)


def billed_units(resp: HttpResponse, settings: Settings) -> int:
    """The `$web_search` calls a 2xx made (each is billed); nothing for an error status."""
    return len(_searches(_message(resp))) if 200 <= resp.status < 300 else 0


def observation(resp: HttpResponse) -> dict[str, Any] | None:
    """Spent balance exhausts the month."""
    if resp.status < 400 or not isinstance(classify_error(resp), errors.QuotaExhausted):
        return None
    return {"exhausted": "month", "why": f"Kimi {resp.status} (balance exhausted)"}


def filter_params(filters: dict[str, Any]) -> tuple[dict[str, Any], list[str]]:
    """country and language as an instruction (`$web_search` takes no parameters); count and
    freshness are unsupported."""
    return parsing.instructed(filters)
