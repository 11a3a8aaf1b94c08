"""Google web search, scraped from its results page (spec 6: Strategy B, tier 1).

Quirks worth knowing:
- Google hands plain HTTP clients one of three pages: the basic (no-JavaScript) results page,
  where every organic link is wrapped as `/url?q=<target>&sa=U&...` (sometimes `/url?url=`); a
  JavaScript-required shell (`/httpservice/retry/enablejs` refresh, no results) which is what
  most clients get since 2025; or a wall: the `/sorry/` CAPTCHA ("Our systems have detected
  unusual traffic") or, in the EU, the consent page ("Before you continue to Google",
  a form posting to consent.google.com). The consent page is avoided with the CONSENT / SOCS
  cookies that public scrapers send.
- A real results page can ALSO carry the enablejs refresh inside `<noscript>`, so that string
  only means "blocked" when the page has no results and does not say it found nothing.
- The 2026 desktop page's inline scripts mention `/sorry/index` even on an ordinary "did not
  match any documents" page: walls are recognised only from what a page shows (its text, forms,
  links, ids; see `engines/html.py`), never from script bodies.
- Organic results are found by their `<h3>` title inside a link, not by Google's generated class
  names (they change every few months); the class names are only used to find the result's
  container and snippet, with a fallback when they are gone.
- Sitelinks (a table of sub-pages under a navigational result, each row its own `h3 > a`),
  inline sub-results (an indented second page of the same site) and the basic page's
  "Docs · Drive · Images" row are parts of the result they sit in, never results: a titled link
  on the same site inside the previous result's block (its outermost known container) or in a
  table right under it is attached to that result as `sitelinks` (issue 22). Counting each as
  a result pushed a navigational query's real second and third results down.
- Ads (`/aclk?` links, googleadservices.com, the `tads`/`bottomads` blocks, an "Ad"/"Sponsored"
  label) and Google's own navigation (`/search?q=...` related searches, knowledge-panel links)
  are dropped. Results that point at Google properties (www.google.com, maps.google.com) are
  real results and are kept.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any
from urllib.parse import parse_qs

from smart_search.sources.engines import html
from smart_search.sources.engines.request import page_request
from smart_search.sources.source import Source

if TYPE_CHECKING:
    from lxml.html import HtmlElement

    from smart_search.host.config import Settings
    from smart_search.sources.http import HttpRequest

NAME = "google"
PATH = "/search"
SOURCE = Source(name=NAME, label="Google", kind="web", order=1, endpoint="https://www.google.com")
RESULTS_PER_PAGE = 10

# Consent cookies as public scrapers send them: CONSENT=YES+ (the older form) and SOCS, which
# records "choices made" so EU clients are not redirected to consent.google.com.
CONSENT_COOKIES = {"CONSENT": "YES+", "SOCS": "CAESHAgBEhIaAB"}

# Containers of one result: the basic page's block, then the JavaScript page's.
_CONTAINER_CLASSES = ("Gx5Zad", "g", "MjjYud", "tF2Cxc", "N54PNb")
# Snippet holders: basic page, then JavaScript page.
_SNIPPET_CLASSES = ("s3v9rd", "VwiC3b", "IsZvec", "lEBKkf", "st")
_AD_BLOCK_IDS = frozenset(("tads", "tadsb", "bottomads", "tvcap"))
_AD_LABELS = frozenset(("ad", "ads", "sponsored", "sponsored result"))
_GOOGLE_HOST = r"(^|\.)google(\.[a-z]{2,3}){1,2}$"
# Paths on a Google host that are Google's own machinery, not a result.
_INTERNAL_PATHS = (
    "/search",
    "/url",
    "/sorry",
    "/setprefs",
    "/preferences",
    "/advanced_search",
    "/webhp",
    "/aclk",
    "/httpservice",
)

# What each wall is called in messages (after "Google ").
CAPTCHA = "served a CAPTCHA (unusual traffic) page."
CONSENT = "served its consent page instead of results."
JS_SHELL = "served a JavaScript-required page instead of results."


def build_request(
    query: str, settings: Settings, *, filters: dict[str, Any] | None = None
) -> HttpRequest:
    """GET /search for the basic results page, English, ten results, no personalisation.
    `filters` (see `filter_params`) override or add Google's own parameters."""
    params = {
        "q": query,
        "hl": "en",
        "num": str(RESULTS_PER_PAGE),
        "ie": "UTF-8",
        "oe": "UTF-8",
        "pws": "0",  # no personalised results: the same query gives the same page
        "gbv": "1",  # "basic version": the no-JavaScript page where Google still serves one
        **filter_params(filters)[0],
    }
    return page_request(settings, NAME, PATH, params, cookies=CONSENT_COOKIES)


def parse(body: bytes) -> list[dict[str, Any]]:
    """Organic results of a Google page, or Blocked / NoResults / ParseError."""
    return html.classify_page(
        SOURCE.label, body, wall=_wall, results=_results, no_results=_no_results, walls=_WALLS
    )


