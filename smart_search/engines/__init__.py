"""Keyless web_fetch engines (spec §6): Google, Bing and DuckDuckGo results pages.

Each engine is one module with the same two pure functions, so the planner can treat them alike:

- `build_request(query, settings) -> HttpRequest` only builds the request (no I/O);
- `parse(body) -> list[dict]` only reads a page: a non-empty list of
  `{"title", "url", "snippet"}` (plain text, real target URLs), or it raises `errors.Blocked`
  (CAPTCHA, consent wall, bot challenge, JavaScript shell), `errors.NoResults` (a genuine empty
  results page) or `errors.ParseError` (anything else). Never a success with junk (RULINGS §5).

`classify_status` turns a non-2xx answer into the same error tree before any parsing, and
`fetch_engine` runs the three steps (build, send, classify + parse) for the tier walker.
Engine requests follow redirects (consent and locale hops): a wall at the end of the chain is
recognised by `parse`, and an unfollowed redirect by `classify_status`.

The HTML helpers at the bottom are shared by the three engine modules. They import lxml only
when called: importing this package stays cheap (the engines themselves load lazily through
`engine_module`). lxml is used directly rather than through BeautifulSoup: the same libxml2
parser, with no Python-level tree building (a 340 KB page parses in about 2 ms, not 12 ms) and
no 140 ms bs4 import in a fresh process.
"""

from __future__ import annotations

import importlib
import re
import time
from collections.abc import Callable, Iterator
from types import ModuleType
from typing import TYPE_CHECKING, NamedTuple
from urllib.parse import urlsplit

from .. import errors

if TYPE_CHECKING:  # only for annotations: lxml and the HTTP stack load when first used
    from lxml.html import HtmlElement

    from ..config import Settings
    from ..http import HttpResponse

ENGINES = ("google", "bing", "duckduckgo")

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
# Phrases of a CAPTCHA or rate-limit page served with a 5xx (Google sends /sorry/ as a 503).
_BLOCK_BODY = (b"/sorry/", b"unusual traffic", b"captcha", b"bots use duckduckgo")


def label(engine: str) -> str:
    """The engine's display name for messages ("Google", "Bing", "DuckDuckGo")."""
    return errors.PROVIDER_LABELS.get(engine, engine)


def engine_module(name: str) -> ModuleType:
    """The module for engine `name`, imported on first use (parsers pull in lxml)."""
    if name not in ENGINES:
        raise ValueError(f"Unknown web_fetch engine: {name!r} (expected one of {ENGINES}).")
    return importlib.import_module(f"{__name__}.{name}")


class EngineCall(NamedTuple):
    """How one engine request ended: the parsed results or the error, and its telemetry."""

    results: list[dict[str, str]] | None
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
) -> EngineCall:
    """One request to `engine` for `query` and its parsed results, by `deadline` (monotonic).

    Pacing and the circuit breaker are the caller's; `before_send` (the pacing wait) runs
    right before the request goes out. There is no retry here: a second request
    inside the pacing interval is the very burst that gets a client blocked, and a failed engine
    simply hands over to the next tier. Never raises our `errors`: the record says how it ended.
    """
    from .. import http

    module = engine_module(engine)
    request = module.build_request(query, settings)
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
        results: list[dict[str, str]] | None, error: errors.SearchError | None, status: int | None
    ) -> EngineCall:
        elapsed = round((time.monotonic() - started) * 1000, 1)
        return EngineCall(results, error, True, [elapsed], status)

    try:
        response = http.send(
            request, deadline=deadline, request_timeout_s=settings.request_timeout_ms / 1000
        )
    except errors.SearchError as err:
        return ended(None, err, None)
    try:
        classify_status(engine, response)
        return ended(module.parse(response.body), None, response.status)
    except errors.SearchError as err:
        return ended(None, err, err.http_status or response.status)


def classify_status(engine: str, resp: HttpResponse) -> None:
    """Raise the error a non-2xx answer means, before any parsing; return None for 2xx.

    429 and 403 are the engines' ways of refusing a client, and a redirect to /sorry/ or a
    consent page is a wall: all `Blocked`. A 5xx is `ServerError`, unless its body is the
    CAPTCHA page (Google serves /sorry/ with a 503), which retrying cannot fix. Any other 4xx or
    an unfollowed redirect is a `ParseError` naming the status: not a results page.
    """
    status = resp.status
    if 200 <= status < 300:
        return
    from ..http import retry_after_seconds

    name = label(engine)
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
        where = urlsplit(location).hostname or location[:80] or "nowhere"
        raise errors.ParseError(
            f"{name} answered with an unexpected redirect (HTTP {status}) to {where}.",
            http_status=status,
        )
    if status >= 500:
        head = resp.body[:65536].lower()
        if any(marker in head for marker in _BLOCK_BODY):
            raise errors.Blocked(
                f"{name} served a CAPTCHA (unusual traffic) page with HTTP {status}.",
                http_status=status,
            )
        raise errors.ServerError(f"{name} server error (HTTP {status}).", http_status=status)
    raise errors.ParseError(
        f"{name} answered HTTP {status}: not a results page (check endpoints.{engine}).",
        http_status=status,
    )


# ---------------------------------------------------------------------------------------------
# HTML helpers shared by the engine modules.

# Block-level elements: their text is separated from their neighbours' by a space.
_BLOCK_TAGS = frozenset(
    "address article aside blockquote br dd div dl dt figcaption figure footer form h1 h2 h3 h4 "
    "h5 h6 header hr li main nav ol p pre section table tbody td th thead tr ul".split()
)
# Never visible text.
_SKIP_TAGS = frozenset(("script", "style", "noscript", "template", "svg", "head", "title"))
_META_CHARSET = re.compile(
    rb"""<meta[^>]{0,200}?charset\s*=\s*["']?([A-Za-z0-9_.:-]{1,40})""", re.I
)


