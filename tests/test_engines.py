"""web_fetch engines: real results pages, hand-written edge pages, requests and HTTP statuses.

The real pages under tests/fixtures/serp/ are byte-identical copies of the shared fixtures (see
their README for where they come from); they are never edited to make a parser pass. The pages
listed in MADE are our own, written in the shape of a real page to pin one behaviour each.
"""

from __future__ import annotations

import base64
import re
import subprocess
import sys
import time
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest

from smart_search import errors
from smart_search.host.config import ENGINES as ALL_ENGINES
from smart_search.sources import registry
from smart_search.sources.engines import bing, duckduckgo, google
from smart_search.sources.engines.fetch import classify_status, engine_module, fetch_engine
from smart_search.sources.http import HttpResponse
from tests.fakes import FakeServer, Reply

# The scraped engines: a self-hosted one (SearXNG, JSON) has its own tests (test_searxng.py).
ENGINES = tuple(e for e in ALL_ENGINES if not registry.source(e).self_hosted)

SERP = Path(__file__).parent / "fixtures" / "serp"

REAL_RESULTS = [
    (
        "duckduckgo",
        "duckduckgo/html-results-caffeine.html",
        9,
        "Caffeine and Sleep Problems",
        "https://www.sleepfoundation.org/nutrition/caffeine-and-sleep",
    ),
    (
        "bing",
        "bing/results-javascript-tutorial.html",
        10,
        "JavaScript Tutorial - W3Schools",
        "https://www.w3schools.com/Js/",
    ),
    ("google", "google/basic-results-google.html", 10, "Google", "https://www.google.com/"),
]
REAL_BLOCKED = [
    ("duckduckgo", "duckduckgo/blocked-challenge.html"),
    ("bing", "bing/blocked-captcha.html"),
    ("google", "google/blocked-sorry.html"),
]
# Hand-made pages (tests/fixtures/serp/README.md): a page that SAYS it found nothing, whose
# scripts and styles carry every wall sign of its engine. Only what a page shows decides.
MADE_NO_RESULTS = [
    ("google", "google/no-results-with-sorry-in-script.html"),
    ("bing", "bing/no-results-with-challenge-in-script.html"),
    ("duckduckgo", "duckduckgo/no-results-with-anomaly-in-script.html"),
]
# Hand-made pages in the shape of an October 2025 page for a navigational query: a first result
# with four sub-pages nested under it, then two more organic results (issue 22).
MADE_SITELINKS = {
    "google": "google/results-with-sitelinks-table.html",
    "bing": "bing/results-with-deep-links.html",
}
LABELS = {"google": "Google", "bing": "Bing", "duckduckgo": "DuckDuckGo"}
TAG = re.compile(r"<[A-Za-z/!][^>]*>")


def page(name: str) -> bytes:
    return (SERP / name).read_bytes()


def html(body: str) -> bytes:
    return f"<!DOCTYPE html><html><head><title>t</title></head><body>{body}</body></html>".encode()


def assert_well_formed(engine: str, results: list[dict[str, Any]]) -> None:
    assert results, "a success has at least one result"
    for result in results:
        own = {key: value for key, value in result.items() if key != "sitelinks"}
        assert_link_well_formed(engine, own, {"title", "url", "snippet"})
        sitelinks = result.get("sitelinks")
        if "sitelinks" in result:  # the key is there only when the result has some
            assert sitelinks, result
            for link in sitelinks:
                assert_link_well_formed(engine, link, {"title", "url"})
            links = [link["url"] for link in sitelinks]
            assert len(links) == len(set(links)) and result["url"] not in links
    urls = [result["url"] for result in results]
    assert len(urls) == len(set(urls))


def assert_link_well_formed(engine: str, link: dict[str, Any], keys: set[str]) -> None:
    assert set(link) == keys
    assert all(isinstance(value, str) for value in link.values())
    assert link["title"].strip()
    parts = urlsplit(link["url"])
    assert parts.scheme in ("http", "https") and parts.hostname, link["url"]
    assert not is_engine_wrapper(engine, link["url"]), link["url"]
    for field in keys - {"url"}:
        text = link[field]
        assert not TAG.search(text), text
        assert text == " ".join(text.split()), f"whitespace not collapsed: {text!r}"


def is_engine_wrapper(engine: str, url: str) -> bool:
    parts = urlsplit(url)
    host = parts.hostname or ""
    if engine == "google":
        return host.endswith("google.com") and parts.path in ("/url", "/aclk", "/search")
    if engine == "bing":
        return host.endswith("bing.com") and parts.path.startswith(("/ck/", "/aclick"))
    return host.endswith("duckduckgo.com") and parts.path.startswith(("/l/", "/y.js"))


# --- real pages -------------------------------------------------------------------------------


@pytest.mark.parametrize(("engine", "name", "count", "title", "url"), REAL_RESULTS)
def test_real_results_page(engine: str, name: str, count: int, title: str, url: str) -> None:
    results = engine_module(engine).parse(page(name))
    assert len(results) == count
    assert results[0]["title"] == title
    assert results[0]["url"] == url
    assert results[0]["snippet"]
    assert_well_formed(engine, results)


