"""What counts as a web link: an absolute http(s) URL with a host, the one rule the sanitizer,
the engines' link readers and the fusion merge all apply; and where a key may be sent (an
endpoint: https anywhere, plain http to loopback only), the rule config and the HTTP layer share.

The link is read as text, not through `urllib.parse.urlsplit`: urlsplit silently deletes tabs
and newlines, strips leading control characters and lower-cases the scheme before it looks, and
refuses some junk (`http://[bad`) outright, so what it reports is not what a reader sees. A
caller that needs the parts (a host name to compare) splits the link after this check.
"""

from __future__ import annotations

import re

WEB_SCHEMES = ("http", "https")
_LOOPBACK_HOSTS = ("localhost", "::1", "[::1]")
_LOCAL_SUFFIXES = (".local", ".lan", ".internal", ".home.arpa")

_SCHEME = re.compile(r"([A-Za-z][A-Za-z0-9+.\-]*):")


def url_scheme(text: str) -> str:
    """The lower-cased scheme `text` starts with, "" when it has none."""
    found = _SCHEME.match(text)
    return found.group(1).lower() if found else ""


def is_web_url(text: str) -> bool:
    """True when `text` is an absolute http(s) URL with a host: `http:` or `https:` in any case,
    then `//` and at least one character that is not `/`, `?` or `#`."""
    found = _SCHEME.match(text)
    if found is None or found.group(1).lower() not in WEB_SCHEMES:
        return False
    rest = text[found.end() :]
    return rest.startswith("//") and len(rest) > 2 and rest[2] not in "/?#"


def is_allowed_base_url(url: str) -> bool:
    """https anywhere; plain http only to loopback, so a key never crosses a network in clear."""
    from urllib.parse import urlsplit

    try:
        parts = urlsplit(url)
        host = parts.hostname
        parts.port  # noqa: B018 - raises ValueError on a malformed port
    except ValueError:
        return False
    if not host or parts.query or parts.fragment or parts.username or parts.password:
        return False
    if parts.scheme == "https":
        return True
    if parts.scheme != "http":
        return False
    return is_loopback_host(host)


def is_private_base_url(url: str) -> bool:
    """`is_allowed_base_url`, and plain http also to a private host (`is_private_host`): for a
    self-hosted engine, which carries no key, on the operator's own network."""
    from urllib.parse import urlsplit

    if is_allowed_base_url(url):
        return True
    try:
        parts = urlsplit(url)
    except ValueError:
        return False
    https = "https://" + url[len("http://") :] if parts.scheme == "http" else ""
    return bool(https) and is_allowed_base_url(https) and is_private_host(parts.hostname)


def is_private_host(host: str | None) -> bool:
    """A host of the operator's own network: loopback, a private or link-local address
    (10/8, 172.16/12, 192.168/16, fc00::/7, fe80::/10...), a single-label name (`search`, a
    container's) or a name under the local suffixes (.local, .lan, .internal, .home.arpa)."""
    import ipaddress

    if host is None or not host:
        return False
    if is_loopback_host(host):
        return True
    try:
        address = ipaddress.ip_address(host)
    except ValueError:
        name = host.rstrip(".").lower()
        return bool(name) and ("." not in name or name.endswith(_LOCAL_SUFFIXES))
    return address.is_private or address.is_link_local


def is_loopback_host(host: str | None) -> bool:
    """127.0.0.0/8, ::1 or localhost: the one loopback rule (config and the HTTP layer)."""
    return host is not None and (host in _LOOPBACK_HOSTS or _is_loopback_ip(host))


def _is_loopback_ip(host: str) -> bool:
    import ipaddress

    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False
