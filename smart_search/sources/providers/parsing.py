"""What the provider modules share: the `Answer` a provider found and the errors its answers
can turn into (each takes the `label` messages name the provider by), a result item's URL, and
the request's common pieces (a query cut to an API's limits, a keyed JSON POST). The provider
modules import this, never their package, so the package (`call_provider`) can import them."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any, NamedTuple

import orjson

from smart_search import errors

if TYPE_CHECKING:
    from smart_search.host.config import Settings
    from smart_search.sources.http import HttpRequest, HttpResponse


class Answer(NamedTuple):
    """What a provider found: Gemini's answer text or Brave's `[{title, url, snippet}]`."""

    results: str | list[dict[str, str]]
    citations: list[dict[str, str]] = []  # never mutated
    complete: bool = True  # False: cut short (Gemini's MAX_TOKENS): usable, never cached


def fit_words(
    query: str, label: str, max_chars: int, max_words: int | None = None
) -> tuple[str, str | None]:
    """`query` cut at a word boundary to the `max_chars` characters (and `max_words` words) the
    provider `label` names accepts, and a warning saying so; None when it fits as it is."""
    words = query.split()
    most_words = max_words or len(words)
    if len(query) <= max_chars and len(words) <= most_words:
        return query, None
    if not words:
        return "", None
    kept: list[str] = []
    length = 0
    for word in words[:most_words]:
        extra = len(word) + (1 if kept else 0)
        if length + extra > max_chars:
            break
        kept.append(word)
        length += extra
    fitted = " ".join(kept) if kept else words[0][:max_chars]
    if fitted == " ".join(words):
        # Only runs of whitespace were over the limit: nothing the user wrote was dropped.
        return fitted, None
    limits = f"{max_chars} characters" + (f" and {max_words} words" if max_words else "")
    warning = (
        f"Query shortened to {len(fitted.split())} words ({len(fitted)} characters) for {label}, "
        f"which accepts at most {limits}."
    )
    return fitted, warning


def key_headers(settings: Settings, name: str, header: str, prefix: str = "") -> dict[str, str]:
    """The headers of a JSON request to provider `name`: its key in `header` (after `prefix`),
    never in the URL or the body."""
    # The tier walk checked the key once, before reserving a unit (tiers._api_tier).
    secret = settings.api_keys[name]
    assert secret is not None
    return {header: prefix + secret.reveal(), "Accept": "application/json"}


def json_post(
    settings: Settings,
    name: str,
    path: str,
    body: dict[str, Any],
    headers: dict[str, str],
    own_filters: dict[str, Any] | None,
) -> HttpRequest:
    """POST `body` as JSON to provider `name`'s endpoint + `path`, with the body keys its
    `filter_params` made of the call's filters (`own_filters`; None or {}: none)."""
    from smart_search.sources.http import HttpRequest

    if own_filters:
        body.update(own_filters)
    return HttpRequest("POST", settings.endpoints[name] + path, headers=headers, json=body)


def json_object(label: str, response: HttpResponse) -> dict[str, Any]:
    """The body of a 2xx answer as a JSON object, or `parse_error` saying what it was instead."""
    try:
        data = orjson.loads(response.body)
    except orjson.JSONDecodeError:
        raise errors.ParseError(
            f"{label} returned a response that is not JSON.",
            http_status=response.status,
        ) from None
    if not isinstance(data, dict):
        raise shape_error(label, response)
    return data


def plain(value: object) -> str:
    """A result's text field with its runs of whitespace folded to one space; "" for anything
    that is not a string (a null title is still a result, with empty text)."""
    return " ".join(value.split()) if isinstance(value, str) else ""


def item_url(item: object, key: str = "url") -> str | None:
    """The http(s) URL under `key` of one result item (a JSON object); None for anything else,
    so the item is dropped."""
    if not isinstance(item, dict):
        return None
    url = item.get(key)
    return url if isinstance(url, str) and url.startswith(("https://", "http://")) else None


