"""DuckDuckGo, scraped from its no-JavaScript page html.duckduckgo.com/html/ (spec 6: Strategy A's
last resort, and the end of Strategy B per RULINGS 5).

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
- Instead of the /html/ page it may serve its JavaScript app (the `duckduckgo.com/?q=` shell:
  empty `div#links`, results fetched later by script) whose `<noscript>` redirects a client
  without JavaScript to the no-JS site ("You are being redirected to the non-JavaScript site.",
  a meta refresh to `/html?q=`). That is the engine not serving the page asked for, like
  Google's JavaScript wall: `Blocked`, not `ParseError`.
- `kl=wt-wt` asks for no region, so results do not depend on where the request comes from.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any
from urllib.parse import parse_qs, urlsplit

from smart_search.sources.engines import html
from smart_search.sources.engines.request import page_request
from smart_search.sources.source import Source

if TYPE_CHECKING:
    from lxml.html import HtmlElement

    from smart_search.host.config import Settings
    from smart_search.sources.http import HttpRequest

NAME = "duckduckgo"
PATH = "/html/"
SOURCE = Source(name=NAME, label="DuckDuckGo", kind="web", order=3, endpoint="https://html.duckduckgo.com")
REGION = "wt-wt"  # "All regions"
CHALLENGE = "served its bot challenge instead of results."
JS_APP = "served its JavaScript app instead of the no-JavaScript results page."


def build_request(
    query: str, settings: Settings, *, filters: dict[str, Any] | None = None
) -> HttpRequest:
    """GET /html/?q=...&kl=wt-wt: the no-JavaScript results page, no region. `filters` (see
    `filter_params`) set a region and a date limit."""
    params = {"q": query, "kl": REGION, **filter_params(filters)[0]}
    return page_request(settings, NAME, PATH, params)


def parse(body: bytes) -> list[dict[str, Any]]:
    """Organic results of a DuckDuckGo /html/ page, or Blocked / NoResults / ParseError."""
    return html.classify_page(
        SOURCE.label, body, wall=_wall, results=_results, no_results=_no_results, walls=_WALLS
    )


def _wall(root: HtmlElement) -> str | None:
    """The bot challenge when its form is in the page's structure."""
    for form in root.iter("form"):
        if form.get("id") == "challenge-form" or "anomaly.js" in (form.get("action") or ""):
            return CHALLENGE
    return None


def _no_results(page: html.Page) -> bool:
    for element in page.root.iter("div"):
        if html.has_class(element, "no-results") or html.has_class(element, "result--no-result"):
            return True
    return False


def _shows_challenge(page: html.Page) -> bool:
    # A <script src=".../anomaly.js"> is the challenge's structure; the same string inside an
    # inline script is not.
    return (
        page.says("bots use duckduckgo too")
        or page.named("anomaly-modal")
        or page.links_to("/anomaly.js")
    )


def _shows_js_app(page: html.Page) -> bool:
    # What the app's <noscript> shows a client without JavaScript: its notice, or its refresh
    # to the no-JS site. (The /html/ page's own form posts to /html/, so a link there is no
    # sign; a refresh is.)
    return (
        page.says("redirected to the non-javascript site")
        or page.named("msg--noscript")
        or any(_refreshes_to_html(meta) for meta in page.root.iter("meta"))
    )


def _refreshes_to_html(meta: HtmlElement) -> bool:
    """A `<meta http-equiv="refresh" content="0;URL=/html?q=...">`: off to the no-JS site."""
    if (meta.get("http-equiv") or "").strip().lower() != "refresh":
        return False
    _, _, target = (meta.get("content") or "").partition("=")
    return urlsplit(target.strip().strip("'\"")).path.lower().startswith("/html")


# What the page shows that makes it a wall, tried after its results and its no-results block.
_WALLS = ((CHALLENGE, _shows_challenge), (JS_APP, _shows_js_app))


def _results(root: HtmlElement) -> list[dict[str, Any]]:
    results: list[dict[str, Any]] = []
    seen: set[str] = set()
    for block in html.by_class(root, "div", "result"):
        if html.has_class(block, "result--ad") or html.has_class(block, "result--no-result"):
            continue
        link = html.result_link(html.first_by_class(block, "a", "result__a"), target_url)
        if link is None:
            continue
        url, title = link
        snippet = html.first_by_class(block, "a", "result__snippet")
        if snippet is None:
            snippet = html.first_by_class(block, "div", "result__snippet")
        text = html.text_of(snippet) if snippet is not None else ""
        html.add_result(results, seen, title, url, text)
    return results


