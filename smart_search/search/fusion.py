"""Deep search's merge (issue 15): canonical URLs, reciprocal rank fusion, corroboration.

Pure functions, no I/O: `canonical_url` says when two links are the same page, and `merge` turns
the ordered result lists of several sources ("legs": Brave, Gemini's citations, a web engine)
into one list where each page appears once, says which sources found it at which native rank,
and carries the parts of its score (`ranking`), so a reader can see why it is where it is.

**Canonical URL** (the merge key; never shown in place of a working link):
- only http and https URLs have one (anything else, or a non-string, gives None); for an
  http(s) URL that cannot be read (bad port, empty host label, bad IDNA...) `canonical_url`
  returns the input stripped and `merge_key` None: `merge` leaves such items out. Neither
  ever raises.
- the scheme becomes https; ports 80 and 443 are dropped (both are a default once http and
  https are one); the host is lower-cased, a trailing dot dropped, a non-ASCII host written in
  IDNA (punycode) so both spellings meet; leading `www.`, `m.` and `amp.` labels are dropped
  (repeatedly, while two labels remain).
- the fragment is dropped; trailing slashes are dropped (the root page is `https://host`).
  Path case is kept (`/Js/` and `/js/` may be two pages). Percent escapes are normalised
  (unreserved characters decoded, hex in upper case, non-ASCII characters encoded).
- tracking parameters are dropped: `utm_*`, `fbclid`, `gclid`, `ref`, `mc_cid`, `mc_eid`,
  `igshid` and any configured name (a trailing `*` makes a prefix), compared case-insensitively.
  The other parameters stay part of the page's identity, **sorted by name** (a stable sort:
  repeated names keep their order), since their order never changes the page.

**Merge and ranking**:
- native rank = 1-based position in the source's list. Items without a usable http(s) URL
  (none, another scheme, or one `canonical_url` cannot read) are left out but still take their
  place, so ranks stay the source's own.
- results with the same canonical URL are one result. Its `url`, `title` and `snippet` come from
  its best-ranked variant (lowest native rank; then the heavier source; then source name), the
  title and snippet from the best-ranked variant that has one (a title that is a bare domain,
  as Gemini's citations have, only when no variant has another). Its `sitelinks` (a web engine's
  links nested under the result) come from the best-ranked variant that has them, and the key
  is present only then.
- Gemini's citations are `vertexaisearch.cloud.google.com/grounding-api-redirect/...` links
  titled with a bare domain: they cannot meet another source's URL without following the
  redirect (I/O). Such a citation corroborates the best-ranked result on its domain (host equal
  to it or under it) that its source did not already find, marked `"matched": "domain"` in
  `sources`; when no result is on that domain it stays a result of its own.
- score = sum over the result's distinct sources of weight / (k + best native rank in that
  source) (reciprocal rank fusion, k = 60, weights default 1.0; a source listing a page twice
  counts once, at its better rank). Order: more distinct sources first (corroboration is the
  main signal), then higher score, then best native rank, then canonical URL: a total order,
  so the output does not depend on the order of the legs.
"""

from __future__ import annotations

import math
import re
import string
from collections.abc import Iterable, Mapping, Sequence
from typing import Any
from urllib.parse import quote, unquote, urlsplit

from smart_search.text.urls import WEB_SCHEMES, url_scheme

DEFAULT_K = 60
TRACKING_PARAMS = ("utm_*", "fbclid", "gclid", "ref", "mc_cid", "mc_eid", "igshid")
HOST_PREFIXES = ("www", "m", "amp")
# Gemini's grounding citations point here; their title is the cited site's domain.
GROUNDING_REDIRECT_HOST = "vertexaisearch.cloud.google.com"
GROUNDING_REDIRECT_PATH = "/grounding-api-redirect/"

