"""The one web-link rule (`urls.is_web_url`) and the callers that share it."""

from __future__ import annotations

import pytest

from smart_search.search.fusion import canonical_url
from smart_search.sources.engines.html import web_url
from smart_search.text.sanitize import safe_url
from smart_search.text.urls import is_web_url, url_scheme

WEB = ["https://example.com", "HTTP://Example.com/x?y=1", "http://[::1]:8080/", "https://a"]
NOT_WEB = [
    "https://",
    "https:///path",
    "http:?q",
    "http:example.com",
    "//example.com",
    "ftp://example.com",
    "javascript:alert(1)",
    "java\tscript:x",
    " https://example.com",  # callers strip first; the rule itself does not
    "",
]


@pytest.mark.parametrize("url", WEB)
def test_web_urls_pass_every_caller(url: str) -> None:
    assert is_web_url(url)
    assert safe_url(url) == url
    assert web_url(url) == url
    assert canonical_url(url) is not None


@pytest.mark.parametrize("url", NOT_WEB)
def test_other_links_pass_no_caller(url: str) -> None:
    assert not is_web_url(url)
    if url.strip() != url:
        return
    assert safe_url(url) is None
    assert web_url(url) is None


def test_engines_also_need_a_host_name_urlsplit_can_read() -> None:
    # The text rule passes these; a page's link needs a host name to compare with the engine's.
    for url in ("http://:80/", "http://user@/", "http://[bad"):
        assert is_web_url(url) and safe_url(url) == url
        assert web_url(url) is None


def test_url_scheme_is_read_as_text() -> None:
    assert url_scheme("HTTPS://x") == "https"
    assert url_scheme("h\ttp://x") == ""
    assert url_scheme("no scheme") == ""
