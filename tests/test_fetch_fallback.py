"""smart_fetch's second extractor (issue 30, point 4): a JavaScript-rendered page, whose main text
the local extractor cannot find, is read by Firecrawl's scrape when `fetch.fallback: "firecrawl"`
is set, charged in Firecrawl's credits under the same ledger as a search (agent allocation,
pool, windows: held at the worst case, settled to what the answer says). Without the setting
nothing changes. Against two loopback fakes: the site, and Firecrawl's API answering its
documented scrape (tests/fixtures/api/firecrawl-scrape-*.json)."""

from __future__ import annotations

import json
from typing import Any

import orjson
import pytest

from smart_search.budget.ledger import Ledger
from tests.conftest import REPO, Env
from tests.fakes import FakeServer, Reply, fixture_bytes
from tests.provider_support import assert_key_never_written

KEY = "SENTINEL-FIRECRAWL-KEY-0002"
SCRAPE = "/v2/scrape"
HTML = {"content-type": "text/html; charset=utf-8"}
SHELL = (REPO / "tests" / "fixtures" / "pages" / "js-shell.html").read_bytes()
ARTICLE = (REPO / "tests" / "fixtures" / "pages" / "article-news.html").read_bytes()


@pytest.fixture
def site() -> Any:
    with FakeServer() as server:
        server.route("/tides", Reply(200, SHELL, HTML))
        server.route("/news", Reply(200, ARTICLE, HTML))
        yield server


@pytest.fixture
def scraper() -> Any:
    """Firecrawl's API."""
    with FakeServer() as server:
        yield server


def configure(
    env: Env, scraper: FakeServer, *, key: bool = True, endpoint: str | None = None, **fetch: Any
) -> None:
    settings = {"allow_private_hosts": True, "min_interval_ms": 0, "fallback": "firecrawl",
                **fetch}  # fmt: skip
    env.write_config(
        {"fetch": settings, "endpoints": {"firecrawl": endpoint or scraper.url},
         "agent_allocations": {"reader": {"firecrawl": 4}}, "request_timeout_ms": 1500,
         "retry_max_attempts": 1},
        env={"FIRECRAWL_API_KEY": KEY} if key else None,
    )  # fmt: skip


def fetch(env: Env, url: str, **args: Any) -> dict[str, Any]:
    return env.call("smart_fetch", {"url": url, "agent_id": "reader", **args})


def firecrawl_window(env: Env) -> dict[str, Any]:
    return Ledger(env.settings()).snapshot()["windows"]["firecrawl"]


def scrape_ok() -> Reply:
    return Reply(200, body=fixture_bytes("firecrawl-scrape-ok.json"))


def test_a_javascript_page_is_read_by_firecrawl_and_charged_to_the_agent(
    env: Env, site: FakeServer, scraper: FakeServer
) -> None:
    configure(env, scraper)
    scraper.route(SCRAPE, scrape_ok())
    result = fetch(env, f"{site.url}/tides")
    assert result["error"] is None, result
    assert result["extractor"] == "firecrawl"
    assert "high water at 06:12 and 18:40" in result["text"]
    assert result["title"] == "Tide tables - Harbour office"
    assert (result["final_url"], result["http_status"]) == (f"{site.url}/tides", 200)
    (sent,) = scraper.requests
    assert (sent.method, sent.path) == ("POST", SCRAPE)
    assert sent.headers["authorization"] == f"Bearer {KEY}" and KEY not in sent.target
    assert sent.json() == {"url": f"{site.url}/tides", "formats": ["markdown"],
                           "onlyMainContent": True, "proxy": "basic"}  # fmt: skip
    # One credit (what the answer reports), from the agent's allocation, in every window.
    window = firecrawl_window(env)
    assert (window["day_used"], window["month_used"], window["holds"]) == (1, 1, {})
    mine = env.call("search_quota_status", {"agent_id": "reader"})
    assert mine["firecrawl"] == {"allocated": 4, "used": 1, "remaining": 3}
    # The page is cached as read: a second fetch sends nothing and costs nothing.
    again = fetch(env, f"{site.url}/tides")
    assert again["cached"] is True and again["extractor"] == "firecrawl"
    assert len(scraper.requests) == 1 and firecrawl_window(env)["day_used"] == 1


def test_without_the_setting_nothing_changes(
    env: Env, site: FakeServer, scraper: FakeServer
) -> None:
    configure(env, scraper, fallback="none")
    scraper.route(SCRAPE, scrape_ok())
    result = fetch(env, f"{site.url}/tides")
    assert result == {"error": "No readable text found on the page.", "error_code": "no_results"}
    assert scraper.requests == [] and firecrawl_window(env)["day_used"] == 0
    # The default is "none".
    env.write_config({"fetch": {"allow_private_hosts": True}})
    assert env.settings().fetch["fallback"] == "none"


def test_a_page_with_readable_text_never_asks_firecrawl(
    env: Env, site: FakeServer, scraper: FakeServer
) -> None:
    configure(env, scraper)
    result = fetch(env, f"{site.url}/news")
    assert result["error"] is None and "extractor" not in result
    assert "six new ship-to-shore cranes" in result["text"]
    assert scraper.requests == []


