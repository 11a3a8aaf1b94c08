"""DuckDuckGo, scraped from its no-JavaScript page html.duckduckgo.com/html/ (spec §6: Strategy A's
last resort, and the end of Strategy B per RULINGS §5).

Quirks worth knowing:
- Each result is a `div` whose class attribute holds several classes
  (`result results_links results_links_deep web-result`). Match the `result` class token, never
  the whole attribute string (a strainer or equality test on "result" silently finds nothing).
- Links go through DuckDuckGo's redirector: `//duckduckgo.com/l/?uddg=<percent-encoded target>
  &rut=...` (scheme-relative). The target is the `uddg` parameter, percent-decoded.
- Ads are `div.result.result--ad`; their link is a `duckduckgo.com/y.js?...` click tracker, and it
  may itself arrive wrapped in `uddg`. Both the class and the unwrapped tracker drop them.
- Too many requests get the bot challenge ("Unfortunately, bots use DuckDuckGo too.",
  `form#challenge-form` posting to `anomaly.js`), often with HTTP 202: parsed, then `Blocked`.
- A query with nothing found shows `div.no-results` ("No results.") inside a
  `result--no-result` block, which is not a result.
- `kl=wt-wt` asks for no region, so results do not depend on where the request comes from.
"""

from __future__ import annotations

from typing import TYPE_CHECKING
from urllib.parse import parse_qs, urlsplit

from ..config import Settings
from ..http import HttpRequest
from . import (
    BROWSER_HEADERS,
    add_result,
    by_class,
    classify_page,
    first_by_class,
    has_class,
    parse_html,
    text_of,
    web_url,
)

if TYPE_CHECKING:
    from lxml.html import HtmlElement

NAME = "duckduckgo"
LABEL = "DuckDuckGo"
PATH = "/html/"
REGION = "wt-wt"  # "All regions"

_CHALLENGE_TEXT = (b"bots use duckduckgo too", b"anomaly-modal", b"/anomaly.js")


def build_request(query: str, settings: Settings) -> HttpRequest:
    """GET /html/?q=...&kl=wt-wt: the no-JavaScript results page, no region."""
    return HttpRequest(
        "GET",
        settings.endpoints[NAME] + PATH,
        params={"q": query, "kl": REGION},
        headers=dict(BROWSER_HEADERS),
        follow_redirects=True,
    )


def parse(body: bytes) -> list[dict[str, str]]:
    """Organic results of a DuckDuckGo /html/ page, or Blocked / NoResults / ParseError."""
    root = parse_html(body, NAME)
    return classify_page(
        NAME,
        body,
        challenged=_is_challenge(root),
        results=_results(root),
        no_results=lambda: _is_no_results(root),
        challenge_text=_CHALLENGE_TEXT,
    )


def _is_challenge(root: HtmlElement) -> bool:
    for form in root.iter("form"):
        if form.get("id") == "challenge-form" or "anomaly.js" in (form.get("action") or ""):
            return True
    return False


def _is_no_results(root: HtmlElement) -> bool:
    for element in root.iter("div"):
        if has_class(element, "no-results") or has_class(element, "result--no-result"):
            return True
    return False


def _results(root: HtmlElement) -> list[dict[str, str]]:
    results: list[dict[str, str]] = []
    seen: set[str] = set()
    for block in by_class(root, "div", "result"):
        if has_class(block, "result--ad") or has_class(block, "result--no-result"):
            continue
        anchor = first_by_class(block, "a", "result__a")
        if anchor is None:
            continue
        url = target_url(anchor.get("href"))
        title = text_of(anchor)
        if url is None or not title:
            continue
        snippet = first_by_class(block, "a", "result__snippet")
        if snippet is None:
            snippet = first_by_class(block, "div", "result__snippet")
        add_result(results, seen, title, url, text_of(snippet) if snippet is not None else "")
    return results


def target_url(href: str | None) -> str | None:
    """The real target of a result link (`uddg` unwrapped); None for ad trackers and for
    DuckDuckGo's own redirectors."""
    if not href:
        return None
    href = href.strip()
    if href.startswith("//"):
        href = "https:" + href  # scheme-relative
    parts = urlsplit(href)
    host = (parts.hostname or "").lower()
    if _is_ddg(host) or not host:
        if parts.path.startswith("/l/"):
            wrapped = (parse_qs(parts.query).get("uddg") or [None])[0]
            return _not_tracker(web_url(wrapped))
        return None  # y.js ad trackers and any other DuckDuckGo-internal link
    return _not_tracker(web_url(href))


def _is_ddg(host: str) -> bool:
    return host == "duckduckgo.com" or host.endswith(".duckduckgo.com")


def _not_tracker(url: str | None) -> str | None:
    """None when the unwrapped target is still a DuckDuckGo redirect (an ad's y.js, a nested
    /l/): those are never a real result."""
    if url is None:
        return None
    parts = urlsplit(url)
    if _is_ddg((parts.hostname or "").lower()) and parts.path.startswith(("/y.js", "/l/")):
        return None
    return url
