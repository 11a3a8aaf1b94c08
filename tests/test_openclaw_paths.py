"""Config discovery as OpenClaw 2026.9.6 does it: paths, $include, size bound, JSON5, layouts,
unknown keys, the state directory, and the one-ledger-per-install merge (issue 8, issue 7.8)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import json5
import pytest

from smart_search.errors import CANNOT_READ_CONFIG, ConfigError
from smart_search.host import openclaw
from smart_search.host.config import load_settings
from tests.conftest import REPO, Env, assert_valid_result
from tests.fakes import FakeServer, Reply, fixture_bytes


def entry(config: dict[str, Any]) -> dict[str, Any]:
    return {"skills": {"entries": {"smart-search": {"config": config}}}}


def write(path: Path, doc: Any) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(doc if isinstance(doc, str) else json.dumps(doc))
    return path


def model_of(environ: dict[str, str]) -> str:
    return load_settings(environ).gemini_model


# -- where the file is -------------------------------------------------------------------------


def test_resolution_order_matches_openclaw(tmp_path: Path) -> None:
    home = tmp_path / "home"
    base = {"HOME": str(home)}
    # Nothing anywhere: defaults, and the canonical path is ~/.openclaw/openclaw.json.
    loc = openclaw.config_location(base)
    assert loc.path == str(home / ".openclaw" / "openclaw.json") and not loc.exists
    assert model_of(base) == "gemini-flash-latest"
    # The legacy ~/.clawdbot/clawdbot.json is found when nothing newer exists.
    write(home / ".clawdbot" / "clawdbot.json", entry({"gemini_model": "m-legacy"}))
    assert model_of(base) == "m-legacy"
    # ~/.openclaw/ existing makes it the state dir; its legacy file name comes before ~/.clawdbot.
    write(home / ".openclaw" / "clawdbot.json", entry({"gemini_model": "m-oc-legacy-name"}))
    assert model_of(base) == "m-oc-legacy-name"
    write(home / ".openclaw" / "openclaw.json", entry({"gemini_model": "m-home"}))
    assert model_of(base) == "m-home"
    # OPENCLAW_HOME replaces HOME for every OpenClaw path.
    ochome = tmp_path / "oc-home"
    write(ochome / ".openclaw" / "openclaw.json", entry({"gemini_model": "m-ochome"}))
    assert model_of({**base, "OPENCLAW_HOME": str(ochome)}) == "m-ochome"
    # OPENCLAW_HOME=~/x expands against HOME.
    write(home / "x" / ".openclaw" / "openclaw.json", entry({"gemini_model": "m-tilde"}))
    assert model_of({**base, "OPENCLAW_HOME": "~/x"}) == "m-tilde"
    # OPENCLAW_STATE_DIR with a file there wins over the home dirs.
    state = tmp_path / "state"
    write(state / "openclaw.json", entry({"gemini_model": "m-state"}))
    assert model_of({**base, "OPENCLAW_STATE_DIR": str(state)}) == "m-state"
    # OPENCLAW_STATE_DIR without a file: OpenClaw does not fall back to ~/.openclaw (defaults).
    empty = tmp_path / "empty-state"
    assert model_of({**base, "OPENCLAW_STATE_DIR": str(empty)}) == "gemini-flash-latest"
    # OPENCLAW_CONFIG_PATH beats everything, `~` expanded.
    write(home / "named.json", entry({"gemini_model": "m-named"}))
    named = {**base, "OPENCLAW_STATE_DIR": str(state), "OPENCLAW_CONFIG_PATH": "~/named.json"}
    assert model_of(named) == "m-named"
    # OPENCLAW_PROFILE alone moves nothing (only `openclaw --profile` does, via the two vars).
    write(home / ".openclaw-work" / "openclaw.json", entry({"gemini_model": "m-profile"}))
    assert model_of({**base, "OPENCLAW_PROFILE": "work"}) == "m-home"


def test_state_dir_only_setup_is_not_silently_ignored(tmp_path: Path) -> None:
    """The issue's case: only OPENCLAW_STATE_DIR set, allocations must be read from there."""
    state = tmp_path / "oc"
    write(state / "openclaw.json", entry({"agent_allocations": {"tech": {"gemini": 7}}}))
    s = load_settings({"HOME": str(tmp_path / "h"), "OPENCLAW_STATE_DIR": str(state)})
    assert s.agent_allocations == {"tech": {"gemini": 7, "brave": 0, "tavily": 0}}
    assert s.state_dir == str(state / "workspace" / "shared")


