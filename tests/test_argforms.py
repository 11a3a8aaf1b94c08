"""Argument forms: `search`, `quota`, `complete` map one to one onto the stdin contract."""

from __future__ import annotations

import json
import re
import shlex
import subprocess
import sys
from typing import Any

import pytest

from smart_search import contract
from smart_search.shell.argforms import UsageError, build_request
from tests.conftest import REPO, Env, assert_valid_result, idle
from tests.fakes import FakeServer, Reply, fixture_bytes

BRAVE_PATH = "/res/v1/web/search"


def run(env: Env, *argv: str, stdin: bytes = b"") -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "smart_search", *argv],
        input=stdin,
        capture_output=True,
        env=env.environ,
        timeout=120,
        cwd=str(env.root),
    )


def same_as_stdin(env: Env, argv: list[str], request: dict[str, Any]) -> dict[str, Any]:
    by_args = run(env, *argv)
    by_stdin = env.run_cli(json.dumps(request))
    assert by_args.returncode == 0 == by_stdin.returncode, by_args.stderr
    assert by_args.stderr == b""
    assert by_args.stdout == by_stdin.stdout  # byte for byte: same result, same error string
    return json.loads(by_args.stdout)


TOOLS = {
    "search": "smart_search",
    "quota": "search_quota_status",
    "complete": "search_mark_agent_complete",
}
# (argument form, the args object the stdin form gets)
CASES = [
    (["search", "--agent-id", "general"], {"agent_id": "general"}),
    (["search", "", "--agent-id", "a"], {"query": "", "agent_id": "a"}),
    (["search", "q"], {"query": "q"}),
    (["search", "q", "--agent-id", "Bad_Id"], {"query": "q", "agent_id": "Bad_Id"}),
    (["search", "q", "--agent-id", "a\n"], {"query": "q", "agent_id": "a\n"}),
    (
        ["search", "q", "--agent-id", "a", "--provider", "yahoo"],
        {"query": "q", "agent_id": "a", "force_provider": "yahoo"},
    ),
    (
        ["search", "q", "--agent-id", "a", "--provider", "bing"],
        {"query": "q", "agent_id": "a", "force_provider": "bing"},
    ),
    (["search", "x" * 1001, "--agent-id", "a"], {"query": "x" * 1001, "agent_id": "a"}),
    (["search", "", "--agent-id", "a", "--fresh"], {"query": "", "agent_id": "a", "fresh": True}),
    (["quota"], {}),
    (["quota", "--agent-id", "ghost"], {"agent_id": "ghost"}),
    (["quota", "--agent-id", "general"], {"agent_id": "general"}),
    (["complete"], {}),
    (["complete", "--agent-id", "ghost"], {"agent_id": "ghost"}),
]


@pytest.mark.parametrize(("argv", "args"), CASES)
def test_argument_form_prints_exactly_what_the_stdin_form_prints(
    env: Env, argv: list[str], args: dict[str, Any]
) -> None:
    tool = TOOLS[argv[0]]
    assert build_request(argv[0], argv[1:]) == {"tool": tool, "args": args}
    result = same_as_stdin(env, argv, {"tool": tool, "args": args})
    assert_valid_result(tool, result)


def test_complete_then_quota_change_state_like_the_tools(env: Env) -> None:
    env.write_config({"agent_allocations": {"tech": {"gemini": 4, "brave": 1}}})
    done = json.loads(run(env, "complete", "--agent-id", "tech").stdout)
    assert done["released"] == idle({"gemini": 4, "brave": 1}) and done["error"] is None
    status = json.loads(run(env, "quota", "--agent-id", "tech").stdout)
    assert status["completed"] is True and status["gemini"]["remaining"] == 0
    again = json.loads(run(env, "complete", "--agent-id", "tech").stdout)
    assert again["error"] == "Agent tech is already marked complete for today."


