"""A provider's keyless tier (issue 30, point 1): Ollama's own host (`ollama_local`) and
Firecrawl's free tier (`firecrawl_free`), each declared as `KEYLESS` in its provider's module.

**Decision** (docs/sources.md): a keyless tier is a web source, as SearXNG is: opt-in (in no plan
until `endpoints.<name>` is set), no key and no units, paced across processes and behind its own
circuit breaker; a tier that refuses or throttles (401, 402, 403, 429) is `blocked`, never
`no_results`. Against loopback fakes serving each provider's documented answer.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from smart_search.host import config, config_keys
from smart_search.search import planner
from smart_search.sources import registry
from tests.conftest import Env
from tests.fakes import FakeServer, Reply, fixture_bytes

SERP = Path(__file__).parent / "fixtures" / "serp"
# name → (the provider whose tier it is, the path it asks, its documented answer, the first URL)
TIERS = {
    "ollama_local": ("ollama", "/api/experimental/web_search", "ollama-ok.json",
                     "https://ollama.com/"),
    "firecrawl_free": ("firecrawl", "/v2/search", "firecrawl-ok.json",
                       "https://www.firecrawl.dev/"),
}  # fmt: skip
SENTINEL = "SENTINEL-PROVIDER-KEY-0009"


@pytest.fixture(params=sorted(TIERS))
def tier(request: pytest.FixtureRequest) -> str:
    return request.param


@pytest.fixture
def instance() -> Any:
    """The keyless tier's host: its own loopback server."""
    with FakeServer() as server:
        yield server


@pytest.fixture
def web() -> Any:
    """Google, Bing, DuckDuckGo and the APIs."""
    with FakeServer() as server:
        yield server


def configure(env: Env, web: FakeServer, tier: str, instance: FakeServer | None, **extra: Any):
    endpoints = {n: web.url for n in ("gemini", "brave", "google", "bing", "duckduckgo")}
    if instance is not None:
        endpoints[tier] = instance.url
    env.write_config({"endpoints": endpoints, "web_fetch_min_interval_ms": 0,
                      "retry_max_attempts": 1, **extra})  # fmt: skip
    # The provider's own key is set: the keyless tier must still send none.
    env.environ[f"{TIERS[tier][0].upper()}_API_KEY"] = SENTINEL


def search(env: Env, agent: str = "general", **args: Any) -> dict[str, Any]:
    return env.call("smart_search", {"query": "web data", "agent_id": agent, **args})


def test_each_is_an_opt_in_web_source_in_its_providers_module(tier: str) -> None:
    source = registry.source(tier)
    assert (source.kind, source.endpoint, source.self_hosted) == ("web", None, True)
    module = registry.module(tier)
    assert module is registry.module(TIERS[tier][0]).KEYLESS
    assert tier not in config_keys.DEFAULT_ENDPOINTS


def test_unconfigured_it_is_in_no_plan_and_never_asked(
    env: Env, web: FakeServer, instance: FakeServer, tier: str
) -> None:
    configure(env, web, tier, None)
    settings = env.settings()
    assert tier not in config.engines(settings)
    assert tier not in [t.engine for t in planner.plan("general", "q", settings, "brave")]
    web.route("/search", Reply(200, (SERP / "google/basic-results-google.html").read_bytes(),
                               {"content-type": "text/html"}))  # fmt: skip
    assert search(env)["web_fetch_engine"] == "google"
    assert instance.requests == []


def test_configured_it_answers_first_keyless_and_at_no_cost(
    env: Env, web: FakeServer, instance: FakeServer, tier: str
) -> None:
    _, path, fixture, first_url = TIERS[tier]
    configure(env, web, tier, instance)
    instance.route(path, Reply(200, body=fixture_bytes(fixture)))
    result = search(env, count=3)
    assert (result["provider_used"], result["web_fetch_engine"]) == ("web_fetch", tier)
    assert result["quota_source"] == "none" and result["results"][0]["url"] == first_url
    assert [(a["engine"], a["outcome"]) for a in result["attempts"]] == [(tier, "success")]
    (sent,) = instance.requests
    assert (sent.method, sent.path) == ("POST", path)
    assert "authorization" not in sent.headers and SENTINEL not in json.dumps(sent.headers)
    assert SENTINEL.encode() not in sent.body and SENTINEL not in sent.target
    body = sent.json()
    assert body["query"] == "web data"
    assert body.get("max_results", body.get("limit")) == 3  # count reaches the request
    providers = env.call("search_quota_status")["providers"]
    assert all(int(providers[p]["used"]) == 0 for p in registry.api_names())
    assert web.requests == []


