"""Issue 7, hardening: hostile state, configs and provider answers end in a named error class,
never in `internal`, a write through a link, or a leaked key."""

from __future__ import annotations

import errno
import json
import os
import signal
import stat
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from smart_search.budget.ledger import Ledger
from tests.conftest import Env, assert_valid_result
from tests.fakes import FakeServer, Reply, fixture_json

GEMINI_KEY = "SENTINEL-GEMINI-KEY-0b9e4d71"
BRAVE_KEY = "SENTINEL-BRAVE-KEY-3f6a2c58"
GEMINI_PATH = "/v1beta/models/gemini-flash-latest:generateContent"
BRAVE_PATH = "/res/v1/web/search"
SEARCH = {"query": "python asyncio tutorial", "agent_id": "general"}
# What SEARCH ends in when every endpoint is a closed port.
UNREACHABLE = "transport_failure"


@pytest.fixture
def fake() -> Any:
    with FakeServer() as server:
        yield server


def configure(env: Env, fake: FakeServer | None = None, **config: Any) -> None:
    url = fake.url if fake is not None else "http://127.0.0.1:9"
    base: dict[str, Any] = {
        "endpoints": {name: url for name in ("gemini", "brave", "google", "bing", "duckduckgo")},
        "web_fetch_min_interval_ms": 0,
        "retry_base_delay": 10,
        "total_timeout_ms": 5000,
    }
    base.update(config)
    env.write_config(base)
    env.environ["GEMINI_API_KEY"] = GEMINI_KEY
    env.environ["BRAVE_API_KEY"] = BRAVE_KEY


def ledger(env: Env) -> Path:
    return env.state_dir / "search-quota.json"


def today_log(env: Env) -> Path:
    (log,) = (env.state_dir / "logs").glob("search-*.jsonl")
    return log


# --- items 2 and 7: every whole number in config is bounded -----------------------------------

HUGE = [
    ("retry_base_delay", 1e13),
    ("web_fetch_min_interval_ms", 1e13),
    ("circuit_failure_threshold", 10**12),
    ("circuit_reset_seconds", 1e13),
    ("request_timeout_ms", 1e13),
    ("total_timeout_ms", 1e13),
    ("lock_timeout_ms", 1e13),
    ("log_retention_days", 10**12),
    ("max_result_chars", 10**12),
]


@pytest.mark.parametrize(("key", "value"), HUGE)
def test_huge_numbers_are_config_errors_naming_the_key(env: Env, key: str, value: Any) -> None:
    env.write_config({key: value})
    for tool, args in (("search_quota_status", {}), ("smart_search", SEARCH)):
        result = env.call(tool, args)
        assert result["error_code"] == "config_error", result
        assert result["error"].startswith(f'Config key "{key}" must be from ')
    assert not env.state_dir.exists()  # refused before anything was touched


def test_largest_retention_is_accepted_and_the_log_line_is_written(env: Env) -> None:
    # Item 7: 10**12 days gave "search log not written (OverflowError)" after writing the line.
    configure(env, log_retention_days=36500)
    proc = env.run_cli(json.dumps({"tool": "smart_search", "args": SEARCH}))
    assert proc.returncode == 0 and proc.stderr == b"", proc.stderr
    assert json.loads(proc.stdout)["error_code"] == UNREACHABLE
    assert len(today_log(env).read_bytes().splitlines()) == 1
    configure(env, log_retention_days=36501)
    proc = env.run_cli(json.dumps({"tool": "smart_search", "args": SEARCH}))
    assert json.loads(proc.stdout)["error"] == (
        'Config key "log_retention_days" must be from 1 to 36500.'
    )
    assert proc.stderr == b""


# --- item 3: links and permissions in the state directory -------------------------------------


