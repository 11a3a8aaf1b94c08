"""http.send against a real loopback server that stalls, trickles, lies and hangs up."""

from __future__ import annotations

import logging
import socket
import threading
import time
import zlib
from datetime import UTC, datetime, timedelta
from email.utils import format_datetime

import pytest

from smart_search import errors
from smart_search.sources.http import MAX_BODY_BYTES, HttpRequest, retry_after_seconds, send
from tests.fakes import FakeServer, Reply, gzipped

KEY = "SENTINEL-KEY-7f3a9c"
# Generous enough for a loaded 2-core box, yet far below the 30 s per-operation timeouts and the
# 60 s stalls below: an overshoot this large can only mean the call's deadline was not enforced.
OVERSHOOT_S = 5.0


@pytest.fixture
def fake() -> FakeServer:
    with FakeServer() as server:
        yield server


def _send(url: str, *, budget: float = 5.0, **kwargs: object):
    request = HttpRequest(kwargs.pop("method", "GET"), url, **kwargs)  # type: ignore[arg-type]
    return send(request, deadline=time.monotonic() + budget, request_timeout_s=budget)


def _closed_port() -> int:
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    sock.close()
    return port


def _http_workers() -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name == "smart-search-http"]


# --- the exchange itself ---


def test_get_sends_params_and_headers_and_returns_lowercased_headers(fake: FakeServer) -> None:
    fake.route("/s", Reply(200, body=b"hello", headers={"X-Custom-Thing": "yes"}))
    resp = _send(fake.url + "/s", params={"q": "a b&c"}, headers={"X-Subscription-Token": KEY})
    assert (resp.status, resp.body) == (200, b"hello")
    assert resp.headers["x-custom-thing"] == "yes"
    assert all(name == name.lower() for name in resp.headers)
    seen = fake.requests[0]
    assert seen.method == "GET"
    assert seen.query == {"q": ["a b&c"]}
    assert seen.headers["x-subscription-token"] == KEY
    assert seen.headers["user-agent"].startswith("smart-search/")
    assert "gzip" in seen.headers["accept-encoding"]


def test_post_sends_json_body(fake: FakeServer) -> None:
    fake.route("/p", Reply(200, json={"ok": True}))
    resp = _send(fake.url + "/p", method="POST", json={"query": "zażółć"})
    assert resp.body == b'{"ok":true}'
    assert fake.requests[0].method == "POST"
    assert fake.requests[0].json() == {"query": "zażółć"}
    assert fake.requests[0].headers["content-type"] == "application/json"


def test_callers_user_agent_wins(fake: FakeServer) -> None:
    fake.route("/ua", Reply(200))
    _send(fake.url + "/ua", headers={"User-Agent": "Mozilla/5.0 test"})
    assert fake.requests[0].headers["user-agent"] == "Mozilla/5.0 test"


def test_error_status_is_returned_not_raised(fake: FakeServer) -> None:
    fake.route("/e", Reply(502, body=b"<html><body>Bad gateway</body></html>"))
    resp = _send(fake.url + "/e")
    assert resp.status == 502
    assert b"Bad gateway" in resp.body


# --- one deadline, whatever the server does ---


def test_server_stalling_before_headers_is_cut_at_the_deadline(fake: FakeServer) -> None:
    fake.route("/stall", Reply(200, body=b"late", delay=60))
    started = time.monotonic()
    with pytest.raises(errors.Timeout):
        send(
            HttpRequest("GET", fake.url + "/stall"),
            deadline=started + 1.0,
            request_timeout_s=30,
        )
    elapsed = time.monotonic() - started
    assert 0.95 <= elapsed < 1.0 + OVERSHOOT_S


def test_body_trickling_one_byte_a_second_is_cut_at_the_deadline(fake: FakeServer) -> None:
    # httpx's read timeout (here 30 s per read) never fires: a byte arrives every second.
    fake.route("/trickle", Reply(200, body=b"x" * 60, trickle_delay=1.0))
    started = time.monotonic()
    with pytest.raises(errors.Timeout):
        send(
            HttpRequest("GET", fake.url + "/trickle"),
            deadline=started + 1.5,
            request_timeout_s=30,
        )
    elapsed = time.monotonic() - started
    assert 1.45 <= elapsed < 1.5 + OVERSHOOT_S


