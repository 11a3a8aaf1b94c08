"""The one place that performs HTTP requests, for providers and engines alike.

Providers and engines only build an `HttpRequest` and parse an `HttpResponse`; `send` does the
I/O under the call's deadline and translates transport failures into `errors` classes.

Why it looks the way it does:

- httpx timeouts bound each socket operation, not the whole exchange: a server that trickles one
  byte a second never trips them. So the exchange runs in a daemon worker thread and `send` waits
  for it with one wall-clock budget. On expiry the worker's sockets are shut down (which wakes a
  blocked `recv`) and the thread is abandoned; per-operation httpx timeouts are its backstop.
- The body is decompressed here, not by httpx, so the 2 MiB bound applies to decompressed bytes
  without ever inflating more than the bound (a small gzip bomb cannot balloon memory).
- Nothing from httpx's own exception text reaches our messages (it can hold full URLs), and
  httpx/httpcore loggers are held at WARNING (httpx logs every request URL at INFO).
"""

from __future__ import annotations

import contextvars
import logging
import socket
import threading
import time
import zlib
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any, NamedTuple
from urllib.parse import urlsplit

from smart_search import errors
from smart_search.sources import cancel
from smart_search.text.urls import is_allowed_base_url

if TYPE_CHECKING:
    import ssl

MAX_BODY_BYTES = 2 * 1024 * 1024  # RULINGS 5: bodies are read with a 2 MiB bound (decompressed).

# Headers that carry an API key: never sent in clear text off-host, never across a redirect.
SECRET_HEADERS = frozenset({"x-goog-api-key", "x-subscription-token", "authorization"})

DEFAULT_USER_AGENT = "smart-search/0.1 (OpenClaw skill; python-httpx)"
# Only encodings this module can decode with a bound; anything else is refused by the server or
# becomes a parse_error.
ACCEPT_ENCODING = "gzip, deflate"

for _name in ("httpx", "httpcore"):
    # httpx logs "HTTP Request: GET <full URL>" at INFO; keep both libraries quiet unless broken.
    logging.getLogger(_name).setLevel(logging.WARNING)


class HttpRequest:
    """A request as data: nothing here performs I/O. Frozen: its fields are set once.

    `follow_redirects` is for keyless engine fetches (consent and locale hops); a request that
    carries a key header never follows a redirect, whatever this says. (Written out rather than
    a frozen dataclass, whose generated methods cost ~1 ms to build in every one-shot process.)
    """

    __slots__ = ("method", "url", "params", "headers", "json", "cookies", "follow_redirects")
    method: str
    url: str
    params: dict[str, str]
    headers: dict[str, str]
    json: object | None
    cookies: dict[str, str]
    follow_redirects: bool

    def __init__(
        self,
        method: str,
        url: str,
        *,
        params: dict[str, str] | None = None,
        headers: dict[str, str] | None = None,
        json: object | None = None,
        cookies: dict[str, str] | None = None,
        follow_redirects: bool = False,
    ) -> None:
        init = object.__setattr__
        init(self, "method", method)
        init(self, "url", url)
        init(self, "params", {} if params is None else params)
        init(self, "headers", {} if headers is None else headers)
        init(self, "json", json)
        init(self, "cookies", {} if cookies is None else cookies)
        init(self, "follow_redirects", follow_redirects)

    def __setattr__(self, name: str, value: object) -> None:
        raise AttributeError(f"HttpRequest is frozen: cannot set {name!r}")

    def __delattr__(self, name: str) -> None:
        raise AttributeError(f"HttpRequest is frozen: cannot delete {name!r}")

    def _fields(self) -> tuple[object, ...]:
        return tuple(getattr(self, name) for name in self.__slots__)

    def __eq__(self, other: object) -> bool:
        if other.__class__ is not self.__class__:
            return NotImplemented
        return self._fields() == other._fields()  # type: ignore[attr-defined]

    __hash__ = None  # type: ignore[assignment]  # its dicts are not hashable either

    def __repr__(self) -> str:
        # Never show headers (keys) or params (queries) in a repr that may end up in a log.
        return f"HttpRequest({self.method} {_origin(self.url)})"