@pytest.mark.parametrize(("engine", "name"), REAL_BLOCKED)
def test_real_blocked_page(engine: str, name: str) -> None:
    with pytest.raises(errors.Blocked) as caught:
        engine_module(engine).parse(page(name))
    assert caught.value.error_code == "blocked"
    assert LABELS[engine] in str(caught.value)


def test_real_google_page_keeps_results_pointing_at_google_properties() -> None:
    urls = [r["url"] for r in google.parse(page("google/basic-results-google.html"))]
    assert "https://maps.google.com/" in urls
    assert "https://www.google.com/imghp?hl=EN" in urls  # %3F / %3D decoded
    # Knowledge-panel and related-search links are not results.
    assert not any("wikipedia.org" in u or "/search" in u for u in urls)


def test_real_google_page_reads_the_sitelinks_row_of_its_first_result() -> None:
    # Under its snippet the first result shows "Google device · Docs · Drive · Images".
    results = google.parse(page("google/basic-results-google.html"))
    assert sitelinks(results[0]) == [
        ("Google device", "https://www.google.com/device"),
        ("Docs", "https://www.google.com/docs/about/"),
        ("Drive", "https://www.google.com/drive/"),
        ("Images", "https://www.google.com/imghp?hl=EN"),
    ]
    assert [r["title"] for r in results[1:3]] == ["Google Account", "Google Maps"]
    assert not [r for r in results[1:] if "sitelinks" in r]


def test_real_bing_page_mentions_no_results_only_in_scripts() -> None:
    body = page("bing/results-javascript-tutorial.html")
    assert b"There are no results for" in body  # a Copilot string inside a script
    assert len(bing.parse(body)) == 10


def test_real_duckduckgo_snippets_are_plain_text() -> None:
    first = duckduckgo.parse(page("duckduckgo/html-results-caffeine.html"))[0]
    assert first["snippet"].startswith("Drinking caffeine too close to bedtime")


@pytest.mark.parametrize("name", ["duckduckgo/blocked-challenge.html", "bing/blocked-captcha.html"])
def test_challenge_pages_are_blocked_even_under_another_engine(name: str) -> None:
    # A wall is never a results page: no engine finds results in another engine's wall.
    for engine in ENGINES:
        with pytest.raises((errors.Blocked, errors.ParseError)):
            engine_module(engine).parse(page(name))


@pytest.mark.parametrize(("engine", "name"), MADE_NO_RESULTS)
def test_no_results_page_with_wall_signs_in_its_scripts_is_no_results(
    engine: str, name: str
) -> None:
    # Issue 7 item 11: a 2026 desktop Google page saying "did not match any documents" was
    # `blocked` because an inline script mentions /sorry/index.
    body = page(name)
    assert b"<script" in body
    with pytest.raises(errors.NoResults, match=LABELS[engine]):
        engine_module(engine).parse(body)


# --- nested blocks: sitelinks, deep links, inline sub-results (issue 22) ----------------------

WIDGETRY = "https://github.com/example-org/widgetry"
SUB_PAGES = [
    ("Releases", WIDGETRY + "/releases"),
    ("Issues", WIDGETRY + "/issues"),
    ("Wiki", WIDGETRY + "/wiki"),
    ("CHANGELOG.md", WIDGETRY + "/blob/main/CHANGELOG.md"),
]
FIRST_THREE = [
    WIDGETRY,
    "https://docs.example.org/widgetry/",
    "https://blog.example.net/2025/10/widgetry-2-4",
]


def sitelinks(result: dict[str, Any]) -> list[tuple[str, str]]:
    return [(link["title"], link["url"]) for link in result.get("sitelinks", [])]


@pytest.mark.parametrize("engine", sorted(MADE_SITELINKS))
def test_sitelinks_are_part_of_their_result_not_results(engine: str) -> None:
    results = engine_module(engine).parse(page(MADE_SITELINKS[engine]))
    assert [r["url"] for r in results] == FIRST_THREE  # the page's own order, nothing between
    assert sitelinks(results[0]) == SUB_PAGES
    assert results[0]["snippet"].startswith("Widgetry is a library of small, composable widgets")
    assert "sitelinks" not in results[1]
    assert_well_formed(engine, results)


def test_google_inline_sub_result_belongs_to_its_result() -> None:
    # The indented second page from the same site is part of the result above it; the "More
    # results from blog.example.net" link is a Google search, not a page.
    third = google.parse(page(MADE_SITELINKS["google"]))[2]
    assert sitelinks(third) == [
        ("Widgetry 2.3: themes", "https://blog.example.net/2025/06/widgetry-2-3")
    ]