def _wall(root: HtmlElement) -> str | None:
    """A CAPTCHA or consent wall in the page's structure: Blocked whatever else it holds."""
    for form in root.iter("form"):
        action = (form.get("action") or "").lower()
        if form.get("id") == "captcha-form" or "/sorry/" in action:
            return CAPTCHA
        if "consent.google." in action or "consent.youtube." in action:
            return CONSENT
    if root.get_element_by_id("recaptcha", None) is not None:
        return CAPTCHA
    return None


def _no_results(page: html.Page) -> bool:
    return page.says("did not match any documents", "no results found for")


def _shows_captcha(page: html.Page) -> bool:
    return (
        page.says("unusual traffic")
        or page.links_to("/sorry/index")
        or page.named("g-recaptcha", "captcha-form")
    )


def _shows_consent(page: html.Page) -> bool:
    return page.says("before you continue to google") or page.links_to("consent.google.")


def _shows_js_shell(page: html.Page) -> bool:
    # Checked after the no-results sentence: an empty results page carries the same <noscript>
    # refresh as the shell.
    return page.links_to("/httpservice/retry/enablejs") or page.says(
        "please click here if you are not redirected", "enable javascript", "turn on javascript"
    )


# What the page shows that makes it a wall, tried in this order after its results and its
# no-results sentence.
_WALLS = ((CAPTCHA, _shows_captcha), (CONSENT, _shows_consent), (JS_SHELL, _shows_js_shell))


class _Block:
    """A result's whole block on the page, what nested headings are checked against. (A plain
    class: a NamedTuple costs ~0.1 ms to define, and this module loads on every call.)"""

    __slots__ = ("element", "anchor", "url", "result")

    def __init__(
        self, element: HtmlElement, anchor: HtmlElement, url: str, result: dict[str, Any] | None
    ) -> None:
        self.element = element
        self.anchor = anchor  # its title link
        self.url = url
        self.result = result  # None for an ad or a repeat: what it holds goes with it


def _results(root: HtmlElement) -> list[dict[str, Any]]:
    results: list[dict[str, Any]] = []
    seen: set[str] = set()
    parent: _Block | None = None
    for heading in root.iter("h3"):
        anchor = _anchor_of(heading)
        if anchor is None:
            continue  # a heading without a link: knowledge panel, "Related searches"
        url = target_url(anchor.get("href"))
        if url is None:
            continue
        title = html.text_of(heading)
        if not title:
            continue
        if parent is not None and _nested_in(parent, heading, anchor, url):
            if parent.result is not None:
                html.add_sitelink(parent.result, title, url)
            continue
        container = _container_of(anchor)
        result = None
        if not _is_ad(anchor, container):
            result = html.add_result(results, seen, title, url, _snippet(container, anchor))
        parent = _Block(_block_of(anchor), anchor, url, result)
        if result is not None:
            _add_inline_sitelinks(parent)
    return results


def _block_of(anchor: HtmlElement) -> HtmlElement:
    """The whole block of the result titled by `anchor`: its outermost ancestor with a known
    container class (sitelinks and sub-results sit beside the title's own container, inside
    that one), else `_container_of`'s fallback."""
    block = None
    for depth, ancestor in enumerate(anchor.iterancestors()):
        if depth > 8:
            break
        if _is_container(ancestor):
            block = ancestor
    return block if block is not None else _container_of(anchor)


def _nested_in(parent: _Block, heading: HtmlElement, anchor: HtmlElement, url: str) -> bool:
    """True when a titled link is part of the result before it, not a result of its own: a sitelink
    or an inline sub-result (a "More results from this site" link is a Google search, dropped
    before this). It sits inside that result's block, or (where class names are gone) in a table
    right under it; and it is on the same site, which every such block is, so a misread block
    never swallows a result."""
    if not html.same_site(url, parent.url):
        return False
    if html.inside(anchor, parent.element):
        return True
    table = next(heading.iterancestors("table"), None)
    if table is None or html.inside(parent.anchor, table):
        return False  # no table, or a layout table holding the results themselves
    for depth, ancestor in enumerate(table.iterancestors()):
        if depth > 2:
            break
        if html.inside(parent.anchor, ancestor):
            return True
    return False


def _add_inline_sitelinks(block: _Block) -> None:
    """The result's links that are not titles (the basic page's "Docs · Drive · Images" row
    under a snippet): sitelinks when they lead to the result's own site."""
    assert block.result is not None
    for link in block.element.iter("a"):
        if link is block.anchor or _in_heading(link):
            continue  # titled links are the headings' business (see `_results`)
        url = target_url(link.get("href"))
        if url is not None and html.same_site(url, block.url):
            html.add_sitelink(block.result, html.text_of(link), url)


def _in_heading(link: HtmlElement) -> bool:
    """True for a link in a heading or holding one: a title."""
    return any(True for _ in link.iterancestors("h3")) or any(True for _ in link.iter("h3"))


