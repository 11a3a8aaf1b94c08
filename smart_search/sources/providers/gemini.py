"""Gemini `generateContent` with Google Search grounding: the wire format, both ways.

Quirks worth knowing:
- The key travels only in the `x-goog-api-key` header; the `?key=` form would put it in URLs
  (and so in proxy and server logs).
- One answer can arrive as several text parts; thinking models add parts flagged `"thought":
  true`, which are reasoning, not the answer.
- Citations come from `groundingMetadata.groundingChunks[].web`; their `uri` is a
  `vertexaisearch.cloud.google.com/grounding-api-redirect/...` link and their `title` a bare domain.
- A blocked prompt is a 200 with no candidates and `promptFeedback.blockReason`; a blocked or
  truncated answer is a candidate without text. Both are "empty", not malformed.
- 429 is two different things: a per-minute limit (retry after `RetryInfo.retryDelay`) or a
  per-day quota (`QuotaFailure` quota id containing "PerDay"): waiting will not help.
- Error bodies can echo the request, key included: no body text is ever copied into a message.
"""

from __future__ import annotations

import re
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any
from urllib.parse import quote

import orjson

from smart_search import errors
from smart_search.sources.providers import parsing
from smart_search.sources.providers.parsing import Answer, json_object, shape_error, status_error
from smart_search.sources.source import Source

if TYPE_CHECKING:
    from smart_search.host.config import Settings
    from smart_search.sources.http import HttpRequest, HttpResponse

NAME = "gemini"
EMPTY = "Gemini returned an empty response."
PATH = "/v1beta/models/{model}:generateContent"
# Gemini 2.x (and 1.x) bill per grounded prompt; Gemini 3 and later per search query it runs.
_PER_PROMPT_MODEL = r"gemini-(1|2)(\.|-)"


def default_unit(section: dict[str, Any]) -> str:
    """The unit a model bills in when config does not say: per prompt before Gemini 3."""
    model = section.get("gemini_model")
    per_prompt = isinstance(model, str) and re.match(_PER_PROMPT_MODEL, model)
    return "request" if per_prompt else "search_query"


SOURCE = Source(
    name=NAME, label="Gemini", kind="api", order=1,
    endpoint="https://generativelanguage.googleapis.com",
    not_configured="GEMINI_API_KEY is not configured in openclaw.json.",
    units=("search_query", "request"), default_unit=default_unit,
    # Grounding with Google Search (Gemini API pricing page, read 2026-11): 5,000 search queries
    # a month free with Gemini 3; daily counters reset at midnight Pacific.
    daily_limit=1500, monthly_limit=5000, reset_timezone="America/Los_Angeles",
    request_settings=("gemini_model",), route_keywords="finance_keywords",
    described="Gemini grounded search", answers_with_text=True, default_allocation=5,
    default_chain=True,  # spec 4: one of the two APIs every strategy walks
    # OpenClaw keeps Gemini's web-search key under its `google` plugin, then GEMINI_API_KEY, then
    # the Google model provider's key (docs/tools/web.md, auto-detection).
    host_plugin="google", host_keys=("$GEMINI_API_KEY", "models.providers.google.apiKey"),
)  # fmt: skip

_RETRY_INFO = "type.googleapis.com/google.rpc.RetryInfo"
_QUOTA_FAILURE = "type.googleapis.com/google.rpc.QuotaFailure"
_DURATION = r"\s*(\d+(?:\.\d+)?)s\s*"
# "Please retry in 21.417306518s." in the error message, used only without RetryInfo.
_RETRY_IN_TEXT = r"(?i)retry in (\d+(?:\.\d+)?)s\b"


def build_request(
    query: str, settings: Settings, *, filters: dict[str, Any] | None = None
) -> HttpRequest:
    """POST the query with the google_search tool enabled; the key goes in a header only.
    `filters` (see `filter_params`) add a time range and an instruction; None changes nothing."""
    url = settings.endpoints[NAME] + PATH.format(model=quote(settings.gemini_model, safe=""))
    body: dict[str, Any] = {
        "contents": [{"role": "user", "parts": [{"text": query}]}],
        "tools": [{"google_search": {}}],
    }
    if filters:
        body.update(filter_params(filters)[0])
    from smart_search.sources.http import HttpRequest

    return HttpRequest(
        "POST",
        url,
        headers=parsing.key_headers(settings, NAME, "x-goog-api-key"),
        json=body,
    )


