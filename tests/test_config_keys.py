"""The config key table: it drives the checks, the defaults, the unknown-key warning and the docs
page docs/configuration-keys.md, and the committed page is what the table writes."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from smart_search.errors import ConfigError
from smart_search.host import config, config_keys
from smart_search.host.config_entry import api_key_sources, find_api_key, skill_section
from smart_search.host.config_keys import KEYS, ConfigKey, fields_of, markdown
from tests.conftest import REPO

PAGE = REPO / "docs" / "configuration-keys.md"
WHOLE_KEYS = [key for key in KEYS if key.kind == "whole"]


def load(tmp_path: Path, section: dict[str, Any], **env: str) -> Any:
    path = tmp_path / "openclaw.json"
    path.write_text(json.dumps({"skills": {"entries": {"smart-search": {"config": section}}}}))
    return config.load_settings(
        {"HOME": str(tmp_path / "home"), "OPENCLAW_CONFIG_PATH": str(path), **env}
    )


def test_the_committed_page_is_what_the_table_writes() -> None:
    assert PAGE.read_text() == markdown(), (
        "docs/configuration-keys.md is stale: "
        "python3 -m smart_search.host.config_keys --markdown > docs/configuration-keys.md"
    )


def test_a_key_added_to_the_table_but_not_the_page_fails_the_comparison(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    extra = ConfigKey("new_knob", "whole", 1, "a key someone forgot to document", 0, 9)
    monkeypatch.setattr(config_keys, "KEYS", (*KEYS, extra))
    assert "| `new_knob` |" in markdown()
    assert PAGE.read_text() != markdown()


def test_every_key_has_its_own_row_on_the_page() -> None:
    rows = [line for line in PAGE.read_text().splitlines() if line.startswith("| `")]
    assert [row.split("`")[1] for row in rows] == [key.name for key in KEYS]


def test_the_page_regenerates_from_the_command_line() -> None:
    command = [sys.executable, "-m", "smart_search.host.config_keys"]
    proc = subprocess.run([*command, "--markdown"], capture_output=True, text=True, cwd=REPO)
    assert (proc.returncode, proc.stdout) == (0, PAGE.read_text())
    proc = subprocess.run(command, capture_output=True, text=True, cwd=REPO)
    assert proc.returncode == 2 and "usage" in proc.stderr


def test_every_kind_has_a_check_and_a_docs_type() -> None:
    kinds = {key.kind for key in KEYS} - {"providers"}
    assert kinds - set(config._CHECKS) == {"redis_url", "redis_prefix"}  # read by the backend
    assert {key.kind for key in KEYS} <= set(config_keys.KIND_TYPES)
    names = [key.name for key in KEYS]
    assert len(names) == len(set(names))


def test_defaults_come_from_the_table(tmp_path: Path) -> None:
    s = config.load_settings({"HOME": str(tmp_path)})
    for key in WHOLE_KEYS:
        if "." not in key.name:
            assert getattr(s, key.name) == key.default, key.name
    for key in fields_of("cache"):
        assert s.cache[key.name.split(".")[1]] == key.default, key.name
    for key in fields_of("providers.<p>"):
        if isinstance(key.default, dict):
            assert getattr(s, key.field) == key.default, key.name
    assert s.finance_keywords == config_keys.DEFAULT_FINANCE_KEYWORDS
    assert s.endpoints == config_keys.DEFAULT_ENDPOINTS
    assert s.state_backend == {
        "kind": "files",
        "on_unavailable": "refuse",
        "on_state_lost": "restore",
    }


@pytest.mark.parametrize("key", WHOLE_KEYS, ids=[key.name for key in WHOLE_KEYS])
def test_bounds_come_from_the_table(tmp_path: Path, key: ConfigKey) -> None:
    parent, _, leaf = key.name.rpartition(".")

    def section(value: int) -> dict[str, Any]:
        return {parent: {leaf: value}} if parent else {leaf: value}

    assert key.low is not None and key.high is not None
    for edge in (key.low, key.high):
        load(tmp_path, section(edge))
    for outside in (key.low - 1, key.high + 1):
        with pytest.raises(ConfigError) as info:
            load(tmp_path, section(outside))
        assert info.value.message == (
            f'Config key "{key.name}" must be from {key.low} to {key.high}.'
        )


def sample(key: ConfigKey, provider: str = "gemini") -> Any:
    """A valid value for `key`: its default as JSON, or one chosen where there is none."""
    value = key.default[provider] if isinstance(key.default, dict) and provider else key.default
    if key.name.endswith("max_units_per_call"):
        return 1
    return list(value) if isinstance(value, tuple) else value


def test_every_key_in_the_table_is_known(tmp_path: Path) -> None:
    section = {key.name: sample(key, "") for key in KEYS if "." not in key.name}
    section["providers"] = {
        p: {key.name.rsplit(".", 1)[1]: sample(key, p) for key in fields_of("providers.<p>")}
        for p in config.PROVIDERS
    }
    section["cache"] = {key.name.split(".")[1]: key.default for key in fields_of("cache")}
    assert load(tmp_path, section).warnings == ()


def test_a_key_missing_from_the_table_is_unknown_with_the_nearest_hint() -> None:
    found = config_keys.unknown_keys(
        {"cache_ttl": 5, "retry_max_atempts": 2, "providers": {"brave": {"dayly_limit": 1}}}
    )
    assert found == [
        ("cache_ttl", "cache"),
        ("retry_max_atempts", "retry_max_attempts"),
        ("providers.brave.dayly_limit", "providers.brave.daily_limit"),
    ]


def test_a_per_provider_rule_comes_from_the_table(tmp_path: Path) -> None:
    (unit,) = [key for key in fields_of("providers.<p>") if key.name.endswith(".unit")]
    assert unit.choices == {
        "gemini": ("search_query", "request"), "brave": ("request",), "tavily": ("credit",),
        "exa": ("request",), "serper": ("credit",)}  # fmt: skip
    with pytest.raises(ConfigError) as info:
        load(tmp_path, {"providers": {"brave": {"unit": "search_query"}}})
    assert info.value.message == 'Config key "providers.brave.unit" must be "request".'
    s = load(tmp_path, {"gemini_model": "gemini-2.5-flash"})
    assert s.units == {"gemini": "request", "brave": "request", "tavily": "credit",
                       "exa": "request", "serper": "credit"}  # fmt: skip
    assert s.max_units_per_call == {"gemini": 1, "brave": 1, "tavily": 1, "exa": 1, "serper": 1}


@pytest.mark.parametrize(
    "doc",
    [
        {"env": {"GEMINI_API_KEY": "top-env", "vars": {"GEMINI_API_KEY": "top-vars"}}},
        {"env": {"BRAVE_API_KEY": "${MY_BRAVE}"}, "skills": {"smart-search": {}}},
        {"skills": {"smart-search": {"env": {"BRAVE_API_KEY": "legacy-entry"}}}},
        {
            "env": {"vars": {"GEMINI_API_KEY": "top-vars"}},
            "skills": {"entries": {"smart-search": {"env": {"GEMINI_API_KEY": " entry "}}}},
        },
    ],
)
def test_config_and_doctor_walk_the_same_key_sources(tmp_path: Path, doc: dict[str, Any]) -> None:
    from smart_search.shell.doctor import _key_sources

    path = tmp_path / "openclaw.json"
    path.write_text(json.dumps(doc))
    env = {"HOME": str(tmp_path), "OPENCLAW_CONFIG_PATH": str(path), "MY_BRAVE": "from-var"}
    settings = config.load_settings(env)
    skill_env = skill_section(doc)[1]
    reported = _key_sources(env, doc, skill_env, None)
    for provider, name in (("gemini", "GEMINI_API_KEY"), ("brave", "BRAVE_API_KEY")):
        loaded = settings.api_keys[provider]
        found = find_api_key(name, api_key_sources(env, doc, skill_env), env)
        assert (found[1] if found else None) == (loaded.reveal() if loaded else None)
        assert reported[provider]["source"] == (found[0] if found else None)
        assert reported[provider]["length"] == (len(found[1]) if found else None)
    assert any(r["set"] for r in reported.values())
