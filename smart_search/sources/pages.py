"""The wire fetch of one web page for `smart_fetch` (issue 21), safe by default.

A page URL comes from a model, so the fetch must not become a way into the machine's own network
(SSRF). Every hop, the first request and each redirect, is checked the same way:

- the URL must be absolute http(s) with a host and no user-info (`InvalidUrl` otherwise);
- the host is resolved HERE, and EVERY address of the answer must be public: loopback, private
  (RFC 1918, fc00::/7), link-local (169.254/16, fe80::/10, which holds the cloud metadata address
  169.254.169.254), shared (100.64/10), reserved, unspecified and multicast addresses are refused
  (`BlockedAddress`), as are the metadata addresses by name (fd00:ec2::254). An IPv4-mapped IPv6
  address is judged by its IPv4 address;
- the connection goes to the checked address itself (no second lookup that a rebinding DNS server
  could answer differently), while the Host header and TLS's server name stay the URL's host.

`allow_private` (config `fetch.allow_private_hosts`) lifts the address rule, for tests and
intranets; the scheme rule always holds.

Why not `http.send`: it follows redirects inside httpx, where a hop cannot be checked before
it connects, and it refuses a body over its bound, where a page over the bound should still
answer with what was read. Here the body is read up to `max_bytes` and the rest is left unread
(`truncated`). Each socket operation is bounded by the request timeout and the whole exchange by
the call's deadline (checked between chunks).
"""

from __future__ import annotations

import http.client
import ipaddress
import socket
import time
from collections.abc import Callable
from typing import Any, NamedTuple
from urllib.parse import urljoin, urlsplit

from smart_search import errors

MAX_REDIRECTS = 5
REDIRECTS = frozenset({301, 302, 303, 307, 308})
# Cloud metadata services by address, beyond the link-local and private ranges that hold them.
METADATA_ADDRESSES = frozenset(
    {ipaddress.ip_address("169.254.169.254"), ipaddress.ip_address("fd00:ec2::254")}
)
USER_AGENT = "smart-search/0.1 (OpenClaw skill; page fetch)"
ACCEPT = "text/html,application/xhtml+xml,text/plain;q=0.9,*/*;q=0.5"
_CHUNK = 64 * 1024

Resolver = Callable[[str, int], list[str]]


class Page(NamedTuple):
    """A fetched page: the URL it came from (after redirects), its status, lower-cased headers,
    the body (at most `max_bytes`, decompressed), and whether the body was cut there."""

    url: str
    status: int
    headers: dict[str, str]
    body: bytes
    truncated: bool

    def __repr__(self) -> str:
        return f"Page({self.status}, {len(self.body)} bytes)"


def check_url(url: str) -> tuple[str, str, int]:
    """(scheme, host, port) of a fetchable URL; `InvalidUrl` for anything else."""
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError:
        raise errors.InvalidUrl("url is not a valid URL.") from None
    scheme = parts.scheme.lower()
    if scheme not in ("http", "https"):
        shown = scheme[:16] or "none"
        raise errors.InvalidUrl(f"Only http:// and https:// URLs can be fetched (scheme: {shown}).")
    host = parts.hostname
    if not host:
        raise errors.InvalidUrl("url has no host.")
    if parts.username is not None or parts.password is not None:
        raise errors.InvalidUrl("url must not carry a user name or password.")
    return scheme, host, port or (443 if scheme == "https" else 80)


def is_blocked_address(address: str) -> bool:
    """True for every address a page fetch must not reach by default (module docstring)."""
    ip = ipaddress.ip_address(address.split("%", 1)[0])
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
        ip = ip.ipv4_mapped
    return ip in METADATA_ADDRESSES or ip.is_multicast or not ip.is_global


def system_resolver(host: str, port: int) -> list[str]:
    """Every address the system resolver gives for `host` (a literal address is its own)."""
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except (OSError, UnicodeError):
        raise errors.TransportFailure(f"Could not resolve {host}.") from None
    return list(dict.fromkeys(str(info[4][0]) for info in infos))


def checked_address(host: str, port: int, *, allow_private: bool, resolver: Resolver) -> str:
    """The address to connect to for `host`: the first of its answer, once every address of
    the answer has passed the check (one bad answer refuses the host: a rebinding server may
    hand out both)."""
    addresses = resolver(host, port)
    if not addresses:
        raise errors.TransportFailure(f"Could not resolve {host}.")
    if not allow_private:
        for address in addresses:
            if is_blocked_address(address):
                raise errors.BlockedAddress(
                    f"Refused to fetch {host}: it resolves to a private, loopback, link-local or "
                    "metadata address (set fetch.allow_private_hosts to allow it)."
                )
    return addresses[0]