def parse_response(resp: HttpResponse, settings: Settings) -> Answer:
    """The answer text and its citations, or the `errors` class the response stands for."""
    if not 200 <= resp.status < 300:
        raise classify_error(resp, settings)
    data = json_object(SOURCE.label, resp)
    candidates = data.get("candidates")
    if candidates is None:
        if "promptFeedback" in data or "usageMetadata" in data:
            # No candidates at all: the prompt was blocked or nothing was generated.
            raise errors.NoResults(EMPTY, http_status=resp.status)
        raise shape_error(SOURCE.label, resp)
    if not isinstance(candidates, list):
        raise shape_error(SOURCE.label, resp)
    if not candidates:
        raise errors.NoResults(EMPTY, http_status=resp.status)
    first = candidates[0]
    if not isinstance(first, dict):
        raise shape_error(SOURCE.label, resp)
    text = _answer_text(first, resp).strip()
    if not text:
        # SAFETY, RECITATION, MAX_TOKENS spent on thinking...: nothing usable came back.
        raise errors.NoResults(EMPTY, http_status=resp.status)
    # Any end but STOP (MAX_TOKENS, SAFETY mid-answer...) left a partial answer: shown, not cached.
    finish = first.get("finishReason")
    complete = finish in (None, "STOP", "FINISH_REASON_UNSPECIFIED")
    return Answer(results=text, citations=_citations(first), complete=complete)


def classify_error(resp: HttpResponse, settings: Settings) -> errors.SearchError:
    """The error for a non-2xx status; decided by the status, the body only refines a 429."""
    status = resp.status
    message = errors.api_error(SOURCE.label, status)
    if status == 404:
        return errors.ModelUnavailable(
            f"Gemini model {settings.gemini_model} is unavailable.", http_status=status
        )
    if status == 429:
        details, text = _error_details(resp.body)
        if _quota_window(details):
            return errors.QuotaExhausted(message, http_status=status)
        wait = _retry_delay(details)
        if wait is None:
            found = re.search(_RETRY_IN_TEXT, text)
            if found:
                wait = float(found.group(1))
            else:
                from smart_search.sources.http import retry_after_seconds

                wait = retry_after_seconds(resp.headers)
        return errors.RateLimited(message, http_status=status, retry_after=wait)
    # 400 API_KEY_INVALID, 401 and 403 are refusals (auth_failed).
    return status_error(SOURCE.label, resp)


def _answer_text(candidate: dict[str, Any], resp: HttpResponse) -> str:
    content = candidate.get("content")
    if content is None:
        return ""
    if not isinstance(content, dict):
        raise shape_error(SOURCE.label, resp)
    parts = content.get("parts", [])
    if not isinstance(parts, list):
        raise shape_error(SOURCE.label, resp)
    texts = []
    for part in parts:
        if not isinstance(part, dict) or part.get("thought") is True:
            continue
        text = part.get("text")
        if isinstance(text, str):
            texts.append(text)
    # Parts are consecutive pieces of one answer, not paragraphs: join them as they are.
    return "".join(texts)


def _citations(candidate: dict[str, Any]) -> list[dict[str, str]]:
    metadata = candidate.get("groundingMetadata")
    chunks = metadata.get("groundingChunks") if isinstance(metadata, dict) else None
    if not isinstance(chunks, list):
        return []
    seen: set[str] = set()
    out = []
    for chunk in chunks:
        web = chunk.get("web") if isinstance(chunk, dict) else None
        if not isinstance(web, dict):
            continue
        url = web.get("uri")
        if not isinstance(url, str) or not url.startswith(("https://", "http://")) or url in seen:
            continue
        seen.add(url)
        title = web.get("title")
        out.append({"title": title if isinstance(title, str) else "", "url": url})
    return out


def _error_details(body: bytes) -> tuple[list[dict[str, Any]], str]:
    """`error.details` and `error.message` of a Google RPC error body; junk gives nothing."""
    try:
        data = orjson.loads(body)
    except orjson.JSONDecodeError:
        return [], ""
    error = data.get("error") if isinstance(data, dict) else None
    if not isinstance(error, dict):
        return [], ""
    details = error.get("details")
    message = error.get("message")
    return (
        [d for d in details if isinstance(d, dict)] if isinstance(details, list) else [],
        message if isinstance(message, str) else "",
    )


