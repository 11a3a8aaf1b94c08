"""The Redis backend of the state seam: one budget, breaker, pacing and cache for many hosts.

Configured as `state_backend: {"kind": "redis", "url": "redis://host:6379/0", "prefix": ...}`;
imported only then (redis-py is an optional extra). Valkey speaks the same protocol. A Sentinel
group's `redis+sentinel://` URL (host/redis_url.py) reaches whichever primary it names (`connect`).

Documents: one string key per document, `<prefix>:<name>` (e.g. `smart-search:quota`), holding
the same JSON the file backend writes. `update` is one optimistic transaction: WATCH the key, GET
it, run the pure `change` in Python (the one copy of the arithmetic), then MULTI / SET / EXEC; if
another client wrote the key in between, EXEC fails (WatchError) and the change runs again on the
new document. No client ever writes from a stale read. Every write sets the key's expiry from
`DOCUMENTS[name].ttl_s`, so a fleet that stops leaves nothing behind for long.

Cache: an entry is a hash `<prefix>:cache:e:<key>` (value, stored_at, expires_at) with its own
expiry; `<prefix>:cache:lru` (sorted set by last use), `<prefix>:cache:exp` (by expiry) and
`<prefix>:cache:sizes` / `<prefix>:cache:bytes` (value sizes, their sum) do the accounting. A put,
with its eviction, is one Lua script. Leases are `<prefix>:lease:<key>` (owner and logical expiry,
claimed and released by Lua scripts; the key also carries a real expiry so a dead owner's lease
goes away on its own).

Failures: a server that is down, refuses us, or answers slower than `lock_timeout_ms` raises
StateUnavailable naming the store (URL without its password); a document that keeps changing
under us past `lock_timeout_ms` raises LockTimeout. Durable data that does not parse raises
StateCorrupt naming the key and is left in place. With `on_unavailable: "web_only"` the advisory
documents (breaker, pacing, cache stats) fall back to this host's state directory while the server
is unreachable, so web tiers keep their per-host pacing and breaker; the quota never falls back.
"""

from __future__ import annotations

import math
import time
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit, urlunsplit

import orjson

from smart_search.errors import (
    ConfigError,
    LockTimeout,
    StateCorrupt,
    StateLost,
    StateUnavailable,
)
from smart_search.host import redis_url
from smart_search.store import witness
from smart_search.store.base import DOCUMENTS, CacheEntry, Change, Document, T, export_documents

if TYPE_CHECKING:
    from smart_search.host.config import Settings


def install_hint() -> str:
    from smart_search import distribution_name

    extra = f"'{distribution_name() or 'openclaw-smart-search'}[redis]'"
    return (
        'state_backend.kind is "redis" but the Redis client is not installed. '
        f"Install it with: pip install {extra} (or: pip install 'redis>=5')."
    )


# How long a store that could not reach its server fails at once before trying it again.
DOWN_FOR_S = 2.0

# Evict expired entries, then least-recently-used ones, after storing one entry. Keys the script
# derives (other entries) sit under the same prefix on the same server (no Redis Cluster).
_PUT = """
local lru, exp, sizes, total = KEYS[1], KEYS[2], KEYS[3], KEYS[4]
local eprefix, member, value = ARGV[1], ARGV[2], ARGV[3]
local stored, expires, ttl_ms = tonumber(ARGV[4]), tonumber(ARGV[5]), tonumber(ARGV[6])
local max_n, max_b = tonumber(ARGV[7]), tonumber(ARGV[8])
local function drop(m)
  local size = redis.call('HGET', sizes, m)
  if size then redis.call('DECRBY', total, size) end
  redis.call('HDEL', sizes, m)
  redis.call('ZREM', lru, m)
  redis.call('ZREM', exp, m)
  redis.call('DEL', eprefix .. m)
end
drop(member)
if ttl_ms > 0 then
  local ek = eprefix .. member
  redis.call('HSET', ek, 'v', value, 's', ARGV[4], 'x', ARGV[5])
  redis.call('PEXPIRE', ek, ttl_ms)
  redis.call('ZADD', lru, stored, member)
  redis.call('ZADD', exp, expires, member)
  redis.call('HSET', sizes, member, string.len(value))
  redis.call('INCRBY', total, string.len(value))
end
for _, m in ipairs(redis.call('ZRANGEBYSCORE', exp, '-inf', stored)) do drop(m) end
while redis.call('ZCARD', lru) > max_n or tonumber(redis.call('GET', total) or '0') > max_b do
  local oldest = redis.call('ZRANGE', lru, 0, 0)
  if #oldest == 0 then break end
  drop(oldest[1])
end
local last = redis.call('ZRANGE', exp, -1, -1, 'WITHSCORES')
if #last == 0 then
  redis.call('DEL', lru, exp, sizes, total)
else
  local keep = math.max(1, math.ceil((tonumber(last[2]) - stored) * 1000) + 60000)
  for _, k in ipairs({lru, exp, sizes, total}) do redis.call('PEXPIRE', k, keep) end
end
return 1
"""