_ESCAPE = re.compile(r"%([0-9A-Fa-f]{2})")
_UNRESERVED = frozenset(string.ascii_letters + string.digits + "-._~")
_HOST = re.compile(r"[a-z0-9_-]+(\.[a-z0-9_-]+)*")
_IPV6 = re.compile(r"[0-9a-f:.]+")
# Characters left as they are (besides letters and digits); everything else is %-encoded.
_PATH_SAFE = "/%:@!$&'()*+,;=-._~"
_QUERY_SAFE = "/?%:@!$'()*+,;=-._~"
_USERINFO_SAFE = "%:!$&'()*+,;=-._~"


def canonical_url(url: object, extra_tracking: Iterable[str] = ()) -> str | None:
    """The canonical form of `url` (see the module docstring); None when it is not http(s),
    the input stripped when it cannot be read."""
    if not isinstance(url, str):
        return None
    key = merge_key(url, extra_tracking)
    if key is None and url_scheme(url.strip()) in WEB_SCHEMES:
        return url.strip()
    return key


def merge_key(url: object, extra_tracking: Iterable[str] = ()) -> str | None:
    """The canonical URL `merge` files `url` under; None when it is not an http(s) URL that can
    be read (such items are left out of the merge)."""
    if not isinstance(url, str):
        return None
    text = url.strip()
    try:
        parts = urlsplit(text)
        if parts.scheme.lower() not in WEB_SCHEMES:
            return None
        host = _canonical_host(parts.hostname)
        port = parts.port  # raises ValueError when out of range or not a number
        if host is None:
            return None
        userinfo = parts.netloc.rpartition("@")[0] if "@" in parts.netloc else ""
        netloc = (_escapes(userinfo, _USERINFO_SAFE) + "@" if userinfo else "") + (
            f"[{host}]" if ":" in host else host
        )
        if port is not None and port not in (80, 443):
            netloc += f":{port}"
        path = _escapes(parts.path, _PATH_SAFE).rstrip("/")
        query = _canonical_query(parts.query, _tracking_rules(extra_tracking))
    except (ValueError, UnicodeError):
        return None
    return f"https://{netloc}{path}" + (f"?{query}" if query else "")


def merge(
    legs: Mapping[str, Sequence[Any]],
    weights: Mapping[str, float] | None = None,
    k: float = DEFAULT_K,
    *,
    extra_tracking: Iterable[str] = (),
    limit: int | None = None,
) -> list[dict[str, Any]]:
    """One ranked list from several sources' ordered lists (see the module docstring).

    `legs` maps a source name ("brave", "gemini", "google"...) to its results in native order:
    `{"title", "url", "snippet"}` dicts (Gemini's citations `{"title", "url"}` too). Each
    returned result is `{"title", "url", "snippet", "sources", "ranking"}` (and `"sitelinks"`
    when a variant carried them):
    `sources` lists every variant found, `{"source", "rank"}` plus `"url"` when that source's
    link differs from the result's and `"matched": "domain"` for a domain-level corroboration;
    `ranking` is `{"position", "corroboration", "score", "contributions", "best_rank",
    "canonical_url"}`, with `contributions` each source's weight / (k + rank).
    Raises ValueError for a weight that is not a positive finite number or a negative k.
    """
    if isinstance(k, bool) or not (isinstance(k, int | float) and math.isfinite(k) and k >= 0):
        raise ValueError(f"k must be a finite number >= 0, not {k!r}")
    weight_of = _weights(legs, weights)
    tracking = tuple(extra_tracking)
    groups: dict[str, _Group] = {}
    by_domain: list[tuple[int, str, str, str, str]] = []
    for source in sorted(legs):
        for rank, item in enumerate(legs[source] or (), start=1):
            if not isinstance(item, Mapping):
                continue
            url = item.get("url")
            key = merge_key(url, tracking)
            if key is None:
                continue
            variant = _Variant(
                source, rank, str(url).strip(), _text(item, "title"), _text(item, "snippet")
            )
            variant.sitelinks = item.get("sitelinks") or None
            domain = _cited_domain(key, variant.title)
            if domain is not None:
                by_domain.append((rank, source, key, domain, variant.url))
                groups.setdefault(key, _Group(key))  # placeholder, filled below if unmatched
                groups[key].pending.append(variant)
                continue
            groups.setdefault(key, _Group(key)).variants.append(variant)
    _attach_by_domain(groups, by_domain)
    merged = [group for group in groups.values() if group.variants]
    for group in merged:
        group.score(weight_of, k)
    merged.sort(key=lambda g: (-len(g.contributions), -g.total, g.best_rank, g.key))
    if limit is not None:
        merged = merged[: max(0, limit)]
    return [group.result(position, weight_of) for position, group in enumerate(merged, start=1)]