def test_abandoned_worker_is_woken_and_exits(fake: FakeServer) -> None:
    # A byte every 0.2 s never trips httpx's own 0.6 s read timeout: only the shutdown ends it.
    fake.route("/trickle", Reply(200, body=b"x" * 100, trickle_delay=0.2))
    with pytest.raises(errors.Timeout):
        _send(fake.url + "/trickle", budget=0.6)
    give_up = time.monotonic() + 5.0
    while _http_workers() and time.monotonic() < give_up:
        time.sleep(0.02)
    assert _http_workers() == []


def test_request_timeout_shorter_than_deadline_wins(fake: FakeServer) -> None:
    fake.route("/stall", Reply(200, delay=60))
    started = time.monotonic()
    with pytest.raises(errors.Timeout):
        send(HttpRequest("GET", fake.url + "/stall"), deadline=started + 30, request_timeout_s=0.5)
    elapsed = time.monotonic() - started
    assert 0.45 <= elapsed < 0.5 + OVERSHOOT_S


def test_no_time_left_sends_nothing(fake: FakeServer) -> None:
    fake.route("/x", Reply(200))
    with pytest.raises(errors.Timeout):
        send(
            HttpRequest("GET", fake.url + "/x"), deadline=time.monotonic() - 1, request_timeout_s=5
        )
    time.sleep(0.1)
    assert fake.requests == []


# --- broken transports ---


def test_connection_refused_is_a_transport_failure() -> None:
    started = time.monotonic()
    with pytest.raises(errors.TransportFailure) as caught:
        _send(f"http://127.0.0.1:{_closed_port()}/x")
    assert time.monotonic() - started < 2
    assert caught.value.retryable and caught.value.counts_for_breaker


def test_reset_mid_body_is_a_transport_failure(fake: FakeServer) -> None:
    fake.route("/r", Reply(200, body=b"x" * 200_000, drop_after=100_000, reset=True))
    with pytest.raises(errors.TransportFailure):
        _send(fake.url + "/r")


def test_body_shorter_than_content_length_is_a_transport_failure(fake: FakeServer) -> None:
    fake.route("/t", Reply(200, body=b'{"partial": tr', content_length=5000))
    with pytest.raises(errors.TransportFailure):
        _send(fake.url + "/t")


def test_incomplete_chunked_body_is_a_transport_failure(fake: FakeServer) -> None:
    fake.route("/c", Reply(200, body=b"x" * 5000, chunked=True, drop_after=3000))
    with pytest.raises(errors.TransportFailure):
        _send(fake.url + "/c")


def test_complete_chunked_body_is_read(fake: FakeServer) -> None:
    fake.route("/c", Reply(200, body=b"y" * 5000, chunked=True))
    assert _send(fake.url + "/c").body == b"y" * 5000


def test_hang_up_without_a_response_is_a_transport_failure(fake: FakeServer) -> None:
    fake.route("/h", Reply(raw=b""))
    with pytest.raises(errors.TransportFailure):
        _send(fake.url + "/h")


def test_garbage_instead_of_http_is_a_transport_failure(fake: FakeServer) -> None:
    fake.route("/g", Reply(raw=b"SSH-2.0-OpenSSH_9.6\r\n\r\n"))
    with pytest.raises(errors.TransportFailure):
        _send(fake.url + "/g")


# --- the 2 MiB bound, decompressed ---


def test_body_at_the_bound_is_read(fake: FakeServer) -> None:
    fake.route("/b", Reply(200, body=b"a" * MAX_BODY_BYTES))
    assert len(_send(fake.url + "/b").body) == MAX_BODY_BYTES


def test_body_over_the_bound_is_a_parse_error(fake: FakeServer) -> None:
    fake.route("/b", Reply(200, body=b"a" * (MAX_BODY_BYTES + 1)))
    with pytest.raises(errors.ParseError, match="2 MiB"):
        _send(fake.url + "/b")