def results_answer(
    label: str,
    response: HttpResponse,
    items: object,
    read: Callable[[object], dict[str, str] | None],
    empty: str,
) -> Answer:
    """A provider's list of results as an `Answer`: each item `read` into `{title, url,
    snippet}` (None: dropped); not a list is `parse_error`, no usable item `no_results`."""
    if not isinstance(items, list):
        raise shape_error(label, response)
    results = [r for r in map(read, items) if r is not None]
    if not results:
        raise errors.NoResults(empty, http_status=response.status)
    return Answer(results=results)


def shape_error(label: str, response: HttpResponse) -> errors.ParseError:
    """JSON that parsed but is not the shape the provider documents."""
    return errors.ParseError(
        f"{label} returned JSON in an unexpected shape.",
        http_status=response.status,
    )


def status_error(label: str, response: HttpResponse) -> errors.SearchError:
    """What an error status means once nothing provider-specific applies (RULINGS 5): 408 a
    timeout, 429 the rate limit, 503 overloaded, other 5xx a server error (those three with any
    `Retry-After`), any other 4xx a refusal of the key or the request, anything else an answer
    we cannot read."""
    from smart_search.sources.http import retry_after_seconds

    status = response.status
    message = errors.api_error(label, status)
    if status == 408:
        return errors.Timeout(message, http_status=status)
    wait = retry_after_seconds(response.headers)
    if status == 429:
        return errors.RateLimited(message, http_status=status, retry_after=wait)
    if status == 503:
        return errors.ProviderOverloaded(message, http_status=status, retry_after=wait)
    if status >= 500:
        return errors.ServerError(message, http_status=status, retry_after=wait)
    if 400 <= status < 500:
        return errors.AuthFailed(message, http_status=status)
    # 1xx/3xx: redirects are not followed for API calls; this is not an answer we can read.
    return errors.ParseError(
        f"{label} answered with unexpected status {status}.", http_status=status
    )


def loose_json(body: bytes) -> Any:
    """`body` parsed as JSON, or None when it is not: for billing and error matching, which
    must not fail on an answer they cannot read."""
    try:
        return orjson.loads(body)
    except orjson.JSONDecodeError:
        return None


def error_words(body: bytes) -> str:
    """The lower-cased `message`, `type` and `code` of an error body (`{"error": {...}}`,
    `{"error": "..."}` or a flat `{"message": ...}`), for matching a class of error only: the
    text is never copied into a message (an error body can echo the request, key included)."""
    data = loose_json(body)
    if not isinstance(data, dict):
        return ""
    inner = data.get("error")
    found = inner if isinstance(inner, dict) else data
    words = [inner] if isinstance(inner, str) else []
    words += [found.get(k) for k in ("message", "type", "code", "detail")]
    return " ".join(w for w in words if isinstance(w, str)).lower()


def citations(pairs: Iterable[tuple[object, object]]) -> list[dict[str, str]]:
    """`[{title, url}]` of an answer's sources, from `(url, title)` pairs: http(s) URLs only,
    each once, in the order given."""
    seen: set[str] = set()
    out: list[dict[str, str]] = []
    for url, title in pairs:
        if not isinstance(url, str) or not url.startswith(("https://", "http://")) or url in seen:
            continue
        seen.add(url)
        out.append({"title": plain(title), "url": url})
    return out


def text_answer(
    label: str,
    response: HttpResponse,
    text: str,
    cited: list[dict[str, str]],
    empty: str,
    *,
    complete: bool = True,
) -> Answer:
    """An answer-style provider's text and its citations as an `Answer`; no text is
    `no_results`."""
    text = text.strip()
    if not text:
        raise errors.NoResults(empty, http_status=response.status)
    return Answer(results=text, citations=cited, complete=complete)


def listed_results(
    label: str,
    response: HttpResponse,
    key: str,
    read: Callable[[object], dict[str, str] | None],
    empty: str,
) -> Answer:
    """The list under `key` of a 2xx JSON answer as an `Answer` (see `results_answer`); not a
    JSON object is `parse_error`."""
    return results_answer(label, response, json_object(label, response).get(key), read, empty)


def titled(item: object, snippet: str = "snippet", url: str = "url") -> dict[str, str] | None:
    """One result item as `{title, url, snippet}`, its snippet read from the field `snippet`
    names and its address from `url`; None (dropped) without an http(s) URL."""
    link = item_url(item, url)
    if link is None:
        return None
    assert isinstance(item, dict)
    return {"title": plain(item.get("title")), "url": link, "snippet": plain(item.get(snippet))}


