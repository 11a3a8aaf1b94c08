"""What every engine's request shares: a browser's headers and the one GET that carries the
query and the engine's own parameters. The engine modules import this, never their package's
`fetch`, so declaring an engine loads nothing of the walk."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from smart_search.host.config import Settings
    from smart_search.sources.http import HttpRequest

# A current desktop Firefox on Windows. No Accept-Encoding: the HTTP layer advertises only the
# codings it can decode (a "br" it cannot decode would turn every page into a parse_error).
BROWSER_HEADERS = {
    "User-Agent": (
        "Mozilla/5.0 (Windows NT 10.0; Win64; x64; rv:128.0) Gecko/20100101 Firefox/128.0"
    ),
    "Accept": "text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8",
    "Accept-Language": "en-US,en;q=0.5",
}


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
