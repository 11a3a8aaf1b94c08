"""Key pools (issue 20, point 3): several keys per provider, each (or each project) with its own
windows, the key with the most headroom first, a refused key disabled for its day and a key out
of quota exhausted until its reset, the next key tried within the same call, and keys named only
by their fingerprints everywhere (docs/quota.md, "Key pools").

The fakes are real loopback HTTP servers that answer by the key a request carries.
"""

from __future__ import annotations

import json
import subprocess
import sys
import threading
from calendar import timegm
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from smart_search.budget import keys, quota
from smart_search.budget.ledger import Ledger
from tests.conftest import Env, assert_valid_result
from tests.fakes import fixture_bytes

KEY_A = "SENTINEL-BRAVE-KEY-0001"
KEY_B = "SENTINEL-BRAVE-KEY-0002"
KEY_C = "SENTINEL-OTHER-KEY-0001"  # ends like KEY_A: its fingerprint is "…0001#2"
SENTINELS = (KEY_A, KEY_B, KEY_C)
FP_A, FP_B, FP_C = "…0001", "…0002", "…0001#2"
TOKEN = "x-subscription-token"


def utc(year: int, month: int, day: int, hour: int = 0) -> float:
    return float(timegm((year, month, day, hour, 0, 0, 0, 0, 0)))


class KeyedBrave:
    """A fake Brave on 127.0.0.1 that answers by the request's subscription token: `ok` (200,
    one billed request), `401`, or `quota` (a QUOTA_LIMITED 429). `fail_after[key] = n`: the
    key answers 401 from its (n+1)-th request on (a key revoked mid-burst). Keeps its own
    books: requests and billed answers per key."""

    def __init__(self) -> None:
        self.mode: dict[str, str] = {}
        self.fail_after: dict[str, int] = {}
        self.limit: dict[str, int] = {}  # a key's own allowance: past it, a quota 429
        self.requests: dict[str, int] = {}
        self.billed: dict[str, int] = {}
        self.after_401: dict[str, int] = {}  # requests a key got after it first answered 401
        self.leaked_in_url = False
        self.lock = threading.Lock()
        fake = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:  # noqa: N802 - the http.server API
                token = self.headers.get(TOKEN, "")
                if any(s in self.path for s in SENTINELS):
                    fake.leaked_in_url = True
                if self.path.startswith("/res/v1/web/search"):
                    status, body = fake.answer(token)
                else:  # a web engine's page: nothing here
                    status, body = 404, b"{}"
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def answer(self, token: str) -> tuple[int, bytes]:
        with self.lock:
            n = self.requests.get(token, 0)
            self.requests[token] = n + 1
            mode = self.mode.get(token, "ok")
            if token in self.fail_after and n >= self.fail_after[token]:
                mode = "401"
            if mode == "ok" and self.billed.get(token, 0) >= self.limit.get(token, 10**9):
                mode = "quota"
            if mode == "401":
                if token in self.after_401:
                    self.after_401[token] += 1
                else:
                    self.after_401[token] = 0
                return 401, b'{"type": "ErrorResponse", "error": {"code": "UNAUTHORIZED"}}'
            if mode == "quota":
                code = b'{"type": "ErrorResponse", "error": {"code": "QUOTA_LIMITED"}}'
                return 429, code
            self.billed[token] = self.billed.get(token, 0) + 1
            return 200, fixture_bytes("brave-ok.json")

    def __enter__(self) -> KeyedBrave:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def brave() -> Iterator[KeyedBrave]:
    with KeyedBrave() as fake:
        yield fake


@pytest.fixture
def env(tmp_path: Path) -> Env:
    return Env(tmp_path)


def configure(env: Env, fake: KeyedBrave, brave: dict[str, Any] | None = None, **more: Any) -> None:
    config: dict[str, Any] = {
        # Web engines answer from the fake too (404: they fail), so no test leaves the machine.
        "endpoints": {n: fake.url for n in ("gemini", "brave", "google", "bing", "duckduckgo")},
        "providers": {"brave": {"daily_limit": 5, **(brave or {})}},
        "retry_max_attempts": 1,
        "web_fetch_min_interval_ms": 0,
        "request_timeout_ms": 3000,
        "cache": {"enabled": False},
        **more,
    }
    env.write_config(config)


