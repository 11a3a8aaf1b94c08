"""Kimi web search (issue 30, point 1): Moonshot's chat completions with the built-in
`$web_search` tool, against a loopback fake serving the two exchanges Moonshot's web-search
guide describes (tests/fixtures/api/kimi-*.json: the `tool_calls` answer whose `arguments` go
back as the tool's result, then the written answer; the OpenAI-style `{"error": {type,
message}}` bodies of its error table; read 2026-12): both requests, the answer and the pages it
names, the ungrounded answer, every error class, billing per search, both regions, filters,
and a forced call through the CLI, with the sentinel key only ever in its header."""

from __future__ import annotations

from typing import Any

import orjson
import pytest

from smart_search import errors
from smart_search.sources.providers import kimi
from tests.conftest import Env
from tests.fakes import FakeServer, Reply, fixture_bytes
from tests.provider_support import (
    api_reply,
    assert_key_only_in_headers,
    bound,
    forced_call,
    response,
)

KEY = "SENTINEL-KIMI-KEY-0001"
PATH = "/v1/chat/completions"

make_settings, search = bound("kimi", KEY)


def grounded(fake: FakeServer) -> None:
    fake.route(PATH, api_reply("kimi-tool-call.json"), api_reply("kimi-ok.json"))


def test_the_search_is_two_exchanges_the_second_handing_back_the_call(tmp_path, fake) -> None:
    grounded(fake)
    record = search(make_settings(tmp_path, fake))
    assert record.error is None and record.units == 1 and record.retries == 0
    first, second = fake.requests_to(PATH)
    for sent in (first, second):
        assert sent.method == "POST" and sent.target == PATH
        assert sent.headers["authorization"] == f"Bearer {KEY}"
    asked: Any = first.json()
    assert asked == {
        "model": "kimi-k2.6",
        "messages": [{"role": "user", "content": "james webb launch"}],
        "tools": [{"type": "builtin_function", "function": {"name": "$web_search"}}],
        "thinking": {"type": "disabled"},
    }
    replayed: Any = second.json()
    call = orjson.loads(fixture_bytes("kimi-tool-call.json"))["choices"][0]["message"]
    assert replayed["messages"] == [
        asked["messages"][0],
        call,
        {"role": "tool", "tool_call_id": "$web_search:0", "name": "$web_search",
         "content": call["tool_calls"][0]["function"]["arguments"]},
    ]  # fmt: skip
    assert replayed["tools"] == asked["tools"]
    assert_key_only_in_headers(fake, KEY)


def test_the_answer_names_its_pages_as_citations(tmp_path, fake) -> None:
    grounded(fake)
    answer = search(make_settings(tmp_path, fake)).answer
    assert answer.results.startswith("The James Webb Space Telescope launched on 25 December")
    assert answer.citations == [
        {"title": "NASA", "url": "https://www.nasa.gov/mission/webb/"},
        {"title": "", "url": "https://www.esa.int/Science_Exploration/Space_Science/Webb"},
    ]
    assert answer.complete


def test_an_answer_that_never_searched_is_no_result_and_costs_nothing(tmp_path, fake) -> None:
    fake.route(PATH, api_reply("kimi-ungrounded.json"))
    record = search(make_settings(tmp_path, fake))
    assert type(record.error) is errors.NoResults and str(record.error) == kimi.UNGROUNDED
    assert record.units == 0 and len(fake.requests_to(PATH)) == 1


def test_a_model_that_keeps_searching_stops_at_its_worst_case(tmp_path, fake) -> None:
    fake.route(PATH, api_reply("kimi-tool-call.json"))  # every answer asks for another search
    settings = make_settings(tmp_path, fake)
    record = search(settings)
    assert type(record.error) is errors.NoResults
    # Three exchanges, each search billed: never more than the call held.
    assert len(fake.requests_to(PATH)) == 3 == record.units == settings.max_units_per_call["kimi"]


