"""The JSON contract: spec error strings, their priority, the schemas as the source of truth."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from smart_search import contract, errors
from smart_search.shell.runner import handle
from tests.conftest import SCHEMAS, _registry, assert_valid_result

SEARCH = "smart_search.args.json"


def check_message(schema: str, args: Any) -> tuple[str, str] | None:
    try:
        contract.check(schema, args)
    except errors.SearchError as err:
        return err.error_code, err.message
    return None


@pytest.mark.parametrize(
    ("args", "message"),
    [
        ({"agent_id": "a"}, "query is required and must be a non-empty string."),
        ({"query": "", "agent_id": "a"}, "query is required and must be a non-empty string."),
        ({"query": " \t\n ", "agent_id": "a"}, "query is required and must be a non-empty string."),
        ({"query": 5, "agent_id": "a"}, "query is required and must be a non-empty string."),
        ({"query": None, "agent_id": "a"}, "query is required and must be a non-empty string."),
        (
            {"query": "x" * 1001, "agent_id": "a"},
            "query exceeds maximum length of 1000 characters.",
        ),
        ({"query": "nul\x00", "agent_id": "a"}, "query contains invalid control characters."),
        ({"query": "del\x7f", "agent_id": "a"}, "query contains invalid control characters."),
        ({"query": "esc\x1b[0m", "agent_id": "a"}, "query contains invalid control characters."),
        ({"query": "ok"}, "agent_id is required and must be a non-empty string."),
        ({"query": "ok", "agent_id": ""}, "agent_id is required and must be a non-empty string."),
        ({"query": "ok", "agent_id": 7}, "agent_id is required and must be a non-empty string."),
        (
            {"query": "ok", "agent_id": "Stock"},
            "agent_id must contain only lowercase letters, numbers, and hyphens.",
        ),
        (
            {"query": "ok", "agent_id": "general\n"},
            "agent_id must contain only lowercase letters, numbers, and hyphens.",
        ),
        (
            {"query": "ok", "agent_id": "a_b"},
            "agent_id must contain only lowercase letters, numbers, and hyphens.",
        ),
        (
            {"query": "ok", "agent_id": "a", "force_provider": "bing"},
            'Invalid force_provider: "bing". Use "gemini" or "brave".',
        ),
        (
            {"query": "ok", "agent_id": "a", "force_provider": 3},
            'Invalid force_provider: "3". Use "gemini" or "brave".',
        ),
    ],
)
def test_spec_error_strings(args: dict[str, Any], message: str) -> None:
    assert check_message(SEARCH, args) == ("invalid_input", message)


def test_exactly_1000_code_points_is_accepted_even_when_wider_in_utf8() -> None:
    assert check_message(SEARCH, {"query": "ż" * 1000, "agent_id": "a"}) is None
    assert check_message(SEARCH, {"query": "😀" * 1000, "agent_id": "a"}) is None
    assert check_message(SEARCH, {"query": "😀" * 1001, "agent_id": "a"}) is not None


def test_tab_newline_and_carriage_return_are_allowed_in_query() -> None:
    assert check_message(SEARCH, {"query": "a\tb\nc\rd", "agent_id": "a"}) is None


def test_first_bad_field_in_spec_order_is_reported() -> None:
    bad_all = {"query": "", "agent_id": "BAD", "force_provider": "x"}
    assert check_message(SEARCH, bad_all)[1].startswith("query is required")
    bad_two = {"query": "fine", "agent_id": "BAD", "force_provider": "x"}
    assert check_message(SEARCH, bad_two)[1].startswith("agent_id must contain")
    # Within one field, the blank check comes before the length check.
    assert check_message(SEARCH, {"query": " " * 2000, "agent_id": "a"})[1].startswith(
        "query is required"
    )


def test_unknown_argument_is_named() -> None:
    code, message = check_message(SEARCH, {"query": "q", "agent_id": "a", "limit": 3})
    assert code == "invalid_input" and '"limit"' in message


def test_envelope_errors() -> None:
    assert check_message("request.json", []) == ("invalid_input", "Invalid JSON input.")
    assert check_message("request.json", {"tool": "nope"}) == ("unknown_tool", "Unknown tool: nope")
    assert check_message("request.json", {"tool": "smart_search", "args": [1]}) == (
        "invalid_input",
        "args must be a JSON object.",
    )


def _validator(name: str) -> Any:
    from jsonschema import Draft202012Validator

    return Draft202012Validator(json.loads((SCHEMAS / name).read_text()), registry=_registry())


ARG_SCHEMAS = [
    "request.json",
    "smart_search.args.json",
    "search_quota_status.args.json",
    "search_mark_agent_complete.args.json",
]

# Strings near every rule's edge: control characters, trailing newlines, case, length bounds.
edge_text = st.one_of(
    st.text(max_size=12),
    st.text(alphabet="abz09-_A \n\t\r\x00\x7f\x1f", max_size=10),
    st.sampled_from(
        [
            "general",
            "general\n",
            "gemini",
            "brave",
            "perplexity",
            "smart_search",
            "search_quota_status",
            "search_mark_agent_complete",
            " ",
            "x" * 1000,
            "x" * 1001,
            "a" * 64,
            "a" * 65,
            "first",
            "deep",
            "day",
            "year",
            "US",
            "de",
            "De",
            "us\n",
            "USA",
            "en",
        ]
    ),
)
json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers()
    | st.integers(min_value=-1, max_value=22)
    | st.sampled_from([5.0, 20.0, 0.5, 21.0])
    | edge_text,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(edge_text, inner, max_size=3),
    max_leaves=6,
)
arg_objects = st.fixed_dictionaries(
    {},
    optional={
        "query": json_values,
        "agent_id": json_values,
        "force_provider": json_values,
        "mode": json_values,
        "count": json_values,
        "freshness": json_values,
        "country": json_values,
        "language": json_values,
        "fresh": json_values,
        "tool": json_values,
        "args": json_values,
    },
)


@pytest.mark.parametrize("schema_name", ARG_SCHEMAS)
@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(value=st.one_of(arg_objects, json_values))
def test_interpreter_agrees_with_jsonschema(schema_name: str, value: Any) -> None:
    """contract.py and jsonschema accept and reject exactly the same inputs."""
    ours = check_message(schema_name, value) is None
    theirs = _validator(schema_name).is_valid(value)
    assert ours == theirs, (schema_name, value)


def _keywords(node: Any, found: set[str]) -> set[str]:
    if isinstance(node, dict):
        for key, value in node.items():
            found.add(key)
            if key in ("properties", "$defs"):
                for sub in value.values():
                    _keywords(sub, found)
            elif key in ("not",):
                _keywords(value, found)
            elif key in ("anyOf", "oneOf", "allOf"):
                for sub in value:
                    _keywords(sub, found)
    return found


@pytest.mark.parametrize("schema_name", ARG_SCHEMAS)
def test_argument_schemas_use_only_what_the_interpreter_enforces(schema_name: str) -> None:
    used = _keywords(json.loads((SCHEMAS / schema_name).read_text()), set())
    unknown = used - contract.SUPPORTED - contract.ANNOTATIONS
    assert not unknown, f"{schema_name} uses {unknown}: teach contract.py or drop them"


def test_interpreter_refuses_a_keyword_it_does_not_know(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(contract._schemas, "drift.json", {"type": "string", "format": "email"})
    with pytest.raises(ValueError, match="format"):
        contract.check("drift.json", "x")


def test_error_codes_in_code_are_the_schemas_vocabulary() -> None:
    vocabulary = set(
        json.loads((SCHEMAS / "common.json").read_text())["$defs"]["error_code"]["enum"]
    )
    classes = [errors.SearchError]
    seen = set()
    while classes:
        cls = classes.pop()
        seen.add(cls.error_code)
        classes.extend(cls.__subclasses__())
    assert seen <= vocabulary
    assert len(vocabulary) == 29  # RULINGS 1's 22, plus state_unavailable, state_unsafe and
    # state_unwritable, smart_fetch's invalid_url, blocked_address and fetch_limit, and
    # RULINGS 8's state_lost


# --- the runner never crashes, whatever the bytes ------------------------------------------


def _tool_of(raw: bytes) -> str | None:
    try:
        doc = json.loads(raw)
    except (ValueError, UnicodeDecodeError):
        return None
    tool = doc.get("tool") if isinstance(doc, dict) else None
    return (
        tool
        if tool in ("smart_search", "search_quota_status", "search_mark_agent_complete")
        else None
    )


@settings(
    max_examples=250, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    raw=st.one_of(
        st.binary(max_size=64),
        json_values.map(lambda v: json.dumps(v).encode()),
        st.builds(
            lambda tool, args: json.dumps({"tool": tool, "args": args}).encode(),
            st.sampled_from(
                ["smart_search", "search_quota_status", "search_mark_agent_complete", "x"]
            ),
            st.one_of(arg_objects, json_values),
        ),
    )
)
def test_runner_answers_junk_with_a_schema_valid_error(raw: bytes, tmp_path_factory: Any) -> None:
    from tests.conftest import Env

    env = Env(tmp_path_factory.mktemp("fuzz"))
    # Strict agents, and no engines or keys reachable: a valid search must fail cleanly too.
    env.write_config(
        {
            "strict_agents": True,
            "agent_allocations": {"a": {"gemini": 1}},
            "endpoints": {
                e: "http://127.0.0.1:9" for e in ("gemini", "brave", "google", "bing", "duckduckgo")
            },
            "total_timeout_ms": 300,
            "web_fetch_min_interval_ms": 0,
        }
    )
    result = handle(raw, env.environ)
    tool = _tool_of(raw)
    if (
        tool is not None
        and "error_code" in result
        and result.get("error_code") in ("invalid_input", "unknown_tool")
        and "results" not in result
    ):
        tool = None  # envelope failure before the tool was known
    assert_valid_result(tool, result)
    assert result["error_code"] != "internal", result


def test_ten_megabyte_strings_are_rejected_cleanly(env: Any) -> None:
    big = "q" * (10 * 1024 * 1024)
    result = env.call("smart_search", {"query": big, "agent_id": "a"})
    assert result["error"] == "query exceeds maximum length of 1000 characters."
    result = env.call("search_quota_status", {"agent_id": "a" * (10 * 1024 * 1024)})
    assert result["error"] == "agent_id exceeds maximum length of 64 characters."


def test_cli_bad_bytes_exit_zero_one_json_line_no_traceback(env: Any) -> None:
    for payload in (b"\xff\xfe", b"", b"[1,2]", b'{"tool": 1}', b"{" * 100000):
        proc = env.run_cli(payload)
        assert proc.returncode == 0
        assert proc.stderr == b""
        lines = proc.stdout.splitlines()
        assert len(lines) == 1
        result = json.loads(lines[0])
        assert_valid_result(None, result)
        assert result["error_code"] in ("invalid_input", "unknown_tool")


def test_cli_unknown_flag_is_the_only_nonzero_exit(env: Any) -> None:
    import subprocess
    import sys

    proc = subprocess.run(
        [sys.executable, "-m", "smart_search", "--frobnicate"], capture_output=True, env=env.environ
    )
    assert proc.returncode == 2 and proc.stdout == b"" and b"usage" in proc.stderr


def test_validation_failures_change_no_state_and_log_nothing(env: Any) -> None:
    env.write_config({"strict_agents": True})
    for args in ({"query": "", "agent_id": "a"}, {"query": "ok", "agent_id": "unlisted"}):
        result = env.call("smart_search", args)
        assert result["error"] is not None
    assert not env.state_dir.exists()
    assert env.call("smart_search", {"query": "ok", "agent_id": "unlisted"})["error"] == (
        'Unknown agent: "unlisted". Add it to openclaw.json to use it.'
    )


def _cli_error(env: Any, args: dict[str, Any]) -> dict[str, Any]:
    """One smart_search call through `python -m smart_search`: its one JSON line."""
    proc = env.run_cli(json.dumps({"tool": "smart_search", "args": args}))
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


def test_force_provider_error_is_the_specs_exactly_when_only_gemini_and_brave_are_configured(
    tmp_path: Any,
) -> None:
    from tests.conftest import Env

    env = Env(tmp_path)
    env.environ.update({"GEMINI_API_KEY": "k-gemini", "BRAVE_API_KEY": "k-brave"})
    result = _cli_error(env, {"query": "q", "agent_id": "a", "force_provider": "bing"})
    assert result["error"] == 'Invalid force_provider: "bing". Use "gemini" or "brave".'
    assert result["error_code"] == "invalid_input"
    # With no key at all it is the spec's too: the spec's pair is always named.
    del env.environ["GEMINI_API_KEY"], env.environ["BRAVE_API_KEY"]
    result = _cli_error(env, {"query": "q", "agent_id": "a", "force_provider": 3})
    assert result["error"] == 'Invalid force_provider: "3". Use "gemini" or "brave".'


def test_force_provider_error_names_each_other_api_the_operator_configured(
    tmp_path: Any,
) -> None:
    from tests.conftest import Env

    env = Env(tmp_path)
    # Serper by its key (in the entry's env), Tavily by an endpoint of the operator's own; Exa
    # has neither, so it is not named.
    env.write_config(
        {"endpoints": {"tavily": "http://127.0.0.1:9/tavily"}},
        env={"SERPER_API_KEY": "k-serper"},
    )
    result = _cli_error(env, {"query": "q", "agent_id": "a", "force_provider": "bing"})
    assert result["error"] == (
        'Invalid force_provider: "bing". Use "gemini", "brave", "tavily" or "serper".'
    )
    assert result["error_code"] == "invalid_input"
    assert "k-serper" not in json.dumps(result)
    # An endpoint that is the source's own default configures nothing.
    env.write_config({"endpoints": {"exa": "https://api.exa.ai"}})
    result = _cli_error(env, {"query": "q", "agent_id": "a", "force_provider": "Exa"})
    assert result["error"] == 'Invalid force_provider: "Exa". Use "gemini" or "brave".'


def test_a_bad_force_provider_is_reported_before_an_unreadable_config(tmp_path: Any) -> None:
    from tests.conftest import Env

    env = Env(tmp_path)
    env.config_path.write_text("{not json")
    result = _cli_error(env, {"query": "q", "agent_id": "a", "force_provider": "bing"})
    assert result == {**result, "error_code": "invalid_input"}
    assert result["error"] == 'Invalid force_provider: "bing". Use "gemini" or "brave".'


def test_forcing_perplexity_is_the_specs_refusal_until_perplexity_is_configured(
    tmp_path: Any,
) -> None:
    """The spec's `Perplexity is not yet implemented.` stands for the spec's install; issue 30
    registers Perplexity, so a configured one is asked (its tier, not the refusal)."""
    from tests.conftest import Env

    env = Env(tmp_path)
    env.write_config({"endpoints": {"duckduckgo": "http://127.0.0.1:9"}, "retry_max_attempts": 1})
    result = _cli_error(env, {"query": "q", "agent_id": "a", "force_provider": "perplexity"})
    assert result["error"] == "Perplexity is not yet implemented."
    assert result["error_code"] == "invalid_input"
    assert not (env.state_dir / "search-quota.json").exists()  # validation: no state touched
    env.environ["PERPLEXITY_API_KEY"] = "k-perplexity-sentinel"
    env.write_config({"endpoints": {"perplexity": "http://127.0.0.1:9",
                                    "duckduckgo": "http://127.0.0.1:9"},
                      "retry_max_attempts": 1})  # fmt: skip
    result = _cli_error(env, {"query": "q", "agent_id": "a", "force_provider": "perplexity"})
    assert result["error"] != "Perplexity is not yet implemented."
    assert result["attempts"][0]["provider"] == "perplexity"
    assert "k-perplexity-sentinel" not in json.dumps(result)