def search(env: Env, now: float | None = None, agent: str = "cron") -> dict[str, Any]:
    from smart_search.search.tools import smart_search

    args = {"query": "nasa launch", "agent_id": agent, "force_provider": "brave"}
    clock = (lambda: now) if now is not None else None
    result = smart_search(args, env.settings(), **({"clock": clock} if clock else {}))
    assert_valid_result("smart_search", result)
    return result


def brave_tier(result: dict[str, Any]) -> dict[str, Any]:
    return next(a for a in result["attempts"] if a["provider"] == "brave")


def status_keys(env: Env, now: float | None = None) -> dict[str, Any]:
    """Brave's pool accounts in the status: through the tool, or read by a ledger whose clock
    says `now`."""
    if now is None:
        return env.call("search_quota_status")["windows"]["brave"]["keys"]
    return Ledger(env.settings(), clock=lambda: now).full_status()["windows"]["brave"]["keys"]


# --- config forms -------------------------------------------------------------------------------


def test_env_pool_is_comma_separated_and_the_windows_are_the_sum(
    env: Env, brave: KeyedBrave
) -> None:
    configure(env, brave)
    env.environ["BRAVE_API_KEYS"] = f" {KEY_A}, ,{KEY_B} "
    s = env.settings()
    assert [k.fingerprint for k in s.key_pools["brave"]] == [FP_A, FP_B]
    assert s.key_pools["gemini"] == ()
    assert s.daily_limits["brave"] == 10 and s.monthly_limits["brave"] == 2000
    assert s.api_keys["brave"] is not None and s.api_keys["brave"].reveal() == KEY_A
    status = env.call("search_quota_status")
    assert status["windows"]["brave"]["daily"]["limit"] == 10
    assert status["windows"]["brave"]["headroom"] == 10
    assert set(status["windows"]["brave"]["keys"]) == {FP_A, FP_B}
    assert "keys" not in status["windows"]["gemini"]


def test_config_list_takes_strings_env_and_value_objects_projects_and_own_limits(
    env: Env, brave: KeyedBrave
) -> None:
    configure(env, brave, {"keys": [
        KEY_A,
        {"env": "POOL_SECOND", "daily_limit": 2, "monthly_limit": 40},
        {"value": KEY_C, "project": "team-x", "daily_limit": 7},
        {"value": "SENTINEL-PROJECT-KEY-9999", "project": "team-x"},
    ]})  # fmt: skip
    env.environ["POOL_SECOND"] = KEY_B
    s = env.settings()
    pool = s.key_pools["brave"]
    assert [(k.fingerprint, k.account, k.daily_limit, k.monthly_limit) for k in pool] == [
        (FP_A, FP_A, 5, 1000),
        (FP_B, FP_B, 2, 40),
        (FP_C, "team-x", 7, 1000),
        ("…9999", "team-x", 7, 1000),  # a project's keys share its windows and limits
    ]
    assert s.daily_limits["brave"] == 5 + 2 + 7  # the project counted once
    keys_status = status_keys(env)
    assert keys_status[FP_C]["project"] == "team-x" and keys_status[FP_A]["project"] is None
    assert keys_status["…9999"]["daily"] == {"used": 0, "limit": 7}


@pytest.mark.parametrize(
    ("entries", "path"),
    [
        ([KEY_A, 7], "providers.brave.keys[1]"),
        ([{"env": "UNSET_POOL_VAR"}], "providers.brave.keys[0].env"),
        ([{"value": KEY_A, "env": "X"}], "providers.brave.keys[0]"),
        ([{"value": KEY_A, "colour": "red"}], "providers.brave.keys[0]"),
        ([{KEY_B: 1}], "providers.brave.keys[0]"),  # a key misplaced as a field's name
        ([{"value": KEY_A, "daily_limit": -1}], "providers.brave.keys[0].daily_limit"),
        ([KEY_A, KEY_A], "providers.brave.keys[1]"),
        (["short"], "providers.brave.keys[0]"),
        ([KEY_A + "\x01z"], "providers.brave.keys[0]"),
        ([{"value": KEY_A, "project": "p q"}], "providers.brave.keys[0].project"),
        (
            [
                {"value": KEY_A, "project": "p", "daily_limit": 1},
                {"value": KEY_B, "project": "p", "daily_limit": 2},
            ],
            "providers.brave.keys[1]",
        ),
        ([], "providers.brave.keys"),
    ],
)
def test_a_bad_entry_is_a_config_error_naming_its_path_never_the_key(
    env: Env, brave: KeyedBrave, entries: list[Any], path: str
) -> None:
    configure(env, brave, {"keys": entries})
    before = sorted(p.name for p in env.state_dir.glob("*")) if env.state_dir.exists() else []
    result = env.call("search_quota_status")
    assert result["error_code"] == "config_error"
    assert f'"{path}' in result["error"]
    assert not any(s in json.dumps(result) for s in SENTINELS)
    after = sorted(p.name for p in env.state_dir.glob("*")) if env.state_dir.exists() else []
    assert after == before  # bad config changes no state


