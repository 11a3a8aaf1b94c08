"""`state_backend.url` for a Redis Sentinel group: parsed and checked without quoting the URL.

A single server is `redis://` or `rediss://` (redis-py reads those itself). A fleet whose Redis
fails over is reached through its sentinels:

    redis+sentinel://[[user]:password@]host[:port][,host[:port]...]/service[/db]
        [?sentinel_password=...&sentinel_username=...]

- the hosts are the sentinels (port 26379 when left out), tried in order until one names the
  primary of `service` (the name in the sentinels' `sentinel monitor <service> ...` line);
- `user` / `password` are the data servers' credentials (the primary's and its replicas'
  `requirepass` / ACL user); `db` is the database number (0 when left out);
- `sentinel_password` / `sentinel_username` are the sentinels' own (`requirepass` in
  sentinel.conf), when they have one; they are not assumed to be the servers'.

Values may be percent-encoded (`%40` for `@`), as in any URL. `${VAR}` is substituted before
this runs, like every config string. Errors name what is wrong, never the URL: it may carry
passwords.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from urllib.parse import unquote, urlsplit

SCHEME = "redis+sentinel"
DEFAULT_PORT = 26379
FORM = "redis+sentinel://host:26379[,host:port...]/service[/db]"
_SERVICE = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,63}")
_OPTIONS = ("sentinel_password", "sentinel_username")


@dataclass(frozen=True)
class SentinelURL:
    sentinels: tuple[tuple[str, int], ...]
    service: str
    db: int = 0
    username: str | None = None
    password: str | None = None
    sentinel_username: str | None = None
    sentinel_password: str | None = None


def is_sentinel(url: str) -> bool:
    return url[: len(SCHEME) + 3].lower() == SCHEME + "://"


def parse_sentinel(url: str) -> SentinelURL:
    """The parts of a `redis+sentinel://` URL; ValueError saying what is wrong (never the URL)."""
    if not is_sentinel(url):
        raise ValueError(f"it does not start with {SCHEME}://")
    rest = url[len(SCHEME) + 3 :]
    rest, _, query = rest.partition("?")
    rest, _, fragment = rest.partition("#")
    netloc, _, path = rest.partition("/")
    userinfo, at, hosts = netloc.rpartition("@")
    username = password = None
    if at:
        user, colon, secret = userinfo.partition(":")
        username = unquote(user) or None
        password = unquote(secret) if colon else None
    sentinels = tuple(_host(part) for part in hosts.split(","))
    service, _, db = path.partition("/")
    if not _SERVICE.fullmatch(service):
        raise ValueError(
            "the service name after the sentinels must be 1-64 letters, digits, '.', '_' or '-'"
        )
    db = db.rstrip("/")
    if db and not (db.isdigit() and len(db) <= 5):
        raise ValueError("the database after the service name must be a number")
    options = _options(query)
    if fragment:
        raise ValueError("it has a '#' part")
    return SentinelURL(
        sentinels=sentinels,
        service=service,
        db=int(db or 0),
        username=username,
        password=password,
        sentinel_username=options.get("sentinel_username"),
        sentinel_password=options.get("sentinel_password"),
    )


def _host(part: str) -> tuple[str, int]:
    try:
        parts = urlsplit("//" + part)
        port = parts.port
    except ValueError:
        raise ValueError("a sentinel's port is not a number from 1 to 65535") from None
    if not parts.hostname or parts.username is not None or parts.path:
        raise ValueError("each sentinel must be host or host:port, separated by commas")
    return parts.hostname, port or DEFAULT_PORT


def _options(query: str) -> dict[str, str]:
    """`name=value&...`, percent-decoded (a `+` stays a `+`: it may be part of a password)."""
    found: dict[str, str] = {}
    for pair in query.split("&") if query else ():
        name, eq, value = pair.partition("=")
        if not eq:
            raise ValueError("its ?options are not name=value pairs")
        if name not in _OPTIONS:
            # Not quoted: a misplaced password would be printed.
            raise ValueError(f"it has an option other than {' and '.join(_OPTIONS)}")
        if name in found:
            raise ValueError(f"it gives {name} more than once")
        found[name] = unquote(value)
    return found
