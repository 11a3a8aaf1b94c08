"""An httpx transport over the standard library's `http.client`: one request per connection.

Why not httpx's default transport: it imports httpcore and h11 (20-80 ms here, with their async
halves), which `import httpx` alone does not, and every search call is a fresh process that
makes one or two requests. `http.client` is already loaded by httpx itself. httpx still does
everything above the wire: URL and parameter encoding, headers, cookies, redirects, timeouts'
configuration and the `Response` object; proxies from the environment are still mounted by httpx
on its own transport, so this one only ever speaks directly to the origin.

Failures are raised as httpx's exception classes, so callers handle one family whatever the
transport: connect failures as `ConnectError`/`ConnectTimeout`, a stalled read as `ReadTimeout`,
a broken or truncated response as `RemoteProtocolError`, a dropped connection as `ReadError`.
"""

from __future__ import annotations

import http.client
import socket
import ssl
from collections.abc import Callable, Iterator

import httpx

_CHUNK = 64 * 1024


class StdlibTransport(httpx.BaseTransport):
    """Sends each request on a new `http.client` connection and streams the response body."""

    def __init__(
        self,
        *,
        ssl_context: ssl.SSLContext | None,
        timeout: float,
        on_socket: Callable[[socket.socket], None] | None = None,
    ) -> None:
        self._ssl_context = ssl_context
        self._timeout = timeout
        # Called with each connected socket, so a watchdog can shut it down from another thread.
        self._on_socket = on_socket

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        url = request.url
        connection = self._connect(url)
        try:
            connection.putrequest(
                request.method, _target(url), skip_host=True, skip_accept_encoding=True
            )
            for name, value in request.headers.raw:
                connection.putheader(name.decode("latin-1"), value.decode("latin-1"))
            body = request.read()
            connection.endheaders(body or None)
            response = connection.getresponse()
        except BaseException as exc:
            connection.close()
            raise _as_httpx(exc, reading=False) from None
        return httpx.Response(
            response.status,
            headers=response.getheaders(),
            stream=_Body(connection, response),
            extensions={"http_version": b"HTTP/1.1", "reason_phrase": response.reason.encode()},
        )

    def _connect(self, url: httpx.URL) -> http.client.HTTPConnection:
        host = url.host
        if url.scheme == "https":
            if self._ssl_context is None:
                raise httpx.UnsupportedProtocol("https needs a TLS context")
            connection: http.client.HTTPConnection = http.client.HTTPSConnection(
                host, url.port or 443, timeout=self._timeout, context=self._ssl_context
            )
        elif url.scheme == "http":
            connection = http.client.HTTPConnection(host, url.port or 80, timeout=self._timeout)
        else:
            raise httpx.UnsupportedProtocol(f"unsupported scheme {url.scheme!r}")
        try:
            connection.connect()
        except BaseException as exc:
            connection.close()
            if isinstance(exc, TimeoutError | socket.timeout):
                raise httpx.ConnectTimeout("connect timed out") from None
            if isinstance(exc, OSError):
                raise httpx.ConnectError("connect failed") from None
            raise
        if self._on_socket is not None and connection.sock is not None:
            self._on_socket(connection.sock)
        return connection


class _Body(httpx.SyncByteStream):
    """The response body as it arrives (still content-encoded: callers decode with a bound)."""

    def __init__(
        self, connection: http.client.HTTPConnection, response: http.client.HTTPResponse
    ) -> None:
        self._connection = connection
        self._response = response

    def __iter__(self) -> Iterator[bytes]:
        try:
            while True:
                chunk = self._response.read1(_CHUNK)
                if not chunk:
                    # read1 ends quietly when the peer closes early; `length` still counts the
                    # bytes the Content-Length promised (chunked bodies raise IncompleteRead).
                    if self._response.length:
                        raise httpx.RemoteProtocolError("body shorter than its Content-Length")
                    return
                yield chunk
        except BaseException as exc:
            raise _as_httpx(exc, reading=True) from None

    def close(self) -> None:
        self._response.close()
        self._connection.close()


def _target(url: httpx.URL) -> str:
    # The request target exactly as httpx encoded it (path and query, percent-escaped).
    return url.raw_path.decode("ascii")


def _as_httpx(exc: BaseException, *, reading: bool) -> BaseException:
    if isinstance(exc, httpx.HTTPError):
        return exc
    if isinstance(exc, TimeoutError | socket.timeout):
        return httpx.ReadTimeout("read timed out") if reading else httpx.WriteTimeout("timed out")
    if isinstance(exc, http.client.IncompleteRead | http.client.HTTPException):
        # Truncated body (Content-Length or chunked), a bad status line, a hang-up before the
        # status line (RemoteDisconnected), oversized headers.
        return httpx.RemoteProtocolError("broken or incomplete response")
    if isinstance(exc, OSError):
        return httpx.ReadError("connection failed") if reading else httpx.WriteError("send failed")
    return exc