def test_bing_deep_link_row_belongs_to_its_result() -> None:
    # A one-line row of deep links under the snippet; the result's favicon link (`a.tilk`, to
    # the site's home page) is not one of them.
    body = page(MADE_SITELINKS["bing"])
    home = base64.urlsafe_b64encode(b"https://blog.example.net/").rstrip(b"=")
    assert b'class="tilk"' in body and b"u=a1" + home + b"&" in body
    third = bing.parse(body)[2]
    assert sitelinks(third) == [
        ("Widgetry 2.3: themes", "https://blog.example.net/2025/06/widgetry-2-3"),
        ("All widgetry posts", "https://blog.example.net/tags/widgetry"),
    ]


def test_google_sitelinks_of_an_ad_go_with_the_ad() -> None:
    body = page(MADE_SITELINKS["google"])
    assert b"https://widgets.example.com/pricing" in body  # the ad's own sitelinks table
    assert "widgets.example.com" not in repr(google.parse(body))


def test_google_sitelinks_table_without_class_names_still_belongs_to_its_result() -> None:
    # Google renames its classes every few months: a table of titled links right under a
    # result is still that result's.
    body = re.sub(rb' class="[^"]*"', b"", page(MADE_SITELINKS["google"]))
    assert b"class=" not in body
    results = google.parse(body)
    assert [r["url"] for r in results[:3]] == FIRST_THREE
    assert sitelinks(results[0]) == SUB_PAGES


def test_google_result_from_another_site_in_the_same_block_is_a_result() -> None:
    # Only pages of a result's own site nest in it: a misread block never swallows a result.
    def g(url: str, title: str) -> str:
        return f'<div class="g"><div><a href="{url}"><h3>{title}</h3></a></div></div>'

    body = html(
        '<div id="rso"><div class="MjjYud"><div class="hlcw0c">'
        + g("https://one.example/a", "One")
        + g("https://two.example/b", "Two")
        + "</div></div></div>"
    )
    results = google.parse(body)
    assert [(r["url"], sitelinks(r)) for r in results] == [
        ("https://one.example/a", []),
        ("https://two.example/b", []),
    ]


# --- page-wide signs: what a page shows, never its code ---------------------------------------

# Every page-wide sign each engine looked for as raw bytes before: each is a wall only when the
# page shows it, never when it sits in a script, a style sheet or a template.
WALL_SIGNS = [
    ("google", "unusual traffic"),
    ("google", "/sorry/index"),
    ("google", "g-recaptcha"),
    ("google", "captcha-form"),
    ("google", "consent.google."),
    ("google", "Before you continue to Google"),
    ("google", "/httpservice/retry/enablejs"),
    ("google", "Please click here if you are not redirected"),
    ("google", "enable JavaScript"),
    ("google", "turn on JavaScript"),
    ("bing", "One last step"),
    ("bing", "Please solve the challenge below to continue"),
    ("duckduckgo", "Unfortunately, bots use DuckDuckGo too."),
    ("duckduckgo", "anomaly-modal"),
    ("duckduckgo", "/anomaly.js"),
]


def in_code(sign: str) -> str:
    return (
        f'<script>var sign = "{sign}"; if (0) location.href = "{sign}";</script>'
        f"<style>/* {sign} */ .x{{content:'{sign}'}}</style>"
        f"<template><p>{sign}</p><a href='{sign}'>x</a></template>"
    )


@pytest.mark.parametrize(("engine", "sign"), WALL_SIGNS)
def test_wall_sign_only_in_code_is_not_a_wall(engine: str, sign: str) -> None:
    body = html(in_code(sign) + "<p>Nothing that looks like results.</p>")
    with pytest.raises(errors.ParseError, match=LABELS[engine]):
        engine_module(engine).parse(body)


SHOWN_WALLS = [
    ("google", "<p>Our systems have detected unusual traffic from your computer network.</p>"),
    ("google", '<a href="https://www.google.com/sorry/index?continue=x">Continue</a>'),
    ("google", '<div class="g-recaptcha" data-sitekey="x"></div>'),
    ("google", '<iframe src="https://consent.google.com/ml?continue=x"></iframe>'),
    ("google", "<h1>Before you continue to Google</h1>"),
    ("google", '<meta http-equiv="refresh" content="0;url=/httpservice/retry/enablejs?sei=x">'),
    ("google", "<div>Please click here if you are not redirected within a few seconds.</div>"),
    ("bing", "<h1>One last step</h1><p>Please solve the challenge below to continue</p>"),
    ("duckduckgo", "<div>Unfortunately, bots use DuckDuckGo too.</div>"),
    ("duckduckgo", '<div class="anomaly-modal__mask"></div>'),
    ("duckduckgo", '<script src="//duckduckgo.com/anomaly.js?sv=html&amp;cc=botnet"></script>'),
]


@pytest.mark.parametrize(("engine", "shown"), SHOWN_WALLS)
def test_wall_sign_the_page_shows_is_a_wall(engine: str, shown: str) -> None:
    with pytest.raises(errors.Blocked, match=LABELS[engine]):
        engine_module(engine).parse(html(shown))


NO_RESULTS_SHOWN = {
    "google": "<p>Your search - <b>zxqv</b> - did not match any documents.</p>",
    "bing": '<ol id="b_results"><li class="b_no"><h1>There are no results for zxqv</h1></li></ol>',
    "duckduckgo": '<div class="result result--no-result"><div class="no-results">No  results.'
    "</div></div>",
}