def test_a_link_planted_at_the_temp_name_is_never_written_through(env: Env, tmp_path: Path) -> None:
    assert env.call("search_mark_agent_complete", {"agent_id": "general"})["error"] is None
    victim = tmp_path / "victim.txt"
    victim.write_text("precious")
    (env.state_dir / "search-quota.json.tmp").symlink_to(victim)
    env.spend((("general", "gemini", 1),))  # a write of the ledger
    assert victim.read_text() == "precious"
    assert not ledger(env).is_symlink() and stat.S_ISREG(ledger(env).lstat().st_mode)
    assert env.call("search_quota_status")["providers"]["gemini"]["used"] == 1
    assert not (env.state_dir / "search-quota.json.tmp").exists()


@pytest.mark.parametrize("name", ["search-quota.json", "search-breaker.json"])
def test_a_linked_state_file_is_refused_and_left_alone(env: Env, tmp_path: Path, name: str) -> None:
    assert env.call("search_mark_agent_complete", {"agent_id": "general"})["error"] is None
    real = tmp_path / "elsewhere.json"
    real.write_bytes((env.state_dir / "search-quota.json").read_bytes())
    link = env.state_dir / name
    link.unlink(missing_ok=True)
    link.symlink_to(real)
    before = real.read_bytes()
    configure(env)
    tools = [("smart_search", SEARCH)]
    if name == "search-quota.json":
        tools.append(("search_quota_status", {}))
    for tool, args in tools:
        result = env.call(tool, args)
        assert result["error_code"] == "state_unsafe", result
        assert result["error"] == (
            f"State file {link} is a symbolic link; smart-search never follows links in its "
            "state directory. It was left in place: remove it."
        )
    assert real.read_bytes() == before and link.is_symlink()


def test_a_linked_lock_file_is_refused(env: Env, tmp_path: Path) -> None:
    target = tmp_path / "target.lock"
    env.state_dir.mkdir(mode=0o700, parents=True)
    (env.state_dir / "search-quota.json.lock").symlink_to(target)
    result = env.call("search_mark_agent_complete", {"agent_id": "general"})
    assert result["error_code"] == "state_unsafe", result
    assert str(env.state_dir / "search-quota.json.lock") in result["error"]
    assert "symbolic link" in result["error"]
    assert not target.exists() and not ledger(env).exists()


def test_state_writable_by_others_is_refused_naming_path_and_mode(env: Env) -> None:
    assert env.call("search_mark_agent_complete", {"agent_id": "general"})["error"] is None
    before = ledger(env).read_bytes()
    os.chmod(env.state_dir, 0o777)
    for tool, args in (("search_quota_status", {}), ("smart_search", SEARCH)):
        result = env.call(tool, args)
        assert result["error_code"] == "state_unsafe", result
        assert result["error"] == (
            f"State directory {env.state_dir} has mode 0777, writable by group or others. "
            f"It was left in place: chmod go-w {env.state_dir}."
        )
    os.chmod(env.state_dir, 0o700)
    os.chmod(ledger(env), 0o620)
    result = env.call("search_quota_status")
    assert result["error_code"] == "state_unsafe"
    assert result["error"].startswith(f"State file {ledger(env)} has mode 0620, writable by group")
    assert ledger(env).read_bytes() == before


def test_state_owned_by_another_user_is_refused(env: Env, monkeypatch: pytest.MonkeyPatch) -> None:
    assert env.call("search_mark_agent_complete", {"agent_id": "general"})["error"] is None
    me = os.geteuid()
    monkeypatch.setattr(os, "geteuid", lambda: me + 4242)
    result = env.call("search_quota_status")
    assert result["error_code"] == "state_unsafe"
    assert result["error"] == (
        f"State directory {env.state_dir} belongs to uid {me}, not to this user "
        f"(uid {me + 4242}). It was left in place: chown it or choose another state_dir."
    )