@pytest.mark.parametrize(
    ("reply", "code", "month_exhausted"),
    [(Reply(402, body=fixture_bytes("firecrawl-402.json")), "quota_exhausted", True),
     (Reply(401, body=fixture_bytes("firecrawl-401.json")), "auth_failed", False),
     (Reply(429, body=fixture_bytes("firecrawl-429.json"), headers={"retry-after": "12"}),
      "rate_limited", False),
     (Reply(500, body=b"{}"), "server_error", False),
     (Reply(200, body=fixture_bytes("firecrawl-scrape-empty.json")), "no_results", False),
     (Reply(200, body=b"<html>"), "parse_error", False)],
    ids=["402", "401", "429", "500", "empty", "not-json"],
)  # fmt: skip
def test_firecrawl_errors_are_mapped_and_bill_what_firecrawl_bills(
    env: Env, site: FakeServer, scraper: FakeServer, reply: Reply, code: str,
    month_exhausted: bool,
) -> None:  # fmt: skip
    configure(env, scraper)
    scraper.route(SCRAPE, reply)
    result = fetch(env, f"{site.url}/tides")
    assert result["error_code"] == code, result
    if reply.status != 200:
        assert result["error"] == f"Firecrawl API error: {reply.status}"
    window = firecrawl_window(env)
    # An error status bills nothing; an answered scrape its credit, even with no text.
    assert window["day_used"] == (1 if reply.status == 200 else 0) and window["holds"] == {}
    assert (window["exhausted_until"] is not None) is month_exhausted


def test_a_scrape_that_never_answers_stays_charged_its_worst_case(
    env: Env, site: FakeServer, scraper: FakeServer
) -> None:
    configure(env, scraper)
    scraper.route(SCRAPE, Reply(200, body=fixture_bytes("firecrawl-scrape-ok.json"), delay=4))
    result = fetch(env, f"{site.url}/tides")
    assert result["error_code"] == "timeout"
    assert firecrawl_window(env)["day_used"] == 2  # the request left: it may have been billed


def test_an_exhausted_budget_never_calls_firecrawl(
    env: Env, site: FakeServer, scraper: FakeServer
) -> None:
    configure(env, scraper)
    # A day window smaller than the worst case (2 credits): the hold cannot be taken.
    doc = json.loads(env.config_path.read_text())
    block = doc["skills"]["entries"]["smart-search"]["config"]
    block["providers"] = {"firecrawl": {"daily_limit": 1}}
    block["agent_allocations"] = {"reader": {"firecrawl": 1}}
    env.config_path.write_text(json.dumps(doc))
    scraper.route(SCRAPE, scrape_ok())
    result = fetch(env, f"{site.url}/tides")
    assert result["error_code"] == "quota_exhausted", result
    assert scraper.requests == [] and firecrawl_window(env)["day_used"] == 0


def test_a_provider_marked_exhausted_is_not_asked_again(
    env: Env, site: FakeServer, scraper: FakeServer
) -> None:
    configure(env, scraper, cache_ttl_seconds=0)
    scraper.route(SCRAPE, Reply(402, body=fixture_bytes("firecrawl-402.json")), scrape_ok())
    assert fetch(env, f"{site.url}/tides")["error_code"] == "quota_exhausted"
    assert fetch(env, f"{site.url}/tides")["error_code"] == "quota_exhausted"
    assert len(scraper.requests) == 1


def test_without_a_key_it_is_not_configured_and_nothing_is_sent(
    env: Env, site: FakeServer, scraper: FakeServer
) -> None:
    configure(env, scraper, key=False)
    result = fetch(env, f"{site.url}/tides")
    assert result["error_code"] == "not_configured" and "FIRECRAWL_API_KEY" in result["error"]
    assert scraper.requests == []


def test_a_private_page_is_never_handed_to_a_hosted_scraper(
    env: Env, site: FakeServer, scraper: FakeServer
) -> None:
    # The page is on loopback (allowed for our own fetch); Firecrawl is the hosted service.
    configure(env, scraper, endpoint="https://api.firecrawl.dev")
    result = fetch(env, f"{site.url}/tides")
    assert result["error_code"] == "blocked_address", result
    assert "Firecrawl" in result["error"] and "127.0.0.1" in result["error"]
    assert firecrawl_window(env)["day_used"] == 0  # refused before any hold or call
    # Without allow_private_hosts the page itself is refused first: Firecrawl never hears of it.
    configure(env, scraper, allow_private_hosts=False)
    assert fetch(env, f"{site.url}/tides")["error_code"] == "blocked_address"
    assert scraper.requests == [] and [r.path for r in site.requests] == ["/tides"]


def test_a_key_firecrawl_echoes_back_is_never_written(
    env: Env, site: FakeServer, scraper: FakeServer
) -> None:
    configure(env, scraper)
    scraper.route(SCRAPE, Reply(401, json={"success": False, "error": f"Invalid token {KEY}"}))
    call = {"tool": "smart_fetch", "args": {"url": f"{site.url}/tides", "agent_id": "reader"}}
    proc = env.run_cli(json.dumps(call))
    assert json.loads(proc.stdout)["error_code"] == "auth_failed"
    assert_key_never_written(env, KEY, proc.stdout, proc.stderr)


def test_a_scraped_page_that_quotes_the_key_keeps_it_nowhere(
    env: Env, site: FakeServer, scraper: FakeServer
) -> None:
    configure(env, scraper)
    body = orjson.loads(fixture_bytes("firecrawl-scrape-ok.json"))
    body["data"]["markdown"] += f"\n\nLeaked: {KEY}"
    scraper.route(SCRAPE, Reply(200, json=body))
    result = fetch(env, f"{site.url}/tides")
    assert result["error"] is None and KEY not in json.dumps(result)
    assert_key_never_written(env, KEY)
