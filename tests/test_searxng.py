"""SearXNG (issue 20): a self-hosted web engine read through its JSON API.

Against loopback fakes serving SearXNG's documented answer (tests/fixtures/api/searxng-*.json,
built from https://docs.searxng.org/dev/search_api): the request, the parse, the errors, and
the plans of both strategies with it configured (it leads the web tiers) and without it
(absent everywhere, no phantom engine).
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import pytest

from smart_search import errors
from smart_search.host import config, config_keys
from smart_search.search import planner
from smart_search.sources import registry
from smart_search.sources.engines import searxng
from smart_search.sources.engines.fetch import fetch_engine
from tests.conftest import Env, other_apis
from tests.fakes import FakeServer, Reply, fixture_bytes, fixture_json

SERP = Path(__file__).parent / "fixtures" / "serp"
GEMINI_KEY = "SENTINEL-GEMINI-KEY-0001"
BRAVE_KEY = "SENTINEL-BRAVE-KEY-0001"
KEYS = (GEMINI_KEY, BRAVE_KEY)
FINANCE_QUERY = "NSE market open today"


@pytest.fixture
def instance() -> Any:
    """The SearXNG instance: its own loopback server (Google also serves /search)."""
    with FakeServer() as server:
        yield server


@pytest.fixture
def web() -> Any:
    """Every other source: Google, Bing, DuckDuckGo and both APIs."""
    with FakeServer() as server:
        yield server


def configure(env: Env, web: FakeServer, instance: FakeServer | None, **extra: Any) -> None:
    endpoints = {n: web.url for n in ("gemini", "brave", "google", "bing", "duckduckgo")}
    if instance is not None:
        endpoints["searxng"] = instance.url
    env.write_config(
        {
            "endpoints": endpoints,
            "web_fetch_min_interval_ms": 0,
            "retry_base_delay": 10,
            "retry_max_attempts": 1,
            "agent_allocations": {"cron": {"gemini": 5, "brave": 5}},
            **extra,
        }
    )


def with_keys(env: Env) -> None:
    env.environ["GEMINI_API_KEY"] = GEMINI_KEY
    env.environ["BRAVE_API_KEY"] = BRAVE_KEY


def ok_reply() -> Reply:
    return Reply(200, body=fixture_bytes("searxng-ok.json"),
                 headers={"content-type": "application/json"})  # fmt: skip


def html(name: str) -> Reply:
    return Reply(200, (SERP / name).read_bytes(), {"content-type": "text/html; charset=utf-8"})


def search(env: Env, query: str = "searxng json api", agent: str = "general", **args: Any):
    return env.call("smart_search", {"query": query, "agent_id": agent, **args})


def units_used(env: Env) -> dict[str, int]:
    providers = env.call("search_quota_status")["providers"]
    return {name: int(providers[name]["used"]) for name in registry.api_names()}


def log_lines(env: Env) -> list[dict[str, Any]]:
    lines: list[dict[str, Any]] = []
    for path in sorted((env.state_dir / "logs").glob("search-*.jsonl")):
        lines += [json.loads(x) for x in path.read_text().splitlines()]
    return lines


def assert_no_secrets(env: Env, *texts: str) -> None:
    state = "".join(p.read_text(errors="replace") for p in env.state_dir.rglob("*") if p.is_file())
    for key in KEYS:
        assert key not in state
        for text in texts:
            assert key not in text


# --- the declaration ---------------------------------------------------------------------------


def test_it_is_a_self_hosted_web_source_without_a_default_endpoint() -> None:
    source = registry.source("searxng")
    assert (source.kind, source.endpoint, source.self_hosted) == ("web", None, True)
    assert registry.web_names()[0] == "searxng"
    assert "searxng" not in config_keys.DEFAULT_ENDPOINTS


# --- the request -------------------------------------------------------------------------------


def test_request_is_a_json_get_on_search(env: Env) -> None:
    env.write_config({"endpoints": {"searxng": "http://127.0.0.1:8888/"}})
    request = searxng.build_request("caffeine & sleep", env.settings())
    assert (request.method, request.url) == ("GET", "http://127.0.0.1:8888/search")
    assert request.params == {"q": "caffeine & sleep", "format": "json", "categories": "general"}
    assert request.json is None


@pytest.mark.parametrize(
    ("filters", "params", "unsupported"),
    [
        ({"freshness": "week"}, {"time_range": "week"}, []),
        ({"language": "DE"}, {"language": "de"}, []),
        ({"language": "de", "country": "at"}, {"language": "de-AT"}, []),
        ({"country": "FR"}, {}, ["country"]),
        ({"count": 15}, {}, []),
        ({"count": 0}, {}, ["count"]),
        ({"freshness": "hour"}, {}, ["freshness"]),
        ({"language": "deu", "country": "DE"}, {}, ["language", "country"]),
    ],
)
def test_filters_map_to_searxng_parameters(
    filters: dict[str, Any], params: dict[str, str], unsupported: list[str]
) -> None:
    assert searxng.filter_params(filters) == (params, unsupported)


def test_filters_reach_the_instance_and_unsupported_ones_are_warned(
    env: Env, web: FakeServer, instance: FakeServer
) -> None:
    configure(env, web, instance)
    instance.route("/search", ok_reply())
    result = search(env, freshness="month", language="fr", country="CA")
    sent = instance.requests[0].query
    assert sent["time_range"] == ["month"] and sent["language"] == ["fr-CA"]
    assert result["web_fetch_engine"] == "searxng"
    result = search(env, "another query", country="FR")
    assert "country" not in instance.requests[1].query
    assert 'SearXNG could not apply these filters: country "FR"' in result["warning"]


# --- the parse ---------------------------------------------------------------------------------


def test_parse_reads_results_as_title_url_snippet() -> None:
    results = searxng.parse(fixture_bytes("searxng-ok.json"))
    assert [r["url"] for r in results] == [
        "https://docs.searxng.org/dev/search_api.html",
        "https://github.com/searxng/searxng",
        "https://docs.searxng.org/admin/settings/settings_search.html",
    ]
    assert results[0] == {
        "title": "Search API — SearXNG Documentation",
        "url": "https://docs.searxng.org/dev/search_api.html",
        "snippet": "SearXNG supports querying via a simple HTTP API. Two endpoints, / and "
        "/search, are supported for both GET and POST methods.",
    }
    assert results[2]["snippet"] == ""  # an empty content is an empty snippet, not a failure


def test_parse_skips_entries_it_cannot_use() -> None:
    entries = [
        {"url": "javascript:alert(1)", "title": "bad scheme"},
        {"url": "https://a.example/", "title": "  "},
        {"title": "no url"},
        "not an object",
        {"url": "https://a.example/", "title": " First\n title ", "content": None},
        {"url": "https://a.example/", "title": "duplicate"},
        {"url": "https://b.example/", "title": "Second", "content": "  two\tlines\n"},
    ]
    body = json.dumps({"results": entries}).encode()
    assert searxng.parse(body) == [
        {"title": "First title", "url": "https://a.example/", "snippet": ""},
        {"title": "Second", "url": "https://b.example/", "snippet": "two lines"},
    ]


def test_empty_results_are_no_results() -> None:
    with pytest.raises(errors.NoResults, match="SearXNG returned no results."):
        searxng.parse(fixture_bytes("searxng-empty.json"))


def test_empty_results_because_its_engines_failed_are_a_server_error() -> None:
    with pytest.raises(errors.ServerError, match="3 of its engines did not answer"):
        searxng.parse(fixture_bytes("searxng-engines-failed.json"))


@pytest.mark.parametrize(
    ("body", "message"),
    [
        (b"<!DOCTYPE html><html><body>SearXNG</body></html>", "not JSON"),
        (b"", "not JSON"),
        (b"[1, 2]", "unexpected shape"),
        (b'{"results": {"url": "https://a.example/"}}', "unexpected shape"),
        (b'{"query": "q"}', "unexpected shape"),
        (b'{"results": [{"url": "ftp://a.example/", "title": "t"}]}', "without a title"),
    ],
)
def test_answers_that_are_not_searxng_json_are_parse_errors(body: bytes, message: str) -> None:
    with pytest.raises(errors.ParseError, match=message):
        searxng.parse(body)


# --- statuses through the fake -----------------------------------------------------------------


def fetch(env: Env, instance: FakeServer, *replies: Reply) -> Any:
    env.write_config({"endpoints": {"searxng": instance.url}})
    instance.route("/search", *replies)
    return fetch_engine("searxng", "q", env.settings(), time.monotonic() + 10)


def test_a_403_says_the_json_format_is_off(env: Env, instance: FakeServer) -> None:
    call = fetch(env, instance, Reply(403, body="<html>Forbidden</html>"))
    assert isinstance(call.error, errors.Blocked) and call.http_status == 403
    assert str(call.error) == searxng.FORMAT_OFF
    assert "search.formats" in str(call.error)


@pytest.mark.parametrize(
    ("reply", "kind"),
    [
        (Reply(429, headers={"Retry-After": "30"}), errors.Blocked),
        (Reply(502, body="bad gateway"), errors.ServerError),
        (Reply(404, body="not found"), errors.ParseError),
        (Reply(200, body=b"<html><body>login</body></html>"), errors.ParseError),
    ],
)
def test_other_failures_are_classified_like_the_engines(
    env: Env, instance: FakeServer, reply: Reply, kind: type[errors.SearchError]
) -> None:
    call = fetch(env, instance, reply)
    assert type(call.error) is kind and "SearXNG" in str(call.error)


def test_fetch_sends_the_documented_request(env: Env, instance: FakeServer) -> None:
    call = fetch(env, instance, ok_reply())
    assert call.error is None and len(call.results) == 3
    (sent,) = instance.requests
    assert (sent.method, sent.path) == ("GET", "/search")
    assert sent.query == {"q": ["q"], "format": ["json"], "categories": ["general"]}


# --- config ------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "url",
    ["http://192.168.1.20:8080", "http://10.0.0.5", "http://searxng:8080", "http://searx.lan",
     "http://[fd00::1]:8888", "http://localhost:8888", "https://search.example.org"],
)  # fmt: skip
def test_a_private_plain_http_instance_is_allowed(env: Env, url: str) -> None:
    env.write_config({"endpoints": {"searxng": url}})
    assert env.settings().endpoints["searxng"] == url


@pytest.mark.parametrize(
    "url", ["http://search.example.org", "http://8.8.8.8", "ftp://10.0.0.5", "http://10.0.0.5?x=1"]
)
def test_a_public_plain_http_instance_is_refused(env: Env, url: str) -> None:
    env.write_config({"endpoints": {"searxng": url}})
    with pytest.raises(errors.ConfigError, match="endpoints.searxng"):
        env.settings()


def test_a_keyed_source_still_needs_https_off_loopback(env: Env) -> None:
    env.write_config({"endpoints": {"brave": "http://192.168.1.20:8080"}})
    with pytest.raises(errors.ConfigError, match="endpoints.brave"):
        env.settings()


def test_a_bad_endpoint_changes_no_state(env: Env) -> None:
    env.write_config({"endpoints": {"searxng": "http://search.example.org"}})
    result = search(env)
    assert result["error_code"] == "config_error" and "endpoints.searxng" in result["error"]
    assert not env.state_dir.exists() or not any(env.state_dir.rglob("*.json"))


# --- the plans ---------------------------------------------------------------------------------


def engines_of(tiers: list[planner.Tier]) -> list[str | None]:
    return [t.engine or t.provider for t in tiers]


def test_unconfigured_it_is_in_no_plan_and_no_listing(env: Env) -> None:
    settings = env.settings()
    assert config.engines(settings) == ("google", "bing", "duckduckgo")
    assert engines_of(planner.plan("general", "q", settings, "brave")) == [
        "google", "bing", "brave", "duckduckgo"]  # fmt: skip
    assert engines_of(planner.plan("cron", "q", settings, "brave")) == [
        "brave", "gemini", "duckduckgo"]  # fmt: skip


def test_configured_it_leads_the_web_tiers_of_both_strategies(env: Env) -> None:
    env.write_config({"endpoints": {"searxng": "http://127.0.0.1:8888"}})
    settings = env.settings()
    assert config.engines(settings) == ("searxng", "google", "bing", "duckduckgo")
    assert engines_of(planner.plan("general", "q", settings, "brave")) == [
        "searxng", "google", "bing", "brave", "duckduckgo"]  # fmt: skip
    tiers = planner.plan("cron", FINANCE_QUERY, settings, "gemini")
    apis = ["gemini", "brave"]  # the default chain, then the web tiers
    assert engines_of(tiers) == [*apis, "searxng", "duckduckgo"]
    assert [t.finance_blocked for t in tiers] == [False] * len(apis) + [True, True]
    assert [t.number for t in tiers] == list(range(1, len(apis) + 3))


def test_the_mcp_status_lists_it_only_when_configured(env: Env) -> None:
    from smart_search.shell.mcp.service import Service

    breakers = Service(env.environ)._breakers()
    assert "searxng" not in breakers and "duckduckgo" in breakers
    env.write_config({"endpoints": {"searxng": "http://127.0.0.1:8888"}})
    # After every API, first of the engines.
    assert list(Service(env.environ)._breakers())[2 + len(other_apis())] == "searxng"


def test_the_report_has_no_column_for_it_until_the_logs_show_it() -> None:
    from smart_search.report.summary import engine_names

    class Seen:
        def __init__(self, *web: str) -> None:
            self.web = dict.fromkeys(web, 1)

    assert engine_names([Seen("google")]) == ["google", "bing", "duckduckgo"]
    assert engine_names([Seen("searxng")])[0] == "searxng"


# --- whole calls -------------------------------------------------------------------------------


def test_general_agent_answers_from_it_first_at_no_cost(
    env: Env, web: FakeServer, instance: FakeServer
) -> None:
    configure(env, web, instance)
    with_keys(env)
    instance.route("/search", ok_reply())
    result = search(env)
    assert (result["provider_used"], result["web_fetch_engine"]) == ("web_fetch", "searxng")
    assert result["quota_source"] == "none" and result["fallback_used"] is True
    assert result["results"][0]["url"] == "https://docs.searxng.org/dev/search_api.html"
    assert [(a["engine"], a["outcome"]) for a in result["attempts"]] == [("searxng", "success")]
    assert web.requests == []  # Google was never asked
    assert units_used(env) == dict.fromkeys(registry.api_names(), 0)
    (line,) = log_lines(env)
    assert line["web_fetch_engine"] == "searxng"
    (sent,) = instance.requests
    assert_no_secrets(env, sent.target, json.dumps(sent.headers), json.dumps(result))


def test_when_it_fails_the_call_falls_through_to_google(
    env: Env, web: FakeServer, instance: FakeServer
) -> None:
    configure(env, web, instance)
    instance.route("/search", Reply(403, body="Forbidden"))
    web.route("/search", html("google/basic-results-google.html"))
    result = search(env)
    assert result["web_fetch_engine"] == "google"
    first, second = result["attempts"][:2]
    assert (first["engine"], first["outcome"], first["error_code"]) == (
        "searxng", "failed", "blocked")  # fmt: skip
    assert first["error"] == searxng.FORMAT_OFF and first["http_status"] == 403
    assert (second["engine"], second["outcome"]) == ("google", "success")


def test_a_scheduled_agent_reaches_it_before_duckduckgo(
    env: Env, web: FakeServer, instance: FakeServer
) -> None:
    configure(env, web, instance)  # no API keys: both API tiers are skipped
    instance.route("/search", ok_reply())
    result = search(env, agent="cron")
    assert result["web_fetch_engine"] == "searxng"
    skipped = ["skipped"] * 2  # no API of the default chain has a key
    assert [a["outcome"] for a in result["attempts"]] == [*skipped, "success"]
    assert web.requests_to("/html/") == []


def test_a_scheduled_agents_finance_query_may_not_use_it(
    env: Env, web: FakeServer, instance: FakeServer
) -> None:
    configure(env, web, instance)
    result = search(env, FINANCE_QUERY, agent="cron")
    assert result["error_code"] == "finance_blocked"
    assert [a.get("engine") for a in result["attempts"]][-2:] == ["searxng", "duckduckgo"]
    assert instance.requests == []


def test_unconfigured_it_is_never_asked(env: Env, web: FakeServer, instance: FakeServer) -> None:
    configure(env, web, None)
    web.route("/search", html("google/basic-results-google.html"))
    result = search(env)
    assert result["web_fetch_engine"] == "google"
    assert "searxng" not in [a.get("engine") for a in result["attempts"]]
    assert instance.requests == []


def test_deep_mode_takes_it_as_the_web_leg(env: Env, web: FakeServer, instance: FakeServer) -> None:
    configure(env, web, instance)
    instance.route("/search", ok_reply())
    result = search(env, agent="cron", mode="deep")
    engines = [a.get("engine") for a in result["attempts"] if a["provider"] == "web_fetch"]
    assert engines == ["searxng"]
    assert web.requests_to("/html/") == []


def test_fixture_is_the_documented_shape() -> None:
    data: Any = fixture_json("searxng-ok.json")
    assert {"query", "number_of_results", "results", "answers", "suggestions"} <= set(data)
    assert all({"url", "title", "content"} <= set(r) for r in data["results"])


def test_no_other_module_of_the_package_names_it() -> None:
    """Issue 20, point 6: its name is in its own module only; the rest reads the registry."""
    package = Path(__file__).resolve().parent.parent / "smart_search"
    naming = [
        str(p.relative_to(package))
        for p in package.rglob("*.py")
        if "searx" in p.read_text().lower() and p.name != "searxng.py"
    ]
    assert naming == []


def test_the_mcp_description_names_it_as_leading_when_configured() -> None:
    from smart_search.shell.mcp.catalog import tool_description

    text = tool_description("smart_search", None)
    assert "DuckDuckGo scraping (after SearXNG, " in text and ", when configured)" in text