def _quota_window(details: list[dict[str, Any]]) -> str | None:
    """"day" or "month" when a `QuotaFailure` names a per-day or per-month quota (waiting for a
    minute will not help), else None (a per-minute rate limit)."""
    for detail in details:
        if detail.get("@type") != _QUOTA_FAILURE:
            continue
        violations = detail.get("violations")
        for violation in violations if isinstance(violations, list) else []:
            quota_id = violation.get("quotaId") if isinstance(violation, dict) else None
            lowered = quota_id.lower() if isinstance(quota_id, str) else ""
            if "permonth" in lowered:
                return "month"
            if "perday" in lowered:
                return "day"
    return None


def billed_units(resp: HttpResponse, settings: Settings) -> int:
    """What this answer costs (the billing issue): nothing unless 2xx; per grounded prompt for
    `unit: request` (Gemini 2.x); per search query the model ran for `unit: search_query`
    (Gemini 3: each entry of `groundingMetadata.webSearchQueries`, zero, one or several). A 2xx
    we cannot read is charged the call's worst case (`max_units_per_call`): it may have been
    billed that much."""
    if not 200 <= resp.status < 300:
        return 0
    if settings.units[NAME] == "request":
        return 1
    try:
        data = orjson.loads(resp.body)
        total = 0
        for candidate in data["candidates"]:
            queries = (candidate.get("groundingMetadata") or {}).get("webSearchQueries") or []
            # Empty entries are not billed (Google: "we ignore the empty web search queries").
            total += sum(1 for q in queries if isinstance(q, str) and q.strip())
        return total
    except (orjson.JSONDecodeError, KeyError, TypeError, AttributeError):
        return max(1, settings.max_units_per_call.get(NAME, 1))


def observation(resp: HttpResponse) -> dict[str, Any] | None:
    """What the provider said about our quota: a per-day or per-month exhaustion."""
    if resp.status != 429:
        return None
    window = _quota_window(_error_details(resp.body)[0])
    if window is None:
        return None
    return {"exhausted": window, "why": f"Gemini 429 RESOURCE_EXHAUSTED (per {window} quota)"}


def _retry_delay(details: list[dict[str, Any]]) -> float | None:
    """`RetryInfo.retryDelay` ("17s", "1.5s": protobuf Duration JSON) in seconds."""
    for detail in details:
        if detail.get("@type") != _RETRY_INFO:
            continue
        delay = detail.get("retryDelay")
        found = re.fullmatch(_DURATION, delay) if isinstance(delay, str) else None
        if found:
            return float(found.group(1))
    return None


# --- filters (issue 15) ----------------------------------------------------------------------


def filter_params(
    filters: dict[str, Any], *, now: datetime | None = None
) -> tuple[dict[str, Any], list[str]]:
    """The request-body keys that carry the search filters, and the filters Gemini cannot honour.

    freshness → the google_search tool's `timeRangeFilter` (an interval ending `now`: a day, 7,
    30 or 365 days back), a real filter on the searches the model makes. country and language
    have no API field: they become a `system_instruction` asking for sources from that country
    and in that language (and the answer in that language), which the model follows as best
    it can. count does not apply to an answer: it is reported as unsupported.
    """
    from smart_search.sources.filters import FRESHNESS_DAYS, normalise, utc_now

    wanted = normalise(filters)
    body: dict[str, Any] = {}
    unsupported: list[str] = []
    google_search: dict[str, Any] = {}
    instructions: list[str] = []
    for name, value in wanted.items():
        if name == "freshness" and str(value) in FRESHNESS_DAYS:
            end = utc_now(now).replace(microsecond=0)
            start = end - timedelta(days=FRESHNESS_DAYS[value])
            google_search["timeRangeFilter"] = {
                "startTime": _rfc3339(start),
                "endTime": _rfc3339(end),
            }
        elif (ask := parsing.locale_ask(name, value)) is not None:
            instructions.append(ask)
        else:
            unsupported.append(name)
    if google_search:
        body["tools"] = [{"google_search": google_search}]
    if instructions:
        body["system_instruction"] = {"parts": [{"text": " ".join(instructions)}]}
    return body, unsupported


def _rfc3339(moment: datetime) -> str:
    from smart_search.text.stamps import utc_stamp

    return utc_stamp(moment.timestamp())
