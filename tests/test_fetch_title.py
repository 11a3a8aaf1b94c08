"""smart_fetch's `title` is the document's own <title> (issue 28 B.2), cut of a trailing site
name as Readability cuts it; the extractor's own title, when it says something else, is
`headline`. Pages are served from loopback as in test_fetch.py."""

from __future__ import annotations

from typing import Any

import pytest

from smart_search.text.extract import page_title
from tests.conftest import Env
from tests.fakes import FakeServer, Reply

LONG = "How harbour seals spend the low tide"
HTML = {"content-type": "text/html; charset=utf-8"}
BODY = (
    "<p>Harbour seals haul out on the sandbanks of the estuary when the tide is low, and the "
    "survey team counts them from a boat moored well away from the colony.</p>"
    "<p>This year the count found more pups than in any year since the survey began, which the "
    "team puts down to a quiet summer with fewer boats on the water near the banks.</p>"
) * 3


def html(head: str, body: str) -> bytes:
    return f"<html><head>{head}</head><body>{body}</body></html>".encode()


@pytest.fixture
def fake() -> Any:
    with FakeServer() as server:
        yield server


def fetch(env: Env, fake: FakeServer, body: bytes) -> dict[str, Any]:
    env.write_config({"fetch": {"allow_private_hosts": True, "min_interval_ms": 0}})
    fake.route("/page", Reply(200, body, HTML))
    result = env.call("smart_fetch", {"url": f"{fake.url}/page", "agent_id": "reader"})
    assert result["error"] is None, result
    return result


def test_the_title_is_the_documents_and_a_lone_h1_is_the_headline(env: Env, fake: FakeServer):
    page = html(
        "<title>Harbour Seal Survey 2026</title>",
        f"<h1>Seals at low tide</h1><article>{BODY}</article>",
    )
    result = fetch(env, fake, page)
    assert result["title"] == "Harbour Seal Survey 2026"
    assert result["headline"] == "Seals at low tide"
    # A cached answer keeps both.
    again = env.call("smart_fetch", {"url": f"{fake.url}/page", "agent_id": "reader"})
    assert again["cached"] is True
    assert (again["title"], again["headline"]) == ("Harbour Seal Survey 2026", "Seals at low tide")


def test_a_trailing_site_name_is_cut_and_a_headline_saying_the_same_is_null(
    env: Env, fake: FakeServer
):
    page = html(
        "<title>How harbour seals spend the low tide | Marine Trust</title>",
        f"<h1>How harbour seals spend the low tide</h1><article>{BODY}</article>",
    )
    result = fetch(env, fake, page)
    assert result["title"] == "How harbour seals spend the low tide"
    assert result["headline"] is None


@pytest.mark.parametrize(
    ("head", "title", "headline"),
    [
        # No <title>: the extractor's title is the title. An inline SVG's <title> is an
        # image's label, not the document's.
        ("", "Seals at low tide", None),
        # The first <title>, its entities decoded and its whitespace folded.
        (
            "<title>Harbour &amp; Estuary   Survey\n 2026</title><title>Second</title>",
            "Harbour & Estuary Survey 2026",
            "Seals at low tide",
        ),
    ],
)
def test_the_title_is_the_first_title_element_outside_svg(
    env: Env, fake: FakeServer, head: str, title: str, headline: str | None
):
    page = html(
        head, f"<svg><title>Logo</title></svg><h1>Seals at low tide</h1><article>{BODY}</article>"
    )
    result = fetch(env, fake, page)
    assert (result["title"], result["headline"]) == (title, headline)


@pytest.mark.parametrize(
    ("raw", "title"),
    [
        # No separator: the title as it is, whitespace folded.
        ("Harbour Seal Survey 2026", "Harbour Seal Survey 2026"),
        ("  Harbour \n Seal\tSurvey  ", "Harbour Seal Survey"),
        ("", None),
        (None, None),
        # A trailing site name, after " | ", " - ", " – " or " — ", goes.
        (f"{LONG} | Marine Trust", LONG),
        (f"{LONG} - Marine Trust", LONG),
        (f"{LONG} — Marine Trust", LONG),
        # Only the last part goes.
        ("Seal counts rise - a record year | Marine Trust", "Seal counts rise - a record year"),
        # A hyphen inside a word is no separator.
        ("Covid-19 rates rise across the north", "Covid-19 rates rise across the north"),
        # Under three words left: the first part goes instead (a section name in front).
        ("News | How harbour seals spend the low tide", "How harbour seals spend the low tide"),
        # Four words or fewer left: the whole title stays (Readability's guard for short titles).
        ("A - B", "A - B"),
        ("Seals | Marine Trust", "Seals | Marine Trust"),
        ("Harbour Seal Survey 2026 | Marine Trust", "Harbour Seal Survey 2026 | Marine Trust"),
        # ... unless the separator was hierarchical and exactly one word went.
        ("Harbour seal survey results » Trust", "Harbour seal survey results"),
        ("Harbour seal survey results » Marine Trust",) * 2,
    ],
)
def test_page_title_cuts_a_site_name_as_readability_does(raw: str | None, title: str | None):
    assert page_title(raw) == title
