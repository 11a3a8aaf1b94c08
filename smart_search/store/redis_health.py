"""What `smart-search doctor` tells of the Redis behind `state_backend`, before it loses a ledger.

Read-only questions, each bounded by `lock_timeout_ms` (at most 5 s), asked of the server the
store itself would use (through the sentinels for a Sentinel URL):

- persistence: `CONFIG GET appendonly / appendfsync / save`. No append-only file and no snapshot
  schedule means a restart forgets the ledger; snapshots alone forget the writes since the last.
- memory: `maxmemory` and `maxmemory-policy`. Once memory runs short an `allkeys-*` policy evicts
  any key, the ledger's too, and a `volatile-*` one evicts keys that carry an expiry, which
  every key of ours does; `noeviction` refuses writes instead (`state_unavailable`).
- the durable keys' expiry (PTTL): every write renews it from `DOCUMENTS[name].ttl_s`.
- replicas: `connected_slaves` from INFO replication; for a Sentinel URL, the sentinels' view.

A server that refuses CONFIG GET (managed services rename or forbid it) is asked INFO, whose
`aof_enabled`, `maxmemory` and `maxmemory_policy` are the server's own statement; the snapshot
schedule is in CONFIG only. What neither answers is reported as not known, never guessed.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from smart_search.host import redis_url
from smart_search.store.base import DOCUMENTS

if TYPE_CHECKING:
    from smart_search.host.config import Settings

DAY_S = 86400.0


def inspect(settings: Settings) -> dict[str, Any]:
    """The facts and the problems (`problems`: each a sentence for doctor's verdict)."""
    from smart_search.errors import SearchError
    from smart_search.store.redis import RedisStore, connect

    backend = settings.state_backend
    timeout_s = min(settings.lock_timeout_ms / 1000.0, 5.0) or 5.0
    out: dict[str, Any] = {"reachable": False, "error": None, "problems": [], "unknown": []}
    try:
        store = RedisStore(settings)
        out["where"] = store.where()
        client = connect(store._redis, store.url, timeout_s)
        info = _info(client, store)
    except SearchError as err:
        out["error"] = err.message
        out["problems"].append(f"redis: {err.message}")
        return out
    out["reachable"] = True
    out["server"] = _server(info)
    config = _Config(client, store)
    out["persistence"] = _persistence(config, info, out)
    out["memory"] = _memory(config, info, out)
    out["keys"] = _keys(client, store, out)
    out["replicas"] = _replicas(info, backend["url"], timeout_s, out)
    if config.refused:
        out["config_get"] = "refused"
    return out


def _info(client: Any, store: Any) -> dict[str, Any]:
    """INFO server, persistence, memory and replication (empty where INFO itself is refused)."""
    redis = store._redis
    try:
        return dict(client.info("everything"))
    except redis.ResponseError:
        return {}
    except redis.RedisError as exc:
        raise store._describe(exc) from None


class _Config:
    """CONFIG GET, remembering whether the server refused it."""

    def __init__(self, client: Any, store: Any) -> None:
        self.client, self.store, self.refused = client, store, False

    def get(self, name: str) -> str | None:
        if self.refused:
            return None
        try:
            found = self.client.config_get(name)
        except self.store._redis.ResponseError:  # unknown command (renamed), NOPERM (ACL)
            self.refused = True
            return None
        except self.store._redis.RedisError as exc:
            raise self.store._describe(exc) from None
        value = (found or {}).get(name)  # redis-py decodes CONFIG GET's names and values
        return value.decode() if isinstance(value, bytes) else value


def _server(info: dict[str, Any]) -> str | None:
    if "valkey_version" in info:
        return f"valkey {info['valkey_version']}"
    if "redis_version" in info:
        name = info.get("server_name") or "redis"
        return f"{name} {info['redis_version']}"
    return None


def _persistence(config: _Config, info: dict[str, Any], out: dict[str, Any]) -> dict[str, Any]:
    appendonly = config.get("appendonly")
    if appendonly is None and "aof_enabled" in info:
        appendonly = "yes" if int(info["aof_enabled"]) else "no"
    fsync = config.get("appendfsync") if appendonly == "yes" else None
    save = config.get("save")
    facts = {"appendonly": appendonly, "appendfsync": fsync, "save": save}
    if appendonly == "yes":
        facts["verdict"] = "append-only file" + (f", appendfsync {fsync}" if fsync else "")
        if fsync == "no" or fsync == "everysec":
            facts["verdict"] += " (a crash of the server may forget its last second of writes)"
    elif appendonly == "no" and save == "":
        facts["verdict"] = "NONE"
        out["problems"].append(
            'redis: no persistence (appendonly no, save ""): a restart forgets the ledger; '
            "set appendonly yes"
        )
    elif appendonly == "no" and save is not None:
        facts["verdict"] = f"snapshots only (save {save})"
        out["problems"].append(
            f"redis: snapshots only (appendonly no, save {save}): a crash forgets every unit "
            "spent since the last snapshot; set appendonly yes"
        )
    else:
        facts["verdict"] = None
        what = "whether it persists (appendonly)" if appendonly is None else "its snapshot schedule"
        out["unknown"].append(f"{what}: the server refused CONFIG GET")
    return facts


def _memory(config: _Config, info: dict[str, Any], out: dict[str, Any]) -> dict[str, Any]:
    limit = config.get("maxmemory")
    if limit is None and "maxmemory" in info:
        limit = str(info["maxmemory"])
    policy = config.get("maxmemory-policy") or info.get("maxmemory_policy")
    facts: dict[str, Any] = {"maxmemory": int(limit) if limit else None, "policy": policy}
    if limit is None or policy is None:
        out["unknown"].append("maxmemory and its policy: the server refused CONFIG GET and INFO")
        return facts
    evicts = policy.startswith("allkeys-") or policy.startswith("volatile-")
    whose = (
        "any key" if policy.startswith("allkeys-") else "keys with an expiry (ours all have one)"
    )
    if evicts and int(limit) > 0:
        out["problems"].append(
            f"redis: maxmemory-policy {policy} evicts {whose} when memory runs short, the ledger "
            "too: set maxmemory-policy noeviction (or give the ledger a server of its own)"
        )
    elif evicts:
        facts["note"] = f"{policy} would evict the ledger once a maxmemory is set"
    return facts


def _keys(client: Any, store: Any, out: dict[str, Any]) -> list[dict[str, Any]]:
    """Each durable document's key and its expiry: every write sets it from its `ttl_s`."""
    keys = []
    for name, kind in DOCUMENTS.items():
        if not kind.durable:
            continue
        key = store.key(name)
        try:
            ttl_ms = client.pttl(key)
        except store._redis.RedisError as exc:
            raise store._describe(exc) from None
        record: dict[str, Any] = {"name": name, "key": key, "renewed_days": kind.ttl_s / DAY_S}
        record["exists"] = ttl_ms != -2
        record["expires_in_days"] = round(ttl_ms / 1000 / DAY_S, 1) if ttl_ms >= 0 else None
        keys.append(record)
    return keys


def _replicas(
    info: dict[str, Any], url: str, timeout_s: float, out: dict[str, Any]
) -> dict[str, Any]:
    facts: dict[str, Any] = {"role": info.get("role")}
    if "connected_slaves" in info:
        facts["connected"] = int(info["connected_slaves"])
    if redis_url.is_sentinel(url):
        facts.update(_sentinel_view(redis_url.parse_sentinel(url), timeout_s))
    if "connected" not in facts and "sentinel_healthy" not in facts:
        out["unknown"].append("its replicas: the server refused INFO")
    return facts


def _sentinel_view(spec: redis_url.SentinelURL, timeout_s: float) -> dict[str, Any]:
    """What the first sentinel that answers says of `service`'s replicas."""
    import redis

    for host, port in spec.sentinels:
        client = redis.Redis(
            host, port, username=spec.sentinel_username, password=spec.sentinel_password,
            socket_timeout=timeout_s, socket_connect_timeout=timeout_s, protocol=2,
        )  # fmt: skip
        try:
            replicas = client.sentinel_slaves(spec.service)
            master = client.sentinel_master(spec.service)
        except redis.RedisError:
            continue
        finally:
            client.close()
        healthy = [
            r for r in replicas
            if not (r.get("is_sdown") or r.get("is_odown") or r.get("is_disconnected"))
        ]  # fmt: skip
        return {
            "sentinel_known": len(replicas),
            "sentinel_healthy": len(healthy),
            "sentinels": 1 + int(master.get("num-other-sentinels", 0)),
            "quorum": master.get("quorum"),
        }
    return {}