def test_small_gzip_body_expanding_past_the_bound_is_a_parse_error(fake: FakeServer) -> None:
    bomb = gzipped(b"\0" * (MAX_BODY_BYTES * 8))
    assert len(bomb) < 64 * 1024  # small on the wire
    fake.route("/z", Reply(200, body=bomb, headers={"Content-Encoding": "gzip"}))
    with pytest.raises(errors.ParseError, match="2 MiB"):
        _send(fake.url + "/z")


def test_gzip_body_is_decompressed(fake: FakeServer) -> None:
    fake.route(
        "/z", Reply(200, body=gzipped(b'{"a": 1}' * 1000), headers={"Content-Encoding": "gzip"})
    )
    assert _send(fake.url + "/z").body == b'{"a": 1}' * 1000


@pytest.mark.parametrize("wbits", [zlib.MAX_WBITS, -zlib.MAX_WBITS], ids=["zlib", "raw"])
def test_deflate_body_is_decompressed_in_both_dialects(fake: FakeServer, wbits: int) -> None:
    compressor = zlib.compressobj(9, zlib.DEFLATED, wbits)
    payload = compressor.compress(b"deflated " * 500) + compressor.flush()
    fake.route("/d", Reply(200, body=payload, headers={"Content-Encoding": "deflate"}))
    assert _send(fake.url + "/d").body == b"deflated " * 500


def test_corrupt_gzip_is_a_parse_error(fake: FakeServer) -> None:
    fake.route(
        "/z",
        Reply(200, body=b"\x1f\x8b\x08\x00garbage-not-gzip", headers={"Content-Encoding": "gzip"}),
    )
    with pytest.raises(errors.ParseError):
        _send(fake.url + "/z")


def test_unknown_content_encoding_is_a_parse_error(fake: FakeServer) -> None:
    fake.route("/u", Reply(200, body=b"??", headers={"Content-Encoding": "zstd"}))
    with pytest.raises(errors.ParseError):
        _send(fake.url + "/u")


# --- redirects ---


def test_redirects_are_not_followed_by_default(fake: FakeServer) -> None:
    fake.route("/from", Reply(302, headers={"Location": "/to"}))
    fake.route("/to", Reply(200, body=b"landed"))
    assert _send(fake.url + "/from").status == 302
    assert [r.path for r in fake.requests] == ["/from"]


def test_redirects_are_followed_when_asked(fake: FakeServer) -> None:
    fake.route("/from", Reply(302, headers={"Location": "/to"}))
    fake.route("/to", Reply(200, body=b"landed"))
    assert _send(fake.url + "/from", follow_redirects=True).body == b"landed"


def test_a_request_carrying_a_key_never_follows_a_redirect(fake: FakeServer) -> None:
    fake.route("/from", Reply(302, headers={"Location": "/to"}))
    fake.route("/to", Reply(200, body=b"landed"))
    resp = _send(fake.url + "/from", follow_redirects=True, headers={"x-goog-api-key": KEY})
    assert resp.status == 302
    assert [r.path for r in fake.requests] == ["/from"]


# --- key safety ---


@pytest.mark.parametrize(
    "url",
    [
        "http://example.com/v1beta/models/x:generateContent",
        "http://10.0.0.1/res/v1/web/search",
        "ftp://127.0.0.1/x",
        "http://user:pw@127.0.0.1/x",
    ],
)
@pytest.mark.parametrize("header", ["x-goog-api-key", "X-Subscription-Token"])
def test_key_is_never_sent_in_clear_text_off_loopback(url: str, header: str) -> None:
    started = time.monotonic()
    with pytest.raises(errors.ConfigError) as caught:
        _send(url, headers={header: KEY})
    # Refused before any DNS or connect: an attempt would take the whole 5 s budget.
    assert time.monotonic() - started < 2.5
    assert KEY not in str(caught.value)


