"""Bing web search, scraped from www.bing.com/search (spec 6: Strategy B, tier 2).

Quirks worth knowing:
- Organic results are `<li class="b_algo">` in `ol#b_results`, title in `h2 > a`, snippet in a
  `p` of `div.b_caption` (lately `p.b_lineclamp2`).
- Every link is a click-tracking redirect: `https://www.bing.com/ck/a?!&&p=...&u=a1<base64url>`.
  The target is the `u` parameter without its "a1" prefix, base64url-encoded without padding;
  the padding is restored before decoding. A link that cannot be decoded is dropped rather
  than returned as a bing.com wrapper.
- Deep links (`div.b_deep`, the two-column `b_vlist2col` list, a heading per link) sit inside
  their `li.b_algo`: attached to it as `sitelinks`, never results; the favicon link (`a.tilk`)
  and links to other sites are not deep links.
- Ads sit in `li.b_ad` blocks (`b_adTop`, `b_adBottom`), carry a `b_adSlug` label, and link
  through `bing.com/aclick`: all dropped.
- The bot challenge ("One last step", a Cloudflare Turnstile widget in `div.captcha`) keeps
  Bing's full page chrome, including `b_results` in its CSS: it is detected by the challenge
  markup, never by the absence of a word.
- A normal results page carries "There are no results for ..." inside its scripts (a Copilot
  string), so an empty result is only recognised from the visible `li.b_no` block.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any
from urllib.parse import parse_qs

from smart_search.sources.engines import html
from smart_search.sources.engines.request import page_request
from smart_search.sources.source import Source

if TYPE_CHECKING:
    from datetime import datetime

    from lxml.html import HtmlElement

    from smart_search.host.config import Settings
    from smart_search.sources.http import HttpRequest

NAME = "bing"
PATH = "/search"
SOURCE = Source(name=NAME, label="Bing", kind="web", order=2, endpoint="https://www.bing.com")
CHALLENGE = "served its bot challenge instead of results."

# Bing's own pages that are navigation, not results.
_INTERNAL_PATHS = (
    "/search",
    "/images",
    "/videos",
    "/news",
    "/maps",
    "/shop",
    "/aclick",
    "/ck/",
    "/copilotsearch",
    "/travel",
)


def build_request(
    query: str, settings: Settings, *, filters: dict[str, Any] | None = None
) -> HttpRequest:
    """GET /search in English for the US market (`setlang` for the interface, `cc` for the
    market), the parameters Bing's own search box sends. `filters` (see `filter_params`)
    override or add Bing's own parameters."""
    params = {"q": query, "setlang": "en", "cc": "US", "form": "QBLH", **filter_params(filters)[0]}
    return page_request(settings, NAME, PATH, params)


def parse(body: bytes) -> list[dict[str, Any]]:
    """Organic results of a Bing page, or Blocked / NoResults / ParseError."""
    return html.classify_page(
        SOURCE.label, body, wall=_wall, results=_results, no_results=_no_results, walls=_WALLS
    )


def _wall(root: HtmlElement) -> str | None:
    """The bot challenge when its widget is in the page's structure."""
    widget = root.get_element_by_id("turnstile-widget", None)
    if widget is not None or html.first_by_class(root, "div", "captcha") is not None:
        return CHALLENGE
    return None


def _no_results(page: html.Page) -> bool:
    for element in page.root.iter("li", "div"):
        if html.has_class(element, "b_no"):
            return True
    container = page.root.get_element_by_id("b_results", None)
    return container is not None and "there are no results for" in html.text_of(container).lower()


def _shows_challenge(page: html.Page) -> bool:
    return page.says("one last step", "solve the challenge below")


# What the page shows that makes it a wall, tried after its results and its no-results block.
_WALLS = ((CHALLENGE, _shows_challenge),)


def _results(root: HtmlElement) -> list[dict[str, Any]]:
    results: list[dict[str, Any]] = []
    seen: set[str] = set()
    for item in html.by_class(root, "li", "b_algo"):
        if _is_ad(item):
            continue
        anchor = _title_link(item)
        link = html.result_link(anchor, target_url)
        if link is None:
            continue
        url, title = link
        result = html.add_result(results, seen, title, url, _snippet(item))
        if result is not None:
            _add_deep_links(result, item, anchor)
    return results


def _add_deep_links(result: dict[str, Any], item: HtmlElement, title: HtmlElement) -> None:
    """The links under a result's snippet that lead into its site (`div.b_deep`, the two-column
    `b_vlist2col` list, a heading per link): sitelinks of that result, never results."""
    for link in item.iter("a"):
        if link is title or not _in_deep_block(link, item):
            continue
        url = target_url(link.get("href"))
        if url is not None and html.same_site(url, result["url"]):
            html.add_sitelink(result, html.text_of(link), url)


