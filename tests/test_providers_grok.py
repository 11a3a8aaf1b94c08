"""Grok web search (issue 30, point 1): xAI's Responses API with the `web_search` tool, against
a loopback fake serving answers in the shapes xAI documents (tests/fixtures/api/grok-*.json:
`output[]` with `web_search_call` and `message` items, `url_citation` annotations, the
top-level `citations` list and `usage.server_side_tool_usage_details` from docs.x.ai's Tools
and Cost tracking pages; the `{"code", "error"}` error bodies its API returns; read 2026-12):
the request, the answer and its citations, every error class, billing per search the model
ran, the worst case held and settled, filters, and a forced call through the CLI."""

from __future__ import annotations

from typing import Any

import orjson
import pytest

from smart_search import errors
from smart_search.sources.providers import grok
from tests.conftest import Env
from tests.fakes import Reply, fixture_json
from tests.provider_support import (
    api_reply,
    assert_key_only_in_headers,
    bound,
    forced_call,
    response,
)

KEY = "SENTINEL-XAI-KEY-0001"
PATH = "/v1/responses"

make_settings, search = bound("grok", KEY)


def test_the_request_asks_for_web_search_with_the_key_in_its_header(tmp_path, fake) -> None:
    fake.route(PATH, api_reply("grok-ok.json"))
    record = search(make_settings(tmp_path, fake))
    assert record.error is None
    (sent,) = fake.requests_to(PATH)
    assert sent.method == "POST" and sent.target == PATH
    assert sent.headers["authorization"] == f"Bearer {KEY}"
    assert sent.json() == {
        "model": "grok-4.7",
        "input": [{"role": "user", "content": "james webb launch"}],
        "tools": [{"type": "web_search"}],
        "store": False,
    }
    assert_key_only_in_headers(fake, KEY)


def test_the_answer_is_its_text_with_each_cited_page_once(tmp_path, fake) -> None:
    fake.route(PATH, api_reply("grok-ok.json"))
    answer = search(make_settings(tmp_path, fake)).answer
    assert answer.results == (
        "The James Webb Space Telescope launched on December 25, 2021, on an Ariane 5 from "
        "Kourou. It reached L2 in January 2022."
    )
    assert answer.citations == [
        {"title": "Webb - NASA", "url": "https://www.nasa.gov/mission/webb/"},
        {
            "title": "ESA - Webb",
            "url": "https://www.esa.int/Science_Exploration/Space_Science/Webb",
        },
        {"title": "", "url": "https://webbtelescope.org/news/launch"},
    ]
    assert answer.complete


def test_an_incomplete_answer_is_usable_but_not_complete(tmp_path, fake) -> None:
    data: Any = fixture_json("grok-ok.json")
    data["status"] = "incomplete"
    fake.route(PATH, Reply(200, json=data))
    answer = search(make_settings(tmp_path, fake)).answer
    assert answer.results.startswith("The James Webb") and answer.complete is False


@pytest.mark.parametrize(
    ("reply", "kind", "attempts"),
    [
        (api_reply("grok-empty.json"), errors.NoResults, 1),
        (Reply(200, json={"id": "r", "output": "text"}), errors.ParseError, 1),
        (Reply(200, b"not json"), errors.ParseError, 1),
        (api_reply("grok-400-key.json", 400), errors.AuthFailed, 1),
        (Reply(401, json={"error": "unauthorized"}), errors.AuthFailed, 1),
        (Reply(403, json={"error": "Forbidden: model not allowed for this key"}),
         errors.AuthFailed, 1),
        (api_reply("grok-403-credits.json", 403), errors.QuotaExhausted, 1),
        (Reply(429, json={"error": "Your team has reached its monthly spending limit."}),
         errors.QuotaExhausted, 1),
        (Reply(404, json={"error": "model not found"}), errors.ModelUnavailable, 1),
        (api_reply("grok-429.json", 429, **{"retry-after": "0"}), errors.RateLimited, 3),
        (Reply(500, b"oops"), errors.ServerError, 3),
    ],
)  # fmt: skip
def test_every_answer_is_classified(tmp_path, fake, reply, kind, attempts) -> None:
    fake.route(PATH, reply)
    record = search(make_settings(tmp_path, fake))
    assert type(record.error) is kind, record.error
    assert len(fake.requests_to(PATH)) == attempts
    assert str(record.error).startswith("Grok")
    assert_key_only_in_headers(fake, KEY, str(record.error), repr(record.error))


def test_an_error_echoing_the_key_is_never_copied(tmp_path, fake) -> None:
    fake.route(PATH, Reply(400, json={"error": f"Incorrect API key provided: {KEY}"}))
    assert str(search(make_settings(tmp_path, fake)).error) == "Grok API error: 400"


def test_spent_credit_marks_the_month_exhausted() -> None:
    spent = response(403, orjson.dumps(fixture_json("grok-403-credits.json")))
    assert grok.observation(spent) == {"exhausted": "month",
                                       "why": "Grok 403 (credit or spending limit)"}  # fmt: skip
    assert grok.observation(response(429, orjson.dumps(fixture_json("grok-429.json")))) is None


def _ok(**changes: Any) -> bytes:
    data: Any = fixture_json("grok-ok.json")
    data.update(changes)
    return orjson.dumps(data)


def test_billing_counts_the_searches_the_model_ran(tmp_path, fake) -> None:
    settings = make_settings(tmp_path, fake)
    assert settings.units["grok"] == "search_query"
    assert settings.max_units_per_call["grok"] == 3  # held until the answer says what it ran
    assert grok.billed_units(response(200, _ok()), settings) == 2  # usage says so
    assert grok.billed_units(response(200, _ok(usage={})), settings) == 2  # its call items
    assert grok.billed_units(response(200, _ok(usage={}, output=[])), settings) == 0
    assert grok.billed_units(response(200, b"garbled"), settings) == 3  # unreadable: worst case
    for status in (400, 403, 429, 500):
        assert grok.billed_units(response(status), settings) == 0


def test_a_call_holds_its_worst_case_and_settles_to_what_it_ran(tmp_path, fake) -> None:
    fake.route(PATH, api_reply("grok-ok.json"))
    env = Env(tmp_path)
    found = forced_call(env, fake, "grok", KEY)
    assert found["error"] is None, found
    assert found["provider_used"] == "grok" and found["results"].startswith("The James Webb")
    assert {c["url"] for c in found["citations"]} >= {"https://www.nasa.gov/mission/webb/"}
    assert found["attempts"][0]["units"] == 2  # settled from the 3 held
    status = env.call("search_quota_status")
    assert status["agents"]["a"]["grok"] == {"allocated": 3, "used": 2, "remaining": 1}
    assert status["windows"]["grok"]["unit"] == "search_query"


def test_filters_become_an_instruction_and_count_is_unsupported(tmp_path, fake) -> None:
    params, unsupported = grok.filter_params(
        {"count": 3, "freshness": "day", "country": "DE", "language": "de"})  # fmt: skip
    assert unsupported == ["count", "freshness"]
    assert "ISO 3166-1 code DE" in params["instructions"] and "code de" in params["instructions"]
    fake.route(PATH, api_reply("grok-ok.json"))
    search(make_settings(tmp_path, fake), language="fr")
    first = fake.requests_to(PATH)[0].json()["input"][0]
    assert first["role"] == "system" and "ISO 639-1 code fr" in first["content"]