def test_named_file_missing_is_the_spec_error(tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as info:
        load_settings({"HOME": str(tmp_path), "OPENCLAW_CONFIG_PATH": str(tmp_path / "no.json")})
    assert info.value.message == CANNOT_READ_CONFIG


# -- $include ----------------------------------------------------------------------------------


def test_includes_relative_nested_arrays_and_sibling_merge(tmp_path: Path) -> None:
    cfg = tmp_path / "cfg"
    write(
        cfg / "openclaw.json",
        """{
          // main file: a relative include for the entry, siblings override it
          skills: { entries: { "smart-search": {
            $include: "./parts/entry.json5",
            config: { strict_agents: true, finance_keywords: ["main"] },
          } } },
        }""",
    )
    write(
        cfg / "parts" / "entry.json5",
        """{ config: { $include: ["./limits.json5", "./agents.json5"],
                      finance_keywords: ["included"], default_provider: "gemini" } }""",
    )
    write(cfg / "parts" / "limits.json5", "{ providers: { brave: { daily_limit: 9 } } }")
    write(cfg / "parts" / "agents.json5", '{ agent_allocations: { "a": { gemini: 2 } } }')
    s = load_settings({"HOME": str(tmp_path), "OPENCLAW_CONFIG_PATH": str(cfg / "openclaw.json")})
    assert s.daily_limits["brave"] == 9  # nested include, relative to the including file
    assert s.agent_allocations == {"a": {"gemini": 2, "brave": 0, "tavily": 0}}  # array include
    assert s.default_provider == "gemini" and s.strict_agents is True
    # Arrays concatenate when siblings merge over an include (OpenClaw's deepMerge).
    assert s.finance_keywords == ("included", "main")


def include_error(tmp_path: Path, files: dict[str, str]) -> str:
    for name, text in files.items():
        write(tmp_path / name, text)
    environ = {"HOME": str(tmp_path), "OPENCLAW_CONFIG_PATH": str(tmp_path / "openclaw.json")}
    with pytest.raises(ConfigError) as info:
        load_settings(environ)
    assert info.value.error_code == "config_error"
    return info.value.message


def test_include_cycle_names_the_files(tmp_path: Path) -> None:
    message = include_error(
        tmp_path,
        {
            "openclaw.json": '{"$include": "./a.json"}',
            "a.json": '{"$include": "./b.json"}',
            "b.json": '{"$include": "./a.json"}',
        },
    )
    assert "cycle" in message and str(tmp_path / "a.json") in message
    assert str(tmp_path / "b.json") in message


def test_include_of_itself_is_a_cycle(tmp_path: Path) -> None:
    message = include_error(tmp_path, {"openclaw.json": '{"$include": "./openclaw.json"}'})
    assert "cycle" in message and str(tmp_path / "openclaw.json") in message


def test_missing_include_names_the_file(tmp_path: Path) -> None:
    message = include_error(tmp_path, {"openclaw.json": '{"skills": {"$include": "./gone.json"}}'})
    assert str(tmp_path / "gone.json") in message and "does not exist" in message


def test_include_outside_the_config_directory_is_refused(tmp_path: Path) -> None:
    outside = tmp_path / "outside.json"
    outside.write_text("{}")
    message = include_error(tmp_path / "cfg", {"openclaw.json": '{"$include": "../outside.json"}'})
    assert "outside the config directory" in message


def test_include_roots_allow_another_directory(tmp_path: Path) -> None:
    shared = write(tmp_path / "shared" / "ss.json", entry({"gemini_model": "m-shared"}))
    cfg = write(tmp_path / "cfg" / "openclaw.json", {"$include": str(shared)})
    environ = {"HOME": str(tmp_path), "OPENCLAW_CONFIG_PATH": str(cfg)}
    with pytest.raises(ConfigError):
        load_settings(environ)
    environ["OPENCLAW_INCLUDE_ROOTS"] = str(tmp_path / "shared")
    assert model_of(environ) == "m-shared"


def test_include_depth_is_bounded_like_openclaw(tmp_path: Path) -> None:
    files = {"openclaw.json": '{"$include": "./d0.json"}'}
    for i in range(10):
        files[f"d{i}.json"] = json.dumps({"$include": f"./d{i + 1}.json"})
    files["d10.json"] = "{}"
    message = include_error(tmp_path, files)
    assert "deeper than 10" in message
    # Ten levels are fine.
    (tmp_path / "d9.json").write_text("{}")
    assert model_of(
        {"HOME": str(tmp_path), "OPENCLAW_CONFIG_PATH": str(tmp_path / "openclaw.json")}
    )


def test_bad_include_values(tmp_path: Path) -> None:
    assert "not a string" in include_error(tmp_path, {"openclaw.json": '{"$include": 5}'})
    files = {"x.json": "{}", "openclaw.json": '{"$include": ["./x.json", 3]}'}
    message = include_error(tmp_path, files)
    assert "not a string" in message


# -- size bound and JSON5 (issue 7 item 8) ------------------------------------------------------


def test_config_over_one_mib_is_refused_main_file_and_include(tmp_path: Path) -> None:
    padding = " " * (1024 * 1024)
    big = write(tmp_path / "big.json", '{"a": 1,' + padding + '"b": 2}')
    with pytest.raises(ConfigError) as info:
        load_settings({"HOME": str(tmp_path), "OPENCLAW_CONFIG_PATH": str(big)})
    assert "larger than 1 MiB" in info.value.message and str(big) in info.value.message
    write(tmp_path / "inc" / "part.json", "// padded\n{" + padding + "}")
    main = write(tmp_path / "inc" / "openclaw.json", {"$include": "./part.json"})
    with pytest.raises(ConfigError) as info:
        load_settings({"HOME": str(tmp_path), "OPENCLAW_CONFIG_PATH": str(main)})
    assert "larger than 1 MiB" in info.value.message and "part.json" in info.value.message
    # Just under the bound is read.
    ok = write(tmp_path / "ok.json", "{" + " " * (1024 * 1024 - 2) + "}")
    assert load_settings({"HOME": str(tmp_path), "OPENCLAW_CONFIG_PATH": str(ok)})


JSON5_CASES = [
    "{a: 1, b: [1, 2, 3,], // c\n}",
    "{'single': 'quoted \"inside\"', /* block */ \"x\": null}",
    "{$dollar_key: true, _u: false, k9: -1.5e3}",
    '{"url": "http://x/y", "s": "a//b /* not a comment */"}',
    "{a: Infinity, b: 0x1F, c: .5, d: +3}",
    '{a: \'it\\\'s\', b: "tab\\tx", c: "\\u00e9"}',
    "{nested: {deeper: [{k: 'v',},],},}",
    "[1, 2,]",
]


@pytest.mark.parametrize("text", JSON5_CASES)
def test_fast_json5_path_agrees_with_the_json5_package(text: str) -> None:
    assert openclaw.parse_config_text(text.encode(), "openclaw.json") == json5.loads(text)


def test_fast_path_refuses_to_guess(text: str = "{a: 1 b: 2}") -> None:
    with pytest.raises(ConfigError) as info:
        openclaw.parse_config_text(text.encode(), "openclaw.json")
    assert "not valid JSON5" in info.value.message


# -- layouts OpenClaw rejects, unknown keys ------------------------------------------------------


def test_legacy_layouts_are_read_with_a_warning_on_every_tool(env: Env) -> None:
    env.config_path.write_text(
        json.dumps(
            {
                "env": {"BRAVE_API_KEY": "SENTINEL-LEGACY-BRAVE"},
                "skills": {
                    "smart-search": {
                        "strict_agents": True,
                        "agent_allocations": {"tech": {"gemini": 4}},
                    }
                },
            }
        )
    )
    status = env.call("search_quota_status", {"agent_id": "tech"})
    assert status["gemini"]["allocated"] == 4  # still read
    text = status["warning"]
    assert 'skills["smart-search"]' in text and "OpenClaw rejects" in text
    assert 'skills.entries["smart-search"].config' in text
    assert "BRAVE_API_KEY directly in the top-level env block" in text
    assert "env.vars.BRAVE_API_KEY" in text and "SENTINEL" not in text
    full = env.call("search_quota_status")
    assert "OpenClaw rejects" in full["warning"]
    done = env.call("search_mark_agent_complete", {"agent_id": "tech"})
    assert done["error"] is None and "OpenClaw rejects" in done["warning"]
    again = env.call("search_mark_agent_complete", {"agent_id": "tech"})
    assert again["error_code"] is not None and "OpenClaw rejects" in again["warning"]
    # smart_search too: strict_agents (read from the legacy layout) refuses an unknown agent.
    search = env.call("smart_search", {"query": "q", "agent_id": "nobody"})
    assert search["error_code"] == "unknown_agent" and "OpenClaw rejects" in search["warning"]


def test_documented_layout_has_no_warning(env: Env) -> None:
    env.write_config({"agent_allocations": {"tech": {"gemini": 4}}}, env={"BRAVE_API_KEY": "k"})
    status = env.call("search_quota_status", {"agent_id": "tech"})
    assert "warning" not in status or status["warning"] is None
    assert env.call("search_quota_status")["warning"] is None


def test_unknown_keys_warn_with_the_nearest_known_key(env: Env) -> None:
    env.write_config(
        {
            "retry_max_atempts": 2,
            "providers": {"brave": {"daily_limt": 3}},
            "max_unconfigured_agents": 10,  # known: read by a feature landing soon
            "cache": {},
            "zzz": 1,
        }
    )
    s = env.settings()
    assert s.retry_max_attempts == 3  # the typo did not change behaviour...
    text = env.call("search_quota_status")["warning"]  # ...and says so on every call
    assert 'Unknown config key "retry_max_atempts" (did you mean "retry_max_attempts"?)' in text
    assert '"providers.brave.daily_limt" (did you mean "providers.brave.daily_limit"?)' in text
    assert 'Unknown config key "zzz" is ignored.' in text
    assert "max_unconfigured_agents" not in text and '"cache"' not in text


# -- the state directory and the one ledger ----------------------------------------------------


def test_workspace_variable_never_moves_the_ledger(tmp_path: Path) -> None:
    base = {"HOME": str(tmp_path / "h")}
    one = load_settings({**base, "OPENCLAW_WORKSPACE_DIR": str(tmp_path / "ws1")}).state_dir
    two = load_settings({**base, "OPENCLAW_WORKSPACE_DIR": str(tmp_path / "ws2")}).state_dir
    assert one == two == str(tmp_path / "h" / ".openclaw" / "workspace" / "shared")
    s = load_settings({**base, "OPENCLAW_HOME": str(tmp_path / "o")})
    assert s.state_dir == str(tmp_path / "o" / ".openclaw" / "workspace" / "shared")


def test_old_per_workspace_ledger_is_merged_once(env: Env, tmp_path: Path) -> None:
    # An earlier release kept this agent's ledger in its workspace.
    workspace = tmp_path / "ws"
    (tmp_path / "old").mkdir()
    old_env = Env(tmp_path / "old")
    old_env.environ["SMART_SEARCH_STATE_DIR"] = str(workspace / "shared")
    old_env.state_dir = workspace / "shared"
    # The current install: default state dir (no SMART_SEARCH_STATE_DIR, which the old rule obeyed).
    del env.environ["SMART_SEARCH_STATE_DIR"]
    env.write_config({"agent_allocations": {"tech": {"gemini": 5, "brave": 0}}})
    old_env.config_path.write_text(env.config_path.read_text())
    old_env.spend((("tech", "gemini", 3), ("other", "gemini", 2)))
    env.spend((("tech", "gemini", 1),))
    env.environ["OPENCLAW_WORKSPACE_DIR"] = str(workspace)
    status = env.call("search_quota_status")
    assert status["providers"]["gemini"]["used"] == 6
    assert status["agents"]["tech"]["gemini"]["used"] == 4
    assert not (workspace / "shared" / "search-quota.json").exists()
    assert (workspace / "shared" / "search-quota.json.merged").exists()
    # Read once: the next call does not add it again.
    assert env.call("search_quota_status")["providers"]["gemini"]["used"] == 6


BRAVE_PATH = "/res/v1/web/search"


def test_two_agents_in_two_workspaces_share_one_provider_limit(tmp_path: Path) -> None:
    """Real processes, one per agent, each with its own OPENCLAW_WORKSPACE_DIR: limit 3 holds."""
    home = tmp_path / "home"
    config = entry(
        {
            "providers": {"brave": {"daily_limit": 3}, "gemini": {"daily_limit": 0}},
            "default_allocation": {"gemini": 0, "brave": 0},
            "endpoints": {},
            "retry_max_attempts": 1,
            "web_fetch_min_interval_ms": 0,
            # Every agent pays for the same question here: the limit is what is tested.
            "cache": {"enabled": False},
        }
    )
    with FakeServer() as fake:
        fake.route(
            BRAVE_PATH,
            Reply(200, fixture_bytes("brave-ok.json"), {"content-type": "application/json"}),
        )
        for name in ("gemini", "brave", "google", "bing", "duckduckgo"):
            config["skills"]["entries"]["smart-search"]["config"]["endpoints"][name] = fake.url
        write(home / ".openclaw" / "openclaw.json", config)
        served = []
        for i in range(8):
            agent = ("agent-a", "agent-b")[i % 2]
            environ = {
                "HOME": str(home),
                "PATH": os.environ.get("PATH", ""),
                "PYTHONPATH": str(REPO),
                "BRAVE_API_KEY": "SENTINEL-BRAVE-KEY",
                "OPENCLAW_WORKSPACE_DIR": str(tmp_path / f"ws-{agent}"),
            }
            proc = subprocess.run(
                [sys.executable, "-m", "smart_search", "search", "rust borrow checker",
                 "--agent-id", agent, "--provider", "brave"],
                capture_output=True, env=environ, timeout=120, cwd=str(tmp_path),
            )  # fmt: skip
            assert proc.returncode == 0, proc.stderr[-2000:]
            result = json.loads(proc.stdout)
            assert_valid_result("smart_search", result)
            if result["provider_used"] == "brave":
                served.append(agent)
        assert len(fake.requests_to(BRAVE_PATH)) == 3
    assert len(served) == 3 and set(served) == {"agent-a", "agent-b"}
    ledger = home / ".openclaw" / "workspace" / "shared" / "search-quota.json"
    assert ledger.exists()
    assert not (tmp_path / "ws-agent-a" / "shared" / "search-quota.json").exists()


# -- the fast JSON5 path never disagrees with the json5 package ---------------------------------

from hypothesis import given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

# BMP only: the python json5 package leaves an escaped surrogate pair uncombined, where
# JavaScript (OpenClaw) and orjson combine it; plain JSON never reaches json5 anyway.
_BMP = st.characters(blacklist_categories=("Cs",), max_codepoint=0xFFFF)
_scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-(10**12), 10**12),
    st.floats(allow_nan=False, allow_infinity=False, width=32),
    st.text(_BMP, max_size=12),
)
_values = st.recursive(
    _scalars,
    lambda inner: (
        st.lists(inner, max_size=4)
        | st.dictionaries(st.text(_BMP, min_size=1, max_size=8), inner, max_size=4)
    ),
    max_leaves=20,
)