def test_one_key_is_no_pool_and_everything_is_as_it_was(env: Env, brave: KeyedBrave) -> None:
    configure(env, brave)
    env.environ["BRAVE_API_KEY"] = KEY_A
    result = search(env)
    assert result["provider_used"] == "brave"
    assert "key" not in brave_tier(result)
    assert "keys" not in env.call("search_quota_status")["windows"]["brave"]
    assert "keys" not in env.quota_doc()["windows"]["brave"]


# --- selection ----------------------------------------------------------------------------------


def test_the_key_with_most_headroom_is_used_ties_in_config_order(
    env: Env, brave: KeyedBrave
) -> None:
    configure(env, brave, {"keys": [KEY_A, {"value": KEY_B, "daily_limit": 3}, KEY_C]})
    ledger = Ledger(env.settings())
    picked = []
    for _ in range(6):
        hold, _ = ledger.reserve("cron", "brave")
        ledger.settle("cron", "brave", [(hold, 1)])
        picked.append(hold.key)
    # A and C start at 5, B at 3: A (first of the tie), C, then A and C alternate down to 3,
    # where B ties them and config order puts A first again.
    assert picked == [FP_A, FP_C, FP_A, FP_C, FP_A, FP_B]
    keys_status = status_keys(env)
    assert {fp: k["daily"]["used"] for fp, k in keys_status.items()} == {FP_A: 3, FP_B: 1, FP_C: 2}
    assert env.call("search_quota_status")["windows"]["brave"]["daily"]["used"] == 6


def test_the_pool_headroom_is_the_sum_and_a_call_needs_one_key_with_its_worst_case() -> None:
    pools = {
        "brave": (
            keys.Account("…aaaa", 2, 100, ("…aaaa",)),
            keys.Account("p", 2, 100, ("…bbbb", "…cccc")),
        )
    }
    c = quota.Ceilings({"gemini": 10, "brave": 4}, {}, {}, {"gemini": 10, "brave": 200},
                       max_units_per_call={"brave": 2}, pools=pools)  # fmt: skip
    doc = quota.roll(quota.new_day("2026-12-01"), quota.Windows("2026-12-01", {
        "gemini": ("2026-12-01", "2026-12"), "brave": ("2026-12-01", "2026-12")}))  # fmt: skip
    assert quota.window_headroom(doc, c, "brave", 0.0) == 4
    first = quota.reserve(doc, c, "a", "brave", 0.0)
    assert (first.account, first.key) == ("…aaaa", "…aaaa")
    quota.settle(doc, "a", "brave", first, 1)  # one of two billed: one unit left on …aaaa
    assert quota.window_headroom(doc, c, "brave", 0.0) == 3
    second = quota.reserve(doc, c, "a", "brave", 0.0)
    assert (second.account, second.key) == ("p", "…bbbb")
    # 1 unit left in all (…aaaa): the sum, but no key holds a worst case of 2.
    assert quota.window_headroom(doc, c, "brave", 0.0) == 1
    with pytest.raises(quota.QuotaExhausted):
        quota.reserve(doc, c, "a", "brave", 0.0)
    assert doc["windows"]["brave"]["day_used"] == 3
    assert doc["windows"]["brave"]["keys"]["p"]["day_used"] == 2


# --- 401 and 429 within one call ---------------------------------------------------------------


