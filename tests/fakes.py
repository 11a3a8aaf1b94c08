"""A scriptable loopback HTTP server for tests: real sockets, real delays, real misbehaviour.

    with FakeServer() as fake:
        fake.route("/res/v1/web/search", Reply(429, json=..., headers={...}), Reply(200, json=...))
        ... point an endpoint at fake.url ...
        assert fake.requests[0].headers["x-subscription-token"] == KEY

Each path serves its replies in order and repeats the last one. Unscripted paths get a 404.
A `Reply` can wait before its headers (`delay`), trickle its body (`trickle_delay`), claim a
longer `content_length` than it sends, stop after `drop_after` body bytes (with a TCP reset when
`reset=True`), send chunked, or send `raw` bytes verbatim. Every request is recorded with its
arrival time (`time.monotonic()`). Written on raw sockets because http.server cannot lie about
Content-Length, reset a connection, or stall without holding the whole server.
"""

from __future__ import annotations

import gzip
import socket
import struct
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import parse_qs, urlsplit

import orjson

FIXTURES = Path(__file__).parent / "fixtures" / "api"

_REASONS = {
    200: "OK",
    204: "No Content",
    302: "Found",
    400: "Bad Request",
    401: "Unauthorized",
    403: "Forbidden",
    404: "Not Found",
    422: "Unprocessable Entity",
    429: "Too Many Requests",
    500: "Internal Server Error",
    502: "Bad Gateway",
    503: "Service Unavailable",
}


def fixture_bytes(name: str) -> bytes:
    """A payload from tests/fixtures/api/."""
    return (FIXTURES / name).read_bytes()


def fixture_json(name: str) -> object:
    return orjson.loads(fixture_bytes(name))


def fixture_headers(name: str) -> dict[str, str]:
    """Header lines of a `*.headers.txt` fixture (comments and the status line skipped)."""
    headers = {}
    for line in (FIXTURES / name).read_text().splitlines():
        if line.startswith("#") or line.startswith("HTTP/") or ":" not in line:
            continue
        key, value = line.split(":", 1)
        headers[key.strip()] = value.strip()
    return headers


def gzipped(data: bytes) -> bytes:
    return gzip.compress(data, compresslevel=9)


@dataclass
class Reply:
    """One scripted response."""

    status: int = 200
    body: bytes | str = b""
    headers: dict[str, str] = field(default_factory=dict)
    json: object | None = None  # serialized as the body, with a JSON content type
    delay: float = 0.0  # seconds before the status line
    trickle_delay: float = 0.0  # seconds between body pieces of `trickle_size` bytes
    trickle_size: int = 1
    content_length: int | None = None  # the header's value; default: the real body length
    drop_after: int | None = None  # send this many body bytes, then close
    reset: bool = False  # close with a TCP RST instead of a FIN
    chunked: bool = False
    raw: bytes | None = None  # sent verbatim instead of a built response

    def body_bytes(self) -> bytes:
        if self.json is not None:
            return orjson.dumps(self.json)
        return self.body.encode() if isinstance(self.body, str) else self.body


@dataclass
class RecordedRequest:
    method: str
    target: str  # path and query as sent
    path: str
    query: dict[str, list[str]]
    headers: dict[str, str]  # lower-cased names
    body: bytes
    arrived: float  # time.monotonic() when the request head was complete

    def json(self) -> object:
        return orjson.loads(self.body)


