"""openclaw.json: locations, both layouts, JSON5, ${VAR}, key lookup order, defaults, errors."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from smart_search.errors import CANNOT_READ_CONFIG, ConfigError
from smart_search.host.config import DEFAULT_GEMINI_MODEL, load_settings
from tests.conftest import idle


def settings_from(tmp_path: Path, text: str, **extra_env: str) -> Any:
    path = tmp_path / "openclaw.json"
    path.write_text(text)
    environ = {"HOME": str(tmp_path / "home"), "OPENCLAW_CONFIG_PATH": str(path), **extra_env}
    return load_settings(environ)


def test_defaults_without_any_file(tmp_path: Path) -> None:
    s = load_settings({"HOME": str(tmp_path)})
    assert s.gemini_model == DEFAULT_GEMINI_MODEL != "gemini-2.0-flash"
    assert s.default_provider == "brave" and s.strict_agents is False
    assert (s.retry_max_attempts, s.retry_base_delay) == (3, 500)
    assert (s.web_fetch_min_interval_ms, s.circuit_failure_threshold) == (2000, 3)
    assert (s.circuit_reset_seconds, s.request_timeout_ms, s.total_timeout_ms) == (60, 10000, 30000)
    assert (s.lock_timeout_ms, s.log_retention_days, s.max_result_chars) == (5000, 30, 10000)
    assert s.default_allocation == idle({"gemini": 5, "brave": 0})
    assert "share price" in s.finance_keywords and "nasa" in s.brave_keywords
    assert s.state_dir == str(tmp_path / ".openclaw" / "workspace" / "shared")
    assert s.endpoints["brave"] == "https://api.search.brave.com"
    assert s.api_keys == dict.fromkeys(s.api_keys) and set(s.api_keys) >= {"gemini", "brave"}


def test_openclaw_layout_json5_with_comments_and_trailing_commas(tmp_path: Path) -> None:
    s = settings_from(
        tmp_path,
        """{
          // OpenClaw writes JSON5
          skills: { entries: { "smart-search": { config: {
            default_provider: 'gemini', strict_agents: true,
            agent_allocations: { 'stock-analysis': { gemini: 15, brave: 0, }, },
            providers: { brave: { daily_limit: 10 } },
          } } } },
        }""",
    )
    assert s.default_provider == "gemini" and s.strict_agents is True
    assert s.agent_allocations == {"stock-analysis": idle({"gemini": 15, "brave": 0})}
    assert {p: s.daily_limits[p] for p in ("gemini", "brave")} == {"gemini": 1500, "brave": 10}


def test_spec_layout_is_accepted_too(tmp_path: Path) -> None:
    s = settings_from(
        tmp_path, json.dumps({"skills": {"smart-search": {"gemini_model": "gemini-2.5-flash"}}})
    )
    assert s.gemini_model == "gemini-2.5-flash"


def test_variable_substitution_and_escape(tmp_path: Path) -> None:
    def doc(state_dir: str) -> str:
        return json.dumps(
            {"skills": {"entries": {"smart-search": {"config": {"state_dir": state_dir}}}}}
        )

    s = settings_from(tmp_path, doc("${STATE_ROOT}/ss"), STATE_ROOT=str(tmp_path / "r"))
    assert s.state_dir == str(tmp_path / "r" / "ss")
    s = settings_from(tmp_path, doc("/x/$${STATE_ROOT}"), STATE_ROOT="/ignored")
    assert s.state_dir == "/x/${STATE_ROOT}"


def test_api_key_lookup_order(tmp_path: Path) -> None:
    def keys(doc: dict[str, Any], **env: str) -> tuple[str | None, str | None]:
        s = settings_from(tmp_path, json.dumps(doc), **env)
        return tuple(k.reveal() if k else None for k in (s.api_keys["gemini"], s.api_keys["brave"]))

    doc = {
        "env": {
            "GEMINI_API_KEY": "top-env",
            "vars": {"GEMINI_API_KEY": "top-vars", "BRAVE_API_KEY": "b-vars"},
        },
        "skills": {"entries": {"smart-search": {"env": {"GEMINI_API_KEY": "entry-env"}}}},
    }
    assert keys(doc, GEMINI_API_KEY="process") == ("process", "b-vars")
    assert keys(doc) == ("entry-env", "b-vars")
    del doc["skills"]
    assert keys(doc) == ("top-vars", "b-vars")
    del doc["env"]["vars"]
    assert keys(doc) == ("top-env", None)
    assert keys({"env": {"BRAVE_API_KEY": "${MY_BRAVE}"}}, MY_BRAVE="from-var") == (
        None,
        "from-var",
    )


def test_secret_never_renders() -> None:
    from smart_search.host.config import Secret

    secret = Secret("SENTINEL-KEY-123")
    assert "SENTINEL" not in repr(secret) and "SENTINEL" not in str(secret)
    assert "SENTINEL" not in repr({"k": secret})


@pytest.mark.parametrize(
    ("config", "key"),
    [
        ({"retry_max_attempts": "3"}, "retry_max_attempts"),
        ({"retry_max_attempts": True}, "retry_max_attempts"),
        ({"retry_max_attempts": 0}, "retry_max_attempts"),
        ({"strict_agents": "yes"}, "strict_agents"),
        ({"default_provider": "bing"}, "default_provider"),
        ({"finance_keywords": "stock"}, "finance_keywords"),
        ({"providers": {"brave": {"daily_limit": -1}}}, "providers.brave.daily_limit"),
        ({"providers": {"yahoo": {}}}, "providers.yahoo"),
        ({"agent_allocations": {"a": {"gemini": "5"}}}, "agent_allocations.a.gemini"),
        ({"agent_allocations": {"Bad Id": {"gemini": 5}}}, "agent_allocations.Bad Id"),
        ({"endpoints": {"brave": "http://example.com"}}, "endpoints.brave"),
        ({"endpoints": {"brave": "ftp://127.0.0.1"}}, "endpoints.brave"),
        ({"endpoints": {"yahoo": "https://yahoo.com"}}, "endpoints.yahoo"),
        ({"brave_count": 21}, "brave_count"),
        ({"timezone": 5}, "timezone"),
    ],
)
def test_bad_values_name_the_key(tmp_path: Path, config: dict[str, Any], key: str) -> None:
    doc = {"skills": {"entries": {"smart-search": {"config": config}}}}
    with pytest.raises(ConfigError) as info:
        settings_from(tmp_path, json.dumps(doc))
    assert f'"{key}"' in info.value.message


def test_loopback_http_endpoints_are_allowed(tmp_path: Path) -> None:
    doc = {
        "skills": {
            "entries": {
                "smart-search": {
                    "config": {
                        "endpoints": {
                            "brave": "http://127.0.0.1:8080/",
                            "gemini": "http://localhost:1",
                            "bing": "http://[::1]:9",
                            "google": "https://www.google.com",
                        }
                    }
                }
            }
        }
    }
    s = settings_from(tmp_path, json.dumps(doc))
    assert s.endpoints["brave"] == "http://127.0.0.1:8080"


def test_missing_named_file_and_unreadable_file(tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as info:
        load_settings({"HOME": str(tmp_path), "OPENCLAW_CONFIG_PATH": str(tmp_path / "nope.json")})
    assert info.value.message == CANNOT_READ_CONFIG
    directory = tmp_path / "dir.json"
    directory.mkdir()
    with pytest.raises(ConfigError) as info:
        load_settings({"HOME": str(tmp_path), "OPENCLAW_CONFIG_PATH": str(directory)})
    assert info.value.message == CANNOT_READ_CONFIG


def test_malformed_file_names_the_file_not_its_content(tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as info:
        settings_from(tmp_path, '{"env": {"BRAVE_API_KEY": "SENTINEL-SECRET"}, oops oops}')
    assert "openclaw.json" in info.value.message and "SENTINEL" not in info.value.message


def test_config_is_reread_on_every_call(env: Any) -> None:
    env.write_config({"agent_allocations": {"tech": {"gemini": 3}}})
    assert env.call("search_quota_status", {"agent_id": "tech"})["gemini"]["allocated"] == 3
    env.write_config({"agent_allocations": {"tech": {"gemini": 9}}})
    assert env.call("search_quota_status", {"agent_id": "tech"})["gemini"]["allocated"] == 9


def test_config_errors_reach_the_caller_as_config_error(env: Any) -> None:
    env.write_config({"retry_base_delay": "fast"})
    result = env.call("search_quota_status", {})
    assert result["error_code"] == "config_error" and '"retry_base_delay"' in result["error"]
    env.config_path.unlink()
    result = env.call("smart_search", {"query": "q", "agent_id": "a"})
    assert (result["error"], result["error_code"]) == (CANNOT_READ_CONFIG, "config_error")


def test_state_dir_resolution_order(tmp_path: Path) -> None:
    base = {"HOME": str(tmp_path / "h")}
    assert load_settings({**base, "OPENCLAW_STATE_DIR": "/oc"}).state_dir == "/oc/workspace/shared"
    # RULINGS 2 (changed): the workspace variable never moves the ledger.
    assert (
        load_settings(
            {**base, "OPENCLAW_WORKSPACE_DIR": "/ws", "OPENCLAW_STATE_DIR": "/oc"}
        ).state_dir
        == "/oc/workspace/shared"
    )
    assert (
        load_settings(
            {**base, "SMART_SEARCH_STATE_DIR": "/ss", "OPENCLAW_WORKSPACE_DIR": "/ws"}
        ).state_dir
        == "/ss"
    )


def test_an_allocation_that_is_not_an_object_shows_what_one_looks_like(tmp_path: Path) -> None:
    path = tmp_path / "openclaw.json"
    path.write_text(json.dumps({"skills": {"entries": {"smart-search": {
        "config": {"agent_allocations": {"cron": 5}}}}}}))  # fmt: skip
    with pytest.raises(ConfigError) as caught:
        load_settings({"HOME": str(tmp_path), "OPENCLAW_CONFIG_PATH": str(path)})
    # The example lists every registered API at its default allocation.
    example = json.dumps(idle({"gemini": 5, "brave": 0}))
    assert str(caught.value) == (
        f'Config key "agent_allocations.cron" must be an object like {example}.'
    )