def test_a_401_disables_the_key_for_its_day_and_the_same_call_moves_on(
    env: Env, brave: KeyedBrave
) -> None:
    configure(env, brave, {"keys": [KEY_A, KEY_B]})
    brave.mode[KEY_A] = "401"
    now = utc(2026, 12, 1, 10)
    result = search(env, now)
    assert result["provider_used"] == "brave" and result["error"] is None
    tier = brave_tier(result)
    assert tier["outcome"] == "success" and tier["key"] == FP_B
    assert tier["units"] == 1 and tier["retries"] == 1 and len(tier["attempt_latencies_ms"]) == 2
    assert len([a for a in result["attempts"] if a["provider"] == "brave"]) == 1  # no extra tier
    assert brave.requests == {KEY_A: 1, KEY_B: 1}
    ledger_keys = status_keys(env, now)
    assert ledger_keys[FP_A]["state"] == "disabled"
    assert ledger_keys[FP_A]["until"] == "2026-12-02T00:00:00Z"
    assert ledger_keys[FP_A]["daily"]["used"] == 0 and ledger_keys[FP_B]["daily"]["used"] == 1
    # The disabled key gets no more requests today, although it has the most headroom.
    for _ in range(3):
        assert search(env, now + 60)["provider_used"] == "brave"
    assert brave.requests[KEY_A] == 1 and brave.requests[KEY_B] == 4
    # Its day over, it is tried again.
    brave.mode[KEY_A] = "ok"
    result = search(env, utc(2026, 12, 2, 1))
    assert brave_tier(result)["key"] == FP_A and brave.requests[KEY_A] == 2


def test_a_quota_429_exhausts_the_key_until_its_reset_and_the_call_moves_on(
    env: Env, brave: KeyedBrave
) -> None:
    configure(env, brave, {"keys": [KEY_A, KEY_B]})
    brave.mode[KEY_A] = "quota"
    now = utc(2026, 12, 10, 9)
    result = search(env, now)
    tier = brave_tier(result)
    assert tier["outcome"] == "success" and tier["key"] == FP_B
    found = status_keys(env, now)[FP_A]
    # Brave's QUOTA_LIMITED is its month: exhausted until the first of the next.
    assert found["state"] == "exhausted" and found["until"] == "2027-01-01T00:00:00Z"
    assert found["remaining"] == 0
    for day in (11, 20, 31):
        assert brave_tier(search(env, utc(2026, 12, day, 9)))["key"] == FP_B
    assert brave.requests[KEY_A] == 1
    brave.mode[KEY_A] = "ok"
    assert brave_tier(search(env, utc(2027, 1, 1, 9)))["key"] == FP_A


def test_every_key_out_fails_the_tier_as_quota_exhausted_and_the_walk_moves_on(
    env: Env, brave: KeyedBrave
) -> None:
    configure(env, brave, {"keys": [KEY_A, KEY_B]})
    brave.mode[KEY_A] = brave.mode[KEY_B] = "quota"
    now = utc(2026, 12, 10, 9)
    first = brave_tier(search(env, now))
    assert first["outcome"] == "failed" and first["error_code"] == "quota_exhausted"
    assert brave.requests == {KEY_A: 1, KEY_B: 1}
    result = search(env, now + 60)
    tier = brave_tier(result)
    assert tier["outcome"] == "skipped" and tier["error_code"] == "quota_exhausted"
    assert "no usable key" in tier["error"]
    assert len(result["attempts"]) > 1  # the web tiers were tried after it
    assert brave.requests == {KEY_A: 1, KEY_B: 1}  # nothing more was sent to either key


def test_keys_at_their_limits_stop_the_tier_and_no_key_passes_its_window(
    env: Env, brave: KeyedBrave
) -> None:
    configure(
        env,
        brave,
        {"keys": [{"value": KEY_A, "daily_limit": 2}, {"value": KEY_B, "daily_limit": 3}]},
    )
    now = utc(2026, 12, 1, 12)
    answered = [search(env, now + i)["provider_used"] for i in range(7)]
    assert answered[:5] == ["brave"] * 5 and "brave" not in answered[5:]
    assert brave.billed == {KEY_A: 2, KEY_B: 3}


# --- real processes -----------------------------------------------------------------------------