def _in_deep_block(link: HtmlElement, item: HtmlElement) -> bool:
    for element in link.iterancestors():
        if element is item:
            return False
        if element.tag in ("h2", "h3") or html.class_prefixed(element, "b_deep"):
            return True
        if html.has_class(element, "b_vlist2col"):
            return True
    return False


def _title_link(item: HtmlElement) -> HtmlElement | None:
    for heading in item.iter("h2"):
        for anchor in heading.iter("a"):
            return anchor
    return None


def _is_ad(item: HtmlElement) -> bool:
    for element in (item, *item.iterancestors()):
        if html.class_prefixed(element, "b_ad") or html.class_prefixed(element, "sb_add"):
            return True
    for element in item.iter():
        if html.has_class(element, "b_adSlug") or html.has_class(element, "b_adProvider"):
            return True
    return False


def target_url(href: str | None) -> str | None:
    """The real target of a result link: `/ck/a?...&u=a1<base64url>` decoded; ads and Bing's
    own pages give None."""
    link = html.split_link(href)
    if link is None:
        return None
    parts, host = link
    if (not host or _is_bing(host)) and parts.path.startswith("/ck/a"):
        encoded = (parse_qs(parts.query).get("u") or [""])[0]
        return html.external_url(decode_u(encoded), _is_own)
    if not host:
        return None  # relative: Bing navigation
    return html.external_url(href, _is_own)


def decode_u(encoded: str) -> str | None:
    """`a1aHR0cHM6Ly9...` → `https://...`: drop the "a1" marker, restore the base64 padding."""
    if not encoded.startswith("a1"):
        return None
    payload = encoded[2:]
    payload += "=" * (-len(payload) % 4)
    import base64  # here, not at import: the registry imports every engine on every call
    import binascii

    try:
        # validate: a stray character is an error, not silently skipped into a wrong URL
        return base64.b64decode(payload, altchars=b"-_", validate=True).decode("utf-8")
    except (binascii.Error, ValueError):  # UnicodeDecodeError is a ValueError
        return None


def _is_own(host: str, path: str) -> bool:
    """Bing's own navigation and redirectors: never a result."""
    return _is_bing(host) and path.startswith(_INTERNAL_PATHS)


def _is_bing(host: str) -> bool:
    return host == "bing.com" or host.endswith(".bing.com")


def _snippet(item: HtmlElement) -> str:
    caption = html.first_by_class(item, "div", "b_caption")
    scope = caption if caption is not None else item
    for paragraph in scope.iter("p"):
        # Some markets prefix the snippet with an icon label ("WEB"): not part of the text.
        icon = html.first_by_class(paragraph, "span", "algoSlug_icon")
        text = html.text_of(paragraph, skip=icon)
        if text:
            return text
    return html.text_of(caption) if caption is not None else ""


# --- filters (issue 15) ----------------------------------------------------------------------

# Bing's date filter: ez1 past 24 hours, ez2 past week, ez3 past month; there is no "past year"
# preset, so a year is the custom range ez5_<first day>_<last day> (days since 1970-01-01).
_DATE_FILTERS = {"day": "ez1", "week": "ez2", "month": "ez3"}
_EPOCH_ORDINAL = 719163  # date(1970, 1, 1).toordinal(): day numbers count from 1970-01-01
RESULTS_PER_PAGE = 10


def filter_params(
    filters: dict[str, Any] | None, *, now: datetime | None = None
) -> tuple[dict[str, str], list[str]]:
    """Bing's query parameters for the search filters, and the filters it cannot honour.

    freshness → `filters=ex1:"ez1|ez2|ez3"` (year: `ex1:"ez5_<from>_<to>"`, 365 days up to
    `now`); country → `cc`; language → `setlang` (Chinese as zh-hans / zh-hant). A results page
    holds ten organic results and no parameter asks for more, so a count above ten is reported
    as unsupported (the caller cuts a longer list to count).
    """
    from smart_search.sources.filters import (
        FRESHNESS_DAYS,
        is_code,
        normalise,
        utc_now,
        valid_count,
    )

    params: dict[str, str] = {}
    unsupported: list[str] = []
    wanted = normalise(filters)
    for name, value in wanted.items():
        if name == "count" and valid_count(value) is not None:
            if value > RESULTS_PER_PAGE:
                unsupported.append(name)
        elif name == "freshness" and str(value) in _DATE_FILTERS:
            params["filters"] = f'ex1:"{_DATE_FILTERS[value]}"'
        elif name == "freshness" and value == "year":
            last = utc_now(now).toordinal() - _EPOCH_ORDINAL
            params["filters"] = f'ex1:"ez5_{last - FRESHNESS_DAYS["year"]}_{last}"'
        elif name == "country" and is_code(value):
            params["cc"] = value
        elif name == "language" and is_code(value):
            if value == "zh":
                value = "zh-hant" if wanted.get("country") in ("TW", "HK") else "zh-hans"
            params["setlang"] = value
        else:
            unsupported.append(name)
    return params, unsupported