def target_url(href: str | None) -> str | None:
    """The real target of a result link (`uddg` unwrapped); None for ad trackers and for
    DuckDuckGo's own redirectors."""
    if not href:
        return None
    href = href.strip()
    if href.startswith("//"):
        href = "https:" + href  # scheme-relative
    link = html.split_link(href)
    if link is None:
        return None
    parts, host = link
    if _is_ddg(host) or not host:
        if parts.path.startswith("/l/"):
            wrapped = (parse_qs(parts.query).get("uddg") or [None])[0]
            return html.external_url(wrapped, _is_own)
        return None  # y.js ad trackers and any other DuckDuckGo-internal link
    return html.external_url(href, _is_own)


def _is_ddg(host: str) -> bool:
    return host == "duckduckgo.com" or host.endswith(".duckduckgo.com")


def _is_own(host: str, path: str) -> bool:
    """A DuckDuckGo redirect (an ad's y.js, a nested /l/), also once unwrapped: never a result."""
    return _is_ddg(host) and path.startswith(("/y.js", "/l/"))


# --- filters (issue 15) ----------------------------------------------------------------------

# DuckDuckGo's regions (`kl`), as "<ISO country> <ISO 639-1 language> <kl>"; the first row of a
# country is its default. DuckDuckGo's own country part differs from ISO for the United Kingdom
# (uk), Slovenia (sl) and the Czech Republic (cz), and its language part for Japanese (jp),
# Korean (kr), Chinese (zh / tzh); "Arabia" (xa) is taken as Saudi Arabia, and the regions
# that are no country (Latin America xl-es, Catalonia ct-ca) are never chosen.
_REGION_ROWS = """
AR es ar-es  AT de at-de  AU en au-en  BE fr be-fr  BE nl be-nl  BG bg bg-bg  BR pt br-pt
CA en ca-en  CA fr ca-fr  CH de ch-de  CH fr ch-fr  CH it ch-it  CL es cl-es  CN zh cn-zh
CO es co-es  CZ cs cz-cs  DE de de-de  DK da dk-da  EE et ee-et  ES es es-es  FI fi fi-fi
FR fr fr-fr  GB en uk-en  GR el gr-el  HK zh hk-tzh  HR hr hr-hr  HU hu hu-hu  ID id id-id
ID en id-en  IE en ie-en  IL he il-he  IN en in-en  IT it it-it  JP ja jp-jp  KR ko kr-kr
LT lt lt-lt  LV lv lv-lv  MX es mx-es  MY ms my-ms  MY en my-en  NL nl nl-nl  NO no no-no
NO nb no-no  NZ en nz-en  PE es pe-es  PH en ph-en  PH tl ph-tl  PL pl pl-pl  PT pt pt-pt
RO ro ro-ro  RU ru ru-ru  SA ar xa-ar  SA en xa-en  SE sv se-sv  SG en sg-en  SI sl sl-sl
SK sk sk-sk  TH th th-th  TR tr tr-tr  TW zh tw-tzh  UA uk ua-uk  US en us-en  US es ue-es
VE es ve-es  VN vi vn-vi  ZA en za-en
""".split()
REGIONS: dict[tuple[str, str], str] = {
    (country, language): kl
    for country, language, kl in zip(
        _REGION_ROWS[0::3], _REGION_ROWS[1::3], _REGION_ROWS[2::3], strict=True
    )
}
_DEFAULT_REGION: dict[str, str] = {}
for (_country, _language), _kl in REGIONS.items():
    _DEFAULT_REGION.setdefault(_country, _kl)
_DATE_LIMITS = {"day": "d", "week": "w", "month": "m", "year": "y"}
RESULTS_PER_PAGE = 10


def filter_params(filters: dict[str, Any] | None) -> tuple[dict[str, str], list[str]]:
    """DuckDuckGo's query parameters for the search filters, and the filters it cannot honour.

    freshness → `df=d|w|m|y`; country and language → one region `kl` (see REGIONS): the
    country's region in that language when DuckDuckGo has one, else the country's default
    region and the language reported as unsupported. DuckDuckGo has no language filter of its
    own, so a language without a country is unsupported (the search stays `wt-wt`). The page
    holds about ten results and no parameter asks for more: a count above ten is unsupported.
    """
    from smart_search.sources.filters import normalise, valid_count

    wanted = normalise(filters)
    params: dict[str, str] = {}
    unsupported: list[str] = []
    count = wanted.get("count")
    if count is not None and (valid_count(count) is None or count > RESULTS_PER_PAGE):
        unsupported.append("count")
    freshness = wanted.get("freshness")
    if freshness is not None:
        if str(freshness) in _DATE_LIMITS:
            params["df"] = _DATE_LIMITS[freshness]
        else:
            unsupported.append("freshness")
    country, language = str(wanted.get("country")), str(wanted.get("language"))
    region = REGIONS.get((country, language))
    if region is None and "country" in wanted:
        region = _DEFAULT_REGION.get(country)
        if region is None:
            unsupported.append("country")
    if region is not None:
        params["kl"] = region
    if "language" in wanted and (country, language) not in REGIONS:
        unsupported.append("language")
    return params, unsupported
