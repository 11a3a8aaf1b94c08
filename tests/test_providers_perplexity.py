"""Perplexity's Search API (issue 30, point 1) against a loopback fake serving the answers its
reference documents (tests/fixtures/api/perplexity-*.json: the `results[]` shape of the Search
API reference and the `{"error": {message, type, code}}` error envelope, docs.perplexity.ai,
read 2026-12): the request, parsing, every error class, billing, the search type, filters, and
a forced call through the CLI, with the sentinel key never leaving its header."""

from __future__ import annotations

from typing import Any

import pytest

from smart_search import errors
from smart_search.sources.providers import perplexity
from tests.conftest import Env
from tests.fakes import FakeServer, Reply
from tests.provider_support import (
    api_reply,
    assert_key_only_in_headers,
    assert_walked_only_when_named,
    bound,
    forced_call,
    response,
)

KEY = "SENTINEL-PERPLEXITY-KEY-0001"
PATH = "/search"

make_settings, search = bound("perplexity", KEY)


def test_the_request_is_a_post_with_the_key_in_the_bearer_header_only(tmp_path, fake) -> None:
    fake.route(PATH, api_reply("perplexity-ok.json"))
    record = search(make_settings(tmp_path, fake))
    assert record.error is None and record.units == 1
    (sent,) = fake.requests_to(PATH)
    assert sent.method == "POST" and sent.target == PATH
    assert sent.headers["authorization"] == f"Bearer {KEY}"
    assert sent.json() == {"query": "james webb launch", "max_results": 10, "search_type": "web"}
    assert_key_only_in_headers(fake, KEY)


def test_results_are_title_url_and_snippet_and_junk_urls_are_dropped(tmp_path, fake) -> None:
    fake.route(PATH, api_reply("perplexity-ok.json"))
    record = search(make_settings(tmp_path, fake))
    assert record.answer.results == [
        {
            "title": "Webb launch: ESA",
            "url": "https://www.esa.int/Science_Exploration/Space_Science/Webb",
            "snippet": "The James Webb Space Telescope launched on December 25, 2021 aboard an "
            "Ariane 5 rocket from Kourou, French Guiana.",
        },
        {
            "title": "Webb Telescope: launch and deployment",
            "url": "https://webbtelescope.org/news/launch",
            "snippet": "Webb unfolded its sunshield and mirrors over the two weeks after launch.",
        },
    ]
    assert record.observation is None


@pytest.mark.parametrize(
    ("reply", "kind", "attempts"),
    [
        (api_reply("perplexity-empty.json"), errors.NoResults, 1),
        (Reply(200, b"<html>oops</html>"), errors.ParseError, 1),
        (Reply(200, json={"results": {"not": "a list"}}), errors.ParseError, 1),
        (api_reply("perplexity-401.json", 401), errors.AuthFailed, 1),
        (Reply(403, json={"error": {"message": "Forbidden", "type": "forbidden"}}),
         errors.AuthFailed, 1),
        (api_reply("perplexity-402.json", 402), errors.QuotaExhausted, 1),
        (Reply(429, json={"error": {"type": "insufficient_quota"}}), errors.QuotaExhausted, 1),
        (api_reply("perplexity-429.json", 429, **{"retry-after": "0"}), errors.RateLimited, 3),
        (Reply(500, json={"error": {"message": "oops"}}), errors.ServerError, 3),
        (Reply(503, b"busy"), errors.ProviderOverloaded, 3),
    ],
)  # fmt: skip
def test_every_answer_is_classified(tmp_path, fake, reply, kind, attempts) -> None:
    fake.route(PATH, reply)
    record = search(make_settings(tmp_path, fake))
    assert type(record.error) is kind, record.error
    assert len(fake.requests_to(PATH)) == attempts  # spent credits and refusals never retried
    assert record.error.http_status == reply.status
    assert record.units == (1 if reply.status < 300 else 0)  # an answered search is billed
    assert str(record.error).startswith("Perplexity")
    assert_key_only_in_headers(fake, KEY, str(record.error), repr(record.error))