WORKER = """
import json, os, sys
from smart_search.host.config import load_settings
from smart_search.search.tools import smart_search
settings = load_settings(os.environ)
for i in range(int(sys.argv[1])):
    args = {"query": "nasa launch", "agent_id": "cron", "force_provider": "brave"}
    r = smart_search(args, settings)
    print(json.dumps([a.get("key") for a in r["attempts"] if a["provider"] == "brave"]), flush=True)
"""


@pytest.mark.multiprocess
def test_processes_two_keys_at_their_limits_and_a_401_mid_burst(
    env: Env, brave: KeyedBrave
) -> None:
    """8 processes x 5 searches against a pool of 3 keys with daily limits 6, 6 and 4; key B
    is revoked after its 3rd request. No key is billed past its window, B gets no request once
    the ledger knows (at most one per process already holding it), every key's charge in the
    ledger equals what the fake billed, and no sentinel appears in any file or stream."""
    configure(env, brave, {"keys": [
        {"value": KEY_A, "daily_limit": 6},
        {"value": KEY_B, "daily_limit": 6},
        {"value": KEY_C, "daily_limit": 4},
    ]}, lock_timeout_ms=60000, total_timeout_ms=60000)  # fmt: skip
    brave.fail_after[KEY_B] = 3
    procs = [
        subprocess.Popen([sys.executable, "-c", WORKER, "5"], stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, env=env.environ)
        for _ in range(8)
    ]  # fmt: skip
    outs = [p.communicate(timeout=300) for p in procs]
    assert all(p.returncode == 0 for p in procs), [e.decode()[-2000:] for _, e in outs]
    assert brave.billed.get(KEY_A, 0) <= 6 and brave.billed.get(KEY_C, 0) <= 4
    assert brave.billed.get(KEY_B, 0) <= 3
    assert brave.after_401.get(KEY_B, 0) <= len(procs) - 1
    assert brave.billed.get(KEY_A, 0) + brave.billed.get(KEY_C, 0) == 10  # both ran to their limits
    doc = env.quota_doc()["windows"]["brave"]
    assert doc["keys"][FP_A]["day_used"] == brave.billed.get(KEY_A, 0)
    assert doc["keys"][FP_B]["day_used"] == brave.billed.get(KEY_B, 0)
    assert doc["keys"][FP_C]["day_used"] == brave.billed.get(KEY_C, 0)
    assert doc["day_used"] == sum(brave.billed.values())
    assert FP_B in doc["keys"][FP_B]["disabled"]
    assert not brave.leaked_in_url
    streams = b"".join(o + e for o, e in outs)
    assert_no_sentinel(env, streams)


def assert_no_sentinel(env: Env, streams: bytes = b"") -> None:
    """The fingerprint scan: no sentinel key (nor its first 12 characters) in any file under the
    state dir (the ledger, breaker, pacing, logs), nor in stdout or stderr."""
    needles = [s.encode() for s in SENTINELS] + [s[:12].encode() for s in SENTINELS]
    files = [p for p in env.state_dir.rglob("*") if p.is_file()]
    assert files, "nothing was written"
    for path in files:
        data = path.read_bytes()
        assert not any(n in data for n in needles), path
    assert not any(n in streams for n in needles)


def test_fingerprint_scan_after_refusals_quota_and_answers_through_the_cli(
    env: Env, brave: KeyedBrave
) -> None:
    configure(env, brave, {"keys": [KEY_A, {"env": "SECOND_KEY"}, KEY_C]})
    env.environ["SECOND_KEY"] = KEY_B
    brave.mode[KEY_A] = "401"
    brave.mode[KEY_C] = "quota"
    streams = b""
    for tool, args in (
        ("smart_search", {"query": "nasa launch", "agent_id": "cron", "force_provider": "brave"}),
        ("smart_search", {"query": "nasa news", "agent_id": "cron", "force_provider": "brave"}),
        ("search_quota_status", {}),
    ):
        done = env.run_cli(json.dumps({"tool": tool, "args": args}))
        assert done.returncode == 0, done.stderr.decode()[-2000:]
        streams += done.stdout + done.stderr
        result = json.loads(done.stdout)
        assert_valid_result(tool, result)
    assert set(result["windows"]["brave"]["keys"]) == {FP_A, FP_B, FP_C}
    logs = [p for p in env.state_dir.rglob("*.jsonl")]
    assert logs and FP_B in "".join(p.read_text() for p in logs)
    assert_no_sentinel(env, streams)