def fetch_page(
    url: str,
    *,
    allow_private: bool,
    max_bytes: int,
    timeout_s: float,
    deadline: float,
    resolver: Resolver = system_resolver,
    on_hop: Callable[[str], None] | None = None,
) -> Page:
    """GET `url`, following up to MAX_REDIRECTS redirects, each hop checked (module docstring).
    `on_hop(host)` runs before each hop connects (the caller's per-host pacing).

    Raises InvalidUrl, BlockedAddress, Timeout, TransportFailure, ParseError (too many
    redirects, an undecodable body)."""
    for _ in range(MAX_REDIRECTS + 1):
        scheme, host, port = check_url(url)
        address = checked_address(host, port, allow_private=allow_private, resolver=resolver)
        if on_hop is not None:
            on_hop(host)
        page = _exchange(url, scheme, host, port, address, max_bytes, timeout_s, deadline)
        location = page.headers.get("location")
        if page.status not in REDIRECTS or not location:
            return page
        url = urljoin(url, location.strip())
    raise errors.ParseError(f"{host} redirected more than {MAX_REDIRECTS} times.")


class _PinnedHTTP(http.client.HTTPConnection):
    """An HTTP connection to a checked address; the Host header stays the URL's host."""

    def __init__(self, host: str, port: int, address: str, timeout: float) -> None:
        super().__init__(host, port, timeout=timeout)
        self._address = address

    def connect(self) -> None:
        self.sock = socket.create_connection((self._address, self.port), self.timeout)


class _PinnedHTTPS(http.client.HTTPSConnection):
    """An HTTPS connection to a checked address; SNI and the certificate check use the host."""

    def __init__(self, host: str, port: int, address: str, timeout: float) -> None:
        super().__init__(host, port, timeout=timeout, context=_tls_context())
        self._address = address

    def connect(self) -> None:
        sock = socket.create_connection((self._address, self.port), self.timeout)
        self.sock = self._context.wrap_socket(sock, server_hostname=self.host)  # type: ignore[attr-defined]


def _exchange(
    url: str,
    scheme: str,
    host: str,
    port: int,
    address: str,
    max_bytes: int,
    timeout_s: float,
    deadline: float,
) -> Page:
    budget = min(timeout_s, deadline - time.monotonic())
    if budget <= 0:
        raise errors.Timeout(f"No time left for the request to {host}.")
    kind = _PinnedHTTPS if scheme == "https" else _PinnedHTTP
    connection = kind(host, port, address, budget)
    target = _request_target(url)
    sent = False
    try:
        connection.putrequest("GET", target, skip_accept_encoding=True)
        connection.putheader("User-Agent", USER_AGENT)
        connection.putheader("Accept", ACCEPT)
        connection.putheader("Accept-Encoding", "gzip, deflate")
        connection.endheaders()
        sent = True
        response = connection.getresponse()
        headers = {name.lower(): value for name, value in response.getheaders()}
        body, truncated = _read_body(response, headers, max_bytes, deadline, host)
        return Page(url, response.status, headers, body, truncated)
    except errors.SearchError:
        raise
    except TimeoutError:  # socket.timeout is its alias
        raise errors.Timeout(f"Request to {host} timed out.", sent=sent) from None
    except (http.client.HTTPException, OSError, UnicodeError):
        # OSError includes ssl.SSLError; UnicodeError a host name IDNA cannot encode.
        raise errors.TransportFailure(f"Could not fetch {host}.", sent=sent) from None
    finally:
        connection.close()


def _request_target(url: str) -> str:
    """Path and query as sent: characters http.client refuses (non-ASCII, spaces from a
    redirect's Location) percent-encoded, escapes already there kept."""
    from urllib.parse import quote

    parts = urlsplit(url)
    target = parts.path or "/"
    if parts.query:
        target += "?" + parts.query
    return quote(target, safe="/?&=%:@!$'()*+,;~[]-._")


def _read_body(
    response: http.client.HTTPResponse,
    headers: dict[str, str],
    max_bytes: int,
    deadline: float,
    host: str,
) -> tuple[bytes, bool]:
    """The body, decompressed, up to `max_bytes`; True when more was left unread."""
    inflater = _inflater(headers.get("content-encoding", ""))
    parts: list[bytes] = []
    size = 0
    while True:
        if time.monotonic() > deadline:
            raise errors.Timeout(f"Reading the page from {host} ran past the deadline.", sent=True)
        chunk = response.read1(_CHUNK)
        if not chunk:
            break
        if inflater is not None:
            try:
                chunk = inflater.decompress(chunk, max_bytes - size + 1)
            except Exception:  # noqa: BLE001 - zlib.error: a broken stream
                raise errors.ParseError(
                    f"The page from {host} could not be decompressed."
                ) from None
        parts.append(chunk)
        size += len(chunk)
        if size > max_bytes:
            return b"".join(parts)[:max_bytes], True
    return b"".join(parts), False


def _inflater(content_encoding: str) -> Any:
    import zlib

    coding = content_encoding.strip().lower()
    if coding in ("", "identity"):
        return None
    if coding in ("gzip", "x-gzip"):
        return zlib.decompressobj(zlib.MAX_WBITS | 16)
    if coding == "deflate":
        return zlib.decompressobj(zlib.MAX_WBITS | 32)
    raise errors.ParseError("The page uses a content encoding that cannot be decoded.")


_TLS: Any = None


def _tls_context() -> Any:
    # Loading the CA bundle costs tens of milliseconds: one context per process.
    global _TLS
    if _TLS is None:
        import ssl

        try:
            import certifi

            _TLS = ssl.create_default_context(cafile=certifi.where())
        except ImportError:
            _TLS = ssl.create_default_context()
    return _TLS
