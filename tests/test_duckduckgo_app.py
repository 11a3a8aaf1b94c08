"""DuckDuckGo's JavaScript app instead of its /html/ page is `blocked` (issue 28 B.3), like
Google's JavaScript wall; a page that says it found nothing stays `no_results`, and a page of no
known shape stays `parse_error`."""

from __future__ import annotations

from pathlib import Path

import pytest

from smart_search import errors
from smart_search.sources.engines import duckduckgo

DDG = Path(__file__).parent / "fixtures" / "serp" / "duckduckgo"
APP = (DDG / "javascript-app.html").read_bytes()
NOSCRIPT_START = APP.index(b"<noscript>")
NOSCRIPT_END = APP.index(b"</noscript>") + len(b"</noscript>")


def without_noscript(page: bytes) -> bytes:
    return page[:NOSCRIPT_START] + page[NOSCRIPT_END:]


def test_the_javascript_app_page_is_blocked() -> None:
    with pytest.raises(errors.Blocked) as caught:
        duckduckgo.parse(APP)
    assert caught.value.message == (
        "DuckDuckGo served its JavaScript app instead of the no-JavaScript results page."
    )
    assert caught.value.error_code == "blocked"


@pytest.mark.parametrize(
    "noscript",
    [
        # Each sign of the app's <noscript> alone is enough: its notice, its class, its refresh.
        "<noscript><p>You are being redirected to the non-JavaScript site.</p></noscript>",
        '<noscript><div class="msg msg--noscript">Redirecting</div></noscript>',
        '<noscript><meta http-equiv="refresh" content="0;URL=/html?q=x"></noscript>',
        "<noscript><meta http-equiv=Refresh content=\"0; url='https://html.duckduckgo.com/html/?q=x'\">"
        "</noscript>",
    ],
)
def test_each_sign_of_the_apps_noscript_redirect_is_blocked(noscript: str) -> None:
    page = without_noscript(APP).replace(b"</body>", noscript.encode() + b"</body>")
    with pytest.raises(errors.Blocked, match="JavaScript app"):
        duckduckgo.parse(page)


def test_the_app_shell_without_its_noscript_redirect_is_a_parse_error() -> None:
    # Nothing says the engine refused: an empty shell of no known shape.
    with pytest.raises(errors.ParseError):
        duckduckgo.parse(without_noscript(APP))


def test_a_no_results_page_is_still_no_results_even_with_the_redirect_notice() -> None:
    page = (DDG / "no-results-with-anomaly-in-script.html").read_bytes()
    with pytest.raises(errors.NoResults):
        duckduckgo.parse(page)
    # The page's own "No results." outranks any page-wide sign.
    notice = b"<noscript><p>You are being redirected to the non-JavaScript site.</p></noscript>"
    with pytest.raises(errors.NoResults):
        duckduckgo.parse(page.replace(b"</body>", notice + b"</body>"))


def test_an_unknown_html_page_is_still_a_parse_error() -> None:
    # The real /html/ page with its result markup renamed: its form still posts to /html/ and it
    # links to /html/, which are no sign of the app.
    real = (DDG / "html-results-caffeine.html").read_bytes()
    assert b'action="/html/"' in real
    assert len(duckduckgo.parse(real)) == 9
    unknown = real.replace(b"result__a", b"entry__link").replace(b"result__snippet", b"entry__x")
    with pytest.raises(errors.ParseError):
        duckduckgo.parse(unknown)


def test_results_on_a_page_that_also_redirects_are_results() -> None:
    # A results page wins over page-wide signs (a snippet may quote the notice).
    real = (DDG / "html-results-caffeine.html").read_bytes()
    notice = b"<noscript><p>You are being redirected to the non-JavaScript site.</p></noscript>"
    assert len(duckduckgo.parse(real.replace(b"</body>", notice + b"</body>"))) == 9