_CLAIM = """
local cur = redis.call('GET', KEYS[1])
if cur then
  local ok, held = pcall(cjson.decode, cur)
  if ok and type(held) == 'table' and held['owner'] ~= ARGV[1]
     and tonumber(held['until'] or 0) > tonumber(ARGV[2]) then
    return 0
  end
end
redis.call('SET', KEYS[1], ARGV[3], 'PX', ARGV[4])
return 1
"""

_RELEASE = """
local cur = redis.call('GET', KEYS[1])
if cur then
  local ok, held = pcall(cjson.decode, cur)
  if not ok or type(held) ~= 'table' or held['owner'] == ARGV[1] then
    redis.call('DEL', KEYS[1])
  end
end
return 1
"""


def masked(url: str) -> str:
    """`url` with any password replaced by ***, for messages and `where()`: the servers' in the
    user part, and a Sentinel URL's `sentinel_password` option."""
    try:
        parts = urlsplit(url)
        if parts.password is not None:
            hosts = parts.netloc.rpartition("@")[2]  # one host, or a Sentinel URL's list
            parts = parts._replace(netloc=f"{parts.username or ''}:***@{hosts}")
        if "password=" in parts.query:
            hidden = [
                f"{p.partition('=')[0]}=***" if "password=" in p else p
                for p in parts.query.split("&")
            ]
            parts = parts._replace(query="&".join(hidden))
        return urlunsplit(parts)
    except ValueError:
        return "redis (unparsable URL)"


def connect(redis: Any, url: str, timeout_s: float) -> Any:
    """A client of the server `url` names, or of the primary a Sentinel URL's sentinels name
    now (redis-py's own Sentinel support asks them again on every new connection, so a process
    that outlives a failover follows it).

    No silent retries: a transaction resent after a lost reply could run twice, and a caller
    must learn at once that the store is gone. Every wait (sentinels included) is bounded by
    `timeout_s`. RESP2: no HELLO round trip when a one-shot call connects, and servers older
    than Redis 6 still understood."""
    from redis.backoff import NoBackoff
    from redis.retry import Retry

    options: dict[str, Any] = dict(
        socket_timeout=timeout_s,
        socket_connect_timeout=timeout_s,
        retry=Retry(NoBackoff(), 0),
        retry_on_timeout=False,
        health_check_interval=0,
        protocol=2,
    )
    if not redis_url.is_sentinel(url):
        return redis.Redis.from_url(url, **options)
    from redis.sentinel import Sentinel

    spec = redis_url.parse_sentinel(url)  # checked with the config: ValueError is not expected
    sentinels = Sentinel(
        list(spec.sentinels),
        sentinel_kwargs={
            **{k: v for k, v in options.items() if k != "retry_on_timeout"},  # deprecated there
            "username": spec.sentinel_username,
            "password": spec.sentinel_password,
        },
    )
    return sentinels.master_for(
        spec.service, db=spec.db, username=spec.username, password=spec.password, **options
    )


