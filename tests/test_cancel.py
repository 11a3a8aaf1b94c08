"""A one-shot `smart-search` asked to stop (SIGTERM: how the OpenClaw plugin aborts a call) sends
nothing more and still settles: what never left is refunded, what left keeps its worst case."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time

from tests.conftest import Env
from tests.fakes import FakeServer, Reply, fixture_bytes
from tests.test_billing import configure


def _start(env: Env, query: str = "nasa news") -> subprocess.Popen[bytes]:
    proc = subprocess.Popen(
        [sys.executable, "-m", "smart_search"],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        env=env.environ, cwd=str(env.root),
    )  # fmt: skip
    assert proc.stdin is not None
    call = {"tool": "smart_search", "args": {"query": query, "agent_id": "cron"}}
    proc.stdin.write(json.dumps(call).encode())
    proc.stdin.close()
    proc.stdin = None  # written and closed: communicate() only reads
    return proc


def _wait_for_requests(fake: FakeServer, path: str, n: int, limit_s: float = 30) -> None:
    give_up = time.monotonic() + limit_s
    while len(fake.requests_to(path)) < n:
        assert time.monotonic() < give_up, "the request never reached the fake"
        time.sleep(0.02)


def _brave_used(env: Env) -> tuple[int, int]:
    status = env.call("search_quota_status")
    return status["providers"]["brave"]["used"], status["providers"]["brave"]["in_flight"]


def test_a_stop_during_the_backoff_refunds_the_retry_that_never_left(env: Env) -> None:
    with FakeServer() as fake:
        # A 503 (nothing billed), then a long backoff before the retry: the stop comes there.
        configure(env, fake, retry_base_delay=20_000, total_timeout_ms=120_000,
                  request_timeout_ms=60_000)  # fmt: skip
        ok = Reply(200, fixture_bytes("brave-ok.json"))
        fake.route("/res/v1/web/search", Reply(503, b"{}"), ok)
        fake.route("/html/", Reply(404, b"no"))
        started = time.monotonic()
        proc = _start(env)
        _wait_for_requests(fake, "/res/v1/web/search", 1)
        time.sleep(0.3)  # inside the 20 s backoff
        proc.send_signal(signal.SIGTERM)
        out, err = proc.communicate(timeout=60)
        took = time.monotonic() - started
        assert len(fake.requests_to("/res/v1/web/search")) == 1  # the retry never left
    assert took < 15, took  # it did not sit out the backoff
    assert proc.returncode == 143 and out == b""  # no answer: the caller gave up on it
    assert err == b"smart-search: stopped: The call was cancelled by its caller.\n"
    assert _brave_used(env) == (0, 0)  # the hold came back whole


def test_a_stop_while_the_request_is_out_keeps_its_worst_case(env: Env) -> None:
    with FakeServer() as fake:
        configure(env, fake, request_timeout_ms=60_000, total_timeout_ms=120_000)
        fake.route("/res/v1/web/search", Reply(200, fixture_bytes("brave-ok.json"), delay=30))
        fake.route("/html/", Reply(404, b"no"))
        started = time.monotonic()
        proc = _start(env)
        _wait_for_requests(fake, "/res/v1/web/search", 1)
        proc.send_signal(signal.SIGTERM)
        out, err = proc.communicate(timeout=60)
        took = time.monotonic() - started
        sent_web = len(fake.requests_to("/html/"))
    assert took < 20, took  # cut off, not waited out
    assert sent_web == 0  # nothing more was sent after the stop
    assert proc.returncode == 143 and out == b"" and b"Traceback" not in err
    assert _brave_used(env) == (1, 0)  # the request left: it may have been billed
