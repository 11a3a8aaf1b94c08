"""Parallel's keyless free tier, its Search MCP, as the opt-in web engine `parallel_free`
(issue 30, point 1) against a loopback fake speaking MCP's Streamable HTTP transport
(tests/fixtures/api/parallel-free-*: the `initialize` result and a `tools/call` result as
MCP's specification shapes them, the tool's payload in the paid API's documented `results[]`
shape, docs.parallel.ai's Search MCP page and OpenClaw's docs/tools/parallel-search.md, read
2026-12): the handshake and the search in one pacing slot, JSON and event-stream answers, a
throttle or refusal as `blocked` (never "no results"), no units spent, the walk's use of it
once configured, and pacing across processes."""

from __future__ import annotations

import json
import threading
import time
from typing import Any

import pytest

from smart_search import errors
from smart_search.host import config_keys
from smart_search.sources import registry
from smart_search.sources.engines import parallel_free
from smart_search.sources.engines.fetch import fetch_engine
from tests.conftest import Env
from tests.fakes import FakeServer, Reply, fixture_bytes

MCP = "/mcp"


def handshake_reply(session: str | None = "sess-4f1c") -> Reply:
    headers = {"content-type": "application/json"}
    if session:
        headers["mcp-session-id"] = session
    return Reply(200, fixture_bytes("parallel-free-initialize.json"), headers=headers)


def search_reply() -> Reply:
    return Reply(200, fixture_bytes("parallel-free-search.sse"),
                 headers={"content-type": "text/event-stream"})  # fmt: skip


def configure(env: Env, fake: FakeServer, **extra: Any) -> None:
    env.write_config({"endpoints": {"parallel_free": fake.url + MCP, "duckduckgo": fake.url},
                      "web_fetch_min_interval_ms": 0, **extra})  # fmt: skip


def fetch(env: Env) -> Any:
    return fetch_engine("parallel_free", "james webb launch", env.settings(), time.monotonic() + 10)


def test_it_is_opt_in_keyless_and_spends_no_units() -> None:
    source = registry.source("parallel_free")
    assert (source.kind, source.endpoint, source.self_hosted, source.key_variable) == (
        "web", None, True, None)  # fmt: skip
    assert "parallel_free" not in config_keys.DEFAULT_ENDPOINTS
    assert parallel_free.SERVER == "https://search.parallel.ai/mcp"


def test_the_handshake_then_the_search_carry_the_session(env: Env, fake: FakeServer) -> None:
    fake.route(MCP, handshake_reply(), search_reply())
    configure(env, fake)
    call = fetch(env)
    assert call.error is None, call.error
    first, second = fake.requests_to(MCP)
    assert first.method == second.method == "POST"
    opened: Any = first.json()
    assert (opened["jsonrpc"], opened["method"]) == ("2.0", "initialize")
    assert opened["params"]["protocolVersion"] == "2025-06-18"
    assert "application/json" in first.headers["accept"]
    assert "text/event-stream" in first.headers["accept"]
    asked: Any = second.json()
    assert asked["method"] == "tools/call" and asked["params"] == {
        "name": "web_search",
        "arguments": {"objective": "james webb launch", "search_queries": ["james webb launch"]},
    }
    assert second.headers["mcp-session-id"] == "sess-4f1c"
    assert second.headers["mcp-protocol-version"] == "2025-06-18"
    assert [r["url"] for r in call.results] == [
        "https://www.nasa.gov/mission/webb/", "https://www.stsci.edu/jwst"]  # fmt: skip
    assert call.results[0]["snippet"].startswith("Webb launched on Dec. 25, 2021")


def test_a_stateless_server_gets_no_session_header(env: Env, fake: FakeServer) -> None:
    fake.route(MCP, handshake_reply(None), search_reply())
    configure(env, fake)
    assert fetch(env).error is None
    assert "mcp-session-id" not in fake.requests_to(MCP)[1].headers


def rpc(result: dict[str, Any]) -> bytes:
    return json.dumps({"jsonrpc": "2.0", "id": 2, "result": result}).encode()


