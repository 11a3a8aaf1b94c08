"""A page's readable main text, title, author and date, for `smart_fetch` (issue 21).

trafilatura does the extraction (docs/fetch.md has the measurement against readability-lxml:
equal text on our fixtures, and only trafilatura reads the author and date the tool returns).
It costs ~130 ms to import, so it is imported here, inside `extract_page`, and only a fetch
pays for it; the one-shot search call never loads this module's dependency.

`title` is the document's own `<title>` (what a browser's tab and Readability show), cleaned of
a trailing site name the way Readability cleans it (`page_title`); the extractor's own title,
which prefers a lone `<h1>` or the page's metadata, is `headline` when it says something else.

Script, style and noscript bodies never reach the text: trafilatura drops them, and a text/plain
page is not HTML at all. What comes back is raw page text: the caller sanitizes it.
"""

from __future__ import annotations

import logging
import re
from typing import Any, NamedTuple

MISSING = (
    "smart_fetch needs the trafilatura package (pip install trafilatura); it is a dependency "
    "of smart-search, so reinstalling the skill brings it."
)


class Extracted(NamedTuple):
    title: str | None
    author: str | None
    date: str | None
    text: str
    headline: str | None = None  # the extractor's title where it differs from `title`


# Readability's title separators: | - – — and the hierarchical \ / > », each between spaces.
_SEPARATORS = r"|\-–—\\/>»"
_BETWEEN_SPACES = re.compile(rf"\s[{_SEPARATORS}]\s")
_HIERARCHICAL = re.compile(r"\s[\\/>»]\s")
_LEADING_PART = re.compile(f"^[^{_SEPARATORS}]*[{_SEPARATORS}]")
_SEPARATOR_RUNS = re.compile(f"[{_SEPARATORS}]+")


def page_title(raw: str | None) -> str | None:
    """A document title with its trailing " | Site" or " - Site" cut, as Readability cuts it:
    everything from the last spaced separator goes; when that leaves under three words, the
    first part goes instead ("News | A long headline here"); and a result of four words or fewer
    is taken back to the whole title, unless the separators were hierarchical (\\ / > ») and
    exactly one part was dropped. Whitespace runs become one space; None for an empty title."""
    title = " ".join((raw or "").split())
    found = list(_BETWEEN_SPACES.finditer(title))
    if not found:
        return title or None
    hierarchical = _HIERARCHICAL.search(title) is not None
    cut = title[: found[-1].start()].strip()
    if len(cut.split()) < 3:
        cut = _LEADING_PART.sub("", title, count=1).strip()
    words = len(cut.split())
    parts_words = len(_SEPARATOR_RUNS.sub("", title).split())
    if words <= 4 and (not hierarchical or words != parts_words - 1):
        return title
    return cut


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
    tree = trafilatura.load_html(body)
    if tree is None:
        return Extracted(None, None, None, "")
    raw = _document_title(tree)  # before the extractor, which prunes the tree it is given
    own = page_title(raw)
    doc = trafilatura.bare_extraction(
        tree,
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
        return Extracted(own, None, None, "")
    found = doc.as_dict() if hasattr(doc, "as_dict") else dict(doc)
    headline = _field(found.get("title"))
    if own is None:  # no <title>: the extractor's is the only one
        own, headline = headline, None
    elif headline is not None and " ".join(headline.split()) in (own, raw):
        headline = None
    return Extracted(own, _field(found.get("author")), _field(found.get("date")),
                     found.get("text") or "", headline)  # fmt: skip


def _document_title(tree: Any) -> str | None:
    """The text of the document's first <title> (not an SVG image's), as `document.title`."""
    for element in tree.iter("title"):
        if not any(a.tag == "svg" for a in element.iterancestors()):
            return " ".join(element.text_content().split()) or None
    return None


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
