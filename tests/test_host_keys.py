"""Keys the host already holds (issue 30, points 2 and 3): when smart-search's own config names no
key, the key OpenClaw holds for the provider's web search (host/host_keys.py), `${VAR}`, `$VAR`
and SecretRefs resolved as OpenClaw documents them (host/openclaw/secret_refs.py); doctor and
search_quota_status say where each key came from, never the key."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from smart_search.errors import ConfigError
from smart_search.host import host_keys
from smart_search.host.config import load_settings
from smart_search.host.openclaw.dotenv import parse
from smart_search.sources import registry
from smart_search.sources.source import Source
from tests.conftest import REPO, Env, assert_valid_result
from tests.fakes import FakeServer, Reply

SENTINEL = "SENTINEL-HOSTKEY-9f8e7d6c5b"
OTHER = "SENTINEL-OTHER-1a2b3c4d"
OPENCLAW = "(OpenClaw)"


def plugin_key(plugin: str, value: Any) -> dict[str, Any]:
    return {"plugins": {"entries": {plugin: {"config": {"webSearch": {"apiKey": value}}}}}}


def merged(*docs: dict[str, Any]) -> dict[str, Any]:
    from smart_search.host.openclaw.includes import deep_merge

    out: dict[str, Any] = {}
    for doc in docs:
        out = deep_merge(out, doc)
    return out


def settings_for(tmp_path: Path, doc: dict[str, Any], **variables: str) -> Any:
    path = tmp_path / "oc" / "openclaw.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(doc))
    environ = {
        "HOME": str(tmp_path / "home"),
        "OPENCLAW_CONFIG_PATH": str(path),
        "OPENCLAW_STATE_DIR": str(tmp_path / "oc"),
        **variables,
    }
    return load_settings(environ)


def private_file(path: Path, text: str, mode: int = 0o600) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    path.chmod(mode)
    return path


# --- each place OpenClaw keeps a key ------------------------------------------------------------


@pytest.mark.parametrize(
    ("doc", "provider", "origin"),
    [
        (
            plugin_key("brave", SENTINEL),
            "brave",
            "plugins.entries.brave.config.webSearch.apiKey",
        ),
        (
            {"tools": {"web": {"search": {"brave": {"apiKey": SENTINEL}}}}},
            "brave",
            "tools.web.search.brave.apiKey",
        ),
        ({"tools": {"web": {"search": {"apiKey": SENTINEL}}}}, "brave", "tools.web.search.apiKey"),
        (
            plugin_key("google", SENTINEL),
            "gemini",
            "plugins.entries.google.config.webSearch.apiKey",
        ),
        (
            {"models": {"providers": {"google": {"apiKey": SENTINEL}}}},
            "gemini",
            "models.providers.google.apiKey",
        ),
        (
            plugin_key("tavily", SENTINEL),
            "tavily",
            "plugins.entries.tavily.config.webSearch.apiKey",
        ),
        (plugin_key("exa", SENTINEL), "exa", "plugins.entries.exa.config.webSearch.apiKey"),
        (
            plugin_key("serper", SENTINEL),
            "serper",
            "plugins.entries.serper.config.webSearch.apiKey",
        ),
    ],
)
def test_each_place_openclaw_keeps_a_key(
    tmp_path: Path, doc: dict[str, Any], provider: str, origin: str
) -> None:
    settings = settings_for(tmp_path, doc)
    assert settings.api_keys[provider].reveal() == SENTINEL
    assert settings.key_origins[provider] == f"{origin} {OPENCLAW}"
    others = [p for p, key in settings.api_keys.items() if key is not None and p != provider]
    assert others == []  # the key went to its own provider only


def test_the_global_dotenv_is_read_for_the_key_variables(tmp_path: Path) -> None:
    dotenv = tmp_path / "oc" / ".env"
    private_file(dotenv, f"# keys\nexport TAVILY_API_KEY='{SENTINEL}'\nEXA_API_KEY = {OTHER} # c\n")
    settings = settings_for(tmp_path, {})
    assert settings.api_keys["tavily"].reveal() == SENTINEL
    assert settings.api_keys["exa"].reveal() == OTHER
    assert settings.key_origins["tavily"] == f"TAVILY_API_KEY from {dotenv} {OPENCLAW}"


def test_dotenv_lines_as_openclaw_reads_them() -> None:
    assert parse("A=1\n# B=2\nexport C=\"x\\ny\"\nD='q # r'\nE=v # note\nnot a line\n F = w ") == {
        "A": "1",
        "C": "x\ny",
        "D": "q # r",
        "E": "v",
        "F": "w",
    }


# --- precedence ----------------------------------------------------------------------------------


def test_smart_searchs_own_config_wins_over_what_openclaw_holds(tmp_path: Path) -> None:
    own = {"skills": {"entries": {"smart-search": {"env": {"BRAVE_API_KEY": OTHER}}}}}
    settings = settings_for(tmp_path, merged(own, plugin_key("brave", SENTINEL)))
    assert settings.api_keys["brave"].reveal() == OTHER
    assert settings.key_origins["brave"] == 'skills.entries["smart-search"].env'


def test_the_process_environment_wins_over_the_plugin_entry(tmp_path: Path) -> None:
    settings = settings_for(tmp_path, plugin_key("brave", SENTINEL), BRAVE_API_KEY=OTHER)
    assert settings.api_keys["brave"].reveal() == OTHER
    assert settings.key_origins["brave"] == "environment"


def test_openclaws_places_in_its_order(tmp_path: Path) -> None:
    # The plugin entry before the legacy keys, the legacy keys before the global .env.
    legacy = {"tools": {"web": {"search": {"apiKey": OTHER, "brave": {"apiKey": OTHER}}}}}
    private_file(tmp_path / "oc" / ".env", f"BRAVE_API_KEY={OTHER}\n")
    both = settings_for(tmp_path, merged(legacy, plugin_key("brave", SENTINEL)))
    assert both.api_keys["brave"].reveal() == SENTINEL
    legacy_only = settings_for(tmp_path, legacy)
    assert legacy_only.key_origins["brave"] == f"tools.web.search.brave.apiKey {OPENCLAW}"
    # Gemini: its plugin entry, then GEMINI_API_KEY (.env), then the Google model provider's key.
    models = {"models": {"providers": {"google": {"apiKey": OTHER}}}}
    private_file(tmp_path / "oc" / ".env", f"GEMINI_API_KEY={SENTINEL}\n")
    gemini = settings_for(tmp_path, models)
    assert gemini.api_keys["gemini"].reveal() == SENTINEL
    assert gemini.key_origins["gemini"].startswith("GEMINI_API_KEY from ")


# --- ${VAR}, $VAR and SecretRefs -----------------------------------------------------------------


def test_variables_in_a_key_are_substituted(tmp_path: Path) -> None:
    inline = settings_for(tmp_path, plugin_key("brave", "${HOST_KEY}"), HOST_KEY=SENTINEL)
    assert inline.api_keys["brave"].reveal() == SENTINEL
    shorthand = settings_for(tmp_path, plugin_key("brave", "$HOST_KEY"), HOST_KEY=SENTINEL)
    assert shorthand.api_keys["brave"].reveal() == SENTINEL
    # `env.vars` is part of OpenClaw's environment too.
    doc = merged(plugin_key("exa", "${FROM_VARS}"), {"env": {"vars": {"FROM_VARS": OTHER}}})
    assert settings_for(tmp_path, doc).api_keys["exa"].reveal() == OTHER


def test_an_unset_variable_leaves_no_key_and_says_which(tmp_path: Path) -> None:
    settings = settings_for(tmp_path, plugin_key("brave", "${NOT_SET_ANYWHERE}"))
    assert settings.api_keys["brave"] is None
    (note,) = settings.key_notes["brave"]
    assert "NOT_SET_ANYWHERE" in note and "is not set" in note


def test_env_secretref(tmp_path: Path) -> None:
    ref = {"source": "env", "provider": "default", "id": "HOST_KEY"}
    settings = settings_for(tmp_path, plugin_key("tavily", ref), HOST_KEY=SENTINEL)
    assert settings.api_keys["tavily"].reveal() == SENTINEL
    missing = settings_for(tmp_path, plugin_key("tavily", ref))
    assert missing.api_keys["tavily"] is None
    assert "env SecretRef to HOST_KEY" in missing.key_notes["tavily"][0]
    # An allowlist on the env provider is enforced.
    fenced = {"secrets": {"providers": {"default": {"source": "env", "allowlist": ["OTHER"]}}}}
    denied = settings_for(tmp_path, merged(fenced, plugin_key("tavily", ref)), HOST_KEY=SENTINEL)
    assert denied.api_keys["tavily"] is None
    assert "allowlist" in denied.key_notes["tavily"][0]


def test_file_secretref_json_and_single_value(tmp_path: Path) -> None:
    secrets = private_file(tmp_path / "s" / "secrets.json", json.dumps({"web": {"b/x": SENTINEL}}))
    single = private_file(tmp_path / "s" / "exa.txt", OTHER + "\n")
    providers = {
        "main": {"source": "file", "path": str(secrets)},
        "one": {"source": "file", "path": str(single), "mode": "singleValue"},
    }
    doc = merged(
        {"secrets": {"providers": providers}},
        plugin_key("brave", {"source": "file", "provider": "main", "id": "/web/b~1x"}),
        plugin_key("exa", {"source": "file", "provider": "one", "id": "value"}),
    )
    settings = settings_for(tmp_path, doc)
    assert settings.api_keys["brave"].reveal() == SENTINEL
    assert settings.api_keys["exa"].reveal() == OTHER


@pytest.mark.parametrize(
    ("setup", "says"),
    [
        ("missing", "does not exist"),
        ("group-readable", "is not private"),
        ("symlink", "symbolic link"),
        ("no-pointer", "holds nothing at /web/brave"),
        ("not-json", "is not valid JSON"),
        ("no-provider", 'secrets provider "main", not configured'),
    ],
)
def test_a_file_secretref_that_cannot_be_read_is_a_note_not_a_crash(
    tmp_path: Path, setup: str, says: str
) -> None:
    target = tmp_path / "s" / "secrets.json"
    if setup == "group-readable":
        private_file(target, json.dumps({"web": {"brave": SENTINEL}}), 0o640)
    elif setup == "symlink":
        real = private_file(tmp_path / "s" / "real.json", json.dumps({"web": {"brave": SENTINEL}}))
        target.symlink_to(real)
    elif setup == "no-pointer":
        private_file(target, json.dumps({"web": {}}))
    elif setup == "not-json":
        private_file(target, SENTINEL)
    providers = {} if setup == "no-provider" else {"main": {"source": "file", "path": str(target)}}
    ref = {"source": "file", "provider": "main", "id": "/web/brave"}
    doc = merged({"secrets": {"providers": providers}}, plugin_key("brave", ref))
    settings = settings_for(tmp_path, doc)
    assert settings.api_keys["brave"] is None
    (note,) = settings.key_notes["brave"]
    assert says in note and SENTINEL not in note
    assert note.startswith(f"plugins.entries.brave.config.webSearch.apiKey {OPENCLAW} ")


def test_exec_and_store_secretrefs_are_refused_saying_why(tmp_path: Path) -> None:
    marker = tmp_path / "ran"
    script = private_file(tmp_path / "bin" / "resolver", f"#!/bin/sh\ntouch {marker}\n", 0o700)
    vault = {"source": "exec", "command": str(script), "jsonOnly": False}
    doc = merged(
        {"secrets": {"providers": {"vault": vault}}},
        plugin_key("brave", {"source": "exec", "provider": "vault", "id": "brave"}),
        plugin_key("exa", {"source": "store", "provider": "default", "id": "EXA"}),
    )
    settings = settings_for(tmp_path, doc)
    assert settings.api_keys["brave"] is None and settings.api_keys["exa"] is None
    assert "never runs a command" in settings.key_notes["brave"][0]
    assert "secret store" in settings.key_notes["exa"][0]
    assert not marker.exists()  # the command was never run


def test_an_unreadable_secretref_ends_the_walk_as_in_openclaw(tmp_path: Path) -> None:
    # OpenClaw: an explicit SecretRef stays authoritative and does not fall through.
    ref = {"source": "env", "id": "UNSET_KEY"}
    legacy = {"tools": {"web": {"search": {"brave": {"apiKey": OTHER}}}}}
    settings = settings_for(tmp_path, merged(legacy, plugin_key("brave", ref)))
    assert settings.api_keys["brave"] is None
    assert "UNSET_KEY" in settings.key_notes["brave"][0]


def test_a_key_from_openclaw_that_cannot_go_in_a_header_is_a_config_error(tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as caught:
        settings_for(tmp_path, plugin_key("brave", SENTINEL + "\nX"))
    assert "plugins.entries.brave.config.webSearch.apiKey" in caught.value.message
    assert SENTINEL not in caught.value.message


# --- a self-hosted engine's endpoint -------------------------------------------------------------


def test_searxng_endpoint_from_openclaw(tmp_path: Path) -> None:
    doc = {"plugins": {"entries": {"searxng": {"config": {"webSearch": {"baseUrl": "${SX}"}}}}}}
    settings = settings_for(tmp_path, doc, SX="http://127.0.0.1:8888/")
    assert settings.endpoints["searxng"] == "http://127.0.0.1:8888"
    assert settings.key_origins["searxng"].startswith("plugins.entries.searxng.config.webSearch")
    env_only = settings_for(tmp_path, {}, SEARXNG_BASE_URL="http://10.0.0.5:8080")
    assert env_only.endpoints["searxng"] == "http://10.0.0.5:8080"
    public = settings_for(tmp_path, {}, SEARXNG_BASE_URL="http://searx.example.org")
    assert "searxng" not in public.endpoints
    assert "not an https:// URL" in public.key_notes["searxng"][0]
    own = {
        "skills": {
            "entries": {
                "smart-search": {"config": {"endpoints": {"searxng": "http://127.0.0.1:1"}}}
            }
        }
    }
    assert settings_for(tmp_path, own, SEARXNG_BASE_URL="http://10.0.0.5:8080").endpoints[
        "searxng"
    ] == "http://127.0.0.1:1"  # fmt: skip


def test_ollamas_own_host_from_openclaws_ollama_web_search_entry(tmp_path: Path) -> None:
    """OpenClaw's Ollama web search with a local `baseUrl` and no key: smart-search's keyless
    `ollama_local` tier uses that host; the hosted `ollama` API still needs a key; Firecrawl's
    free tier takes no endpoint from OpenClaw (it has no entry of its own there)."""
    entry = {"ollama": {"config": {"webSearch": {"baseUrl": "http://127.0.0.1:11434"}}},
             "firecrawl": {"config": {"webSearch": {"baseUrl": "http://127.0.0.1:3002"}}}}
    settings = settings_for(tmp_path, {"plugins": {"entries": entry}})
    assert settings.endpoints["ollama_local"] == "http://127.0.0.1:11434"
    assert settings.key_origins["ollama_local"].startswith("plugins.entries.ollama.config")
    assert settings.api_keys["ollama"] is None
    assert "firecrawl_free" not in settings.endpoints


# --- the declaration a source makes --------------------------------------------------------------


def test_a_new_source_needs_no_declaration_to_be_read_from_openclaw() -> None:
    api = Source(name="newapi", label="New", kind="api", order=99, endpoint="https://x.invalid")
    assert host_keys.places(api) == (
        "plugins.entries.newapi.config.webSearch.apiKey",
        "tools.web.search.newapi.apiKey",
        "$NEWAPI_API_KEY",
    )
    renamed = Source(
        name="grokish", label="G", kind="api", order=99, endpoint="https://x.invalid",
        key_variable="XAI_API_KEY", host_plugin="xai", host_keys=("$OTHER_KEY",),
    )  # fmt: skip
    assert host_keys.places(renamed) == (
        "plugins.entries.xai.config.webSearch.apiKey",
        "tools.web.search.grokish.apiKey",
        "$OTHER_KEY",
        "$XAI_API_KEY",
    )
    scraped = Source(name="eng", label="E", kind="web", order=9, endpoint="https://x.invalid")
    assert host_keys.places(scraped) == ()
    for source in registry.sources("api"):  # every registered API is read from OpenClaw
        assert host_keys.places(source)[0].endswith(".config.webSearch.apiKey")


# --- what status and doctor say ------------------------------------------------------------------


def test_status_lists_every_source_and_where_its_key_came_from(tmp_path: Path) -> None:
    env = Env(tmp_path)
    doc = json.loads(env.config_path.read_text())
    doc.update(plugin_key("brave", SENTINEL))
    env.config_path.write_text(json.dumps(doc))
    env.environ["EXA_API_KEY"] = OTHER
    status = env.call("search_quota_status", {})
    assert_valid_result("search_quota_status", status)
    sources = status["sources"]
    assert list(sources) == [s.name for s in registry.sources()]
    assert sources["brave"] == {
        "configured": True,
        "kind": "api",
        "key_from": f"plugins.entries.brave.config.webSearch.apiKey {OPENCLAW}",
        "note": None,
    }
    assert sources["exa"]["key_from"] == "environment"
    assert sources["gemini"]["configured"] is False and sources["gemini"]["key_from"] is None
    assert sources["searxng"]["configured"] is False  # no endpoint anywhere
    assert sources["duckduckgo"] == {
        "configured": True,
        "kind": "web",
        "key_from": None,
        "note": None,
    }
    one_agent = env.call("search_quota_status", {"agent_id": "general"})
    assert "sources" not in one_agent  # the one-agent object is the spec's
    text = json.dumps(status)
    assert SENTINEL not in text and OTHER not in text


def doctor(environ: dict[str, str], *args: str) -> subprocess.CompletedProcess:
    proc = subprocess.run(
        [sys.executable, "-m", "smart_search", "doctor", *args],
        capture_output=True,
        env={**environ, "PYTHONPATH": str(REPO), "PATH": os.environ.get("PATH", "")},
        timeout=120,
    )
    for secret in (SENTINEL, OTHER):
        for part in (secret, secret[-10:]):
            assert part.encode() not in proc.stdout + proc.stderr
    return proc


def test_doctor_says_where_each_key_was_found_never_the_key(tmp_path: Path) -> None:
    ref = {"source": "file", "provider": "main", "id": "/tavily"}
    missing = tmp_path / "nowhere" / "secrets.json"
    doc = merged(
        plugin_key("brave", SENTINEL),
        {"secrets": {"providers": {"main": {"source": "file", "path": str(missing)}}}},
        plugin_key("tavily", ref),
    )
    path = tmp_path / "oc" / "openclaw.json"
    path.parent.mkdir(parents=True)
    path.write_text(json.dumps(doc))
    environ = {"HOME": str(tmp_path / "home"), "OPENCLAW_CONFIG_PATH": str(path),
               "SMART_SEARCH_STATE_DIR": str(tmp_path / "state"), "EXA_API_KEY": OTHER}  # fmt: skip
    out = doctor(environ).stdout.decode()
    assert (
        f"brave: BRAVE_API_KEY: set ({len(SENTINEL)} characters) from "
        f"plugins.entries.brave.config.webSearch.apiKey {OPENCLAW}" in out
    )
    assert f"exa: EXA_API_KEY: set ({len(OTHER)} characters) from environment" in out
    assert f"NOT READ: plugins.entries.tavily.config.webSearch.apiKey {OPENCLAW}" in out
    assert f"{missing} does not exist" in out
    unconfigured = [
        s.name
        for s in registry.sources()
        if s.name not in ("brave", "exa") and (s.kind == "api" or s.self_hosted)
    ]
    assert f"Sources not configured: {', '.join(unconfigured)}" in out
    assert unconfigured[:4] == ["gemini", "tavily", "serper", "perplexity"]
    report = json.loads(doctor(environ, "--json").stdout)
    assert report["api_keys"]["brave"]["source"].startswith("plugins.entries.brave")
    assert report["sources"]["tavily"]["configured"] is False
    assert any(p.startswith("key: tavily: ") for p in report["problems"])
    assert report["healthy"] is False  # a key OpenClaw names but nobody can read


def test_a_key_from_openclaw_never_leaks_even_when_echoed(tmp_path: Path) -> None:
    env = Env(tmp_path)
    with FakeServer() as fake:
        config = {
            "endpoints": {n: fake.url for n in ("gemini", "brave", "google", "bing", "duckduckgo")},
            "web_fetch_min_interval_ms": 0,
            "retry_base_delay": 10,
        }
        env.write_config(config)
        doc = json.loads(env.config_path.read_text())
        doc.update(plugin_key("brave", "${HOST_BRAVE}"))
        env.config_path.write_text(json.dumps(doc))
        env.environ["HOST_BRAVE"] = SENTINEL
        echo = {"error": {"detail": f"bad token {SENTINEL}", "code": "SUBSCRIPTION_TOKEN_INVALID"}}
        fake.route("/res/v1/web/search", Reply(422, json=echo))
        fake.route("/", Reply(500, f"<html>{SENTINEL}</html>"))
        args = {"query": "plain words", "agent_id": "a", "force_provider": "brave"}
        call = {"tool": "smart_search", "args": args}
        proc = env.run_cli(json.dumps(call))
        result = json.loads(proc.stdout)
        brave = [r for r in fake.requests if r.target.startswith("/res/v1/web/search")]
        assert brave and brave[0].headers["x-subscription-token"] == SENTINEL
        assert all(SENTINEL not in r.target for r in fake.requests)
    assert "Brave API error: 422" in [a["error"] for a in result["attempts"]]
    written = b"".join(p.read_bytes() for p in env.state_dir.rglob("*") if p.is_file())
    for where in (proc.stdout, proc.stderr, written):
        assert SENTINEL.encode() not in where


def test_a_long_running_server_sees_a_key_added_to_openclaws_dotenv(tmp_path: Path) -> None:
    from smart_search.shell.mcp.service import Service

    secret = private_file(tmp_path / "s" / "k.txt", OTHER)
    ref = {"source": "file", "provider": "one", "id": "value"}
    one = {"source": "file", "path": str(secret), "mode": "singleValue"}
    doc = merged({"secrets": {"providers": {"one": one}}}, plugin_key("exa", ref))
    path = tmp_path / "oc" / "openclaw.json"
    path.parent.mkdir(parents=True)
    path.write_text(json.dumps(doc))
    environ = {"HOME": str(tmp_path / "home"), "OPENCLAW_CONFIG_PATH": str(path),
               "OPENCLAW_STATE_DIR": str(tmp_path / "oc")}  # fmt: skip
    service = Service(environ)
    first = service.settings()
    assert first.api_keys["tavily"] is None and first.api_keys["exa"].reveal() == OTHER
    dotenv = tmp_path / "oc" / ".env"
    assert str(dotenv) in first.config_files and str(secret) in first.config_files
    service.settings()  # the stamp now covers the .env and the secret file
    private_file(dotenv, f"TAVILY_API_KEY={SENTINEL}\n")
    later = service.settings()
    assert later.api_keys["tavily"].reveal() == SENTINEL
    loads = service.loads
    secret.write_text(SENTINEL + "-rotated")
    assert service.settings().api_keys["exa"].reveal() == SENTINEL + "-rotated"
    assert service.loads == loads + 1


def test_configured_key_values_include_what_openclaw_holds(tmp_path: Path) -> None:
    # What scrubs an internal error's traceback when Settings could not be built.
    from smart_search.host.config_entry import configured_key_values

    path = tmp_path / "oc" / "openclaw.json"
    path.parent.mkdir(parents=True)
    path.write_text(json.dumps(plugin_key("brave", "${HOST_KEY}")))
    environ = {"HOME": str(tmp_path / "home"), "OPENCLAW_CONFIG_PATH": str(path),
               "HOST_KEY": SENTINEL}  # fmt: skip
    assert SENTINEL in configured_key_values(environ)