@pytest.mark.parametrize("engine", ENGINES)
def test_no_results_sentence_outranks_every_wall_sign_in_code(engine: str) -> None:
    code = "".join(in_code(sign) for name, sign in WALL_SIGNS if name == engine)
    body = html(code + NO_RESULTS_SHOWN[engine])
    with pytest.raises(errors.NoResults, match=LABELS[engine]):
        engine_module(engine).parse(body)


def test_google_no_results_for_a_query_quoting_a_wall_phrase() -> None:
    # The page shows "unusual traffic", but only as the query it found nothing for.
    body = html("<p>Your search - <b>unusual traffic</b> - did not match any documents.</p>")
    with pytest.raises(errors.NoResults, match="Google"):
        google.parse(body)


@pytest.mark.parametrize(
    ("engine", "result"),
    [
        ("google", '<div class="g"><a href="{href}"><h3>{title}</h3></a></div>'),
        (
            "bing",
            '<ol id="b_results"><li class="b_algo"><h2><a href="{href}">{title}</a></h2></li>',
        ),
        ("duckduckgo", '<div class="result"><a class="result__a" href="{href}">{title}</a></div>'),
    ],
    ids=ENGINES,
)
def test_malformed_link_is_skipped_not_a_crash(engine: str, result: str) -> None:
    body = html(
        result.format(href="http://[bad/x", title="Broken")
        + result.format(href="https://good.example/", title="Good")
    )
    assert [r["url"] for r in engine_module(engine).parse(body)] == ["https://good.example/"]


# --- Google, hand-written ---------------------------------------------------------------------


def g_result(href: str, title: str, snippet: str, extra: str = "") -> str:
    return (
        f'<div><div class="Gx5Zad fP1Qef xpd EtOod pkphOe">{extra}<div class="egMi0 kCrYT">'
        f'<a href="{href}"><div class="DnJfK"><div class="j039Wc"><h3 class="zBAuLc l97dzf">'
        f'<div class="BNeawe vvjwJb AP7Wnd">{title}</div></h3></div>'
        f'<div class="sCuL3"><div class="BNeawe UPmit AP7Wnd">site</div></div></div></a></div>'
        f'<div class="kCrYT"><div><div class="BNeawe s3v9rd AP7Wnd">{snippet}</div></div></div>'
        f"</div></div>"
    )


ORGANIC = g_result("/url?q=https://example.org/page&amp;sa=U&amp;ved=x", "Organic", "Real text")


def test_google_drops_ads_and_keeps_the_organic_result() -> None:
    body = html(
        '<div id="tads">'
        + g_result("/url?q=https://shop.example/&amp;sa=U", "Ad in the ad block", "buy")
        + "</div>"
        + g_result("/aclk?sa=l&amp;ai=x&amp;adurl=https://shop.example/", "Aclk ad", "buy")
        + g_result(
            "/url?q=https://labelled.example/&amp;sa=U",
            "Labelled ad",
            "buy",
            extra="<span>Ad</span>",
        )
        + g_result("https://www.googleadservices.com/pagead/aclk?x=1", "Adservices", "buy")
        + ORGANIC
    )
    assert google.parse(body) == [
        {"title": "Organic", "url": "https://example.org/page", "snippet": "Real text"}
    ]


def test_google_drops_its_own_links_and_unwraps_url_param() -> None:
    body = html(
        g_result("/search?q=related&amp;sa=X", "Related search", "x")
        + g_result("https://www.google.com/search?q=other", "Absolute search link", "x")
        + g_result("/url?url=https://example.net/a%3Fb%3D1&amp;sa=U", "Url form", "y")
        + '<span><h3 class="zBAuLc"><div>Heading without link</div></h3></span>'
        + g_result("/url?q=javascript:alert(1)&amp;sa=U", "Script", "z")
    )
    assert google.parse(body) == [
        {"title": "Url form", "url": "https://example.net/a?b=1", "snippet": "y"}
    ]


def test_google_sitelink_named_ads_does_not_make_an_ad() -> None:
    sitelink = '<span class="BNeawe"><a href="/url?q=https://ads.google.com/">Ads</a></span>'
    body = html(g_result("/url?q=https://www.google.com/&amp;sa=U", "Google", "Search" + sitelink))
    assert [r["title"] for r in google.parse(body)] == ["Google"]


def test_google_javascript_layout_is_parsed_too() -> None:
    body = html(
        '<div id="search"><div class="MjjYud"><div class="g"><div><a href="https://example.com/x">'
        '<h3 class="LC20lb">Direct link</h3><cite>example.com</cite></a></div>'
        '<div class="VwiC3b">A <em>plain</em>   snippet.</div></div></div></div>'
    )
    assert google.parse(body) == [
        {"title": "Direct link", "url": "https://example.com/x", "snippet": "A plain snippet."}
    ]


ENABLEJS = (
    '<noscript><meta content="0;url=/httpservice/retry/enablejs?sei=abc" '
    'http-equiv="refresh"></noscript>'
)