def classify_page(
    engine: str,
    body: bytes,
    *,
    challenged: bool,
    results: list[dict[str, str]],
    no_results: Callable[[], bool],
    challenge_text: tuple[bytes, ...],
) -> list[dict[str, str]]:
    """The outcome ladder of a results page (RULINGS §5): a challenge in the page's structure is
    `Blocked` whatever else it holds; then any organic result is success; then a genuine empty
    page is `NoResults`; only then may page-wide challenge phrases decide (a snippet may quote
    them); anything else is `ParseError`. Never success with junk."""
    name = label(engine)
    blocked = f"{name} served its bot challenge instead of results."
    if challenged:
        raise errors.Blocked(blocked)
    if results:
        return results
    if no_results():
        raise errors.NoResults(f"{name} found no results for this query.")
    lowered = body.lower()
    if any(marker in lowered for marker in challenge_text):
        raise errors.Blocked(blocked)
    raise errors.ParseError(f"{name} returned a page with no recognisable results.")


def parse_html(body: bytes, engine: str) -> HtmlElement:
    """`body` as an lxml HTML tree; ParseError for an empty or unreadable page.

    libxml2 guesses ISO-8859-1 when a page does not declare its charset, so the encoding is
    settled here: UTF-8 when the bytes are valid UTF-8 (every engine today), else the
    declared charset, else Windows-1252.
    """
    name = label(engine)
    if not body or not body.strip():
        raise errors.ParseError(f"{name} returned an empty page.")
    from lxml import etree, html

    if body.startswith(b"\xef\xbb\xbf"):
        body = body[3:]
    try:
        body.decode("utf-8")
    except UnicodeDecodeError:
        body = _to_utf8(body)
    parser = html.HTMLParser(
        encoding="utf-8", remove_comments=True, remove_pis=True, no_network=True
    )
    try:
        root = html.document_fromstring(body, parser=parser)
    except (etree.ParserError, ValueError) as exc:
        raise errors.ParseError(f"{name} returned a page that is not HTML ({exc}).") from None
    if root is None:
        raise errors.ParseError(f"{name} returned a page that is not HTML.")
    return root


def _to_utf8(body: bytes) -> bytes:
    if body.startswith((b"\xff\xfe", b"\xfe\xff")):
        return body.decode("utf-16", errors="replace").encode("utf-8")
    declared = _META_CHARSET.search(body[:4096])
    encoding = declared.group(1).decode("ascii") if declared else "windows-1252"
    try:
        text = body.decode(encoding, errors="replace")
    except LookupError:
        text = body.decode("windows-1252", errors="replace")
    return text.encode("utf-8")


def has_class(element: HtmlElement, token: str) -> bool:
    """True when `token` is one of the element's classes (class attributes hold several)."""
    classes = element.get("class")
    return bool(classes) and token in classes.split()


def class_prefixed(element: HtmlElement, prefix: str) -> bool:
    """True when one of the element's classes starts with `prefix`."""
    classes = element.get("class")
    return bool(classes) and any(c.startswith(prefix) for c in classes.split())


def by_class(root: HtmlElement, tag: str, token: str) -> Iterator[HtmlElement]:
    """Every `tag` element under `root` whose classes include `token` (by token, not by string:
    `class="result results_links"` has the class `result`)."""
    for element in root.iter(tag):
        if has_class(element, token):
            yield element


def first_by_class(root: HtmlElement, tag: str, token: str) -> HtmlElement | None:
    return next(by_class(root, tag, token), None)


def text_of(element: HtmlElement, skip: HtmlElement | None = None) -> str:
    """The element's visible text, whitespace collapsed; `skip`'s subtree is left out.

    Unlike `text_content()`, block elements are kept apart by a space ("<div>a</div><div>b</div>"
    reads "a b", not "ab"), and script/style text never leaks in. Iterative: deep pages cannot
    exhaust the recursion limit.
    """
    parts: list[str] = []
    stack: list[object] = [element]
    while stack:
        item = stack.pop()
        if isinstance(item, tuple):  # leaving a node: close its block, then its tail text
            node = item[0]
            if node.tag in _BLOCK_TAGS:
                parts.append(" ")
            if node is not element and node.tail:
                parts.append(node.tail)
            continue
        node = item
        tag = node.tag
        if node is skip or not isinstance(tag, str) or tag in _SKIP_TAGS:
            if node is not element and node.tail:
                parts.append(node.tail)
            continue
        if tag in _BLOCK_TAGS:
            parts.append(" ")
        if node.text:
            parts.append(node.text)
        stack.append((node,))
        stack.extend(reversed(node))
    return " ".join("".join(parts).split())


def web_url(url: str | None) -> str | None:
    """`url` if it is an absolute http(s) URL with a host, else None."""
    if not url:
        return None
    url = url.strip()
    try:
        parts = urlsplit(url)
    except ValueError:
        return None
    if parts.scheme not in ("http", "https") or not parts.netloc or not parts.hostname:
        return None
    return url


def add_result(
    results: list[dict[str, str]], seen: set[str], title: str, url: str, snippet: str
) -> None:
    """Append one result unless its URL was already listed (engines repeat sitelinks)."""
    if url in seen:
        return
    seen.add(url)
    results.append({"title": title, "url": url, "snippet": snippet})
