"""Fetching an engine's page for the tier walk: `fetch_engine` runs the three steps (build,
send, classify + parse), `classify_status` turns a non-2xx answer into the error tree before any
parsing, and `engine_module` finds an engine through the registry."""

from __future__ import annotations

import re
import time
from collections.abc import Callable
from types import ModuleType
from typing import TYPE_CHECKING, Any, NamedTuple
from urllib.parse import urlsplit

from smart_search import errors

if TYPE_CHECKING:  # only for annotations: the HTTP stack loads when first used
    from smart_search.host.config import Settings
    from smart_search.sources.http import HttpRequest, HttpResponse
    from smart_search.sources.source import Source


# Where a redirect or an error page sends a client the engine distrusts.
_BLOCK_LOCATION = re.compile(r"/sorry/|consent\.|/captcha|/challenge", re.IGNORECASE)
# Signs of a CAPTCHA or rate-limit page served with a 5xx (Google sends /sorry/ as a 503), looked
# for in what the page shows (see engines/html.py), never in its scripts.
_WALL_PHRASES = ("unusual traffic", "captcha", "bots use duckduckgo")
_WALL_LINKS = ("/sorry/", "captcha")
_WALL_NAMES = ("captcha",)


def engine_module(name: str) -> ModuleType:
    """The module that declares engine `name` (the registry's; its parser loads lxml when it
    first parses)."""
    from smart_search.sources import registry

    engines = registry.web_names()
    if name not in engines:
        raise ValueError(f"Unknown web_fetch engine: {name!r} (expected one of {engines}).")
    return registry.module(name)




class EngineCall(NamedTuple):
    """How one engine request ended: the parsed results or the error, and its telemetry."""

    results: list[dict[str, Any]] | None
    error: errors.SearchError | None
    sent: bool  # False: nothing left (no pacing slot before the deadline)
    attempt_latencies_ms: list[float]
    http_status: int | None


def fetch_engine(
    engine: str,
    query: str,
    settings: Settings,
    deadline: float,
    before_send: Callable[[], object] | None = None,
    *,
    filters: dict[str, Any] | None = None,
) -> EngineCall:
    """One request to `engine` for `query` and its parsed results, by `deadline` (monotonic).

    Pacing and the circuit breaker are the caller's; `before_send` (the pacing wait) runs
    right before the request goes out. There is no retry here: a second request
    inside the pacing interval is the very burst that gets a client blocked, and a failed engine
    simply hands over to the next tier. Never raises our `errors`: the record says how it ended.
    `filters` (issue 15) go into the request through the engine's `build_request`.
    """
    from smart_search.sources import http

    module = engine_module(engine)
    request = module.build_request(query, settings, filters=filters)
    if before_send is not None:
        # The caller's pacing slot: claim it only once every one-off cost (imports, TLS context)
        # is paid, so requests leave as evenly spaced as their slots.
        http.warm(request)
        try:
            before_send()
        except errors.SearchError as err:
            return EngineCall(None, err, False, [], None)
    started = time.monotonic()

    def ended(
        results: list[dict[str, Any]] | None, error: errors.SearchError | None, status: int | None
    ) -> EngineCall:
        elapsed = round((time.monotonic() - started) * 1000, 1)
        return EngineCall(results, error, True, [elapsed], status)

    # An engine that opens a session first (a keyless MCP server) sends its handshake in the
    # same pacing slot, then the search with what the handshake answered.
    handshake = getattr(module, "handshake", None)
    timeout_s = settings.request_timeout_ms / 1000
    status: list[int | None] = [None]  # of the answer being read; None while a request is out

    def exchange(sending: HttpRequest) -> HttpResponse:
        status[0] = None
        response = http.send(sending, deadline=deadline, request_timeout_s=timeout_s)
        status[0] = response.status
        _check(module, response)
        return response

    try:
        if handshake is not None:
            request = module.with_session(request, exchange(handshake(settings)))
        response = exchange(request)
        return ended(module.parse(response.body), None, response.status)
    except errors.SearchError as err:
        return ended(None, err, err.http_status or status[0])


def _check(module: ModuleType, response: HttpResponse) -> None:
    """Raise what a non-2xx answer means: an engine whose statuses mean something of their
    own classifies them itself."""
    own = getattr(module, "classify_status", None)
    if own is not None:
        own(response)
    else:
        classify_status(module.SOURCE, response)


def classify_status(source: Source, resp: HttpResponse) -> None:
    """Raise the error a non-2xx answer means, before any parsing; return None for 2xx.

    429 and 403 are the engines' ways of refusing a client, and a redirect to /sorry/ or a
    consent page is a wall: all `Blocked`. A 5xx is `ServerError`, unless its page shows a
    CAPTCHA (Google serves /sorry/ with a 503), which retrying cannot fix. Any other 4xx or
    an unfollowed redirect is a `ParseError` naming the status: not a results page.
    """
    status = resp.status
    if 200 <= status < 300:
        return
    from smart_search.sources.http import retry_after_seconds

    engine, name = source.name, source.label
    if status == 429:
        raise errors.Blocked(
            f"{name} refused the request as too many (HTTP 429).",
            http_status=status,
            retry_after=retry_after_seconds(resp.headers),
        )
    if status == 403:
        raise errors.Blocked(f"{name} refused the request (HTTP 403).", http_status=status)
    if 300 <= status < 400:
        location = resp.headers.get("location", "")
        if _BLOCK_LOCATION.search(location):
            raise errors.Blocked(
                f"{name} redirected to a CAPTCHA or consent page (HTTP {status}).",
                http_status=status,
            )
        try:
            host = urlsplit(location).hostname
        except ValueError:  # "http://[bad": still a redirect we did not follow
            host = None
        where = host or location[:80] or "nowhere"
        raise errors.ParseError(
            f"{name} answered with an unexpected redirect (HTTP {status}) to {where}.",
            http_status=status,
        )
    if status >= 500:
        if _shows_a_wall(name, resp.body):
            raise errors.Blocked(
                f"{name} served a CAPTCHA (unusual traffic) page with HTTP {status}.",
                http_status=status,
            )
        raise errors.ServerError(f"{name} server error (HTTP {status}).", http_status=status)
    raise errors.ParseError(
        f"{name} answered HTTP {status}: not a results page (check endpoints.{engine}).",
        http_status=status,
    )


def _shows_a_wall(label: str, body: bytes) -> bool:
    """Whether a 5xx page shows a CAPTCHA or challenge (text, links, ids), not in its code."""
    from smart_search.sources.engines.html import Page, parse_html

    try:
        page = Page(parse_html(body, label))
    except errors.ParseError:
        return False  # empty or not HTML: a plain server error
    return page.says(*_WALL_PHRASES) or page.links_to(*_WALL_LINKS) or page.named(*_WALL_NAMES)
