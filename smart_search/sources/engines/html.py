"""The HTML toolkit the engine modules share: reading a page, finding elements, one outcome ladder.

lxml is imported only when a page is parsed, so importing this module stays cheap. lxml is used
directly rather than through BeautifulSoup: the same libxml2 parser, with no Python-level tree
building (a 340 KB page parses in about 2 ms, not 12 ms) and no 140 ms bs4 import in a fresh
process.

Page-wide signs (a CAPTCHA, a consent wall, a bot challenge, a "no results" sentence, a
JavaScript shell) are looked for only in what a page SHOWS a client without JavaScript: its text
outside `<script>`, `<style>` and `<template>` (`<noscript>` included: that is what such a client
is shown), the URLs its elements point at (`href`, `src`, `action`, a `<meta>` refresh) and its
element ids and classes. Never in script or style bodies: a normal results page carries all
kinds of strings in its code (Google's inline scripts mention `/sorry/index`, Bing's mention
"There are no results for"). `Page` is that view; `classify_page` is the one outcome ladder.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator, Sequence
from typing import TYPE_CHECKING, Any
from urllib.parse import SplitResult, urlsplit

from smart_search import errors
from smart_search.text.urls import is_web_url

if TYPE_CHECKING:  # only for annotations: lxml loads when a page is first parsed
    from lxml.html import HtmlElement

# Block-level elements: their text is separated from their neighbours' by a space.
_BLOCK_TAGS = frozenset(
    "address article aside blockquote br dd div dl dt figcaption figure footer form h1 h2 h3 h4 "
    "h5 h6 header hr li main nav ol p pre section table tbody td th thead tr ul".split()
)
# Never part of an element's visible text (a result's title or snippet).
_SKIP_TAGS = frozenset(("script", "style", "noscript", "template", "svg", "head", "title"))
# Never part of what a page shows: code, not content.
_CODE_TAGS = frozenset(("script", "style", "template"))
# Attributes of elements a page shows (a <template>'s content is inert until a script uses it).
_URLS = "//@*[name()='href' or name()='src' or name()='action'][not(ancestor::template)]"
_NAMES = "//@*[name()='id' or name()='class'][not(ancestor::template)]"
_META_CHARSET = rb"""(?i)<meta[^>]{0,200}?charset\s*=\s*["']?([A-Za-z0-9_.:-]{1,40})"""


# --- the outcome ladder -----------------------------------------------------------------------


class Page:
    """What a parsed page shows a client without JavaScript, each view built on first use.

    `says` looks in the visible text, `links_to` in the URLs of its elements, `named` in its
    element ids and classes; all three match lower-case, and none ever reads a script or style
    body.
    """

    __slots__ = ("root", "_text", "_links", "_names")

    def __init__(self, root: HtmlElement) -> None:
        self.root = root
        self._text: str | None = None
        self._links: str | None = None
        self._names: str | None = None

    def says(self, *phrases: str) -> bool:
        """True when the page's visible text contains one of `phrases` (lower case)."""
        if self._text is None:
            self._text = text_of(self.root, hidden=_CODE_TAGS).lower()
        return any(phrase in self._text for phrase in phrases)

    def links_to(self, *fragments: str) -> bool:
        """True when an element's href, src or action, or a meta refresh target, contains one
        of `fragments` (lower case): `<script src=".../anomaly.js">` is structure."""
        if self._links is None:
            urls = [str(value) for value in self.root.xpath(_URLS)]
            for meta in self.root.iter("meta"):
                if (meta.get("http-equiv") or "").strip().lower() == "refresh":
                    if next(meta.iterancestors("template"), None) is None:
                        urls.append(meta.get("content") or "")
            self._links = "\n".join(urls).lower()
        return any(fragment in self._links for fragment in fragments)

    def named(self, *prefixes: str) -> bool:
        """True when an element id or class starts with one of `prefixes` (lower case)."""
        if self._names is None:
            tokens = " ".join(self.root.xpath(_NAMES)).lower().split()
            self._names = " " + " ".join(tokens)
        return any(f" {prefix}" in self._names for prefix in prefixes)


Check = Callable[[Page], bool]


def classify_page(
    label: str,
    body: bytes,
    *,
    wall: Callable[[HtmlElement], str | None],
    results: Callable[[HtmlElement], list[dict[str, Any]]],
    no_results: Check,
    walls: Sequence[tuple[str, Check]] = (),
) -> list[dict[str, Any]]:
    """The outcome ladder of every engine's page (RULINGS 5), `body` read by `parse_html`
    (ParseError for an empty or unreadable page), each rung fed by the engine's readers:

    1. `wall(root)`, a wall found in the page's structure (a CAPTCHA form, a challenge widget),
       is `Blocked` whatever else the page holds; it is the message after the engine's name;
    2. then any organic result (`results(root)`) is success;
    3. then a page that shows it found nothing (`no_results`) is `NoResults`: that sentence
       outranks any page-wide sign below (a query may quote "unusual traffic");
    4. only then may page-wide signs decide: the first `(message, check)` of `walls` that finds
       its signs in what the page shows is `Blocked` (a snippet may quote them, hence after 2);
    5. anything else is `ParseError`. Never success with junk.
    """
    root = parse_html(body, label)
    found_wall = wall(root)
    found = results(root)
    name = label  # "Google": how messages name the engine
    if found_wall is not None:
        raise errors.Blocked(f"{name} {found_wall}")
    if found:
        return found
    page = Page(root)
    if no_results(page):
        raise errors.NoResults(f"{name} found no results for this query.")
    for message, check in walls:
        if check(page):
            raise errors.Blocked(f"{name} {message}")
    raise errors.ParseError(f"{name} returned a page with no recognisable results.")


# --- reading a page ---------------------------------------------------------------------------


def parse_html(body: bytes, label: str) -> HtmlElement:
    """`body` as an lxml HTML tree; ParseError for an empty or unreadable page.

    libxml2 guesses ISO-8859-1 when a page does not declare its charset, so the encoding is
    settled here: UTF-8 when the bytes are valid UTF-8 (every engine today), else the
    declared charset, else Windows-1252.
    """
    name = label
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
    declared = re.search(_META_CHARSET, body[:4096])
    encoding = declared.group(1).decode("ascii") if declared else "windows-1252"
    try:
        text = body.decode(encoding, errors="replace")
    except LookupError:
        text = body.decode("windows-1252", errors="replace")
    return text.encode("utf-8")


# --- finding elements -------------------------------------------------------------------------


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


def inside(element: HtmlElement, ancestor: HtmlElement) -> bool:
    """True when `element` lies somewhere under `ancestor`."""
    return any(parent is ancestor for parent in element.iterancestors())


def first_by_class(root: HtmlElement, tag: str, token: str) -> HtmlElement | None:
    return next(by_class(root, tag, token), None)


def text_of(
    element: HtmlElement,
    skip: HtmlElement | None = None,
    *,
    hidden: frozenset[str] = _SKIP_TAGS,
) -> str:
    """The element's visible text, whitespace collapsed; `skip`'s subtree is left out, and so is
    every element whose tag is in `hidden` (by default everything that is not a result's text).

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
        if node is skip or not isinstance(tag, str) or tag in hidden:
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


# --- result links -----------------------------------------------------------------------------


def split_url(url: str) -> SplitResult | None:
    """`url` split into its parts; None for one that cannot be split (`http://[bad`): a page's
    malformed link is skipped, never a crash."""
    try:
        return urlsplit(url.strip())
    except ValueError:
        return None


def split_link(href: str | None) -> tuple[SplitResult, str] | None:
    """A page's link split into its parts, with its host in lower case ("" for a relative
    link); None for no link or one that cannot be split."""
    if not href:
        return None
    parts = split_url(href)
    if parts is None:
        return None
    return parts, (parts.hostname or "").lower()


def web_url(url: str | None) -> str | None:
    """`url` stripped if it is an absolute http(s) URL with a host (`urls.is_web_url`) that
    urlsplit can read and finds a host name in (`is_own` needs one), else None."""
    if not url:
        return None
    url = url.strip()
    if not is_web_url(url):
        return None
    parts = split_url(url)
    if parts is None or not parts.hostname:
        return None
    return url


def external_url(url: str | None, is_own: Callable[[str, str], bool]) -> str | None:
    """`url` when it is a real external result: an absolute http(s) URL that the engine's own
    rule `is_own(host, path)` (lower-case host) does not claim as its navigation, redirector or
    ad tracker. None otherwise."""
    url = web_url(url)
    if url is None:
        return None
    parts = urlsplit(url)
    if is_own((parts.hostname or "").lower(), parts.path):
        return None
    return url


def result_link(
    anchor: HtmlElement | None, target_url: Callable[[str | None], str | None]
) -> tuple[str, str] | None:
    """`(url, title)` of a result's title link: the engine's `target_url` of its href and the
    link's text; None when there is no link, no usable target or no title."""
    if anchor is None:
        return None
    url = target_url(anchor.get("href"))
    title = text_of(anchor)
    if url is None or not title:
        return None
    return url, title