class HttpResponse(NamedTuple):
    """A fully read response: status, lower-cased headers, body bytes (at most MAX_BODY_BYTES).

    The body is already decompressed; `content-encoding` is left in `headers` as the server sent it.
    """

    status: int
    headers: dict[str, str]
    body: bytes

    def __repr__(self) -> str:
        return f"HttpResponse({self.status}, {len(self.body)} bytes)"


def send(request: HttpRequest, *, deadline: float, request_timeout_s: float) -> HttpResponse:
    """Perform `request`, giving up at `min(now + request_timeout_s, deadline)` (monotonic).

    Raises errors.Timeout, errors.TransportFailure, errors.ParseError (body over the bound or
    undecodable), errors.ConfigError (a key header bound for plain http off loopback, a bad URL),
    and errors.Cancelled (not a SearchError) when the context's `CancelScope` is cancelled first.
    """
    _refuse_clear_text_keys(request)
    budget = min(request_timeout_s, deadline - time.monotonic())
    host = _host(request.url)
    if budget <= 0:
        raise errors.Timeout(f"No time left for the request to {host}.")
    exchange = _Exchange()
    scopes = [PROCESS_SCOPE]
    context_scope = _current_scope.get()
    if context_scope is not None:
        scopes.append(context_scope)
    entered: list[CancelScope] = []
    try:
        for scope in scopes:
            scope._enter(exchange)  # raises Cancelled when the caller already gave up
            entered.append(scope)
        worker = threading.Thread(
            target=exchange.run, args=(request, budget), name="smart-search-http", daemon=True
        )
        worker.start()
        answered = exchange.done.wait(budget)
    finally:
        for scope in entered:
            scope._leave(exchange)
    if exchange.cancelled:
        raise errors.Cancelled(sent=exchange.connected)
    if not answered:
        exchange.abandon()
        raise errors.Timeout(
            f"Request to {host} timed out after {budget:.1f} s.", sent=exchange.connected
        )
    if exchange.error is not None:
        raise _translate(exchange.error, host, exchange.connected) from None
    assert exchange.response is not None
    return exchange.response


def retry_after_seconds(headers: dict[str, str]) -> float | None:
    """The `Retry-After` header (delta-seconds or HTTP-date) as seconds from now, if readable."""
    value = headers.get("retry-after")
    if not value:
        return None
    value = value.strip()
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    from email.utils import parsedate_to_datetime  # rare (date form): not on every import

    try:
        when = parsedate_to_datetime(value)
    except (TypeError, ValueError, IndexError):
        return None
    if when is None or when.tzinfo is None:
        return None
    return max(0.0, when.timestamp() - time.time())


def is_secret_header(name: str) -> bool:
    return name.lower() in SECRET_HEADERS


# --- the worker side -------------------------------------------------------------------------


class _Exchange:
    """State shared by `send` (waiting) and its worker thread (doing the I/O)."""

    def __init__(self) -> None:
        self.done = threading.Event()
        self.response: HttpResponse | None = None
        self.error: BaseException | None = None
        self._lock = threading.Lock()
        self._sockets: list[socket.socket] = []
        self._abandoned = False
        # A connection was made (TCP, and TLS where used): from here on the request may have
        # reached the server.
        self.connected = False
        self.cancelled = False

    def run(self, request: HttpRequest, budget: float) -> None:
        response: HttpResponse | None = None
        error: BaseException | None = None
        try:
            response = _perform(request, budget, self._on_trace, self._track)
        except BaseException as exc:  # noqa: BLE001 - handed to send(); a thread must not print
            error = exc
        with self._lock:
            # Under the lock: an answer and a cancel() never both win (see cancel).
            if not self.cancelled:
                self.response, self.error = response, error
                self.done.set()

    def cancel(self) -> None:
        """Give up on the exchange unless it already answered: its sockets are shut and `send`
        raises Cancelled. An answer that came first stands (the provider charged for it)."""
        with self._lock:
            if self.done.is_set():
                return
            self.cancelled = True
            self.done.set()
        self.abandon()

    def _on_trace(self, event: str, info: dict[str, Any]) -> None:
        # Through a proxy, httpx uses httpcore, which reports each new network stream (TCP, then
        # TLS over it); keep its socket so `abandon` can wake a worker blocked in recv(). Direct
        # requests go through transport.StdlibTransport, which hands sockets to `_track`.
        if not event.endswith(("connect_tcp.complete", "start_tls.complete")):
            return
        stream = info.get("return_value")
        get_extra_info = getattr(stream, "get_extra_info", None)
        sock = get_extra_info("socket") if get_extra_info else None
        if isinstance(sock, socket.socket):
            self._track(sock)

    def _track(self, sock: socket.socket) -> None:
        """Remember a connected socket (shut it at once if the exchange was abandoned)."""
        self.connected = True
        with self._lock:
            abandoned = self._abandoned
            if not abandoned:
                self._sockets.append(sock)
        if abandoned:
            _shutdown(sock)

    def abandon(self) -> None:
        with self._lock:
            self._abandoned = True
            sockets, self._sockets = self._sockets, []
        for sock in sockets:
            _shutdown(sock)