# --- canonical URL pieces ---------------------------------------------------------------------


def _canonical_host(hostname: str | None) -> str | None:
    """The host lower-cased, IDNA-encoded, without a trailing dot or a `www.`/`m.`/`amp.`
    label; None when it is not a host name or an IPv6 literal."""
    if not hostname:
        return None
    host = hostname.rstrip(".")
    if ":" in host:
        return host.lower() if _IPV6.fullmatch(host.lower()) else None
    if not host.isascii():
        host = host.encode("idna").decode("ascii")  # UnicodeError on an empty or long label
    host = host.lower()
    if not _HOST.fullmatch(host):
        return None
    labels = host.split(".")
    while len(labels) > 2 and labels[0] in HOST_PREFIXES:
        labels.pop(0)
    return ".".join(labels)


def _escapes(text: str, safe: str) -> str:
    """`text` with the characters that need it %-encoded (UTF-8) and every escape in one form:
    unreserved characters decoded, the others in upper-case hex."""
    encoded = quote(text, safe=safe)  # a lone surrogate raises UnicodeEncodeError

    def one_form(found: re.Match[str]) -> str:
        char = chr(int(found.group(1), 16))
        return char if char in _UNRESERVED else "%" + found.group(1).upper()

    return _ESCAPE.sub(one_form, encoded)


def _tracking_rules(extra: Iterable[str]) -> tuple[frozenset[str], tuple[str, ...]]:
    """(exact names, prefixes) of the tracking parameters, lower case."""
    exact: set[str] = set()
    prefixes: list[str] = []
    for name in (*TRACKING_PARAMS, *extra):
        if not isinstance(name, str) or not name:
            continue
        name = name.lower()
        if name.endswith("*"):
            prefixes.append(name[:-1])
        else:
            exact.add(name)
    return frozenset(exact), tuple(prefixes)


def _canonical_query(query: str, rules: tuple[frozenset[str], tuple[str, ...]]) -> str:
    exact, prefixes = rules
    kept: list[tuple[str, str]] = []
    for pair in query.split("&"):
        if not pair:
            continue
        normal = _escapes(pair, _QUERY_SAFE + "=")
        name = unquote(normal.partition("=")[0]).lower()
        if name in exact or name.startswith(prefixes):
            continue
        kept.append((normal.partition("=")[0], normal))
    kept.sort(key=lambda item: item[0])  # stable: a repeated name keeps its order
    return "&".join(pair for _, pair in kept)


# --- merging ----------------------------------------------------------------------------------


class _Variant:
    __slots__ = ("source", "rank", "url", "title", "snippet", "by_domain", "sitelinks")

    def __init__(self, source: str, rank: int, url: str, title: str, snippet: str) -> None:
        self.source = source
        self.rank = rank
        self.url = url
        self.title = title
        self.snippet = snippet
        self.by_domain = False
        self.sitelinks: list[dict[str, str]] | None = None