def test_google_results_page_with_enablejs_noscript_is_a_success() -> None:
    results = google.parse(html(ENABLEJS + ORGANIC))
    assert [r["url"] for r in results] == ["https://example.org/page"]


def test_google_snippet_quoting_unusual_traffic_is_not_a_captcha() -> None:
    body = html(g_result("/url?q=https://news.example/&amp;sa=U", "News", "unusual traffic seen"))
    assert google.parse(body)[0]["snippet"] == "unusual traffic seen"


@pytest.mark.parametrize(
    ("body", "word"),
    [
        (
            '<noscript><meta content="0;url=/httpservice/retry/enablejs?sei=abc" '
            'http-equiv="refresh"></noscript><div>Please click here if you are not redirected'
            "</div>",
            "JavaScript",
        ),
        (
            '<form action="https://consent.google.com/save" method="POST">'
            '<input type="submit" value="Accept all"></form>',
            "consent",
        ),
        ("<h1>Before you continue to Google</h1><p>We use cookies</p>", "consent"),
        (
            '<form id="captcha-form" action="index" method="post"><div id="recaptcha"></div>'
            "</form>Our systems have detected unusual traffic from your computer network.",
            "CAPTCHA",
        ),
        ('<form action="/sorry/index" method="post"></form>' + ORGANIC, "CAPTCHA"),
    ],
)
def test_google_walls_are_blocked(body: str, word: str) -> None:
    with pytest.raises(errors.Blocked, match=word):
        google.parse(html(body))


@pytest.mark.parametrize("noscript", ["", ENABLEJS])
def test_google_no_results_page(noscript: str) -> None:
    body = html(
        noscript + '<div id="main"><div class="card-section"><p>Your search - <b>zxqv</b> - '
        "did not match any documents.</p></div></div>"
    )
    with pytest.raises(errors.NoResults, match="Google"):
        google.parse(body)


# --- Bing, hand-written -----------------------------------------------------------------------


def ck(url: str) -> str:
    encoded = base64.urlsafe_b64encode(url.encode()).decode().rstrip("=")
    return f"https://www.bing.com/ck/a?!&amp;&amp;p=abc&amp;ptn=3&amp;u=a1{encoded}&amp;ntb=1"


def b_result(href: str, title: str, snippet: str, cls: str = "b_algo", extra: str = "") -> str:
    return (
        f'<li class="{cls}" data-id>{extra}<h2><a href="{href}">{title}</a></h2>'
        f'<div class="b_caption"><p class="b_lineclamp2">{snippet}</p></div></li>'
    )


def test_bing_drops_ads_and_decodes_the_organic_result() -> None:
    body = html(
        '<ol id="b_results">'
        '<li class="b_ad b_adTop"><ul>'
        + b_result(ck("https://top-ad.example/"), "Top ad", "buy", cls="b_algo")
        + "</ul></li>"
        + b_result("https://www.bing.com/aclick?ld=x&amp;u=y", "Aclick ad", "buy")
        + '<li class="b_ad b_adBottom"><ul>'
        + b_result(ck("https://bottom-ad.example/"), "Bottom ad", "buy", cls="b_adLastChild")
        + "</ul></li>"
        + b_result(
            ck("https://ads.example/"), "Slugged ad", "buy", extra='<div class="b_adSlug">Ad</div>'
        )
        + b_result(ck("https://example.org/a?b=1&c=2"), "Organic <strong>one</strong>", "Text")
        + "</ol>"
    )
    assert bing.parse(body) == [
        {"title": "Organic one", "url": "https://example.org/a?b=1&c=2", "snippet": "Text"}
    ]


def test_bing_link_forms() -> None:
    body = html(
        '<ol id="b_results">'
        + b_result("https://direct.example/", "Direct", "d")
        + b_result("https://www.bing.com/ck/a?!&amp;u=zzNotA1&amp;ntb=1", "Undecodable", "u")
        + b_result("/search?q=more", "Internal", "i")
        + b_result(ck("https://www.bing.com/images/search?q=x"), "Wrapped internal", "w")
        + "</ol>"
    )
    assert [r["url"] for r in bing.parse(body)] == ["https://direct.example/"]


@pytest.mark.parametrize("length", range(1, 9))
def test_bing_decode_u_restores_any_padding(length: int) -> None:
    url = "https://e.example/" + "x" * length
    encoded = base64.urlsafe_b64encode(url.encode()).decode().rstrip("=")
    assert bing.decode_u("a1" + encoded) == url
    assert bing.decode_u(encoded) is None  # no "a1" marker
    assert bing.decode_u("a1!!!") is None


def test_bing_no_results_page() -> None:
    body = html(
        '<ol id="b_results"><li class="b_no"><h1>There are no results for <strong>zxqv</strong>'
        "</h1><ul><li>Check your spelling</li></ul></li></ol>"
    )
    with pytest.raises(errors.NoResults, match="Bing"):
        bing.parse(body)


