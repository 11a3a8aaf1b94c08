"""Parallel's paid Search API (issue 30, point 1) against a loopback fake serving the answers
its docs show (tests/fixtures/api/parallel-*.json: the `results[]` of `url`, `title`,
`publish_date`, `excerpts` from the Search quickstart, and the `{"error": {ref_id, message,
detail}}` envelope of its "Warnings and Errors" page, docs.parallel.ai, read 2026-12): the
request, parsing, every error class, billing, modes, filters and a forced call through the CLI,
with the sentinel key never leaving its header. The keyless tier: tests/test_parallel_free.py."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from smart_search import errors
from smart_search.sources.providers import parallel
from tests.conftest import Env
from tests.fakes import Reply
from tests.provider_support import (
    api_reply,
    assert_key_only_in_headers,
    bound,
    forced_call,
    response,
)

KEY = "SENTINEL-PARALLEL-KEY-0001"
PATH = "/v1/search"

make_settings, search = bound("parallel", KEY)


def test_the_request_carries_the_key_in_its_header_and_the_query_twice(tmp_path, fake) -> None:
    fake.route(PATH, api_reply("parallel-ok.json"))
    record = search(make_settings(tmp_path, fake))
    assert record.error is None and record.units == 1
    (sent,) = fake.requests_to(PATH)
    assert sent.method == "POST" and sent.target == PATH
    assert sent.headers["x-api-key"] == KEY and "authorization" not in sent.headers
    assert sent.json() == {
        "objective": "james webb launch",
        "search_queries": ["james webb launch"],
        "advanced_settings": {"max_results": 10},
        "mode": "advanced",
    }
    assert_key_only_in_headers(fake, KEY)


def test_results_join_their_excerpts_and_junk_urls_are_dropped(tmp_path, fake) -> None:
    fake.route(PATH, api_reply("parallel-ok.json"))
    assert search(make_settings(tmp_path, fake)).answer.results == [
        {
            "title": "Webb Mission - NASA",
            "url": "https://www.nasa.gov/mission/webb/",
            "snippet": "Webb launched on Dec. 25, 2021, on an Ariane 5 rocket from Europe's "
            "Spaceport in French Guiana. … It reached the second Lagrange point about a month "
            "later.",
        },
        {"title": "JWST at STScI", "url": "https://www.stsci.edu/jwst", "snippet": ""},
    ]


@pytest.mark.parametrize(
    ("reply", "kind", "attempts"),
    [
        (api_reply("parallel-empty.json"), errors.NoResults, 1),
        (Reply(200, b"[]"), errors.ParseError, 1),
        (api_reply("parallel-401.json", 401), errors.AuthFailed, 1),
        (api_reply("parallel-422.json", 422), errors.AuthFailed, 1),
        (api_reply("parallel-402.json", 402), errors.QuotaExhausted, 1),
        (api_reply("parallel-429.json", 429, **{"retry-after": "0"}), errors.RateLimited, 3),
        (Reply(502, b"bad gateway"), errors.ServerError, 3),
    ],
)
def test_every_answer_is_classified(tmp_path, fake, reply, kind, attempts) -> None:
    fake.route(PATH, reply)
    record = search(make_settings(tmp_path, fake))
    assert type(record.error) is kind, record.error
    assert len(fake.requests_to(PATH)) == attempts
    assert record.units == (1 if reply.status < 300 else 0)
    assert str(record.error).startswith("Parallel")
    assert_key_only_in_headers(fake, KEY, str(record.error), repr(record.error))


def test_spent_credit_marks_the_month_and_an_echoed_key_is_never_copied(tmp_path, fake) -> None:
    fake.route(PATH, Reply(402, json={"error": {"message": f"no credit for {KEY}"}}))
    record = search(make_settings(tmp_path, fake))
    assert str(record.error) == "Parallel API error: 402"
    assert record.observation == {"exhausted": "month", "why": "Parallel 402 (credit exhausted)"}
    assert parallel.observation(response(429)) is None


def test_every_mode_is_one_request_and_the_configured_one_is_sent(tmp_path, fake) -> None:
    fake.route(PATH, api_reply("parallel-ok.json"))
    turbo = make_settings(tmp_path, fake, providers={"parallel": {"mode": "turbo"}})
    assert turbo.max_units_per_call["parallel"] == 1
    assert search(turbo).units == 1
    assert fake.requests_to(PATH)[0].json()["mode"] == "turbo"
    with pytest.raises(errors.ConfigError) as caught:
        make_settings(tmp_path, fake, providers={"parallel": {"mode": "ultra"}})
    assert '"providers.parallel.mode" must be' in str(caught.value)


def test_filters_go_inside_advanced_settings() -> None:
    now = datetime(2026, 12, 4, 12, 0, tzinfo=UTC)
    params, unsupported = parallel.filter_params(
        {"count": 4, "freshness": "week", "country": "DE", "language": "de"}, now=now
    )
    assert params == {
        "advanced_settings": {"max_results": 4, "source_policy": {"after_date": "2026-11-27"}}
    }
    assert unsupported == ["country", "language"]
    assert parallel.filter_params({"count": 11}) == ({}, ["count"])  # past 10 bills extra


def test_a_long_query_is_cut_for_search_queries() -> None:
    fitted, warning = parallel.fit_query(" ".join(["word"] * 60))
    assert len(fitted) <= 200 and warning and "Parallel" in warning


def test_forced_parallel_answers_through_the_cli(tmp_path, fake) -> None:
    fake.route(PATH, api_reply("parallel-ok.json"))
    found = forced_call(Env(tmp_path), fake, "parallel", KEY, count=3, country="DE")
    assert found["error"] is None, found
    assert found["provider_used"] == "parallel" and found["attempts"][0]["units"] == 1
    assert fake.requests_to(PATH)[0].json()["advanced_settings"] == {"max_results": 3}
    assert 'country "DE"' in found["warning"]  # Parallel has no country field
    assert_key_only_in_headers(fake, KEY)
