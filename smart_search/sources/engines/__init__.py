"""Keyless web_fetch engines (spec 6): Google, Bing and DuckDuckGo results pages.

Each engine is one module with the same two pure functions, so the planner can treat them alike:

- `build_request(query, settings) -> HttpRequest` only builds the request (no I/O);
- `parse(body) -> list[dict]` only reads a page: a non-empty list of
  `{"title", "url", "snippet"}` (plain text, real target URLs; plus `sitelinks`, a list of
  `{"title", "url"}`, on a result the engine nests links under), or it raises `errors.Blocked`
  (CAPTCHA, consent wall, bot challenge, JavaScript shell), `errors.NoResults` (a genuine empty
  results page) or `errors.ParseError` (anything else). Never a success with junk (RULINGS 5).

`classify_status` turns a non-2xx answer into the same error tree before any parsing, and
`fetch_engine` runs the three steps (build, send, classify + parse) for the tier walker.
Engine requests follow redirects (consent and locale hops): a wall at the end of the chain is
recognised by `parse`, and an unfollowed redirect by `classify_status`.

This package holds the registry, `fetch_engine` and the status classification only. The HTML
toolkit the engine modules share (reading a page, finding elements, the one outcome ladder
`classify_page`) is `engines/html.py`. Importing this package stays cheap: the engines load
lazily through `engine_module`, and lxml only when a page is parsed.
"""

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

# A current desktop Firefox on Windows. No Accept-Encoding: the HTTP layer advertises only the
# codings it can decode (a "br" it cannot decode would turn every page into a parse_error).
BROWSER_HEADERS = {
    "User-Agent": (
        "Mozilla/5.0 (Windows NT 10.0; Win64; x64; rv:128.0) Gecko/20100101 Firefox/128.0"
    ),
    "Accept": "text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8",
    "Accept-Language": "en-US,en;q=0.5",
}

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


def page_request(
    settings: Settings,
    name: str,
    path: str,
    params: dict[str, str],
    *,
    cookies: dict[str, str] | None = None,
) -> HttpRequest:
    """GET `path` on engine `name`'s endpoint as a browser asks for it: the browser's headers,
    `params` as the query string, `cookies` sent, redirects followed."""
    from smart_search.sources.http import HttpRequest

    return HttpRequest(
        "GET",
        settings.endpoints[name] + path,
        params=params,
        headers=dict(BROWSER_HEADERS),
        follow_redirects=True,
        cookies=dict(cookies or {}),
    )


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

    try:
        response = http.send(
            request, deadline=deadline, request_timeout_s=settings.request_timeout_ms / 1000
        )
    except errors.SearchError as err:
        return ended(None, err, err.http_status)
    try:
        classify_status(module.SOURCE, response)
        return ended(module.parse(response.body), None, response.status)
    except errors.SearchError as err:
        return ended(None, err, err.http_status or response.status)


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