def locale_ask(name: str, value: object) -> str | None:
    """The instruction an answer-writing provider with no field for it gets for the `country`
    or `language` filter (`name`); None for any other filter or a value that is no ISO code."""
    from smart_search.sources.filters import is_code

    if not is_code(value):
        return None
    if name == "country":
        return f"Prefer web sources from the country with ISO 3166-1 code {value}."
    if name == "language":
        return (
            f"Prefer web sources written in the language with ISO 639-1 code {value}, "
            "and write the answer in that language."
        )
    return None


def instructed(filters: dict[str, Any]) -> tuple[dict[str, Any], list[str]]:
    """`{"instructions": ...}` for the country and language filters (`locale_ask`)
    and every other filter as unsupported: how a chat model with web search takes filters."""
    from smart_search.sources.filters import normalise

    asks: list[str] = []
    unsupported: list[str] = []
    for name, value in normalise(filters).items():
        ask = locale_ask(name, value)
        if ask is None:
            unsupported.append(name)
        else:
            asks.append(ask)
    return ({"instructions": " ".join(asks)} if asks else {}), unsupported


# --- a provider's keyless tier (`KEYLESS`, docs/sources.md): a web source of its own ----------


def keyless_tier(
    name: str,
    label: str,
    order: int,
    path: str,
    body: Callable[[str], dict[str, Any]],
    filter_params: Callable[[dict[str, Any] | None], tuple[dict[str, Any], list[str]]],
    parse_response: Callable[[HttpResponse, Any], Answer],
    host_plugin: str | None = None,
) -> Any:
    """A provider's keyless tier (its module's `KEYLESS`): a self-hosted-style web source `name`
    that POSTs `body(query)` and its filters to `endpoints.<name>` + `path` with no key, reads
    the answer with its provider's own `parse_response`, and fails as the engines do
    (`keyless_status`). `host_plugin`: the OpenClaw plugin whose `webSearch.baseUrl` may name
    its endpoint (None: OpenClaw holds none for it)."""
    from types import SimpleNamespace

    from smart_search.sources.source import Source

    source = Source(
        name=name, label=label, kind="web", order=order, endpoint=None, self_hosted=True,
        host_plugin=host_plugin,
    )  # fmt: skip

    def build_request(
        query: str, settings: Settings, *, filters: dict[str, Any] | None = None
    ) -> HttpRequest:
        sent = {**body(query), **(filter_params(filters)[0] if filters else {})}
        return keyless_post(settings, name, path, sent)

    return SimpleNamespace(
        NAME=name,
        SOURCE=source,
        build_request=build_request,
        classify_status=lambda resp: keyless_status(source, resp),
        parse=lambda page: keyless_results(parse_response, page),
        filter_params=filter_params,
    )


def keyless_post(settings: Settings, name: str, path: str, body: dict[str, Any]) -> HttpRequest:
    """POST `body` as JSON to keyless tier `name`'s endpoint + `path`: no key header at all."""
    from smart_search.sources.http import HttpRequest

    return HttpRequest(
        "POST", settings.endpoints[name] + path, headers={"Accept": "application/json"}, json=body
    )


def keyless_status(source: Any, response: HttpResponse) -> None:
    """A keyless tier's non-2xx answer as the engines' error tree (engines/fetch.py: 429 and 403
    are `blocked`), and also 401 (the tier now wants a key) and 402 (its free allowance is
    spent): `blocked` too, never `no_results`. Returns None for 2xx."""
    if response.status in (401, 402):
        raise errors.Blocked(
            f"{source.label} refused the keyless request (HTTP {response.status}).",
            http_status=response.status,
        )
    from smart_search.sources.engines.fetch import classify_status

    classify_status(source, response)


def keyless_results(
    parse_response: Callable[[HttpResponse, Any], Answer], body: bytes
) -> list[dict[str, str]]:
    """A keyless tier's 2xx body read by its provider's own `parse_response`: the same results,
    or the same `no_results` / `parse_error`."""
    from smart_search.sources.http import HttpResponse

    found = parse_response(HttpResponse(status=200, headers={}, body=body), None).results
    assert isinstance(found, list)
    return found