class RedisStore:
    kind = "redis"

    def __init__(self, settings: Settings) -> None:
        try:
            import redis
        except ImportError:
            raise ConfigError(install_hint()) from None
        backend = settings.state_backend
        self.url: str = backend["url"]
        self.prefix: str = backend.get("prefix", "smart-search")
        self.web_only = backend.get("on_unavailable", "refuse") == "web_only"
        self.settings = settings
        self.timeout_s = settings.lock_timeout_ms / 1000.0
        self._redis = redis
        self.client = connect(redis, self.url, self.timeout_s)
        self._scripts: dict[str, Any] = {}
        self._fallback: Any = None
        # After a failure to reach the server, further operations of this store fail at once
        # for a moment instead of each waiting out lock_timeout_ms again (one call touches
        # breaker, pacing and ledger several times).
        self._down: tuple[float, StateUnavailable] | None = None
        # RULINGS 8: durable documents carry their identity and this host keeps a witness of
        # them (store/witness.py); `witnessing` False is the old behaviour (the fault bench only).
        self.on_state_lost: str = backend.get("on_state_lost", "restore")
        self.witnessing = True
        self.read_only = False  # doctor: check against the witness, never write it

    # -- documents -------------------------------------------------------------------------------
    def key(self, name: str) -> str:
        return f"{self.prefix}:{name}"

    def read(self, name: str) -> Document | None:
        kind = DOCUMENTS[name]
        try:
            raw = self._call(lambda: self.client.get(self.key(name)))
        except StateUnavailable:
            if self.web_only and not kind.durable:
                return self._local().read(name)
            raise
        if not self._witnessed(name):
            return self._parse(name, raw)
        doc, meta = self._checked(name, self._parse(name, raw))
        self._saw(name, meta, doc)
        return doc

    def update(self, name: str, change: Change[T], *, durable: bool = True) -> T:
        # Redis's own persistence settings decide durability: `durable` has nothing to skip.
        kind = DOCUMENTS[name]
        try:
            return self._update(name, change)
        except StateUnavailable:
            if self.web_only and not kind.durable:
                return self._local().update(name, change)
            raise

    def _update(self, name: str, change: Change[T]) -> T:
        if not self._witnessed(name):
            return self._transact(name, lambda raw: (*change(raw), None))

        def step(raw: Document | None) -> tuple[Document | None, T, Any]:
            doc, meta = self._checked(name, raw)
            new_doc, result = change(doc)
            if new_doc is None:
                return None, result, (meta, doc)
            meta = witness.advance(meta, time.time())
            return witness.joined(new_doc, meta), result, (meta, new_doc)

        return self._transact(name, step)

    def rewrite(self, name: str, fn: Any) -> Any:
        """One atomic step over a witnessed document's content AND identity, without the loss
        check (the budget's restore and fold, `state restore`): `fn(doc, meta, witness)` returns
        (new document | None, its identity, result)."""

        def step(raw: Document | None) -> tuple[Document | None, Any, Any]:
            doc, meta = witness.split(raw)
            new_doc, new_meta, result = fn(doc, meta, self.witness_of(name))
            if new_doc is None:
                return None, result, None  # the witness stays as it was (it may be the only copy)
            return witness.joined(new_doc, new_meta), result, (new_meta, new_doc)

        return self._transact(name, step)

    def identity(self, name: str) -> Document | None:
        """The document's `_ledger` identity as the store holds it (doctor), unchecked."""
        raw = self._call(lambda: self.client.get(self.key(name)))
        return witness.split(self._parse(name, raw))[1]

    def witness_of(self, name: str) -> witness.Witness | None:
        return witness.read_witness(self.settings.state_dir, name, self.settings.lock_timeout_ms)

    def _witnessed(self, name: str) -> bool:
        return self.witnessing and DOCUMENTS[name].durable

    def _checked(self, name: str, raw: Document | None) -> tuple[Document | None, Any]:
        doc, meta = witness.split(raw)
        loss = witness.judge(name, meta, raw is not None, self.witness_of(name), self.host,
                             DOCUMENTS[name].ttl_s, time.time())  # fmt: skip
        if loss is not None:
            raise StateLost(witness.refusal(masked(self.url), loss), loss=loss)
        return doc, meta

    def _saw(self, name: str, meta: Document | None, doc: Document | None) -> None:
        if meta is None or doc is None or self.read_only or meta.get("lost"):
            return  # a store marked lost is no state to vouch for: the witness keeps the last
        try:
            witness.keep(self.settings.state_dir, name, self.settings.lock_timeout_ms, meta, doc)
        except LockTimeout:
            pass  # this host's other processes keep it busy: theirs is as recent

    @property
    def host(self) -> str:
        return witness.host_label(self.settings.state_dir)

    def _transact(self, name: str, step: Any) -> Any:
        """WATCH, GET, `step(document) -> (document to SET | None, result, seen)`, MULTI/SET/
        EXEC, retried on a concurrent write; then `seen` (identity, document) goes to the
        witness."""
        self._check_down()
        key = self.key(name)
        ttl_ms = int(DOCUMENTS[name].ttl_s * 1000) if DOCUMENTS[name].ttl_s else None
        deadline = time.monotonic() + self.timeout_s
        tries = 0
        while True:
            tries += 1
            with self.client.pipeline(transaction=True) as pipe:
                try:
                    pipe.watch(key)
                    new_doc, result, seen = step(self._parse(name, pipe.get(key)))
                    if new_doc is None:
                        pipe.unwatch()
                    else:
                        pipe.multi()
                        pipe.set(key, orjson.dumps(new_doc), px=ttl_ms)
                        pipe.execute()
                    if seen is not None:
                        self._saw(name, *seen)
                    return result
                except self._redis.WatchError as exc:
                    self._raise_if_lost(exc)
                    # someone wrote the key since our GET: run the change again
                except self._redis.RedisError as exc:
                    raise self._unavailable(exc) from None
            if time.monotonic() >= deadline:
                raise LockTimeout(
                    f"Shared state {key} at {self.where()} stayed busy past lock_timeout_ms. "
                    "Try again."
                )
            if tries > 3:
                time.sleep(min(0.002 * tries, 0.02))  # heavy contention: let the winner finish

    def _parse(self, name: str, raw: bytes | None) -> Document | None:
        if raw is None:
            return None
        try:
            doc = orjson.loads(raw)
        except orjson.JSONDecodeError:
            doc = None
        if isinstance(doc, dict):
            return doc
        if not DOCUMENTS[name].durable:
            return None  # advisory: rebuilt by the next update
        raise StateCorrupt(
            f"State key {self.key(name)} at {self.where()} is corrupt (not a JSON object). "
            "It was left in place: repair or delete it."
        )

    def where(self) -> str:
        return f"{masked(self.url)} (prefix {self.prefix})"

    def export_state(self) -> dict[str, Any]:
        return export_documents(self)

    # -- cache -----------------------------------------------------------------------------------
    def _ckey(self, key: str) -> str:
        return f"{self.prefix}:cache:e:{key}"

    def _book(self) -> list[str]:
        p = self.prefix
        return [f"{p}:cache:lru", f"{p}:cache:exp", f"{p}:cache:sizes", f"{p}:cache:bytes"]

    def cache_get(self, key: str, now: float) -> CacheEntry | None:
        try:
            value, stored, expires = self._call(
                lambda: self.client.hmget(self._ckey(key), ["v", "s", "x"])
            )
            if value is None:
                return None
            entry = CacheEntry(bytes(value), float(stored), float(expires))
            if entry.expires_at <= now:
                return None
            self._call(lambda: self.client.zadd(self._book()[0], {key: now}, xx=True))
            return entry
        except (StateUnavailable, TypeError, ValueError):
            return None  # advisory: an unreachable or damaged cache is a miss

    def cache_put(self, key: str, entry: CacheEntry, *, max_entries: int, max_bytes: int) -> None:
        ttl_ms = math.ceil((entry.expires_at - entry.stored_at) * 1000)
        args = [self.prefix + ":cache:e:", key, entry.value, repr(entry.stored_at),
                repr(entry.expires_at), max(ttl_ms, 0), max_entries, max_bytes]  # fmt: skip
        try:
            self._call(lambda: self._script("put", _PUT)(keys=self._book(), args=args))
        except StateUnavailable:
            return  # advisory: the answer is still returned, just not kept

    def cache_clear(self) -> int:
        def clear() -> int:
            count = 0
            for pattern in (f"{self.prefix}:cache:*", f"{self.prefix}:lease:*"):
                batch: list[bytes] = []
                for k in self.client.scan_iter(match=pattern, count=500):
                    if k.startswith(self._ckey("").encode()):
                        count += 1
                    batch.append(k)
                    if len(batch) >= 500:
                        self.client.delete(*batch)
                        batch = []
                if batch:
                    self.client.delete(*batch)
            return count

        return self._call(clear)

    def cache_size(self) -> tuple[int, int]:
        lru, _, _, total = self._book()
        pipe = self.client.pipeline(transaction=False)
        pipe.zcard(lru)
        pipe.get(total)
        entries, size = self._call(pipe.execute)
        return int(entries), int(size or 0)

    # -- single-flight leases --------------------------------------------------------------------
    def _lkey(self, key: str) -> str:
        return f"{self.prefix}:lease:{key}"

    def lease_claim(self, key: str, owner: str, ttl_s: float, now: float) -> bool:
        held = orjson.dumps({"owner": owner, "until": now + ttl_s})
        px = max(1, math.ceil(ttl_s * 1000))
        try:
            won = self._call(
                lambda: self._script("claim", _CLAIM)(
                    keys=[self._lkey(key)], args=[owner, repr(now), held, px]
                )
            )
        except StateUnavailable:
            # Advisory: without the store nobody can coordinate; the caller asks on its own and
            # the ledger (which does not fall back) decides whether anything may be spent.
            return True
        return bool(won)

    def lease_release(self, key: str, owner: str) -> None:
        try:
            self._call(
                lambda: self._script("release", _RELEASE)(keys=[self._lkey(key)], args=[owner])
            )
        except StateUnavailable:
            return  # the lease's own expiry frees it

    def lease_holder(self, key: str, now: float) -> str | None:
        try:
            raw = self._call(lambda: self.client.get(self._lkey(key)))
        except StateUnavailable:
            return None
        try:
            held = orjson.loads(raw) if raw is not None else None
        except orjson.JSONDecodeError:
            return None
        if not isinstance(held, dict) or not isinstance(held.get("owner"), str):
            return None
        until = held.get("until")
        if not isinstance(until, int | float) or until <= now:
            return None
        return held["owner"]

    # -- plumbing --------------------------------------------------------------------------------
    def _script(self, name: str, source: str) -> Any:
        script = self._scripts.get(name)
        if script is None:
            script = self._scripts[name] = self.client.register_script(source)
        return script

    def _call(self, fn: Any) -> Any:
        self._check_down()
        try:
            return fn()
        except self._redis.RedisError as exc:
            raise self._unavailable(exc) from None

    def _raise_if_lost(self, exc: Exception) -> None:
        """redis-py turns a connection lost inside WATCH ... EXEC (a server killed, a failover)
        into a WatchError, "retry the transaction". Its EXEC may have been applied before the
        reply was lost: run again (on a new primary, say) it would be counted twice, and
        taken as failed it would not be counted at all. Neither is assumed: the caller gets
        StateUnavailable, sends no request, and a hold that did land stays charged (burned,
        never free)."""
        lost = exc.__context__
        if isinstance(lost, self._redis.ConnectionError | self._redis.TimeoutError):
            raise self._unavailable(lost) from None

    def _check_down(self) -> None:
        if self._down is not None:
            until, err = self._down
            if time.monotonic() < until:
                raise StateUnavailable(err.message)
            self._down = None

    def _unavailable(self, exc: Exception) -> StateUnavailable:
        err = self._describe(exc)
        self._down = (time.monotonic() + DOWN_FOR_S, err)
        return err

    def _describe(self, exc: Exception) -> StateUnavailable:
        errors = self._redis.exceptions
        if isinstance(exc, self._redis.sentinel.MasterNotFoundError):
            why = "no sentinel named its primary (down, or a failover under way)"
        elif isinstance(exc, errors.TimeoutError):
            why = "it did not answer within lock_timeout_ms"
        elif isinstance(exc, errors.AuthenticationError):
            why = "it refused our credentials"
        elif isinstance(exc, errors.ConnectionError):
            why = "it cannot be reached"
        elif isinstance(exc, errors.ResponseError) and "NOAUTH" in str(exc):
            why = "it requires a password"
        elif isinstance(exc, errors.ResponseError) and "NOREPLICAS" in str(exc):
            why = "it takes no writes while too few replicas are in sync (min-replicas-to-write)"
        else:
            why = f"it answered with an error ({exc.__class__.__name__})"
        return StateUnavailable(
            f"State store {self.where()} is unavailable: {why}. Nothing was spent blind."
        )

    def _local(self) -> Any:
        """This host's state directory, for advisory documents while the server is away."""
        if self._fallback is None:
            from smart_search.store.files import FileStore

            self._fallback = FileStore(self.settings.state_dir, self.settings.lock_timeout_ms)
        return self._fallback