def _anchor_of(heading: HtmlElement) -> HtmlElement | None:
    """The link a result title sits in (basic and JS pages) or holds (older pages)."""
    for ancestor in heading.iterancestors("a"):
        return ancestor
    for anchor in heading.iter("a"):
        return anchor
    return None


def target_url(href: str | None) -> str | None:
    """The real target of a result link, or None for ads and Google's own links."""
    link = html.split_link(href)
    if link is None:
        return None
    parts, host = link
    if parts.path == "/url" and (not host or re.search(_GOOGLE_HOST, host)):
        query = parse_qs(parts.query)
        wrapped = (query.get("q") or query.get("url") or [None])[0]
        return html.external_url(wrapped, _is_own)
    # Relative links (/search?q=..., /aclk?..., /preferences) are Google's own: not absolute.
    return html.external_url(href, _is_own)


def _is_own(host: str, path: str) -> bool:
    """Ad redirects, Google's own machinery and its cache: never a result."""
    if host.endswith(("googleadservices.com", "doubleclick.net")):
        return True
    if re.search(_GOOGLE_HOST, host) and path.startswith(_INTERNAL_PATHS):
        return True
    return host == "webcache.googleusercontent.com"


def _container_of(anchor: HtmlElement) -> HtmlElement:
    """The result's block: the nearest ancestor with a known container class, else the link's
    grandparent (class names change; the fallback still finds a nearby snippet)."""
    for depth, ancestor in enumerate(anchor.iterancestors()):
        if depth > 8:
            break
        if _is_container(ancestor):
            return ancestor
    parent = anchor.getparent()
    if parent is None:
        return anchor
    grandparent = parent.getparent()
    return grandparent if grandparent is not None else parent


def _is_container(element: HtmlElement) -> bool:
    classes = (element.get("class") or "").split()
    return any(name in classes for name in _CONTAINER_CLASSES)


def _is_ad(anchor: HtmlElement, container: HtmlElement) -> bool:
    href = anchor.get("href") or ""
    if "/aclk?" in href or "googleadservices.com" in href:
        return True
    if container.get("data-text-ad") is not None:
        return True
    for ancestor in container.iterancestors():
        if ancestor.get("id") in _AD_BLOCK_IDS:
            return True
    # The basic page marks an ad with a standalone "Ad" / "Sponsored" label.
    for element in container.iter("span", "div"):
        if (
            element.text
            and len(element) == 0
            and element.text.strip().lower() in _AD_LABELS
            and next(element.iterancestors("a"), None) is None  # a sitelink may read "Ads"
        ):
            return True
    return False


def _snippet(container: HtmlElement, anchor: HtmlElement) -> str:
    """The innermost snippet block outside the title link; the container's other text when
    Google's class names are unknown."""
    for name in _SNIPPET_CLASSES:
        candidates = [
            element
            for element in container.iter("div", "span")
            if html.has_class(element, name) and not html.inside(element, anchor)
        ]
        for element in candidates:
            if any(html.has_class(inner, name) for inner in element.iterdescendants("div", "span")):
                continue  # an outer wrapper (snippet + sitelinks): the inner one is the snippet
            text = html.text_of(element)
            if text:
                return text
    return html.text_of(container, skip=anchor)


# --- filters (issue 15) ----------------------------------------------------------------------

_TBS = {"day": "qdr:d", "week": "qdr:w", "month": "qdr:m", "year": "qdr:y"}


def filter_params(filters: dict[str, Any] | None) -> tuple[dict[str, str], list[str]]:
    """Google's query parameters for the search filters, and the filters it cannot honour.

    freshness → `tbs=qdr:d|w|m|y`; country → `gl` (results boosted for that country, not
    restricted to it); language → `hl` (the page's language) and `lr=lang_xx` (results in that
    language); count → `num`. Google has ignored `num` since September 2025 and serves ten
    results a page, so a count above RESULTS_PER_PAGE is reported as unsupported (the caller
    cuts a longer list to count).
    """
    from smart_search.sources.filters import is_code, normalise, valid_count

    params: dict[str, str] = {}
    unsupported: list[str] = []
    wanted = normalise(filters)
    for name, value in wanted.items():
        if name == "count" and valid_count(value) is not None:
            params["num"] = str(value)
            if value > RESULTS_PER_PAGE:
                unsupported.append(name)
        elif name == "freshness" and str(value) in _TBS:
            params["tbs"] = _TBS[value]
        elif name == "country" and is_code(value):
            params["gl"] = value.lower()
        elif name == "language" and is_code(value):
            code = _google_language(value, wanted.get("country"))
            params["hl"] = code
            params["lr"] = f"lang_{code}"
        else:
            unsupported.append(name)
    return params, unsupported


def _google_language(language: str, country: object) -> str:
    """Google's code for an ISO 639-1 language where it differs: Hebrew is `iw`, Norwegian
    `no`, and Chinese is `zh-CN` or (for Taiwan and Hong Kong) `zh-TW`."""
    if language == "zh":
        return "zh-TW" if country in ("TW", "HK") else "zh-CN"
    return {"he": "iw", "nb": "no"}.get(language, language)
