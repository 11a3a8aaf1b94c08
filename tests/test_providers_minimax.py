"""MiniMax Token Plan search (issue 30, point 1) through call_provider and the whole runner,
against a loopback fake that sends the answers MiniMax documents
(tests/fixtures/api/minimax-*.json): its failures may come as HTTP 200 with a `base_resp` code."""

from __future__ import annotations

import logging
from pathlib import Path

import orjson
import pytest

from smart_search import errors
from smart_search.host.config import Settings
from smart_search.sources.providers import minimax
from smart_search.sources.providers.calls import ProviderCall
from tests.conftest import Env
from tests.fakes import FakeServer, Reply, fixture_bytes
from tests.provider_support import (
    assert_api_error,
    assert_echoed_key_stays_secret,
    assert_key_never_written,
    assert_walked_only_when_named,
    forced_cli,
    install_key,
    provider_call,
    provider_settings,
    response,
)

KEY = "SENTINEL-MINIMAX-KEY-0001"
PATH = "/v1/coding_plan/search"


def make_settings(tmp_path: Path, fake: FakeServer, **config: object) -> Settings:
    return provider_settings(tmp_path, fake, "minimax", KEY, **config)


def run(settings: Settings, query: str = "james webb launch", **kw: object) -> ProviderCall:
    return provider_call("minimax", settings, query, **kw)


def ok() -> Reply:
    return Reply(200, body=fixture_bytes("minimax-ok.json"))


def test_request_is_a_json_post_of_q_with_the_key_in_its_header_only(
    tmp_path: Path, fake: FakeServer
) -> None:
    fake.route(PATH, ok())
    record = run(make_settings(tmp_path, fake), query="when did JWST launch")
    assert record.error is None
    (seen,) = fake.requests
    assert (seen.method, seen.path, seen.query) == ("POST", PATH, {})
    assert seen.headers["authorization"] == f"Bearer {KEY}"
    assert KEY not in seen.target and KEY.encode() not in seen.body
    assert seen.json() == {"q": "when did JWST launch"}


def test_organic_results_are_title_url_snippet_and_junk_links_are_dropped(
    tmp_path: Path, fake: FakeServer
) -> None:
    fake.route(PATH, ok())
    record = run(make_settings(tmp_path, fake))
    assert record.error is None and record.units == 1
    assert record.answer.results == [
        {"title": "James Webb Space Telescope - NASA Science",
         "url": "https://science.nasa.gov/mission/webb/",
         "snippet": "Webb launched on Dec. 25th 2021 and is the premier observatory of the "
                    "next decade."},
        {"title": "Webb's launch - ESA",
         "url": "https://www.esa.int/Science_Exploration/Space_Science/Webb/Webb_launch",
         "snippet": ""},
    ]  # fmt: skip


def test_more_than_ten_results_are_cut_to_ten() -> None:
    many = [{"title": f"t{i}", "link": f"https://e.example/{i}", "snippet": ""} for i in range(14)]
    body = orjson.dumps({"organic": many, "base_resp": {"status_code": 0}})
    assert len(minimax.parse_response(response(200, body), None).results) == 10


@pytest.mark.parametrize(
    "body", [fixture_bytes("minimax-empty.json"), b'{"base_resp": {"status_code": 0}}'],
)  # fmt: skip
def test_empty_is_no_results_and_not_retried(tmp_path: Path, fake: FakeServer, body: bytes) -> None:
    fake.route(PATH, Reply(200, body=body), ok())
    record = run(make_settings(tmp_path, fake, retry_max_attempts=3))
    assert isinstance(record.error, errors.NoResults) and len(fake.requests) == 1
    assert str(record.error) == "MiniMax returned no results."


@pytest.mark.parametrize(
    ("name", "kind"),
    [("minimax-1004.json", errors.AuthFailed), ("minimax-2049.json", errors.AuthFailed),
     ("minimax-1008.json", errors.QuotaExhausted), ("minimax-2056.json", errors.QuotaExhausted),
     ("minimax-1002.json", errors.RateLimited)],
)  # fmt: skip
def test_a_failure_inside_a_200_is_its_class_and_bills_nothing(
    tmp_path: Path, fake: FakeServer, caplog: pytest.LogCaptureFixture, name: str, kind: type
) -> None:
    caplog.set_level(logging.DEBUG)
    fake.route(PATH, Reply(200, body=fixture_bytes(name)))
    record = run(make_settings(tmp_path, fake, retry_max_attempts=1))
    assert type(record.error) is kind and record.units == 0
    code = orjson.loads(fixture_bytes(name))["base_resp"]["status_code"]
    assert str(record.error) == f"MiniMax API error: 200 (code {code})"
    # The provider's own words are never copied into the message.
    assert "balance" not in str(record.error) and KEY not in caplog.text
    spent = kind is errors.QuotaExhausted
    assert (record.observation is not None) is spent
    if spent:
        assert record.observation == {
            "exhausted": "day", "why": f"MiniMax code {code} (Token Plan usage spent)"}  # fmt: skip