def add_result(
    results: list[dict[str, Any]], seen: set[str], title: str, url: str, snippet: str
) -> dict[str, Any] | None:
    """Append one result unless its URL was already listed; the new result, or None."""
    if url in seen:
        return None
    seen.add(url)
    result = {"title": title, "url": url, "snippet": snippet}
    results.append(result)
    return result


def same_site(url: str, other: str) -> bool:
    """True when both URLs are on one host, or one host is under the other (`www.` aside): a
    result's sitelinks are pages of its own site."""
    first, second = _site(url), _site(other)
    return bool(first) and (
        first == second or first.endswith("." + second) or second.endswith("." + first)
    )


def _site(url: str) -> str:
    link = split_link(url)
    return link[1].removeprefix("www.") if link is not None else ""


# Google's sitelinks table shows at most six; a longer list only crowds out later results
# under the output cap.
MAX_SITELINKS = 6


def add_sitelink(result: dict[str, Any], title: str, url: str) -> None:
    """Attach a link nested in `result` (a sitelink, a deep link, an inline sub-result) to it as
    `{"title", "url"}` under `sitelinks`, the key present only when there is one: never the
    result's own URL, never twice, at most MAX_SITELINKS."""
    if not title or url == result["url"]:
        return
    links = result.setdefault("sitelinks", [])
    if len(links) < MAX_SITELINKS and all(link["url"] != url for link in links):
        links.append({"title": title, "url": url})
