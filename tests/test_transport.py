"""transport.StdlibTransport: real TLS with verification, and no httpcore on the request path."""

from __future__ import annotations

import socket
import ssl
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from smart_search import errors
from smart_search.sources import http
from smart_search.sources.http import HttpRequest


@pytest.fixture(scope="module")
def cert(tmp_path_factory: Any) -> tuple[Path, Path]:
    """A throwaway self-signed certificate for 127.0.0.1 (openssl is in the base image)."""
    directory = tmp_path_factory.mktemp("tls")
    key, crt = directory / "key.pem", directory / "cert.pem"
    subprocess.run(
        ["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1",
         "-subj", "/CN=127.0.0.1", "-addext", "subjectAltName=IP:127.0.0.1",
         "-keyout", str(key), "-out", str(crt)],
        check=True, capture_output=True,
    )  # fmt: skip
    return crt, key


class TlsServer:
    """Answers every TLS request on 127.0.0.1 with one fixed JSON body."""

    def __init__(self, crt: Path, key: Path) -> None:
        self.context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        self.context.load_cert_chain(crt, key)
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port = self.listener.getsockname()[1]
        self.handshakes_failed = 0
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self) -> None:
        while True:
            try:
                raw, _ = self.listener.accept()
            except OSError:
                return
            try:
                with self.context.wrap_socket(raw, server_side=True) as conn:
                    data = b""
                    while b"\r\n\r\n" not in data:
                        data += conn.recv(4096)
                    body = b'{"ok": true}'
                    conn.sendall(
                        b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
                        + f"Content-Length: {len(body)}\r\n\r\n".encode()
                        + body
                    )
            except (ssl.SSLError, OSError):
                self.handshakes_failed += 1

    def close(self) -> None:
        self.listener.close()


def test_https_verifies_certificates(cert: tuple[Path, Path], monkeypatch: Any) -> None:
    server = TlsServer(*cert)
    url = f"https://127.0.0.1:{server.port}/x"
    try:
        # The real, verifying context refuses a certificate nobody vouches for.
        with pytest.raises(errors.TransportFailure):
            http.send(HttpRequest("GET", url), deadline=time.monotonic() + 5, request_timeout_s=5)
        # A context that trusts this certificate gets the answer, over TLS.
        trusting = ssl.create_default_context(cafile=str(cert[0]))
        monkeypatch.setattr(http, "_SSL_CONTEXT", trusting)
        response = http.send(
            HttpRequest("GET", url), deadline=time.monotonic() + 5, request_timeout_s=5
        )
        assert (response.status, response.body) == (200, b'{"ok": true}')
        assert response.headers["content-type"] == "application/json"
    finally:
        server.close()


DIRECT_REQUEST = """
import sys, time
sys.path.insert(0, sys.argv[2])
from tests.fakes import FakeServer, Reply
from smart_search.sources import http
with FakeServer() as fake:
    fake.route("/x", Reply(200, b"hello"))
    r = http.send(http.HttpRequest("GET", fake.url + "/x", params={"q": "a b&c"}),
                  deadline=time.monotonic() + 5, request_timeout_s=5)
    assert r.body == b"hello", r.body
    assert fake.requests[0].query == {"q": ["a b&c"]}, fake.requests[0].query
print(sorted(m for m in sys.modules if m.split(".")[0] in ("httpcore", "h11", "anyio", "trio")))
"""


def test_a_direct_request_never_loads_httpcore() -> None:
    tests_dir = str(Path(__file__).parent)
    out = subprocess.run(
        [sys.executable, "-c", DIRECT_REQUEST, "", tests_dir],
        capture_output=True, text=True, check=True,
    ).stdout  # fmt: skip
    assert out.strip() == "[]"