class _Group:
    """The variants of one canonical URL and, once scored, its ranking parts."""

    __slots__ = ("key", "host", "variants", "pending", "contributions", "total", "best_rank")

    def __init__(self, key: str) -> None:
        self.key = key
        self.host = (urlsplit(key).hostname or "") if key.startswith("https://") else ""
        self.variants: list[_Variant] = []
        # Domain-titled citations keyed here, waiting to be matched to another result.
        self.pending: list[_Variant] = []
        self.contributions: dict[str, float] = {}
        self.total = 0.0
        self.best_rank = 0

    def best_native_rank(self) -> int:
        """The best rank any source gave this URL itself (domain corroborations aside)."""
        return min(v.rank for v in self.variants if not v.by_domain)

    def score(self, weight_of: Mapping[str, float], k: float) -> None:
        best: dict[str, int] = {}
        for variant in self.variants:
            best[variant.source] = min(best.get(variant.source, variant.rank), variant.rank)
        self.contributions = {s: weight_of[s] / (k + best[s]) for s in sorted(best)}
        self.total = math.fsum(self.contributions.values())
        self.best_rank = min(best.values())

    def result(self, position: int, weight_of: Mapping[str, float]) -> dict[str, Any]:
        own = sorted(
            (v for v in self.variants if not v.by_domain),
            key=lambda v: (v.rank, -weight_of[v.source], v.source, v.url),
        )
        url = own[0].url
        # A bare domain (a Gemini citation's title) is a title only when nothing better is.
        titled = sorted((v for v in own if v.title), key=lambda v: _is_bare_domain(v.title))
        title = titled[0].title if titled else ""
        snippet = next((v.snippet for v in own if v.snippet), "")
        sitelinks = next((v.sitelinks for v in own if v.sitelinks), None)
        sources = []
        for v in sorted(self.variants, key=lambda v: (v.rank, v.source, v.by_domain, v.url)):
            entry: dict[str, Any] = {"source": v.source, "rank": v.rank}
            if v.url != url:
                entry["url"] = v.url
            if v.by_domain:
                entry["matched"] = "domain"
            sources.append(entry)
        result: dict[str, Any] = {"title": title, "url": url, "snippet": snippet}
        if sitelinks:
            result["sitelinks"] = sitelinks
        return {
            **result,
            "sources": sources,
            "ranking": {
                "position": position,
                "corroboration": len(self.contributions),
                "score": round(self.total, 6),
                "contributions": {s: round(c, 6) for s, c in self.contributions.items()},
                "best_rank": self.best_rank,
                "canonical_url": self.key,
            },
        }


def _weights(
    legs: Mapping[str, Sequence[Any]], weights: Mapping[str, float] | None
) -> dict[str, float]:
    out = {}
    for source in legs:
        weight = (weights or {}).get(source, 1.0)
        if (
            isinstance(weight, bool)
            or not isinstance(weight, int | float)
            or not math.isfinite(weight)
            or weight <= 0
        ):
            raise ValueError(f"weight of {source!r} must be a positive number, not {weight!r}")
        out[source] = float(weight)
    return out


def _text(item: Mapping[str, Any], name: str) -> str:
    value = item.get(name)
    return value.strip() if isinstance(value, str) else ""


def _is_bare_domain(title: str) -> bool:
    return " " not in title and "." in title and _HOST.fullmatch(title.lower()) is not None


def _cited_domain(key: str, title: str) -> str | None:
    """The domain a Gemini grounding redirect cites (its title), or None for any other link."""
    parts = urlsplit(key)
    if parts.hostname != GROUNDING_REDIRECT_HOST:
        return None
    if not parts.path.startswith(GROUNDING_REDIRECT_PATH.rstrip("/")):
        return None
    try:
        domain = _canonical_host(title.strip().rstrip("/"))
    except UnicodeError:
        return None
    if domain is None or "." not in domain or ":" in domain:
        return None
    return domain


def _attach_by_domain(
    groups: dict[str, _Group], by_domain: list[tuple[int, str, str, str, str]]
) -> None:
    """Each domain-titled citation, best rank first, corroborates the best-ranked result on its
    domain that its source has not found yet; unmatched ones become results of their own."""
    for rank, source, key, domain, _url in sorted(by_domain):
        owner = groups[key]
        variant = next(v for v in owner.pending if v.source == source and v.rank == rank)
        candidates = [
            g
            for g in groups.values()
            if g.variants
            and (g.host == domain or g.host.endswith("." + domain))
            and not any(v.source == source for v in g.variants)
        ]
        if candidates:
            target = min(candidates, key=lambda g: (g.best_native_rank(), g.key))
            variant.by_domain = True
            target.variants.append(variant)
        else:
            owner.variants.append(variant)
        owner.pending.remove(variant)