@pytest.mark.parametrize("status", [401, 402, 403, 429])
def test_a_refusal_or_throttle_is_blocked_never_no_results(
    env: Env, web: FakeServer, instance: FakeServer, tier: str, status: int
) -> None:
    configure(env, web, tier, instance)
    instance.route(TIERS[tier][1], Reply(status, json={"error": "slow down"},
                                         headers={"retry-after": "30"}))  # fmt: skip
    web.route("/search", Reply(200, (SERP / "google/basic-results-google.html").read_bytes(),
                               {"content-type": "text/html"}))  # fmt: skip
    result = search(env)
    first = result["attempts"][0]
    assert (first["engine"], first["error_code"], first["http_status"]) == (
        tier, "blocked", status)  # fmt: skip
    assert "keyless" in first["error"] or "refused" in first["error"]
    assert result["web_fetch_engine"] == "google"  # the walk went on


def test_a_genuinely_empty_answer_is_no_results(
    env: Env, web: FakeServer, instance: FakeServer, tier: str
) -> None:
    configure(env, web, tier, instance)
    empty = {"ollama_local": b'{"results": []}', "firecrawl_free": b'{"data": {"web": []}}'}
    instance.route(TIERS[tier][1], Reply(200, body=empty[tier]))
    web.route("/search", Reply(503, b"down"))
    web.route("/html/", Reply(404, b"no"))
    result = search(env)
    assert result["attempts"][0]["error_code"] == "no_results"


@pytest.mark.parametrize("url", ["http://192.168.1.20:11434", "http://ollama:11434"])
def test_a_private_plain_http_host_is_allowed_a_public_one_is_not(
    env: Env, tier: str, url: str
) -> None:
    env.write_config({"endpoints": {tier: url}})
    assert env.settings().endpoints[tier] == url
    env.write_config({"endpoints": {tier: "http://search.example.org"}})
    with pytest.raises(Exception, match=f"endpoints.{tier}"):
        env.settings()


# Two processes search at once through the keyless tier: the pacing slots (budget/pacing.py,
# shared through the state) space their requests by the interval.
SEARCHER = """
import json, os, sys, time
from smart_search.shell.runner import handle
start = float(sys.argv[1])
while time.time() < start:
    time.sleep(0.001)
out = handle(json.dumps({"tool": "smart_search",
                         "args": {"query": sys.argv[2], "agent_id": "general"}}).encode(),
             os.environ)
print(json.dumps(out["web_fetch_engine"]))
"""


@pytest.mark.multiprocess
def test_the_tier_is_paced_across_processes(
    env: Env, web: FakeServer, instance: FakeServer, tier: str
) -> None:
    interval_s = 2.5
    configure(env, web, tier, instance, web_fetch_min_interval_ms=int(interval_s * 1000),
              total_timeout_ms=30000, lock_timeout_ms=20000)  # fmt: skip
    _, path, fixture, _ = TIERS[tier]
    instance.route(path, Reply(200, body=fixture_bytes(fixture)))
    start = time.time() + 2.0
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", SEARCHER, str(start), f"query {n}"],
            stdout=subprocess.PIPE,
            env=env.environ,
        )  # fmt: skip
        for n in range(2)
    ]
    engines = [json.loads(p.communicate(timeout=90)[0]) for p in procs]
    assert engines == [tier, tier]
    first, second = sorted(r.arrived for r in instance.requests_to(path))
    assert second - first >= interval_s - 0.1