@pytest.mark.parametrize(
    ("reply", "kind"),
    [(Reply(401, json={"base_resp": {"status_code": 1004}}), errors.AuthFailed),
     (Reply(403, body=b"forbidden"), errors.AuthFailed),
     (Reply(402, body=fixture_bytes("minimax-1008.json")), errors.QuotaExhausted),
     (Reply(429, body=b"slow down", headers={"retry-after": "0"}), errors.RateLimited),
     (Reply(500, body=b"oops"), errors.ServerError)],
    ids=["401", "403", "402-balance", "429", "500"],
)  # fmt: skip
def test_error_statuses(
    tmp_path: Path, fake: FakeServer, caplog: pytest.LogCaptureFixture, reply: Reply, kind: type
) -> None:
    caplog.set_level(logging.DEBUG)
    fake.route(PATH, reply)
    record = run(make_settings(tmp_path, fake, retry_max_attempts=1))
    assert type(record.error) is kind and record.units == 0
    assert str(record.error).startswith(f"MiniMax API error: {reply.status}")
    if reply.status in (403, 429, 500):
        assert_api_error(record, kind, "MiniMax", reply.status, KEY, caplog.text)


def test_rate_limit_is_retried_after_its_retry_after_then_answers(
    tmp_path: Path, fake: FakeServer
) -> None:
    fake.route(PATH, Reply(429, body=b"{}", headers={"retry-after": "1"}), ok())
    record = run(make_settings(tmp_path, fake, retry_max_attempts=3))
    assert record.error is None and record.retries == 1 and record.units == 1
    first, second = fake.requests
    assert second.arrived - first.arrived >= 0.9  # Retry-After: 1 was waited out


def test_spent_usage_is_never_retried(tmp_path: Path, fake: FakeServer) -> None:
    fake.route(PATH, Reply(200, body=fixture_bytes("minimax-2056.json")), ok())
    record = run(make_settings(tmp_path, fake, retry_max_attempts=5))
    assert isinstance(record.error, errors.QuotaExhausted) and len(fake.requests) == 1


@pytest.mark.parametrize(
    ("status", "body", "units"),
    [(200, fixture_bytes("minimax-ok.json"), 1), (200, fixture_bytes("minimax-empty.json"), 1),
     (200, fixture_bytes("minimax-2056.json"), 0), (200, b"not json", 1),
     (401, fixture_bytes("minimax-1004.json"), 0), (500, b"", 0)],
)  # fmt: skip
def test_billed_requests(status: int, body: bytes, units: int) -> None:
    assert minimax.billed_units(response(status, body), None) == units


@pytest.mark.parametrize(
    ("filters", "unsupported"),
    [({"count": 5}, []), ({"count": 10}, []), ({"count": 11}, ["count"]),
     ({"freshness": "week", "country": "DE", "language": "de"},
      ["freshness", "country", "language"])],
)  # fmt: skip
def test_minimax_takes_no_filter_parameter(filters: dict, unsupported: list) -> None:
    assert minimax.filter_params(filters) == ({}, unsupported)


# --- the whole runner ---


def test_forced_minimax_answers_cut_to_count_and_status_shows_its_windows(
    tmp_path: Path, fake: FakeServer
) -> None:
    env = Env(tmp_path)
    install_key(env, fake, "minimax", KEY)
    fake.route(PATH, ok())
    found, proc = forced_cli(env, "minimax", count=1, freshness="week")
    assert found["error"] is None, found
    assert found["provider_used"] == "minimax" and found["attempts"][0]["units"] == 1
    assert [r["url"] for r in found["results"]] == ["https://science.nasa.gov/mission/webb/"]
    assert "MiniMax could not apply these filters: freshness" in found["warning"]
    assert fake.requests_to(PATH)[0].json() == {"q": "james webb launch"}
    windows = env.call("search_quota_status")["windows"]["minimax"]
    assert windows["unit"] == "request"
    assert (windows["daily"]["limit"], windows["monthly"]["limit"]) == (100, 3000)
    assert (windows["daily"]["used"], windows["monthly"]["used"]) == (1, 1)
    assert_key_never_written(env, KEY, proc.stdout, proc.stderr)


def test_a_key_minimax_echoes_back_is_never_written(tmp_path: Path, fake: FakeServer) -> None:
    echo = Reply(200, json={"base_resp": {"status_code": 2049, "status_msg": f"bad key {KEY}"}})
    assert_echoed_key_stays_secret(Env(tmp_path), fake, "minimax", PATH, KEY, echo)


def test_a_scheduled_agents_plan_walks_to_minimax_when_provider_order_names_it(
    tmp_path: Path, fake: FakeServer
) -> None:
    def install(env: Env, fake: FakeServer, **config: object) -> None:
        install_key(env, fake, "minimax", KEY, **config)

    assert_walked_only_when_named(Env(tmp_path), fake, "minimax", PATH, install, KEY)


def test_spent_usage_falls_through_and_marks_the_day_exhausted(
    tmp_path: Path, fake: FakeServer
) -> None:
    env = Env(tmp_path)
    install_key(env, fake, "minimax", KEY)
    fake.route(PATH, Reply(200, body=fixture_bytes("minimax-2056.json")))
    fake.route("/html/", Reply(404, b"no"))
    found, _ = forced_cli(env, "minimax", query="plain words")
    first = found["attempts"][0]
    assert (first["provider"], first["error_code"], first["units"]) == (
        "minimax", "quota_exhausted", 0)  # fmt: skip
    until = env.call("search_quota_status")["windows"]["minimax"]["exhausted_until"]
    assert until is not None
    # Exhausted: the next forced call does not ask MiniMax at all.
    asked = len(fake.requests_to(PATH))
    again, _ = forced_cli(env, "minimax", query="other words")
    assert again["attempts"][0]["error_code"] == "quota_exhausted"
    assert len(fake.requests_to(PATH)) == asked
