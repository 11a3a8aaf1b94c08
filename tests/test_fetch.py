"""smart_fetch (issue 21): one page fetched, extracted, sanitized, capped, cached, paced, counted
and logged, and refused when it points anywhere but the public web (unless configured)."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from smart_search.sources import pages
from tests.conftest import REPO, Env
from tests.fakes import FakeServer, Reply

FIXTURES = REPO / "tests" / "fixtures" / "pages"
SENTINEL = "SENTINEL-GEMINI-KEY-0001"
HTML = {"content-type": "text/html; charset=utf-8"}


def page(name: str) -> bytes:
    return (FIXTURES / name).read_bytes()


@pytest.fixture
def fake() -> Any:
    with FakeServer() as server:
        yield server


def configure(env: Env, **fetch: Any) -> None:
    settings = {"allow_private_hosts": True, "min_interval_ms": 0, **fetch}
    env.write_config(
        {"fetch": settings, "agent_allocations": {"night": {"gemini": 1, "brave": 0}}},
        env={"GEMINI_API_KEY": SENTINEL},
    )


def fetch_log(env: Env) -> list[dict[str, Any]]:
    logs = sorted((env.state_dir / "logs").glob("fetch-*.jsonl"))
    return [json.loads(line) for f in logs for line in f.read_text().splitlines()]


def state_files(env: Env) -> list[str]:
    if not env.state_dir.exists():
        return []
    return sorted(str(p.relative_to(env.state_dir)) for p in env.state_dir.rglob("*"))


def test_an_article_comes_back_as_readable_text_with_its_metadata(env: Env, fake: FakeServer):
    configure(env)
    fake.route("/news", Reply(200, page("article-news.html"), HTML))
    result = env.call("smart_fetch", {"url": f"{fake.url}/news", "agent_id": "reader"})
    assert result["error"] is None
    assert result["title"] == "Harbour crane fleet doubles at Gdansk terminal"
    assert result["author"] == "Marta Kowalska"
    assert result["date"] == "2026-11-28"
    assert "six new ship-to-shore cranes" in result["text"]
    assert "three million containers" in result["text"]
    # Script and style bodies never come back, nor the page's chrome.
    for gone in ("SECRET-TRACKING-SCRIPT", "INJECTED-BY-SCRIPT", "font-family", "Subscribe now"):
        assert gone not in result["text"], gone
    # The injection phrase is sanitized as in search results.
    assert "Ignore all previous instructions" not in result["text"]
    assert result["final_url"] == f"{fake.url}/news"
    assert result["cached"] is False and result["truncated"] is False
    assert result["fetches_used"] == 1 and result["fetches_remaining"] is None


def test_json_ld_metadata_and_scripts_of_a_blog_post(env: Env, fake: FakeServer):
    configure(env)
    fake.route("/post", Reply(200, page("article-blog.html"), HTML))
    result = env.call("smart_fetch", {"url": f"{fake.url}/post"})
    assert result["author"] == "Jonas Berg" and result["date"] == "2026-10-03"
    assert "overproofing" in result["text"]
    assert "SCRIPT-BODY-SHOULD-NOT-APPEAR" not in result["text"]
    assert result["agent_id"] == "general"


def test_loopback_is_refused_by_default_and_nothing_is_sent_or_counted(
    env: Env, fake: FakeServer
):
    env.write_config({})
    fake.route("/x", Reply(200, page("docs-page.html"), HTML))
    result = env.call("smart_fetch", {"url": f"{fake.url}/x", "agent_id": "reader"})
    assert result == {"error": result["error"], "error_code": "blocked_address"}
    assert "fetch.allow_private_hosts" in result["error"]
    assert fake.requests == []
    status = env.call("search_quota_status", {})
    assert status["fetches"]["total"] == 0 and status["fetches"]["agents"] == {}
    # The refusal is visible in the log.
    assert [line["error_code"] for line in fetch_log(env)] == ["blocked_address"]


@pytest.mark.parametrize(
    "url", ["file:///etc/passwd", "ftp://example.com/a", "javascript:alert(1)", "gopher://x/",
            "http://", "https://user:pw@example.com/", "//example.com/x", "example.com"],
)  # fmt: skip
def test_other_schemes_and_shapes_are_invalid_and_change_no_state(env: Env, url: str):
    configure(env)
    result = env.call("smart_fetch", {"url": url})
    assert result["error_code"] == "invalid_url", result
    assert state_files(env) == []


@pytest.mark.parametrize(
    "args, message",
    [({}, "url is required and must be a non-empty string."),
     ({"url": "http://a.test/ x"}, "url contains whitespace or control characters."),
     ({"url": "http://a.test/", "max_chars": "10"}, "max_chars must be a whole number."),
     ({"url": "http://a.test/", "max_chars": 0}, "max_chars must be at least 1."),
     ({"url": "http://a.test/", "agent_id": "Bad Agent"},
      "agent_id must contain only lowercase letters, numbers, and hyphens."),
     ({"url": "http://a.test/", "extra": 1},
      'Unknown argument: "extra". smart_fetch takes url, agent_id, max_chars and fresh.')],
)  # fmt: skip
def test_bad_arguments_get_clear_errors(env: Env, args: dict[str, Any], message: str):
    configure(env)
    result = env.call("smart_fetch", args)
    assert result == {"error": message, "error_code": "invalid_input"}
    assert state_files(env) == []


@pytest.mark.parametrize(
    "address, blocked",
    [("127.0.0.1", True), ("10.1.2.3", True), ("172.16.0.1", True), ("192.168.1.1", True),
     ("169.254.169.254", True), ("fd00:ec2::254", True), ("::1", True), ("fe80::1", True),
     ("100.64.0.1", True), ("0.0.0.0", True), ("224.0.0.1", True), ("240.0.0.1", True),
     ("::ffff:127.0.0.1", True), ("::ffff:10.0.0.1", True), ("ff02::1", True),
     ("93.184.216.34", False), ("2606:4700::1111", False), ("::ffff:93.184.216.34", False)],
)  # fmt: skip
def test_address_rules(address: str, blocked: bool):
    assert pages.is_blocked_address(address) is blocked


def test_one_private_address_in_a_dns_answer_refuses_the_host():
    def resolver(host: str, port: int) -> list[str]:
        return ["93.184.216.34", "10.0.0.7"]

    with pytest.raises(pages.errors.BlockedAddress):
        pages.checked_address("mixed.test", 80, allow_private=False, resolver=resolver)
    assert pages.checked_address("mixed.test", 80, allow_private=True, resolver=resolver) == (
        "93.184.216.34"
    )


def _public_loopback(monkeypatch: pytest.MonkeyPatch) -> None:
    """Treat 127.0.0.1 (the fakes) as a public address; every other rule stays."""
    real = pages.is_blocked_address
    monkeypatch.setattr(pages, "is_blocked_address", lambda a: a != "127.0.0.1" and real(a))


def test_a_redirect_to_a_private_address_is_refused_before_it_connects(
    env: Env, fake: FakeServer, monkeypatch: pytest.MonkeyPatch
):
    env.write_config({"fetch": {"min_interval_ms": 0}})
    _public_loopback(monkeypatch)
    names = {"public.test": ["127.0.0.1"], "intranet.test": ["10.0.0.5"]}
    asked: list[str] = []

    def resolver(host: str, port: int) -> list[str]:
        asked.append(host)
        return names[host]

    fake.route("/go", Reply(302, b"", {"location": "http://intranet.test/admin"}))
    url = f"http://public.test:{fake.port}/go"
    result = env.call("smart_fetch", {"url": url}, resolver=resolver)
    assert result["error_code"] == "blocked_address", result
    assert asked == ["public.test", "intranet.test"]
    assert [r.path for r in fake.requests] == ["/go"]
    # A redirect to a non-web scheme is refused too.
    fake.route("/file", Reply(301, b"", {"location": "file:///etc/passwd"}))
    result = env.call("smart_fetch", {"url": f"http://public.test:{fake.port}/file"},
                      resolver=resolver)  # fmt: skip
    assert result["error_code"] == "invalid_url"


def test_the_connection_goes_to_the_checked_address_under_the_urls_host_name(
    env: Env, fake: FakeServer
):
    # "site.test" exists nowhere but in this resolver: a second lookup by the system would fail.
    configure(env)
    fake.route("/doc", Reply(200, page("docs-page.html"), HTML))
    fake.route("/moved", Reply(301, b"", {"location": "/doc"}))
    result = env.call(
        "smart_fetch", {"url": f"http://site.test:{fake.port}/moved"},
        resolver=lambda host, port: ["127.0.0.1"],
    )  # fmt: skip
    assert result["error"] is None, result
    assert result["final_url"] == f"http://site.test:{fake.port}/doc"
    assert [r.headers["host"] for r in fake.requests] == [f"site.test:{fake.port}"] * 2
    assert "exponential backoff" in result["text"]


def test_a_5_mb_page_answers_capped(env: Env, fake: FakeServer):
    configure(env, max_bytes=256 * 1024)
    # Paragraphs differ (an extractor drops repeated ones).
    paragraphs = "".join(
        f"<p>Station {i} lists the height of the water at each hour of day {i % 365}. " * 12
        + "</p>\n" for i in range(6500)
    )
    body = ("<html><head><title>Tides</title></head><body><article>"
            + paragraphs + "</article></body></html>").encode()  # fmt: skip
    assert len(body) > 5 * 1024 * 1024
    fake.route("/big", Reply(200, body, HTML))
    result = env.call("smart_fetch", {"url": f"{fake.url}/big", "max_chars": 2000})
    assert result["error"] is None, result
    assert result["truncated"] is True
    assert len(result["text"]) == 2000
    assert result["bytes"] == 256 * 1024
    assert fetch_log(env)[-1]["bytes"] == 256 * 1024


def test_the_text_never_exceeds_max_result_chars(env: Env, fake: FakeServer):
    env.write_config({"max_result_chars": 300, "fetch": {"allow_private_hosts": True}})
    fake.route("/news", Reply(200, page("article-news.html"), HTML))
    result = env.call("smart_fetch", {"url": f"{fake.url}/news", "max_chars": 5000})
    assert len(result["text"]) == 300 and result["truncated"] is True


def test_a_second_fetch_within_the_ttl_sends_nothing(env: Env, fake: FakeServer):
    configure(env)
    fake.route("/news", Reply(200, page("article-news.html"), HTML))
    url = f"{fake.url}/news"
    first = env.call("smart_fetch", {"url": url, "agent_id": "reader"})
    second = env.call("smart_fetch", {"url": url, "agent_id": "reader", "max_chars": 100})
    assert len(fake.requests) == 1
    assert second["cached"] is True and second["cached_at"] is not None
    assert second["text"] == first["text"][:100] and second["title"] == first["title"]
    assert second["fetches_used"] == 1  # a cache hit is not a fetch
    fresh = env.call("smart_fetch", {"url": url, "agent_id": "reader", "fresh": True})
    assert len(fake.requests) == 2 and fresh["cached"] is False
    assert [line["outcome"] for line in fetch_log(env)] == ["fetched", "cached", "fetched"]


def test_a_ttl_of_zero_never_serves_from_the_cache(env: Env, fake: FakeServer):
    configure(env, cache_ttl_seconds=0)
    fake.route("/news", Reply(200, page("article-news.html"), HTML))
    for _ in range(2):
        env.call("smart_fetch", {"url": f"{fake.url}/news"})
    assert len(fake.requests) == 2


def test_retry_after_is_honoured_then_the_page_answers(env: Env, fake: FakeServer):
    configure(env)
    fake.route("/busy", Reply(429, b"slow down", {"retry-after": "1"}),
               Reply(200, page("docs-page.html"), HTML))  # fmt: skip
    result = env.call("smart_fetch", {"url": f"{fake.url}/busy"})
    assert result["error"] is None, result
    first, second = fake.requests
    assert second.arrived - first.arrived >= 1.0
    assert result["fetches_used"] == 1  # one call, one fetch


def test_a_retry_after_past_the_deadline_is_a_clear_rate_limited_error(
    env: Env, fake: FakeServer
):
    configure(env)
    fake.route("/busy", Reply(429, b"slow down", {"retry-after": "3600"}))
    result = env.call("smart_fetch", {"url": f"{fake.url}/busy"})
    assert result["error_code"] == "rate_limited"
    assert len(fake.requests) == 1
    # The host is held for every process: the next call does not knock before the time is up.
    again = env.call("smart_fetch", {"url": f"{fake.url}/busy", "fresh": True})
    assert again["error_code"] == "timeout" and len(fake.requests) == 1


@pytest.mark.parametrize(
    "status, code", [(404, "no_results"), (403, "blocked"), (500, "server_error"),
                     (400, "parse_error")],
)  # fmt: skip
def test_http_failures_have_their_codes(env: Env, fake: FakeServer, status: int, code: str):
    configure(env)
    fake.route("/x", Reply(status, b"<html>nope</html>", HTML))
    result = env.call("smart_fetch", {"url": f"{fake.url}/x"})
    assert result["error_code"] == code
    assert fetch_log(env)[-1]["http_status"] == status


def test_a_non_html_page_is_refused(env: Env, fake: FakeServer):
    configure(env)
    fake.route("/img", Reply(200, b"\x89PNG....", {"content-type": "image/png"}))
    result = env.call("smart_fetch", {"url": f"{fake.url}/img"})
    assert result["error_code"] == "parse_error" and "image/png" in result["error"]


def test_requests_to_one_host_are_paced(env: Env, fake: FakeServer):
    configure(env, min_interval_ms=400, cache_ttl_seconds=0)
    fake.route("/doc", Reply(200, page("docs-page.html"), HTML))
    for _ in range(2):
        assert env.call("smart_fetch", {"url": f"{fake.url}/doc"})["error"] is None
    first, second = fake.requests
    # The slot is wall-clock time, the arrival monotonic: allow their few milliseconds of skew.
    assert second.arrived - first.arrived >= 0.35


def test_the_daily_fetch_allocation_is_enforced_and_shown_in_status(
    env: Env, fake: FakeServer
):
    configure(env, daily_allocation=2)
    fake.route("/a", Reply(200, page("docs-page.html"), HTML))
    fake.route("/b", Reply(200, page("article-news.html"), HTML))
    fake.route("/c", Reply(200, page("article-blog.html"), HTML))
    one = env.call("smart_fetch", {"url": f"{fake.url}/a", "agent_id": "night"})
    two = env.call("smart_fetch", {"url": f"{fake.url}/b", "agent_id": "night"})
    assert (one["fetches_remaining"], two["fetches_remaining"]) == (1, 0)
    three = env.call("smart_fetch", {"url": f"{fake.url}/c", "agent_id": "night"})
    assert three == {
        "error": "Agent night has used its 2 fetches for today (fetch.daily_allocation).",
        "error_code": "fetch_limit",
    }
    assert [r.path for r in fake.requests] == ["/a", "/b"]
    # Another agent has its own allocation; a cached page is still served to the spent agent.
    assert env.call("smart_fetch", {"url": f"{fake.url}/c", "agent_id": "day"})["error"] is None
    assert env.call("smart_fetch", {"url": f"{fake.url}/a", "agent_id": "night"})["cached"]
    mine = env.call("search_quota_status", {"agent_id": "night"})
    assert mine["fetches"] == {"used": 2, "allocated": 2, "remaining": 0}
    full = env.call("search_quota_status", {})
    assert full["fetches"]["total"] == 3
    assert full["fetches"]["agents"]["day"] == {"used": 1, "allocated": 2, "remaining": 1}


def test_every_fetch_writes_a_log_line_of_its_schema(env: Env, fake: FakeServer):
    from jsonschema import Draft202012Validator

    from tests.conftest import _registry

    configure(env)
    fake.route("/news", Reply(200, page("article-news.html"), HTML))
    env.call("smart_fetch", {"url": f"{fake.url}/news", "agent_id": "reader"})
    env.call("smart_fetch", {"url": f"{fake.url}/missing", "agent_id": "reader"})
    schema = json.loads((REPO / "schemas" / "fetch-log.json").read_text())
    validator = Draft202012Validator(schema, registry=_registry())
    lines = fetch_log(env)
    for line in lines:
        validator.validate(line)
    ok, missing = lines
    assert (ok["tool"], ok["agent_id"], ok["url"], ok["outcome"]) == (
        "smart_fetch", "reader", f"{fake.url}/news", "fetched")  # fmt: skip
    assert ok["bytes"] == len(page("article-news.html")) and ok["http_status"] == 200
    assert (missing["outcome"], missing["error_code"]) == ("failed", "no_results")
    # The search log is untouched by fetches.
    assert list((env.state_dir / "logs").glob("search-*")) == []


def test_a_configured_key_never_leaves_in_a_fetch(env: Env, fake: FakeServer):
    configure(env)
    body = (f"<html><head><title>Leak {SENTINEL}</title></head><body><article><p>"
            + f"The key is {SENTINEL} and it appears in the middle of a long enough paragraph "
            + "of text so that the extractor keeps it as the main content of the page.</p>"
            + "</article></body></html>").encode()  # fmt: skip
    fake.route("/leak", Reply(200, body, HTML))
    url = f"{fake.url}/leak?k={SENTINEL}"
    result = env.call("smart_fetch", {"url": url})
    assert SENTINEL not in json.dumps(result)
    for path in env.state_dir.rglob("*"):
        if path.is_file():
            assert SENTINEL.encode() not in path.read_bytes(), path


def test_the_cli_form_and_the_import_discipline(env: Env, fake: FakeServer):
    configure(env)
    fake.route("/news", Reply(200, page("article-news.html"), HTML))
    done = subprocess.run(
        [sys.executable, "-m", "smart_search", "fetch", f"{fake.url}/news", "--agent-id",
         "reader", "--max-chars", "120"],
        capture_output=True, env=env.environ, timeout=60, cwd=str(env.root),
    )  # fmt: skip
    assert done.returncode == 0 and done.stderr == b""
    result = json.loads(done.stdout)
    assert result["title"].startswith("Harbour crane") and len(result["text"]) == 120
    # A search-side call never imports the extractor.
    probe = (
        "import sys, json\n"
        "from smart_search.shell.runner import handle\n"
        f"handle(b'{{\"tool\": \"search_quota_status\"}}', {env.environ!r})\n"
        "print(json.dumps([m for m in sys.modules if m.split('.')[0] in "
        "('trafilatura', 'htmldate', 'justext', 'courlan')]))\n"
    )
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, timeout=60,
                         cwd=str(REPO))  # fmt: skip
    assert json.loads(out.stdout) == [], out.stderr


def test_the_cli_form_without_a_url_gets_the_contracts_message(env: Env):
    done = subprocess.run(
        [sys.executable, "-m", "smart_search", "fetch"],
        capture_output=True, env=env.environ, timeout=60, cwd=str(env.root),
    )  # fmt: skip
    assert json.loads(done.stdout) == {
        "error": "url is required and must be a non-empty string.", "error_code": "invalid_input"
    }


def test_mcp_lists_the_tool():
    from smart_search.shell.mcp import catalog

    assert "smart_fetch" in catalog.TOOLS
    schema = catalog.input_schema("smart_fetch", None)
    assert schema["required"] == ["url"]
    assert "blocked_address" in catalog.tool_description("smart_fetch", None)


def test_extraction_without_trafilatura_is_a_clear_error(
    env: Env, fake: FakeServer, monkeypatch: pytest.MonkeyPatch
):
    monkeypatch.setitem(sys.modules, "trafilatura", None)  # as if not installed
    configure(env)
    fake.route("/news", Reply(200, page("article-news.html"), HTML))
    result = env.call("smart_fetch", {"url": f"{fake.url}/news"})
    assert result["error_code"] == "not_configured" and "trafilatura" in result["error"]


def test_pages_read_a_trickle_no_longer_than_the_deadline(fake: FakeServer):
    fake.route("/slow", Reply(200, b"x" * 400, HTML, trickle_delay=0.05, trickle_size=10))
    started = time.monotonic()
    with pytest.raises(pages.errors.Timeout):
        pages.fetch_page(
            f"{fake.url}/slow", allow_private=True, max_bytes=10_000, timeout_s=5.0,
            deadline=time.monotonic() + 0.5,
        )  # fmt: skip
    assert time.monotonic() - started < 2.0


def test_fixture_pages_exist():
    assert sorted(p.name for p in FIXTURES.glob("*.html")) == [
        "article-blog.html", "article-news.html", "docs-page.html", "js-shell.html"]  # fmt: skip
    assert isinstance(Path, type)


def test_the_report_counts_fetches_per_agent(env: Env, fake: FakeServer):
    from datetime import date

    from smart_search import report
    from smart_search.report.window import Window

    configure(env)
    fake.route("/news", Reply(200, page("article-news.html"), HTML))
    url = f"{fake.url}/news"
    env.call("smart_fetch", {"url": url, "agent_id": "reader"})
    env.call("smart_fetch", {"url": url, "agent_id": "reader"})
    env.call("smart_fetch", {"url": f"{fake.url}/gone", "agent_id": "other"})
    today = date.fromisoformat(fetch_log(env)[0]["timestamp"][:10])
    (env.state_dir / "logs" / "fetch-2026-01-01.jsonl").write_text("not json\n")  # out of window
    doc = report.build_report(str(env.state_dir / "logs"), Window(today, today))
    size = len(page("article-news.html"))
    assert doc["fetches"] == {
        "total": 3,
        "skipped": 0,
        "agents": {
            "other": {"fetched": 0, "cached": 0, "failed": 1, "bytes": len(b"not scripted")},
            "reader": {"fetched": 1, "cached": 1, "failed": 0, "bytes": size},
        },
    }
    rows = {t.key: t.rows for t in report.report_tables(doc)}["fetches"]
    assert rows == [["other", "0", "0", "1", "12"], ["reader", "1", "1", "0", f"{size:,}"]]
    # Fetch logs are logs: not counted among the directory's other files.
    assert doc["files"]["ignored"] == 0


def test_a_path_outside_ascii_is_sent_percent_encoded(env: Env, fake: FakeServer):
    configure(env)
    fake.route("/café menu", Reply(200, page("docs-page.html"), HTML))
    fake.route("/caf%C3%A9%20menu", Reply(200, page("docs-page.html"), HTML))
    fake.route("/old", Reply(302, b"", {"location": "/café menu?q=ü"}))
    result = env.call("smart_fetch", {"url": f"{fake.url}/old"})
    assert result["error"] is None, result
    assert fake.requests[-1].target == "/caf%C3%A9%20menu?q=%C3%BC"


def test_https_goes_through_tls_to_the_checked_address(fake: FakeServer):
    # The fake speaks plain HTTP: it waits for a request line that the TLS handshake never
    # sends, so the fetch fails (at the timeout), and no request ever reaches it in clear text.
    with pytest.raises((pages.errors.TransportFailure, pages.errors.Timeout)):
        pages.fetch_page(
            f"https://site.test:{fake.port}/", allow_private=True, max_bytes=1000, timeout_s=0.5,
            deadline=time.monotonic() + 5, resolver=lambda host, port: ["127.0.0.1"],
        )  # fmt: skip
    assert fake.requests == []