def test_files_are_private_even_under_umask_000(env: Env, fake: FakeServer) -> None:
    configure(env, fake)
    fake.route("/search", Reply(200, b"<html><body>nothing</body></html>"))
    env.state_dir = env.root / "deep" / "er" / "state"
    env.environ["SMART_SEARCH_STATE_DIR"] = str(env.state_dir)
    old = os.umask(0)
    try:
        env.call("smart_search", {"query": "q", "agent_id": "general", "force_provider": "brave"})
        env.call("smart_search", SEARCH)  # web tiers: breaker and pacing files too
    finally:
        os.umask(old)
    modes = {
        str(p.relative_to(env.root)): stat.S_IMODE(p.lstat().st_mode)
        for p in env.root.rglob("*")
        if p.is_relative_to(env.root / "deep")
    }
    locks = [name for name in modes if name.endswith(".lock")]
    assert len(locks) >= 2, modes
    for name, mode in modes.items():
        is_dir = (env.root / name).is_dir()
        assert mode == (0o700 if is_dir else 0o600), (name, oct(mode))


def test_a_loose_lock_file_of_ours_is_tightened_and_anothers_is_refused(
    env: Env, monkeypatch: pytest.MonkeyPatch
) -> None:
    env.state_dir.mkdir(mode=0o700, parents=True)
    lock = env.state_dir / "search-quota.json.lock"
    lock.touch()
    os.chmod(lock, 0o666)  # what an older version left under umask 000
    assert env.call("search_mark_agent_complete", {"agent_id": "general"})["error"] is None
    assert stat.S_IMODE(lock.stat().st_mode) == 0o600
    os.chmod(lock, 0o666)
    real_lstat = os.lstat

    def foreign(path: Any, *args: Any, **kwargs: Any) -> Any:
        st = real_lstat(path, *args, **kwargs)
        if str(path) == str(lock):
            fields = list(st)
            fields[stat.ST_UID] = os.geteuid() + 4242
            return os.stat_result(fields)
        return st

    monkeypatch.setattr(os, "lstat", foreign)
    result = env.call("search_mark_agent_complete", {"agent_id": "general"})
    assert result["error_code"] == "state_unsafe" and str(lock) in result["error"]
    assert stat.S_IMODE(lock.stat().st_mode) == 0o666