@pytest.mark.parametrize(
    ("body", "kind"),
    [
        (fixture_bytes("parallel-free-rate-limited.json"), errors.Blocked),
        (b'{"jsonrpc": "2.0", "id": 2, "error": {"code": -32000, "message": "Too many"}}',
         errors.Blocked),
        (rpc({"content": [{"type": "text", "text": "internal failure"}], "isError": True}),
         errors.ServerError),
        (rpc({"structuredContent": {"results": []}}), errors.NoResults),
        (rpc({"content": [{"type": "text", "text": "no json here"}]}), errors.ParseError),
        (b"event: message\ndata: not json\n\n", errors.ParseError),
        (b"<html>hello</html>", errors.ParseError),
    ],
)  # fmt: skip
def test_every_answer_is_classified(body: bytes, kind: type[Exception]) -> None:
    with pytest.raises(kind):
        parallel_free.parse(body)


def test_structured_content_is_read_first() -> None:
    found = parallel_free.parse(rpc({"structuredContent": {"results": [
        {"url": "https://example.org/a", "title": "A", "excerpts": ["alpha"]}]}}))  # fmt: skip
    assert found == [{"title": "A", "url": "https://example.org/a", "snippet": "alpha"}]


@pytest.mark.parametrize("status", [429, 403, 400, 404])
def test_a_refusal_at_either_step_is_blocked(env: Env, fake: FakeServer, status: int) -> None:
    fake.route(MCP, Reply(status, b'{"error": "slow down"}', headers={"retry-after": "30"}))
    configure(env, fake)
    call = fetch(env)
    assert type(call.error) is errors.Blocked and call.http_status == status
    assert len(fake.requests_to(MCP)) == 1  # the search never followed a refused handshake
    fake.route(MCP, handshake_reply(), Reply(status, b"{}"))
    call = fetch(env)
    assert type(call.error) is errors.Blocked and call.http_status == status


def test_count_is_served_by_cutting_and_other_filters_are_unsupported() -> None:
    assert parallel_free.filter_params({"count": 3, "language": "de", "freshness": "day"}) == (
        {}, ["freshness", "language"])  # fmt: skip


def test_a_configured_free_tier_leads_the_web_tiers_and_costs_nothing(
    env: Env, fake: FakeServer
) -> None:
    fake.route(MCP, handshake_reply(), search_reply())
    configure(env, fake)
    found = env.call("smart_search", {"query": "james webb launch", "agent_id": "general"})
    assert found["error"] is None, found
    assert (found["provider_used"], found["web_fetch_engine"]) == ("web_fetch", "parallel_free")
    assert found["attempts"][0]["engine"] == "parallel_free"
    assert found["attempts"][0]["units"] == 0
    status = env.call("search_quota_status")
    assert all(int(p["used"]) == 0 for p in status["providers"].values())


def test_a_blocked_free_tier_hands_over_to_the_next_tier(env: Env, fake: FakeServer) -> None:
    fake.route(MCP, Reply(429, b"{}"))
    fake.route("/html/", Reply(404, b"no"))
    configure(env, fake)
    found = env.call("smart_search", {"query": "james webb launch", "agent_id": "general"})
    tiers = {a["engine"]: a for a in found["attempts"] if a["provider"] == "web_fetch"}
    assert tiers["parallel_free"]["error_code"] == "blocked"
    assert "duckduckgo" in tiers  # the walk went on


@pytest.mark.multiprocess
def test_two_processes_are_paced_apart(env: Env, fake: FakeServer) -> None:
    """Two one-shot CLI processes searching at once: their requests to the free tier start at
    least `web_fetch_min_interval_ms` apart (the shared pacing slot), each call's handshake and
    search inside its own slot."""
    interval_ms = 1500
    fake.route(MCP, handshake_reply(), search_reply(), handshake_reply(), search_reply())
    configure(env, fake, web_fetch_min_interval_ms=interval_ms)
    calls = [json.dumps({"tool": "smart_search",  # two queries: no answer from the cache
                         "args": {"query": f"webb launch {n}", "agent_id": "general"}})
             for n in (1, 2)]  # fmt: skip
    outputs: list[str] = []
    runs = [threading.Thread(target=lambda c=c: outputs.append(env.run_cli(c).stdout))
            for c in calls]  # fmt: skip
    for run in runs:
        run.start()
    for run in runs:
        run.join()
    assert all(json.loads(o)["web_fetch_engine"] == "parallel_free" for o in outputs), outputs
    opens = [r.arrived for r in fake.requests_to(MCP) if b'"initialize"' in r.body]
    assert len(opens) == 2
    assert abs(opens[1] - opens[0]) >= interval_ms / 1000 * 0.9