@pytest.mark.parametrize(
    ("header", "text"),
    [
        ("One last step", "Please solve the challenge below to continue"),
        ("Ostatni krok", "Rozwiąż zadanie poniżej, aby kontynuować"),  # markup alone decides
    ],
)
def test_bing_challenge_markup_is_blocked_even_with_results_css(header: str, text: str) -> None:
    body = html(
        "<style>#b_results .b_algo{color:red}</style>"
        f'<div class="captcha"><div class="captcha_header">{header}</div>'
        f'<div class="captcha_text">{text}</div><div id="turnstile-widget"></div></div>'
    )
    with pytest.raises(errors.Blocked, match="Bing"):
        bing.parse(body)


# --- DuckDuckGo, hand-written -----------------------------------------------------------------


def d_result(href: str, title: str, snippet: str, cls: str = "") -> str:
    return (
        f'<div class="result results_links results_links_deep web-result {cls}">'
        f'<div class="links_main links_deep result__body"><h2 class="result__title">'
        f'<a rel="nofollow" class="result__a" href="{href}">{title}</a></h2>'
        f'<a class="result__snippet" href="{href}">{snippet}</a></div></div>'
    )


def uddg(url: str) -> str:
    from urllib.parse import quote

    return f"//duckduckgo.com/l/?uddg={quote(url, safe='')}&amp;rut=abc"


def test_duckduckgo_drops_ads_and_unwraps_the_organic_result() -> None:
    tracker = "https://duckduckgo.com/y.js?ad_domain=shop.example&u3=https%3A%2F%2Fshop.example"
    body = html(
        '<div class="serp__results"><div id="links" class="results">'
        + d_result(uddg("https://shop.example/"), "Ad by class", "buy", cls="result--ad")
        + d_result(tracker, "Tracker link", "buy")
        + d_result(uddg(tracker), "Ad hidden in uddg", "buy")
        + d_result(uddg("https://example.org/a b?x=1&y=2"), "Organic <b>one</b>", "Text <b>b</b>.")
        + "</div></div>"
    )
    assert duckduckgo.parse(body) == [
        {"title": "Organic one", "url": "https://example.org/a b?x=1&y=2", "snippet": "Text b."}
    ]


def test_duckduckgo_result_with_several_classes_and_a_direct_link() -> None:
    body = html(d_result("https://direct.example/p", "Direct", "snip", cls="highlight_d"))
    assert duckduckgo.parse(body)[0]["url"] == "https://direct.example/p"


def test_duckduckgo_no_results_page() -> None:
    body = html(
        '<div class="result results_links_deep highlight_d result--no-result">'
        '<div class="no-results">No results.</div></div>'
    )
    with pytest.raises(errors.NoResults, match="DuckDuckGo"):
        duckduckgo.parse(body)


@pytest.mark.parametrize(
    "form",
    [
        '<form id="challenge-form" action="//duckduckgo.com/anomaly.js?sv=html" method="POST">'
        '<div class="anomaly-modal__title">Unfortunately, bots use DuckDuckGo too.</div></form>',
        '<form id="challenge-form" action="/x" method="POST"><button>Submit</button></form>',
    ],
)
def test_duckduckgo_challenge_form_is_blocked(form: str) -> None:
    with pytest.raises(errors.Blocked, match="DuckDuckGo"):
        duckduckgo.parse(html(form + d_result(uddg("https://example.org/"), "Stale", "x")))


# --- every engine: unreadable pages, encodings -----------------------------------------------

UNRECOGNISED = [
    b"",
    b"   \n\t  ",
    b"<html><body><p>Hello, world.</p><a href='https://x.example'>x</a></body></html>",
    b'{"results": []}',
    bytes(range(256)) * 8,
    b"\x1f\x8b\x08\x00" + b"\x00" * 64,  # a gzip body nobody decompressed
    b"<html><body><h3>Heading</h3><h2>Other</h2><div class='result'></div></body></html>",
]


@pytest.mark.parametrize("engine", ENGINES)
@pytest.mark.parametrize("body", UNRECOGNISED, ids=range(len(UNRECOGNISED)))
def test_unrecognised_pages_are_parse_errors(engine: str, body: bytes) -> None:
    with pytest.raises(errors.ParseError) as caught:
        engine_module(engine).parse(body)
    assert LABELS[engine] in str(caught.value)


def test_utf8_page_without_declared_charset_is_read_as_utf8() -> None:
    body = html(d_result(uddg("https://example.org/"), "Zażółć gęślą jaźń", "Café"))
    assert b"charset" not in body
    assert duckduckgo.parse(body)[0]["title"] == "Zażółć gęślą jaźń"


def test_windows_1252_page_uses_its_declared_charset() -> None:
    body = (
        '<html><head><meta http-equiv="content-type" content="text/html; charset=windows-1252">'
        "</head><body>"
        + d_result(uddg("https://example.org/"), "Café “quoted”", "naïve")
        + "</body></html>"
    ).encode("cp1252")
    result = duckduckgo.parse(body)[0]
    assert (result["title"], result["snippet"]) == ("Café “quoted”", "naïve")