# --- the ledger document ------------------------------------------------------------------------


@pytest.mark.parametrize(
    "damage",
    [
        lambda e: e.update(day_used=-1),
        lambda e: e.update(disabled=[]),
        lambda e: e["disabled"].update({FP_A: "tomorrow"}),
        lambda e: e.update(exhausted_until=True),
        lambda e: e.pop("month_used"),
    ],
)
def test_a_damaged_account_is_state_corrupt_and_its_bytes_stay(
    env: Env, brave: KeyedBrave, damage: Any
) -> None:
    configure(env, brave, {"keys": [KEY_A, KEY_B]})
    assert search(env)["provider_used"] == "brave"
    path = env.state_dir / "search-quota.json"
    doc = json.loads(path.read_text())
    damage(doc["windows"]["brave"]["keys"][FP_A])
    path.write_text(json.dumps(doc))
    before = path.read_bytes()
    result = env.call("search_quota_status")
    assert result["error_code"] == "state_corrupt"
    assert path.read_bytes() == before


def test_importing_a_ledger_folds_its_accounts_and_disabled_keys(
    env: Env, brave: KeyedBrave
) -> None:
    from smart_search.budget.quota_merge import merge_quota

    configure(env, brave, {"keys": [KEY_A, KEY_B]})
    brave.mode[KEY_A] = "401"
    now = utc(2026, 12, 1, 10)
    search(env, now)
    ledger = Ledger(env.settings(), clock=lambda: now)
    mine = ledger.snapshot()
    theirs = json.loads(json.dumps(mine))
    theirs["windows"]["brave"]["keys"][FP_B]["day_used"] = 4
    del mine["windows"]["brave"]["keys"][FP_A]
    merged = merge_quota(mine, theirs)["windows"]["brave"]["keys"]
    assert merged[FP_B]["day_used"] == 4  # the larger of the two
    assert FP_A in merged[FP_A]["disabled"]  # an account only they had is taken whole
    assert merge_quota(mine, theirs, add=True)["windows"]["brave"]["keys"][FP_B]["day_used"] == 5


def test_doctor_names_the_pool_by_fingerprints(env: Env, brave: KeyedBrave) -> None:
    configure(env, brave)
    env.environ["BRAVE_API_KEYS"] = f"{KEY_A},{KEY_B}"
    done = subprocess.run(
        [sys.executable, "-m", "smart_search", "doctor"],
        capture_output=True, env=env.environ, timeout=60, cwd=str(env.root),
    )  # fmt: skip
    out = done.stdout + done.stderr
    assert f"key pool of 2 ({FP_A}, {FP_B})".encode() in out, out.decode()[-2000:]
    assert not any(s.encode() in out for s in SENTINELS)


def test_the_report_counts_units_per_key_fingerprint(env: Env, brave: KeyedBrave) -> None:
    """Issue 20, point 6: the report shows a pool's units per key, by fingerprint only."""
    configure(env, brave, {"keys": [KEY_A, KEY_B]})
    for _ in range(3):
        assert brave_tier(search(env))["outcome"] == "success"
    proc = subprocess.run(
        [sys.executable, "-m", "smart_search", "report", "--days", "1", "--json"],
        capture_output=True, env=env.environ, cwd=str(env.root), timeout=60,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    report = json.loads(proc.stdout)
    by_key = report["totals"]["units_by_key"]["brave"]
    billed = ((FP_A, brave.billed.get(KEY_A, 0)), (FP_B, brave.billed.get(KEY_B, 0)))
    assert by_key == {fp: n for fp, n in billed if n}
    assert sum(by_key.values()) == 3 == report["totals"]["units"]["brave"]["total"]
    text = subprocess.run(
        [sys.executable, "-m", "smart_search", "report", "--days", "1"],
        capture_output=True, env=env.environ, cwd=str(env.root), timeout=60,
    )  # fmt: skip
    assert "Units by key (key pools)" in text.stdout.decode()
    assert FP_A in text.stdout.decode()
    assert_no_sentinel(env, proc.stdout + proc.stderr + text.stdout + text.stderr)
