"""A page's readable main text, title, author and date, for `smart_fetch` (issue 21).

trafilatura does the extraction (docs/fetch.md has the measurement against readability-lxml:
equal text on our fixtures, and only trafilatura reads the author and date the tool returns).
It costs ~130 ms to import, so it is imported here, inside `extract_page`, and only a fetch
pays for it; the one-shot search call never loads this module's dependency.

Script, style and noscript bodies never reach the text: trafilatura drops them, and a text/plain
page is not HTML at all. What comes back is raw page text: the caller sanitizes it.
"""

from __future__ import annotations

import logging
from typing import NamedTuple

MISSING = (
    "smart_fetch needs the trafilatura package (pip install trafilatura); it is a dependency "
    "of smart-search, so reinstalling the skill brings it."
)


class Extracted(NamedTuple):
    title: str | None
    author: str | None
    date: str | None
    text: str


def extract_page(body: bytes, content_type: str, url: str) -> Extracted:
    """The readable parts of `body`: a text/plain page as it is (decoded), an HTML page through
    trafilatura. Raises ImportError with MISSING when trafilatura is not installed."""
    if content_type.startswith("text/plain"):
        return Extracted(None, None, None, _decode(body, content_type))
    try:
        import trafilatura
    except ImportError:
        raise ImportError(MISSING) from None
    for name in ("trafilatura", "htmldate", "courlan", "justext", "charset_normalizer"):
        # They log parsing trouble at WARNING and above; with no handler configured Python
        # prints that to stderr, which the contract keeps clean.
        logging.getLogger(name).setLevel(logging.CRITICAL + 1)
    doc = trafilatura.bare_extraction(
        body,
        url=url,
        with_metadata=True,
        include_comments=False,
        include_tables=True,
        include_images=False,
        include_links=False,
        # The page's own published date only, not a guess from any date in its text (the
        # extensive search dated CAPTCHA pages and result lists from stray numbers).
        date_extraction_params={"extensive_search": False, "original_date": True},
    )
    if doc is None:
        return Extracted(None, None, None, "")
    found = doc.as_dict() if hasattr(doc, "as_dict") else dict(doc)
    return Extracted(
        _field(found.get("title")),
        _field(found.get("author")),
        _field(found.get("date")),
        found.get("text") or "",
    )


def _field(value: object) -> str | None:
    return value.strip() or None if isinstance(value, str) else None


def _decode(body: bytes, content_type: str) -> str:
    charset = "utf-8"
    for part in content_type.split(";")[1:]:
        name, _, value = part.partition("=")
        if name.strip().lower() == "charset" and value.strip():
            charset = value.strip().strip('"')
    try:
        return body.decode(charset, "replace")
    except LookupError:
        return body.decode("utf-8", "replace")