class CancelScope:
    """A caller's handle on the HTTP requests made on its behalf, wherever they are made.

    The MCP server runs each tool call inside `cancel_scope(scope)`; `send` registers every
    exchange it starts with the scope of its context. `cancel()` (from any thread) shuts the
    sockets of the exchanges still waiting for an answer, so their `send` raises
    `errors.Cancelled` at once, and any later `send` under the scope raises it before connecting.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._cancelled = False
        self._exchanges: set[_Exchange] = set()
        # Set on cancel: the call's waits (`cancel.sleep`: a backoff, the pacing) end with it.
        self.stopped = threading.Event()

    @property
    def cancelled(self) -> bool:
        return self._cancelled

    def cancel(self) -> None:
        with self._lock:
            self._cancelled = True
            exchanges = list(self._exchanges)
        self.stopped.set()
        for exchange in exchanges:
            exchange.cancel()

    def _enter(self, exchange: _Exchange) -> None:
        with self._lock:
            if self._cancelled:
                raise errors.Cancelled()
            self._exchanges.add(exchange)

    def _leave(self, exchange: _Exchange) -> None:
        with self._lock:
            self._exchanges.discard(exchange)


_current_scope: contextvars.ContextVar[CancelScope | None] = contextvars.ContextVar(
    "smart_search_http_cancel_scope", default=None
)


# The process's own scope: a stop request (`sources/cancel.py`, the one-shot CLI's SIGTERM)
# cancels it, and with it every exchange of the process.
PROCESS_SCOPE = CancelScope()
cancel.on_request(PROCESS_SCOPE.cancel)


@contextmanager
def cancel_scope(scope: CancelScope) -> Iterator[CancelScope]:
    """Make `send` calls in this context (this thread) cancellable through `scope`, and its
    waits (`cancel.sleep`) with them."""
    token = _current_scope.set(scope)
    try:
        with cancel.stopping_on(scope.stopped):
            yield scope
    finally:
        _current_scope.reset(token)


def _shutdown(sock: socket.socket) -> None:
    # The base-class shutdown works on the fd for TLS sockets too, without touching SSL state
    # that the worker thread may be using. A socket already closed raises EBADF: nothing to do.
    try:
        socket.socket.shutdown(sock, socket.SHUT_RDWR)
    except OSError:
        pass


def _perform(
    request: HttpRequest,
    budget: float,
    on_trace: Any,
    on_socket: Callable[[socket.socket], None],
) -> HttpResponse:
    import httpx

    from smart_search.sources.transport import StdlibTransport

    carries_key = any(is_secret_header(name) for name in request.headers)
    headers = {"user-agent": DEFAULT_USER_AGENT, "accept-encoding": ACCEPT_ENCODING}
    headers.update({name.lower(): value for name, value in request.headers.items()})
    loopback = _is_loopback(request.url)
    follow = request.follow_redirects and not carries_key
    tls = speaks_tls(request)
    context = _ssl_context() if tls else None
    # httpx mounts the environment's proxies only when it builds its own transport: a request
    # the environment sends through a proxy goes through httpx's (httpcore, whose sockets the
    # trace hook still tracks for `abandon`); every other request through ours.
    proxied = not loopback and _proxied_by_environment(request.url)
    client = httpx.Client(
        transport=(
            None
            if proxied
            else StdlibTransport(ssl_context=context, timeout=budget, on_socket=on_socket)
        ),
        timeout=httpx.Timeout(budget),
        follow_redirects=follow,
        cookies=request.cookies or None,
        verify=context if context is not None else False,
        # Without a verifying context, no hop may leave plain http (see speaks_tls).
        event_hooks={
            "response": [_refuse_non_web_redirect],
            **({} if tls else {"request": [_refuse_tls_hop]}),
        },
        # A loopback address is never reached through a proxy from the environment.
        trust_env=not loopback,
    )
    with client:
        with client.stream(
            request.method,
            request.url,
            params=request.params or None,
            headers=headers,
            json=request.json,
            extensions={"trace": on_trace},
        ) as response:
            decoder = _BoundedDecoder(response.headers.get("content-encoding", ""))
            for chunk in response.iter_raw():
                decoder.feed(chunk)
            body = decoder.finish()
            lowered = {name.lower(): value for name, value in response.headers.items()}
            return HttpResponse(response.status_code, lowered, body)


def speaks_tls(request: HttpRequest) -> bool:
    """Whether the exchange can need TLS. Building a verifying context loads the CA bundle
    (~180 ms here), so plain-http requests (loopback only) skip it; a redirect from one to
    https is refused by `_refuse_tls_hop` rather than followed unverified."""
    return not request.url.startswith("http:")


def _refuse_non_web_redirect(response: Any) -> None:
    """A redirect to anything but http(s) (`javascript:`, `data:`, `ftp:`) is the server's fault,
    not the operator's: `parse_error`, followed or not. Without this, httpx fails to build the
    next request with the same exception as a bad configured URL (`config_error`)."""
    if not response.has_redirect_location:
        return
    try:
        scheme = urlsplit(response.headers["location"]).scheme.lower()
    except ValueError:
        return  # unreadable: httpx reports a broken response (transport_failure)
    if scheme and scheme not in ("http", "https"):
        host = response.request.url.host or "the server"
        raise errors.ParseError(
            f"{host} redirected to a non-http(s) URL ({scheme[:16]}:).",
            http_status=response.status_code,
        )


def _refuse_tls_hop(hop: Any) -> None:
    if hop.url.scheme != "http":
        raise errors.ParseError(f"Refused a redirect from plain http to {hop.url.scheme}.")


def warm(request: HttpRequest) -> None:
    """Pay the one-off costs of `send` now (imports, TLS context), e.g. before a paced slot."""
    import httpx  # noqa: F401

    from smart_search.sources import transport  # noqa: F401

    if speaks_tls(request):
        _ssl_context()


_SSL_CONTEXT: ssl.SSLContext | None = None
_SSL_LOCK = threading.Lock()


def _ssl_context() -> ssl.SSLContext:
    # Loading the CA bundle costs tens of milliseconds; one context serves every request.
    global _SSL_CONTEXT
    with _SSL_LOCK:
        if _SSL_CONTEXT is None:
            import httpx

            _SSL_CONTEXT = httpx.create_ssl_context()
        return _SSL_CONTEXT


class _BoundedDecoder:
    """Decompresses a body as it arrives, refusing to produce more than MAX_BODY_BYTES."""

    def __init__(self, content_encoding: str) -> None:
        codings = [c.strip().lower() for c in content_encoding.split(",") if c.strip()]
        codings = [c for c in codings if c != "identity"]
        if len(codings) > 1 or (codings and codings[0] not in ("gzip", "x-gzip", "deflate")):
            raise errors.ParseError("Response uses a content encoding that cannot be decoded.")
        self._coding = codings[0] if codings else None
        self._inflater: Any = None
        if self._coding in ("gzip", "x-gzip"):
            self._inflater = zlib.decompressobj(zlib.MAX_WBITS | 16)
        elif self._coding == "deflate":
            self._inflater = zlib.decompressobj()
        self._parts: list[bytes] = []
        self._size = 0
        self._fed = False

    def feed(self, data: bytes) -> None:
        if not data:
            return
        if self._inflater is None:
            self._keep(data)
            return
        if not self._fed and self._coding == "deflate":
            # "deflate" is meant to be zlib-wrapped but many servers send raw deflate.
            if not _looks_zlib_wrapped(data):
                self._inflater = zlib.decompressobj(-zlib.MAX_WBITS)
        self._fed = True
        try:
            while data:
                # Ask for one byte past the room left: getting it means the bound is crossed.
                out = self._inflater.decompress(data, MAX_BODY_BYTES - self._size + 1)
                self._keep(out)
                data = self._inflater.unconsumed_tail
        except zlib.error:
            raise errors.ParseError("Response body could not be decompressed.") from None

    def finish(self) -> bytes:
        if self._inflater is not None:
            try:
                self._keep(self._inflater.flush())
            except zlib.error:
                raise errors.ParseError("Response body could not be decompressed.") from None
            if self._fed and not self._inflater.eof:
                raise errors.ParseError("Response body ends inside its compressed stream.")
        return b"".join(self._parts)

    def _keep(self, data: bytes) -> None:
        self._size += len(data)
        if self._size > MAX_BODY_BYTES:
            raise errors.ParseError("Response body exceeds 2 MiB.")
        if data:
            self._parts.append(data)


def _looks_zlib_wrapped(data: bytes) -> bool:
    return len(data) >= 2 and (data[0] & 0x0F) == 8 and ((data[0] << 8) | data[1]) % 31 == 0


# --- translation and safety ------------------------------------------------------------------


def _translate(exc: BaseException, host: str, sent: bool) -> BaseException:
    """Our error for whatever the worker raised; httpx's own text (URLs) is never reused.
    `sent`: a connection was made, so the request may have reached the server."""
    import httpx

    if isinstance(exc, errors.SearchError):
        return exc
    if isinstance(exc, httpx.ConnectError):
        return errors.TransportFailure(f"Could not connect to {host}.")
    if isinstance(exc, httpx.TimeoutException):
        left = sent and not isinstance(exc, httpx.ConnectTimeout)
        return errors.Timeout(f"Request to {host} timed out.", sent=left)
    if isinstance(exc, httpx.RemoteProtocolError):
        # h11's verdict on a truncated body (Content-Length or chunked) and on garbage.
        return errors.TransportFailure(f"{host} sent a broken or incomplete response.", sent=sent)
    if isinstance(exc, httpx.ProxyError):
        return errors.TransportFailure(f"The proxy refused the request to {host}.")
    if isinstance(exc, httpx.TooManyRedirects):
        return errors.ParseError(f"{host} redirected too many times.", sent=sent)
    if isinstance(exc, httpx.UnsupportedProtocol | httpx.InvalidURL):
        return errors.ConfigError("A request URL is not a valid http(s) URL.")
    if isinstance(exc, httpx.TransportError | OSError):
        # ReadError / WriteError / CloseError and raw socket errors: the connection broke.
        return errors.TransportFailure(f"Connection to {host} failed mid-request.", sent=sent)
    return exc  # a bug, not a network condition: the runner reports it as internal


def _refuse_clear_text_keys(request: HttpRequest) -> None:
    # Second line of defence behind config.is_allowed_base_url: a key never crosses a network
    # in clear text, whatever URL reached us.
    if not any(is_secret_header(name) for name in request.headers):
        return
    try:
        parts = urlsplit(request.url)
        origin = f"{parts.scheme}://{parts.netloc}"
    except ValueError:
        raise errors.ConfigError("A request URL is not a valid http(s) URL.") from None
    if not is_allowed_base_url(origin):
        raise errors.ConfigError(
            "Refusing to send an API key to a URL that is neither https:// nor loopback."
        )


def _host(url: str) -> str:
    try:
        return urlsplit(url).hostname or "the server"
    except ValueError:
        return "the server"


def _origin(url: str) -> str:
    try:
        parts = urlsplit(url)
        return f"{parts.scheme}://{parts.hostname}{parts.path}"
    except ValueError:
        return "<invalid URL>"


def _proxied_by_environment(url: str) -> bool:
    """True when *_PROXY / ALL_PROXY name a proxy for this URL's scheme and NO_PROXY spares it."""
    import urllib.request

    proxies = urllib.request.getproxies_environment()
    try:
        parts = urlsplit(url)
    except ValueError:
        return False
    if not (proxies.get(parts.scheme) or proxies.get("all")):
        return False
    return not urllib.request.proxy_bypass_environment(parts.hostname or "", proxies)


def _is_loopback(url: str) -> bool:
    from smart_search.text.urls import is_loopback_host

    return is_loopback_host(_host(url))