# --- requests ---------------------------------------------------------------------------------


@pytest.fixture
def settings(env: Any) -> Any:
    env.write_config(
        {
            "endpoints": {
                "google": "http://127.0.0.1:8001",
                "bing": "http://127.0.0.1:8002/",
                "duckduckgo": "http://localhost:8003",
            }
        }
    )
    return env.settings()


def test_google_request(settings: Any) -> None:
    request = google.build_request("caffeine & sleep", settings)
    assert request.method == "GET"
    assert request.url == "http://127.0.0.1:8001/search"
    assert request.params["q"] == "caffeine & sleep"
    assert request.params["hl"] == "en"
    assert request.params["num"] == "10"
    assert request.params["gbv"] == "1"
    assert "Mozilla/5.0" in request.headers["User-Agent"]
    assert request.headers["Accept-Language"].startswith("en")
    assert "text/html" in request.headers["Accept"]
    assert request.cookies["CONSENT"].startswith("YES+")
    assert request.cookies["SOCS"]


def test_bing_request(settings: Any) -> None:
    request = bing.build_request("javascript tutorial", settings)
    assert (request.method, request.url) == ("GET", "http://127.0.0.1:8002/search")
    assert request.params["q"] == "javascript tutorial"
    assert request.params["setlang"] == "en"
    assert "Mozilla/5.0" in request.headers["User-Agent"]


def test_duckduckgo_request(settings: Any) -> None:
    request = duckduckgo.build_request("does caffeine affect sleep", settings)
    assert (request.method, request.url) == ("GET", "http://localhost:8003/html/")
    assert request.params == {"q": "does caffeine affect sleep", "kl": "wt-wt"}
    assert "Mozilla/5.0" in request.headers["User-Agent"]


def test_default_endpoints(env: Any) -> None:
    settings = env.settings()
    assert google.build_request("q", settings).url == "https://www.google.com/search"
    assert bing.build_request("q", settings).url == "https://www.bing.com/search"
    assert duckduckgo.build_request("q", settings).url == "https://html.duckduckgo.com/html/"


def test_requests_do_not_share_mutable_headers(settings: Any) -> None:
    first = google.build_request("a", settings)
    first.headers["User-Agent"] = "changed"
    first.cookies["CONSENT"] = "changed"
    second = google.build_request("b", settings)
    assert second.headers["User-Agent"] != "changed"
    assert second.cookies["CONSENT"] != "changed"


def test_engine_requests_follow_redirects(settings: Any) -> None:
    for name in ENGINES:
        assert engine_module(name).build_request("q", settings).follow_redirects is True


# --- fetch_engine against a loopback server ---------------------------------------------------


@pytest.fixture
def fake(env: Any) -> Any:
    with FakeServer() as server:
        env.write_config({"endpoints": {name: server.url for name in ENGINES}})
        server.settings = env.settings()
        yield server


def test_fetch_engine_returns_parsed_results(fake: Any) -> None:
    fake.route("/html/", Reply(200, body=page("duckduckgo/html-results-caffeine.html")))
    call = fetch_engine("duckduckgo", "does caffeine affect sleep", fake.settings, _soon())
    assert call.error is None and call.sent and call.http_status == 200
    assert len(call.results) == 9 and len(call.attempt_latencies_ms) == 1
    sent = fake.requests[0]
    assert sent.path == "/html/" and sent.query["q"] == ["does caffeine affect sleep"]
    assert "Firefox" in sent.headers["user-agent"]


def test_fetch_engine_sends_google_consent_cookies(fake: Any) -> None:
    fake.route("/search", Reply(200, body=page("google/basic-results-google.html")))
    assert len(fetched("google", "google", fake.settings)) == 10
    cookie = fake.requests[0].headers["cookie"]
    assert "CONSENT=YES+" in cookie and "SOCS=" in cookie


@pytest.mark.parametrize(
    ("reply", "error", "status"),
    [
        ({"status": 429, "headers": {"Retry-After": "5"}}, errors.Blocked, 429),
        ({"status": 503, "body": page("google/blocked-sorry.html")}, errors.Blocked, 503),
        ({"status": 502, "body": b"bad gateway"}, errors.ServerError, 502),
        ({"status": 200, "body": page("google/blocked-sorry.html")}, errors.Blocked, 200),
        ({"status": 200, "body": b"<html><body>nothing</body></html>"}, errors.ParseError, 200),
        ({"status": 404, "body": b"not here"}, errors.ParseError, 404),
    ],
)
def test_fetch_engine_failures_carry_their_status(
    fake: Any, reply: dict[str, Any], error: type[Exception], status: int
) -> None:
    fake.route("/search", Reply(**reply))
    call = fetch_engine("google", "q", fake.settings, _soon())
    assert isinstance(call.error, error) and call.results is None
    assert call.http_status == status and call.sent