@st.composite
def json5_documents(draw: Any) -> str:
    """A random value rendered the way people write JSON5: every style choice drawn."""

    def render(value: Any) -> str:
        gap = draw(st.sampled_from(["", " ", "\n  ", " /* c */ ", " // c\n"]))
        if isinstance(value, dict):
            items = []
            for key, item in value.items():
                bare = key.isidentifier() and key.isascii() and draw(st.booleans())
                name = key if bare else _quote(key, draw(st.booleans()))
                items.append(f"{name}:{gap}{render(item)}")
            trailing = "," if items and draw(st.booleans()) else ""
            return "{" + gap + ("," + gap).join(items) + trailing + "}"
        if isinstance(value, list):
            trailing = "," if value and draw(st.booleans()) else ""
            return "[" + ", ".join(render(v) for v in value) + trailing + gap + "]"
        if isinstance(value, str):
            return _quote(value, draw(st.booleans()))
        return json.dumps(value)

    return draw(st.sampled_from(["", "// head\n", "/* head */"])) + render(draw(_values))


def _quote(text: str, single: bool) -> str:
    if not single or "\\" in text or "'" in text or any(ord(c) < 32 for c in text):
        return json.dumps(text)
    return "'" + text + "'"


@settings(max_examples=300, deadline=None)
@given(json5_documents())
def test_fast_json5_path_matches_json5_on_generated_documents(text: str) -> None:
    assert openclaw.parse_config_text(text.encode(), "openclaw.json") == json5.loads(text)