def test_a_rate_limit_waits_for_retry_after(tmp_path, fake) -> None:
    fake.route(PATH, api_reply("perplexity-429.json", 429, **{"retry-after": "7"}))
    error = perplexity.classify_error(response(429, b"{}", {"retry-after": "7"}))
    assert type(error) is errors.RateLimited and error.retry_after == 7


def test_an_error_echoing_the_key_is_never_copied(tmp_path, fake) -> None:
    fake.route(PATH, Reply(401, json={"error": {"message": f"bad key {KEY}"}}))
    record = search(make_settings(tmp_path, fake))
    assert str(record.error) == "Perplexity API error: 401"


def test_spent_credits_mark_the_month_exhausted() -> None:
    spent = response(402, b'{"error": {"type": "insufficient_quota"}}')
    assert perplexity.observation(spent) == {
        "exhausted": "month", "why": "Perplexity 402 (credits exhausted)"}  # fmt: skip
    assert perplexity.observation(response(429, b'{"error": {"type": "rate_limit"}}')) is None
    assert perplexity.observation(response(200)) is None


def test_either_search_type_bills_one_request_and_fast_is_sent(tmp_path, fake) -> None:
    fake.route(PATH, api_reply("perplexity-ok.json"))
    fast = make_settings(tmp_path, fake, providers={"perplexity": {"mode": "fast"}})
    assert fast.modes["perplexity"] == "fast" and fast.max_units_per_call["perplexity"] == 1
    record = search(fast)
    assert record.units == 1 and fake.requests_to(PATH)[0].json()["search_type"] == "fast"
    for status in (401, 402, 429, 500):
        assert perplexity.billed_units(response(status), fast) == 0
    with pytest.raises(errors.ConfigError) as caught:
        make_settings(tmp_path, fake, providers={"perplexity": {"mode": "pro"}})
    assert '"providers.perplexity.mode" must be "web" or "fast".' in str(caught.value)


def test_filters_map_to_perplexitys_fields() -> None:
    params, unsupported = perplexity.filter_params(
        {"count": 7, "freshness": "week", "country": "gb", "language": "de"}
    )
    assert params == {"max_results": 7, "search_recency_filter": "week", "country": "GB",
                      "search_language_filter": ["de"]}  # fmt: skip
    assert unsupported == []
    assert perplexity.filter_params({"count": 50}) == ({}, ["count"])


def test_filters_reach_the_request_body(tmp_path, fake) -> None:
    fake.route(PATH, api_reply("perplexity-ok.json"))
    search(make_settings(tmp_path, fake), count=3, freshness="day", country="US")
    body = fake.requests_to(PATH)[0].json()
    assert (body["max_results"], body["search_recency_filter"], body["country"]) == (3, "day", "US")


def test_forced_perplexity_answers_through_the_cli(tmp_path, fake) -> None:
    fake.route(PATH, api_reply("perplexity-ok.json"))
    found = forced_call(Env(tmp_path), fake, "perplexity", KEY, language="de")
    assert found["error"] is None, found
    assert (found["provider_used"], found["quota_source"]) == ("perplexity", "agent_allocation")
    assert found["attempts"][0]["units"] == 1 and found["queries_remaining"] == 2
    assert fake.requests_to(PATH)[0].json()["search_language_filter"] == ["de"]
    assert_key_only_in_headers(fake, KEY)


def test_a_scheduled_agent_walks_to_perplexity_only_when_named(tmp_path, fake) -> None:
    def install(env: Env, fake: FakeServer, **config: Any) -> None:
        env.environ["PERPLEXITY_API_KEY"] = KEY
        env.write_config({"endpoints": {"perplexity": fake.url, "duckduckgo": fake.url},
                          "web_fetch_min_interval_ms": 0, **config})  # fmt: skip

    assert_walked_only_when_named(Env(tmp_path), fake, "perplexity", PATH, install, KEY)