@pytest.mark.parametrize(
    "argv",
    [
        ["search", "two", "words", "--agent-id", "a"],  # an unquoted query
        ["search", "q", "--agent-id"],  # option without its value
        ["search", "q", "--agent-id", "a", "--frobnicate"],
        ["quota", "extra"],
        ["complete", "--agent-id", "a", "--provider", "brave"],
    ],
)
def test_unusable_command_line_exits_2_with_usage_on_stderr_only(env: Env, argv: list[str]) -> None:
    proc = run(env, *argv)
    assert proc.returncode == 2
    assert proc.stdout == b""
    assert proc.stderr.startswith(b"usage: smart-search " + argv[0].encode())
    assert not (env.state_dir / "search-quota.json").exists()


def test_help_goes_to_stdout_with_exit_0(env: Env) -> None:
    proc = run(env, "search", "--help")
    assert proc.returncode == 0 and proc.stdout.startswith(b"usage: smart-search search QUERY")


def test_quotes_dollars_backticks_and_leading_dash_arrive_intact(env: Env) -> None:
    nasty = 'Macy\'s "Black Friday" $HOME `date` !x'
    line = f"smart-search search {shlex.quote(nasty)} --agent-id general"
    argv = shlex.split(line)[1:]
    assert build_request(argv[0], argv[1:])["args"]["query"] == nasty
    dash = build_request("search", ["--agent-id", "a", "--", "-5 C in F"])
    assert dash["args"] == {"query": "-5 C in F", "agent_id": "a"}
    with pytest.raises(UsageError):
        build_request("search", ["q", "--nope"])


def test_a_real_search_through_the_argument_form(env: Env) -> None:
    query = 'it\'s "quoted" $PATH `x`'
    with FakeServer() as fake:
        fake.route(
            BRAVE_PATH,
            Reply(200, fixture_bytes("brave-ok.json"), {"content-type": "application/json"}),
        )
        env.write_config(
            {
                "endpoints": {
                    n: fake.url for n in ("gemini", "brave", "google", "bing", "duckduckgo")
                },
                "agent_allocations": {"space-news": {"gemini": 0, "brave": 2}},
            },
            env={"BRAVE_API_KEY": "SENTINEL-ARGFORM-KEY"},
        )
        proc = run(env, "search", query, "--agent-id", "space-news", "--provider", "brave")
        assert proc.returncode == 0, proc.stderr
        result = json.loads(proc.stdout)
        assert_valid_result("smart_search", result)
        assert result["provider_used"] == "brave" and result["quota_source"] == "agent_allocation"
        (request,) = fake.requests_to(BRAVE_PATH)
        assert request.query["q"] == [query]
    assert b"SENTINEL" not in proc.stdout + proc.stderr
    status = json.loads(run(env, "quota", "--agent-id", "space-news").stdout)
    assert status["brave"] == {"allocated": 2, "used": 1, "remaining": 1}


def test_skill_md_argument_examples_are_valid_requests() -> None:
    text = (REPO / "SKILL.md").read_text()
    lines = re.findall(r"^smart-search (?:search|quota|complete)\b.*$", text, re.M)
    inline = re.findall(r"`(smart-search (?:search|quota|complete) [^`]*)`", text)
    assert len(lines) >= 5
    tools = set()
    for line in lines + inline:
        argv = shlex.split(line)[1:]
        request = build_request(argv[0], argv[1:])
        assert request is not None
        contract.check("request.json", request)
        contract.check(f"{request['tool']}.args.json", request["args"])
        tools.add(request["tool"])
    assert tools == {"smart_search", "search_quota_status", "search_mark_agent_complete"}
    assert "<<" not in "\n".join(lines + inline)


def test_fresh_maps_to_the_cache_bypass() -> None:
    from smart_search.shell.argforms import build_request

    request = build_request("search", ["nasa news", "--agent-id", "cron", "--fresh"])
    assert request == {
        "tool": "smart_search",
        "args": {"query": "nasa news", "agent_id": "cron", "fresh": True},
    }
    plain = build_request("search", ["nasa news", "--agent-id", "cron"])
    assert plain is not None and "fresh" not in plain["args"]
