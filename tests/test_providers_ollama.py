"""Ollama's hosted web search (issue 30, point 1) through call_provider and the whole runner,
against a loopback fake that sends the answers Ollama documents (tests/fixtures/api/ollama-*.json).
Its keyless tier (an Ollama host the operator runs) is tested in test_keyless_tiers.py."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from smart_search import errors
from smart_search.host.config import Settings
from smart_search.sources.providers import ollama
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

KEY = "SENTINEL-OLLAMA-KEY-0001"
PATH = "/api/web_search"


def make_settings(tmp_path: Path, fake: FakeServer, **config: object) -> Settings:
    return provider_settings(tmp_path, fake, "ollama", KEY, **config)


def run(settings: Settings, query: str = "what is ollama", **kw: object) -> ProviderCall:
    return provider_call("ollama", settings, query, **kw)


def ok() -> Reply:
    return Reply(200, body=fixture_bytes("ollama-ok.json"))


def test_request_is_a_json_post_with_the_key_as_a_bearer_token_only(
    tmp_path: Path, fake: FakeServer
) -> None:
    fake.route(PATH, ok())
    record = run(make_settings(tmp_path, fake), query="what is ollama?")
    assert record.error is None
    (seen,) = fake.requests
    assert (seen.method, seen.path, seen.query) == ("POST", PATH, {})
    assert seen.headers["authorization"] == f"Bearer {KEY}"
    assert KEY not in seen.target and KEY.encode() not in seen.body
    assert seen.json() == {"query": "what is ollama?", "max_results": 10}


def test_results_are_title_url_snippet_and_junk_urls_are_dropped(
    tmp_path: Path, fake: FakeServer
) -> None:
    fake.route(PATH, ok())
    record = run(make_settings(tmp_path, fake))
    assert record.error is None and record.units == 1
    assert record.answer.results == [
        {"title": "Ollama", "url": "https://ollama.com/",
         "snippet": "Cloud models are now available in Ollama. Run the largest models on "
                    "datacenter hardware."},
        {"title": "What is Ollama? Introduction to the AI model management tool",
         "url": "https://www.hostinger.com/tutorials/what-is-ollama",
         "snippet": "Ollama is an open-source tool that runs large language models locally."},
        {"title": "", "url": "https://github.com/ollama/ollama", "snippet": ""},
    ]  # fmt: skip


def test_a_long_content_is_cut_to_a_snippet() -> None:
    body = b'{"results": [{"title": "t", "url": "https://e.example/", "content": "%s"}]}' % (
        b"word " * 400
    )
    (result,) = ollama.parse_response(response(200, body), None).results
    assert len(result["snippet"]) == ollama.SNIPPET_CHARS


@pytest.mark.parametrize("body", [fixture_bytes("ollama-empty.json"), b'{"results": [{"url": 1}]}'])
def test_empty_is_no_results_and_not_retried(tmp_path: Path, fake: FakeServer, body: bytes) -> None:
    fake.route(PATH, Reply(200, body=body), ok())
    record = run(make_settings(tmp_path, fake, retry_max_attempts=3))
    assert isinstance(record.error, errors.NoResults) and len(fake.requests) == 1


@pytest.mark.parametrize("body", [b"<html>", b"[]", b'{"results": "none"}'])
def test_unreadable_success_is_a_parse_error(tmp_path: Path, fake: FakeServer, body: bytes) -> None:
    fake.route(PATH, Reply(200, body=body))
    record = run(make_settings(tmp_path, fake, retry_max_attempts=1))
    assert isinstance(record.error, errors.ParseError)


@pytest.mark.parametrize(
    ("reply", "kind"),
    [(Reply(401, body=fixture_bytes("ollama-401.json")), errors.AuthFailed),
     (Reply(403, body=b"{}"), errors.AuthFailed),
     (Reply(429, body=fixture_bytes("ollama-429.json"), headers={"retry-after": "0"}),
      errors.RateLimited),
     (Reply(502, body=b"bad gateway"), errors.ServerError),
     (Reply(503, body=b"busy"), errors.ProviderOverloaded)],
    ids=["401", "403", "429", "502", "503"],
)  # fmt: skip
def test_error_statuses(
    tmp_path: Path, fake: FakeServer, caplog: pytest.LogCaptureFixture, reply: Reply, kind: type
) -> None:
    caplog.set_level(logging.DEBUG)
    fake.route(PATH, reply)
    record = run(make_settings(tmp_path, fake, retry_max_attempts=1))
    assert_api_error(record, kind, "Ollama", reply.status, KEY, caplog.text)
    assert record.observation is None


def test_a_429_carries_its_retry_after_and_is_retried(tmp_path: Path, fake: FakeServer) -> None:
    fake.route(PATH, Reply(429, body=b"{}", headers={"retry-after": "7"}))
    one = run(make_settings(tmp_path, fake, retry_max_attempts=1))
    assert isinstance(one.error, errors.RateLimited) and one.error.retry_after == 7
    fake.route(PATH, Reply(429, body=b"{}", headers={"retry-after": "0"}), ok())
    record = run(make_settings(tmp_path, fake, retry_max_attempts=3))
    assert record.error is None and record.retries == 1 and record.units == 1


@pytest.mark.parametrize(
    ("filters", "body", "unsupported"),
    [({"count": 3}, {"max_results": 3}, []), ({"count": 11}, {}, ["count"]),
     ({"freshness": "day", "country": "US", "language": "en"}, {},
      ["freshness", "country", "language"])],
)  # fmt: skip
def test_filters_map_to_max_results_only(filters: dict, body: dict, unsupported: list) -> None:
    assert ollama.filter_params(filters) == (body, unsupported)


# --- the whole runner ---


def test_forced_ollama_answers_with_count_and_status_shows_its_windows(
    tmp_path: Path, fake: FakeServer
) -> None:
    env = Env(tmp_path)
    install_key(env, fake, "ollama", KEY)
    fake.route(PATH, ok())
    found, proc = forced_cli(env, "ollama", count=2)
    assert found["error"] is None, found
    assert found["provider_used"] == "ollama" and found["attempts"][0]["units"] == 1
    assert len(found["results"]) == 2
    assert fake.requests_to(PATH)[0].json() == {"query": "james webb launch", "max_results": 2}
    windows = env.call("search_quota_status")["windows"]["ollama"]
    assert (windows["unit"], windows["daily"]["limit"], windows["monthly"]["limit"]) == (
        "request", 33, 1000)  # fmt: skip
    assert windows["daily"]["used"] == 1
    assert_key_never_written(env, KEY, proc.stdout, proc.stderr)


def test_a_key_ollama_echoes_back_is_never_written(tmp_path: Path, fake: FakeServer) -> None:
    echo = Reply(401, json={"error": f"unauthorized: key {KEY} is not valid"})
    assert_echoed_key_stays_secret(Env(tmp_path), fake, "ollama", PATH, KEY, echo)


def test_a_scheduled_agents_plan_walks_to_ollama_when_provider_order_names_it(
    tmp_path: Path, fake: FakeServer
) -> None:
    def install(env: Env, fake: FakeServer, **config: object) -> None:
        install_key(env, fake, "ollama", KEY, **config)

    assert_walked_only_when_named(Env(tmp_path), fake, "ollama", PATH, install, KEY)