def test_log_links_are_refused_never_appended_through(
    env: Env, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    configure(env)
    assert env.call("smart_search", SEARCH)["error_code"] == UNREACHABLE
    log = today_log(env)
    victim = tmp_path / "victim.txt"
    victim.write_text("precious")
    log.unlink()
    log.symlink_to(victim)
    assert env.call("smart_search", SEARCH)["error_code"] == UNREACHABLE
    assert victim.read_text() == "precious"
    assert "search log not written" in capsys.readouterr().err
    # The logs directory itself as a link.
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir(mode=0o700)
    log.unlink()
    (env.state_dir / "logs").rmdir()
    (env.state_dir / "logs").symlink_to(elsewhere)
    assert env.call("smart_search", SEARCH)["error_code"] == UNREACHABLE
    # internal-errors.log is refused through the linked directory too.
    from smart_search.search import tools

    monkeypatch.setattr(tools, "search_quota_status", _boom("bug"))
    assert env.call("search_quota_status")["error_code"] == "internal"
    assert list(elsewhere.iterdir()) == []


# --- item 4: provider answers that echo a key ---------------------------------------------------


def _boom(message: str) -> Any:
    def fail(*_args: Any, **_kwargs: Any) -> Any:
        raise RuntimeError(message)

    return fail


def _assert_no_key(blob: bytes | str) -> None:
    text = blob.decode("utf-8", "replace") if isinstance(blob, bytes) else blob
    for key in (GEMINI_KEY, BRAVE_KEY):
        assert key not in text
        assert key[:12] not in text  # not even its start, where a cut would leave it


def test_keys_echoed_in_a_gemini_answer_never_reach_stdout_or_the_log(
    env: Env, fake: FakeServer
) -> None:
    configure(env, fake)
    answer: Any = fixture_json("gemini-ok.json")
    candidate = answer["candidates"][0]
    candidate["content"]["parts"][0]["text"] = (
        f"Your key is {GEMINI_KEY}; the other one is {BRAVE_KEY}. " + "Filler text. " * 2000
    )
    chunk = candidate["groundingMetadata"]["groundingChunks"][0]["web"]
    chunk["uri"] = f"https://example.com/page?key={GEMINI_KEY}"
    chunk["title"] = f"title {BRAVE_KEY}"
    fake.route(GEMINI_PATH, Reply(200, json.dumps(answer).encode(),
                                  {"content-type": "application/json"}))  # fmt: skip
    call = {"tool": "smart_search", "args": {**SEARCH, "force_provider": "gemini"}}
    proc = env.run_cli(json.dumps(call))
    assert proc.returncode == 0 and proc.stderr == b""
    result = json.loads(proc.stdout)
    assert_valid_result("smart_search", result)
    assert result["provider_used"] == "gemini" and result["error"] is None
    assert result["results"].startswith("Your key is [redacted]; the other one is [redacted].")
    assert result["truncated"] is True
    assert f"title {'[redacted]'}" in [c["title"] for c in result["citations"]]
    _assert_no_key(proc.stdout)
    _assert_no_key(today_log(env).read_bytes())


def test_keys_echoed_in_a_brave_answer_are_scrubbed_even_where_the_cap_cuts(
    env: Env, fake: FakeServer
) -> None:
    configure(env, fake, max_result_chars=300)
    answer: Any = fixture_json("brave-ok.json")
    first = answer["web"]["results"][0]
    # The cap cuts this snippet in the middle of the key: scrubbing must come first.
    first["description"] = "y" * 160 + BRAVE_KEY + " tail"
    first["title"] = f"T {GEMINI_KEY}"
    first["url"] = f"https://example.com/?token={BRAVE_KEY}"
    fake.route(BRAVE_PATH, Reply(200, json.dumps(answer).encode(),
                                 {"content-type": "application/json"}))  # fmt: skip
    call = {"tool": "smart_search", "args": {**SEARCH, "force_provider": "brave"}}
    proc = env.run_cli(json.dumps(call))
    result = json.loads(proc.stdout)
    assert result["provider_used"] == "brave" and result["truncated"] is True
    assert result["results"][0]["url"] == "https://example.com/?token=[redacted]"
    _assert_no_key(proc.stdout)
    _assert_no_key(today_log(env).read_bytes())


# --- item 5: keys that cannot be sent, and tracebacks that would quote them ---------------------


@pytest.mark.parametrize(
    "value", ["abc123\r\nX-Injected: 1", "klucz-\u017c\u00f3\u0142w-123456", "key\u2028key-12345"]
)
@pytest.mark.parametrize("where", ["environment", "openclaw.json"])
def test_a_key_that_cannot_go_in_a_header_is_a_config_error(
    env: Env, value: str, where: str
) -> None:
    configure(env)
    if where == "environment":
        env.environ["GEMINI_API_KEY"] = value
        name = "GEMINI_API_KEY"
    else:
        env.environ.pop("BRAVE_API_KEY")
        doc = json.loads(env.config_path.read_text())
        doc["env"] = {"vars": {"BRAVE_API_KEY": value}}
        env.config_path.write_text(json.dumps(doc))
        name = "BRAVE_API_KEY"
    proc = env.run_cli(json.dumps({"tool": "smart_search", "args": SEARCH}))
    result = json.loads(proc.stdout)
    assert (result["error"], result["error_code"]) == (
        f"{name} contains characters that cannot be sent in an HTTP header.",
        "config_error",
    )
    assert proc.stderr == b""
    assert value.strip()[:6] not in proc.stdout.decode()
    assert not (env.state_dir / "logs" / "internal-errors.log").exists()


@pytest.mark.parametrize("stage", ["tool", "config"])
def test_internal_errors_log_never_holds_a_key(
    env: Env, monkeypatch: pytest.MonkeyPatch, stage: str
) -> None:
    configure(env)
    message = f"boom {GEMINI_KEY} {BRAVE_KEY!r} {GEMINI_KEY.encode()!r} ?k={BRAVE_KEY}"
    if stage == "tool":
        from smart_search.search import tools

        monkeypatch.setattr(tools, "search_quota_status", _boom(message))
    else:
        from smart_search.host import config

        monkeypatch.setattr(config, "load_settings", _boom(message))
    result = env.call("search_quota_status")
    assert result == {"error": "Internal error: RuntimeError", "error_code": "internal"}
    text = (env.state_dir / "logs" / "internal-errors.log").read_text()
    assert "RuntimeError: boom [redacted] '[redacted]' b'[redacted]' ?k=[redacted]" in text
    _assert_no_key(text)


# --- item 6: every fault classified -------------------------------------------------------------


@pytest.mark.parametrize("depth", [999, 1000, 1020, 1023, 1100, 50_000])
def test_arguments_nested_about_1000_deep_are_invalid_input(env: Env, depth: int) -> None:
    nested = "[" * depth + "]" * depth
    for raw in (
        '{"tool": "smart_search", "args": {"query": N, "agent_id": "a"}}',
        '{"tool": "search_quota_status", "args": {"x": N}}',
        '{"tool": "search_mark_agent_complete", "args": {"agent_id": "a", "x": N}}',
    ):
        raw = raw.replace("N", nested)
        from smart_search.shell.runner import handle

        result = handle(raw.encode(), env.environ)
        assert result["error_code"] == "invalid_input", result
        if depth >= 1000:
            assert result["error"] == "Input is nested too deeply.", result


@pytest.mark.parametrize("depth", [900, 1000, 1100])
def test_config_nested_900_deep_is_a_config_error(env: Env, depth: int) -> None:
    nested = "[" * depth + "]" * depth
    env.config_path.write_text(
        '{"skills": {"entries": {"smart-search": {"config": {"x": N}}}}}'.replace("N", nested)
    )
    result = env.call("search_quota_status")
    assert result == {"error": "openclaw.json is nested too deeply.", "error_code": "config_error"}


FAULTS = {
    errno.EROFS: "the file system is read-only",
    errno.ENOSPC: "no space left on the device",
    errno.EDQUOT: "the disk quota is exhausted",
    errno.EACCES: "permission denied",
}


@pytest.mark.parametrize("code", sorted(FAULTS))
@pytest.mark.parametrize("stage", ["create", "write"])
def test_read_only_or_full_state_is_state_unwritable_and_nothing_spent(
    env: Env, fake: FakeServer, monkeypatch: pytest.MonkeyPatch, code: int, stage: str
) -> None:
    configure(env, fake, agent_allocations={"cron": {"gemini": 0, "brave": 5}})
    fake.route(BRAVE_PATH, Reply(200, b"{}", {"content-type": "application/json"}))
    written = Ledger(env.settings())  # a ledger file to damage: one unit taken and given back
    held, _ = written.reserve("cron", "brave")
    written.refund("cron", "brave", held)
    before = ledger(env).read_bytes()
    real_open, real_write = os.open, os.write

    def failing_open(path: Any, flags: int, *args: Any, **kwargs: Any) -> int:
        if stage == "create" and str(path).endswith(".tmp"):
            raise OSError(code, os.strerror(code), str(path))
        return real_open(path, flags, *args, **kwargs)

    def failing_write(fd: int, data: Any) -> int:
        if stage == "write" and os.readlink(f"/proc/self/fd/{fd}").endswith(".tmp"):
            raise OSError(code, os.strerror(code))
        return real_write(fd, data)

    monkeypatch.setattr(os, "open", failing_open)
    monkeypatch.setattr(os, "write", failing_write)
    call = {"query": "q", "agent_id": "cron", "force_provider": "brave"}
    result = env.call("smart_search", call)
    monkeypatch.undo()
    assert (result["error"], result["error_code"]) == (
        f"State file {ledger(env)} cannot be written ({FAULTS[code]}). "
        "Nothing was changed or spent.",
        "state_unwritable",
    )
    assert fake.requests == []  # no provider was called: nothing was spent
    assert ledger(env).read_bytes() == before
    assert not (env.state_dir / "search-quota.json.tmp").exists()


def _limit_file_size() -> None:
    import resource

    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # write() then fails with EFBIG
    resource.setrlimit(resource.RLIMIT_FSIZE, (64, 64))


def test_a_real_write_failure_is_state_unwritable(env: Env) -> None:
    """No simulation: the kernel refuses the ledger write (a file-size limit, which holds for
    root too, unlike a read-only directory's mode)."""
    proc = subprocess.run(
        [sys.executable, "-m", "smart_search"],
        input=b'{"tool": "search_mark_agent_complete", "args": {"agent_id": "general"}}',
        capture_output=True,
        env=env.environ,
        cwd=str(env.root),
        preexec_fn=_limit_file_size,
        timeout=60,
    )
    assert proc.returncode == 0 and proc.stderr == b""
    result = json.loads(proc.stdout)
    assert (result["error"], result["error_code"]) == (
        f"State file {ledger(env)} cannot be written (the file size limit was reached). "
        "Nothing was changed or spent.",
        "state_unwritable",
    )
    assert not ledger(env).exists() and not (env.state_dir / "search-quota.json.tmp").exists()


@pytest.mark.skipif(
    os.geteuid() == 0,
    reason="root writes through directory permissions; the simulated EACCES/EROFS test and the "
    "RLIMIT_FSIZE test cover this path as root",
)
def test_a_read_only_state_directory_is_state_unwritable(env: Env) -> None:
    written = Ledger(env.settings())  # a ledger file: one unit taken and given back
    held, _ = written.reserve("general", "gemini")
    written.refund("general", "gemini", held)
    before = ledger(env).read_bytes()
    os.chmod(env.state_dir, 0o500)
    try:
        result = env.call("smart_search", {"query": "q", "agent_id": "tech"})
    finally:
        os.chmod(env.state_dir, 0o700)
    assert result["error_code"] == "state_unwritable"
    assert "(permission denied)" in result["error"] and str(env.state_dir) in result["error"]
    assert ledger(env).read_bytes() == before


# --- item 10: unset variables -------------------------------------------------------------------


def test_an_unset_variable_in_a_config_string_is_a_config_error(env: Env) -> None:
    env.environ.pop("SS_UNSET_ROOT", None)
    env.write_config({"state_dir": "${SS_UNSET_ROOT}/x"})
    result = env.call("search_quota_status")
    assert (result["error"], result["error_code"]) == (
        'Config key "state_dir" uses ${SS_UNSET_ROOT}, but the environment variable '
        "SS_UNSET_ROOT is not set (or is empty).",
        "config_error",
    )
    env.environ["SS_EMPTY"] = ""
    env.write_config({"finance_keywords": ["ok", "${SS_EMPTY}"]})
    assert env.call("search_quota_status")["error"].startswith(
        'Config key "finance_keywords[1]" uses ${SS_EMPTY}'
    )
    # Set, and escaped: both fine.
    env.environ.pop("SMART_SEARCH_STATE_DIR")
    env.environ["SS_ROOT"] = str(env.root / "r")
    env.write_config({"state_dir": "${SS_ROOT}/x"})
    assert env.settings().state_dir == str(env.root / "r" / "x")
    env.write_config({"finance_keywords": ["$${SS_UNSET_ROOT}"]})
    assert env.settings().finance_keywords == ("${ss_unset_root}",)