def test_fetch_engine_follows_a_redirect_to_the_consent_wall(fake: Any) -> None:
    consent = html('<form action="https://consent.google.com/save" method="POST"></form>')
    fake.route("/search", Reply(302, headers={"Location": fake.url + "/ml?continue=x"}))
    fake.route("/ml", Reply(200, body=consent))
    with pytest.raises(errors.Blocked, match="consent"):
        fetched("google", "q", fake.settings)
    assert [r.path for r in fake.requests] == ["/search", "/ml"]


def _soon() -> float:
    return time.monotonic() + 10


def fetched(engine: str, query: str, settings: Any) -> list[dict[str, str]]:
    """The results of one fetch; the error it ended with is raised."""
    call = fetch_engine(engine, query, settings, _soon())
    if call.error is not None:
        raise call.error
    return call.results


def test_fetch_engine_that_gets_no_pacing_slot_sends_nothing(fake: Any) -> None:
    def no_slot() -> None:
        raise errors.Timeout("Google pacing: the next request slot lies past the deadline.")

    call = fetch_engine("google", "q", fake.settings, _soon(), no_slot)
    assert not call.sent and isinstance(call.error, errors.Timeout) and fake.requests == []


# --- HTTP statuses ----------------------------------------------------------------------------


def response(status: int, body: bytes = b"", **headers: str) -> HttpResponse:
    return HttpResponse(status, {k.replace("_", "-"): v for k, v in headers.items()}, body)


@pytest.mark.parametrize("status", [200, 202, 203])
def test_success_statuses_pass(status: int) -> None:
    assert classify_status(registry.source("google"), response(status)) is None


def test_429_is_blocked_with_retry_after() -> None:
    with pytest.raises(errors.Blocked) as caught:
        classify_status(registry.source("bing"), response(429, retry_after="30"))
    assert caught.value.http_status == 429
    assert caught.value.retry_after == 30.0
    assert "Bing" in str(caught.value)


def test_403_is_blocked() -> None:
    with pytest.raises(errors.Blocked, match="DuckDuckGo"):
        classify_status(registry.source("duckduckgo"), response(403))


@pytest.mark.parametrize(
    "location",
    [
        "https://www.google.com/sorry/index?continue=https://www.google.com/search",
        "https://consent.google.com/ml?continue=https://www.google.com/search",
    ],
)
def test_redirect_to_sorry_or_consent_is_blocked(location: str) -> None:
    with pytest.raises(errors.Blocked) as caught:
        classify_status(registry.source("google"), response(302, location=location))
    assert caught.value.http_status == 302


def test_other_redirect_is_a_parse_error_naming_the_target() -> None:
    with pytest.raises(errors.ParseError, match="elsewhere.example"):
        classify_status(registry.source("google"), response(301, location="https://elsewhere.example/x"))


@pytest.mark.parametrize("status", [500, 502, 503])
def test_5xx_is_a_server_error(status: int) -> None:
    with pytest.raises(errors.ServerError) as caught:
        classify_status(registry.source("bing"), response(status, b"<html>oops</html>"))
    assert caught.value.retryable and caught.value.http_status == status


def test_503_sorry_page_is_blocked_not_a_server_error() -> None:
    with pytest.raises(errors.Blocked):
        classify_status(registry.source("google"), response(503, page("google/blocked-sorry.html")))


@pytest.mark.parametrize(
    "body",
    [
        b"<html><head><script>var s='/sorry/index'; // captcha, unusual traffic</script>"
        b"<style>.g-recaptcha{}</style></head><body><p>Service Unavailable</p></body></html>",
        b"",
    ],
    ids=["signs-in-code", "empty"],
)
def test_5xx_with_captcha_signs_only_in_code_is_a_server_error(body: bytes) -> None:
    with pytest.raises(errors.ServerError):
        classify_status(registry.source("google"), response(503, body))


@pytest.mark.parametrize(
    "body",
    [
        b"<html><body><p>Our systems have detected unusual traffic.</p></body></html>",
        b'<html><body><form id="captcha-form" action="index"></form></body></html>',
        b'<html><body><a href="/sorry/index?continue=x">continue</a></body></html>',
    ],
    ids=["text", "form", "link"],
)
def test_5xx_showing_a_captcha_is_blocked(body: bytes) -> None:
    with pytest.raises(errors.Blocked, match="503"):
        classify_status(registry.source("google"), response(503, body))


@pytest.mark.parametrize("status", [400, 404, 410, 418])
def test_other_4xx_is_a_parse_error_with_the_status(status: int) -> None:
    with pytest.raises(errors.ParseError, match=str(status)):
        classify_status(registry.source("duckduckgo"), response(status))


# --- the package ------------------------------------------------------------------------------


def test_engine_registry() -> None:
    assert ENGINES == ("google", "bing", "duckduckgo")
    for name in ENGINES:
        module = engine_module(name)
        assert callable(module.build_request) and callable(module.parse)
        assert module.__doc__ and len(module.__doc__) > 200
    with pytest.raises(ValueError):
        engine_module("yahoo")


def test_importing_the_package_does_not_load_html_parsers() -> None:
    code = (
        "import sys, smart_search.sources.engines, smart_search.text.sanitize; "
        "print(sorted(m for m in ('lxml', 'bs4', 'soupsieve') if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"