@pytest.mark.parametrize(
    ("reply", "kind", "attempts"),
    [
        (Reply(200, json={"id": "x", "choices": "none"}), errors.ParseError, 1),
        (Reply(200, b"<html>"), errors.ParseError, 1),
        (api_reply("kimi-401.json", 401), errors.AuthFailed, 1),
        (Reply(403, json={"error": {"type": "permission_denied_error"}}), errors.AuthFailed, 1),
        (api_reply("kimi-429-quota.json", 429), errors.QuotaExhausted, 1),
        (Reply(403, json={"error": {"type": "exceeded_current_quota_error"}}),
         errors.QuotaExhausted, 1),
        (api_reply("kimi-429-rate.json", 429, **{"retry-after": "0"}), errors.RateLimited, 3),
        (api_reply("kimi-429-overloaded.json", 429, **{"retry-after": "0"}),
         errors.ProviderOverloaded, 3),
        (Reply(404, json={"error": {"type": "resource_not_found_error"}}),
         errors.ModelUnavailable, 1),
        (Reply(500, json={"error": {"type": "server_error"}}), errors.ServerError, 3),
    ],
)  # fmt: skip
def test_every_answer_is_classified(tmp_path, fake, reply, kind, attempts) -> None:
    fake.route(PATH, reply)
    record = search(make_settings(tmp_path, fake))
    assert type(record.error) is kind, record.error
    assert len(fake.requests_to(PATH)) == attempts and record.units == 0
    assert str(record.error).startswith("Kimi")
    assert_key_only_in_headers(fake, KEY, str(record.error), repr(record.error))


def test_an_error_on_the_second_exchange_keeps_the_search_billed(tmp_path, fake) -> None:
    fake.route(PATH, api_reply("kimi-tool-call.json"), api_reply("kimi-401.json", 401))
    record = search(make_settings(tmp_path, fake))
    assert type(record.error) is errors.AuthFailed and record.units == 1


def test_spent_balance_marks_the_month_and_an_echoed_key_is_never_copied(tmp_path, fake) -> None:
    spent = {"type": "exceeded_current_quota_error", "message": f"key {KEY} has no balance"}
    fake.route(PATH, Reply(429, json={"error": spent}))
    record = search(make_settings(tmp_path, fake))
    assert str(record.error) == "Kimi API error: 429"
    assert record.observation == {"exhausted": "month", "why": "Kimi 429 (balance exhausted)"}
    assert kimi.observation(response(429, fixture_bytes("kimi-429-rate.json"))) is None


def test_billing_counts_the_web_search_calls(tmp_path, fake) -> None:
    settings = make_settings(tmp_path, fake)
    assert settings.units["kimi"] == "search_query" and settings.max_units_per_call["kimi"] == 3
    assert kimi.billed_units(response(200, fixture_bytes("kimi-tool-call.json")), settings) == 1
    assert kimi.billed_units(response(200, fixture_bytes("kimi-ok.json")), settings) == 0
    assert kimi.billed_units(response(429, fixture_bytes("kimi-429-quota.json")), settings) == 0


def test_the_china_region_is_its_endpoint(tmp_path, fake) -> None:
    """`endpoints.kimi` picks the region: the default is the international host."""
    assert kimi.SOURCE.endpoint == "https://api.moonshot.ai"
    with FakeServer() as china:
        grounded(china)
        record = search(make_settings(tmp_path, fake, endpoints={"kimi": china.url}))
        assert record.error is None and len(china.requests_to(PATH)) == 2
    assert not fake.requests


def test_filters_become_an_instruction(tmp_path, fake) -> None:
    assert kimi.filter_params({"count": 2, "freshness": "week"}) == ({}, ["count", "freshness"])
    grounded(fake)
    search(make_settings(tmp_path, fake), country="CN")
    first: Any = fake.requests_to(PATH)[0].json()
    assert first["messages"][0]["role"] == "system" and "code CN" in first["messages"][0]["content"]


def test_forced_kimi_answers_through_the_cli_and_settles_its_searches(tmp_path, fake) -> None:
    grounded(fake)
    env = Env(tmp_path)
    found = forced_call(env, fake, "kimi", KEY)
    assert found["error"] is None, found
    assert found["provider_used"] == "kimi" and found["results"].startswith("The James Webb")
    assert found["citations"][0]["url"] == "https://www.nasa.gov/mission/webb/"
    assert found["attempts"][0]["units"] == 1
    assert env.call("search_quota_status")["agents"]["a"]["kimi"]["used"] == 1
    assert_key_only_in_headers(fake, KEY)