class FakeServer:
    """Threaded HTTP/1.1 server on 127.0.0.1 (an ephemeral port); one response per connection."""

    def __init__(self) -> None:
        self._listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self._listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self._listener.bind(("127.0.0.1", 0))
        self._listener.listen(64)
        self._listener.settimeout(0.05)
        self.port: int = self._listener.getsockname()[1]
        self.url = f"http://127.0.0.1:{self.port}"
        self.requests: list[RecordedRequest] = []
        self._routes: dict[str, list[Reply]] = {}
        self._lock = threading.Lock()
        self._stopping = threading.Event()
        self._connections: set[socket.socket] = set()
        self._threads: list[threading.Thread] = []
        self._acceptor = threading.Thread(target=self._accept_loop, name="fake-accept", daemon=True)

    def __enter__(self) -> FakeServer:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def start(self) -> None:
        self._acceptor.start()

    def stop(self) -> None:
        self._stopping.set()
        self._acceptor.join(timeout=2)
        self._listener.close()
        with self._lock:
            conns = list(self._connections)
        for conn in conns:
            try:
                conn.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
        for thread in self._threads:
            thread.join(timeout=2)

    def route(self, path: str, *replies: Reply) -> None:
        """Serve `replies` in order on `path` (query ignored); the last one repeats."""
        if not replies:
            raise ValueError("route() needs at least one Reply")
        with self._lock:
            self._routes[path] = list(replies)

    def requests_to(self, path: str) -> list[RecordedRequest]:
        with self._lock:
            return [r for r in self.requests if r.path == path]

    # --- internals ---

    def _next_reply(self, path: str) -> Reply:
        with self._lock:
            queue = self._routes.get(path)
            if not queue:
                return Reply(404, body=b"not scripted")
            return queue.pop(0) if len(queue) > 1 else queue[0]

    def _accept_loop(self) -> None:
        while not self._stopping.is_set():
            try:
                conn, _ = self._listener.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            conn.settimeout(None)
            with self._lock:
                self._connections.add(conn)
            thread = threading.Thread(target=self._serve, args=(conn,), daemon=True)
            self._threads.append(thread)
            thread.start()

    def _serve(self, conn: socket.socket) -> None:
        reset = False
        try:
            request = self._read_request(conn)
            if request is None:
                return
            with self._lock:
                self.requests.append(request)
            reply = self._next_reply(request.path)
            reset = reply.reset
            self._respond(conn, reply)
        except OSError:
            pass  # the client went away: that is often the point of the test
        finally:
            with self._lock:
                self._connections.discard(conn)
            if reset:
                # SO_LINGER with a zero timeout turns close() into a TCP RST.
                try:
                    conn.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
                except OSError:
                    pass
            conn.close()

    def _read_request(self, conn: socket.socket) -> RecordedRequest | None:
        conn.settimeout(5)
        data = b""
        while b"\r\n\r\n" not in data:
            chunk = conn.recv(65536)
            if not chunk:
                return None
            data += chunk
            if len(data) > 1 << 20:
                return None
        head, _, rest = data.partition(b"\r\n\r\n")
        arrived = time.monotonic()
        lines = head.decode("latin-1").split("\r\n")
        method, target, _version = lines[0].split(" ", 2)
        headers: dict[str, str] = {}
        for line in lines[1:]:
            name, _, value = line.partition(":")
            headers[name.strip().lower()] = value.strip()
        length = int(headers.get("content-length", "0") or 0)
        while len(rest) < length:
            chunk = conn.recv(65536)
            if not chunk:
                break
            rest += chunk
        conn.settimeout(None)
        parts = urlsplit(target)
        return RecordedRequest(
            method=method,
            target=target,
            path=parts.path,
            query=parse_qs(parts.query, keep_blank_values=True),
            headers=headers,
            body=rest[:length],
            arrived=arrived,
        )

    def _respond(self, conn: socket.socket, reply: Reply) -> None:
        if reply.delay and self._stopping.wait(reply.delay):
            return
        if reply.raw is not None:
            conn.sendall(reply.raw)
            return
        body = reply.body_bytes()
        headers = {k.lower(): v for k, v in reply.headers.items()}
        if reply.json is not None:
            headers.setdefault("content-type", "application/json; charset=UTF-8")
        headers["connection"] = "close"
        if reply.chunked:
            headers["transfer-encoding"] = "chunked"
            piece = max(1, reply.trickle_size) if reply.trickle_delay else max(1, len(body))
            wire = b"".join(
                b"%x\r\n%s\r\n" % (len(body[i : i + piece]), body[i : i + piece])
                for i in range(0, len(body), piece)
            )
            wire += b"0\r\n\r\n"
        else:
            length = len(body) if reply.content_length is None else reply.content_length
            headers.setdefault("content-length", str(length))
            wire = body
        reason = _REASONS.get(reply.status, "Status")
        head = f"HTTP/1.1 {reply.status} {reason}\r\n"
        head += "".join(f"{k}: {v}\r\n" for k, v in headers.items()) + "\r\n"
        conn.sendall(head.encode("latin-1"))
        if reply.drop_after is not None:
            wire = wire[: reply.drop_after]
        if reply.trickle_delay:
            step = max(1, reply.trickle_size)
            for i in range(0, len(wire), step):
                conn.sendall(wire[i : i + step])
                if self._stopping.wait(reply.trickle_delay):
                    return
        else:
            conn.sendall(wire)