def test_no_key_or_query_in_messages_or_logs(
    fake: FakeServer, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    secret_query = "SENTINEL-QUERY-41d2"
    fake.route("/ok", Reply(200, body=b"fine"))
    fake.route("/stall", Reply(200, delay=60))
    fake.route("/cut", Reply(200, body=b"x", content_length=99))
    headers = {"x-goog-api-key": KEY}
    params = {"q": secret_query}
    messages = []
    _send(fake.url + "/ok", headers=headers, params=params)
    for url, budget in [
        (fake.url + "/stall", 0.3),
        (fake.url + "/cut", 5),
        (f"http://127.0.0.1:{_closed_port()}/x", 5),
    ]:
        with pytest.raises(errors.SearchError) as caught:
            _send(url, budget=budget, headers=headers, params=params)
        messages.append(str(caught.value))
        messages.append(repr(caught.value))
        # Our errors never chain httpx's exceptions (their text holds the full URL).
        assert caught.value.__cause__ is None
    assert len(messages) == 6
    logged = "\n".join(r.getMessage() for r in caplog.records)
    for text in [*messages, logged]:
        assert KEY not in text
        assert secret_query not in text
    assert not [r for r in caplog.records if r.name.startswith(("httpx", "httpcore"))]
    # The key went where it belongs, and only there.
    for seen in fake.requests:
        assert seen.headers["x-goog-api-key"] == KEY
        assert KEY not in seen.target


def test_request_repr_hides_headers_and_params() -> None:
    request = HttpRequest(
        "GET", "https://api.example/x", headers={"x-goog-api-key": KEY}, params={"q": "secret"}
    )
    assert KEY not in repr(request)
    assert "secret" not in repr(request)


# --- Retry-After ---


def test_retry_after_seconds_reads_both_forms() -> None:
    assert retry_after_seconds({"retry-after": "3"}) == 3.0
    assert retry_after_seconds({"retry-after": " 1.5 "}) == 1.5
    assert retry_after_seconds({"retry-after": "-4"}) == 0.0
    assert retry_after_seconds({}) is None
    assert retry_after_seconds({"retry-after": "soon"}) is None
    future = format_datetime(datetime.now(UTC) + timedelta(seconds=120), usegmt=True)
    assert 100 < (retry_after_seconds({"retry-after": future}) or 0) <= 121


def test_a_proxy_from_the_environment_carries_requests_off_loopback(
    fake: FakeServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    """httpx stays for this path (README, Development): with HTTP_PROXY set, a request to a host
    that is not loopback goes to the proxy in absolute form; loopback never goes through it."""
    for name in ("HTTPS_PROXY", "https_proxy", "ALL_PROXY", "all_proxy", "NO_PROXY", "no_proxy"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("HTTP_PROXY", fake.url)
    fake.route("/page", Reply(200, b"via the proxy"))
    response = send(
        HttpRequest("GET", "http://search.example.invalid/page", params={"q": "x"}),
        deadline=time.monotonic() + 5,
        request_timeout_s=5,
    )
    assert response.status == 200 and response.body == b"via the proxy"
    (seen,) = fake.requests
    assert seen.target == "http://search.example.invalid/page?q=x"  # absolute form: a proxy
    assert seen.headers["host"] == "search.example.invalid"
    # A loopback target ignores the proxy (a key never detours through one on this machine).
    direct = send(HttpRequest("GET", fake.url + "/page"), deadline=time.monotonic() + 5,
                  request_timeout_s=5)  # fmt: skip
    assert direct.status == 200 and fake.requests[-1].target == "/page"


def test_a_request_is_frozen_compares_by_value_and_never_shows_its_key() -> None:
    request = HttpRequest(
        "GET", "https://api.example.com/x?y=1", headers={"x-subscription-token": "SENTINEL-KEY"}
    )
    assert request.params == {} and request.cookies == {} and request.json is None
    assert not request.follow_redirects
    with pytest.raises(AttributeError):
        request.url = "https://elsewhere.example.com/"  # type: ignore[misc]
    with pytest.raises(AttributeError):
        del request.method  # type: ignore[misc]
    same = HttpRequest(
        "GET", "https://api.example.com/x?y=1", headers={"x-subscription-token": "SENTINEL-KEY"}
    )
    assert request == same and request != HttpRequest("POST", request.url)
    assert "SENTINEL" not in repr(request) and "y=1" not in repr(request)
    with pytest.raises(TypeError):
        hash(request)
    with pytest.raises(TypeError):
        HttpRequest("GET", "https://api.example.com/", {"q": "x"})  # type: ignore[misc]
