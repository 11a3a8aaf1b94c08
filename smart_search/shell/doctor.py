"""`smart-search doctor [--json]`: what this install reads, where it keeps state, what is wrong.

Read-only: it opens the config, the ledger and the breaker file, and writes nothing (no state
directory is created, no legacy ledger is merged, no provider is called, no quota is spent). An
API key is never printed, not even in part: only where it came from and its length.

Exit 0 when healthy, 1 when something needs the operator, 2 for an unusable command line.
"""

from __future__ import annotations

import os
import sys
import time
from typing import Any

from smart_search.host import openclaw
from smart_search.host.config_entry import ENTRY, LEGACY_SECTION


def main(argv: list[str]) -> int:
    if argv not in ([], ["--json"]):
        if argv in (["-h"], ["--help"]):
            sys.stdout.write("usage: smart-search doctor [--json]\n")
            return 0
        sys.stderr.write(f"usage: smart-search doctor [--json]\nunknown arguments: {argv!r}\n")
        return 2
    report = diagnose(os.environ)
    if argv == ["--json"]:
        import orjson

        sys.stdout.buffer.write(orjson.dumps(report, option=orjson.OPT_APPEND_NEWLINE))
    else:
        sys.stdout.write(render(report))
    sys.stdout.flush()
    return 0 if report["healthy"] else 1


def diagnose(env: Any) -> dict[str, Any]:
    """Everything doctor knows, as one JSON-ready dict; `problems` decides the verdict."""
    from smart_search.errors import SearchError
    from smart_search.host import config, config_entry, config_keys

    problems: list[str] = []
    location = openclaw.config_location(env)
    report: dict[str, Any] = {
        "config": {
            "path": location.path,
            "exists": location.exists,
            "named_by_variable": location.explicit,
            "steps": location.steps,
            "files_read": [],
            "error": None,
        }
    }
    root: dict[str, Any] = {}
    try:
        root, files = openclaw.load_config(location, env)
        report["config"]["files_read"] = files
    except SearchError as err:
        report["config"]["error"] = err.message
        problems.append(f"config: {err.message}")

    report["layout"] = _layout(root, problems)
    settings = None
    section: dict[str, Any] = {}
    skill_env: dict[str, Any] = {}
    if report["config"]["error"] is None:
        try:
            section, skill_env = config_entry.skill_section(root)
            settings = config.load_settings(env)
        except SearchError as err:
            report["config"]["error"] = err.message
            problems.append(f"config: {err.message}")
    report["api_keys"] = _key_sources(env, root, skill_env, settings)
    for provider, record in report["api_keys"].items():
        problems.extend(f"key: {provider}: {note}" for note in record["notes"])
    report["sources"] = _sources(settings)
    unknown = config_keys.unknown_keys(section) if isinstance(section, dict) else []
    report["unknown_keys"] = [{"key": k, "nearest": near} for k, near in unknown]
    problems.extend(config_keys.unknown_key_warning(k, near) for k, near in unknown)

    report["state_dir"] = _state_dir(env, section, settings, problems)
    report["ledger"] = _ledger(settings, problems)
    report["last_restore"] = last_restore(settings)
    report["breakers"] = _breakers(settings)
    for b in report["breakers"]:
        problems.append(f"{b['name']} circuit is {b['state']}")
    report["cache"] = _cache(settings)
    report["redis"] = _redis(settings, problems)
    if report["cache"] and report["cache"]["config"].get("enabled") and not report["cache"]["ok"]:
        problems.append(f"cache: {report['cache']['error']}")
    report["problems"] = problems
    report["healthy"] = not problems
    report["verdict"] = _verdict(problems)
    return report


def _state_dir(env: Any, section: Any, settings: Any, problems: list[str]) -> dict[str, Any]:
    configured = section.get("state_dir") if isinstance(section, dict) else None
    configured = configured if isinstance(configured, str) and configured else None
    if settings is not None:
        state_dir, why = settings.state_dir, openclaw.skill_state_dir(env, configured)[1]
    else:
        state_dir, why = openclaw.skill_state_dir(env, configured)
    out = {"path": state_dir, "why": why, **_dir_health(state_dir)}
    if not out["writable"]:
        problems.append(f"state dir {state_dir} is not writable")
    legacy = settings.legacy_state_dir if settings is not None else None
    legacy_file = os.path.join(legacy, "search-quota.json") if legacy else None
    out["legacy_ledger"] = legacy_file if legacy_file and os.path.exists(legacy_file) else None
    return out


def _verdict(problems: list[str]) -> str:
    """The verdict line: healthy, or how many problems of which kind."""
    if not problems:
        return "healthy"
    kinds: dict[str, int] = {}
    for problem in problems:
        kind = problem.split(":", 1)[0] if ":" in problem[:12] else problem.split('"', 1)[0]
        kinds[kind.strip()] = kinds.get(kind.strip(), 0) + 1
    summary = ", ".join(f"{k} x{n}" if n > 1 else k for k, n in kinds.items())
    return f"NOT HEALTHY: {len(problems)} problem(s) ({summary})"


def _layout(root: dict[str, Any], problems: list[str]) -> dict[str, Any]:
    skills = root.get("skills") if isinstance(root, dict) else None
    skills = skills if isinstance(skills, dict) else {}
    entries = skills.get("entries")
    found = []
    if isinstance(entries, dict) and "smart-search" in entries:
        found.append(ENTRY)
    if "smart-search" in skills:
        found.append(LEGACY_SECTION)
    rejected = []
    if "smart-search" in skills:
        rejected.append(
            f'{LEGACY_SECTION}: OpenClaw rejects the whole file ("skills: Unrecognized key"); '
            f"move it to {ENTRY}.config (env keys to {ENTRY}.env)"
        )
    top_env = root.get("env") if isinstance(root, dict) else None
    if isinstance(top_env, dict):
        for key in top_env:
            if key not in ("vars", "shellEnv"):
                rejected.append(
                    f'env.{key}: OpenClaw rejects the whole file ("env: Unrecognized key"); '
                    f"move it to env.vars.{key}"
                )
    problems.extend(f"layout: {r}" for r in rejected)
    return {"found": found, "rejected_by_openclaw": rejected}


def _key_sources(
    env: Any, root: dict[str, Any], skill_env: dict[str, Any], settings: Any
) -> dict[str, Any]:
    """Where each key comes from: smart-search's own places in the lookup order of RULINGS 2,
    then what OpenClaw holds (issue 30), the walk config.py uses; the value is never shown, only
    its length, and `notes` say why a key OpenClaw names could not be read."""
    from smart_search.host.config import PROVIDERS, find_key
    from smart_search.host.config_entry import API_KEY_NAMES, api_key_sources
    from smart_search.host.host_keys import HostEnv

    sources = api_key_sources(env, root, skill_env)
    host_env = HostEnv(env, root)
    out: dict[str, Any] = {}
    for provider, name in zip(PROVIDERS, API_KEY_NAMES, strict=True):
        record: dict[str, Any] = {"name": name, "set": False, "source": None, "length": None}
        try:
            origin, value, notes = find_key(provider, sources, root, env, host_env)
        except Exception as err:  # noqa: BLE001 - doctor reports, never crashes on a key
            origin, value, notes = None, None, (f"cannot be looked up ({type(err).__name__})",)
        if value is not None:
            record.update(set=True, source=origin, length=len(value))
        record["notes"] = list(notes)
        if settings is not None:
            loaded = settings.api_keys.get(provider)
            record["set"] = loaded is not None
            if loaded is not None:
                record["length"] = len(loaded.reveal())
            pool = settings.key_pools.get(provider)
            if pool:  # a key pool (docs/quota.md): its keys by fingerprint, never a value
                prints = ", ".join(k.fingerprint for k in pool)
                record["source"] = f"key pool of {len(pool)} ({prints})"
        out[provider] = record
    return out


def _sources(settings: Any) -> dict[str, Any] | None:
    """Which sources this install can use (search_quota_status's `sources`); None without
    settings."""
    if settings is None:
        return None
    from smart_search.host.host_keys import source_states

    return source_states(settings)


def _dir_health(path: str) -> dict[str, Any]:
    exists = os.path.isdir(path)
    probe = path
    while not os.path.exists(probe):
        parent = os.path.dirname(probe)
        if parent == probe:
            break
        probe = parent
    writable = os.access(probe, os.W_OK | os.X_OK) and os.path.isdir(probe)
    return {"exists": exists, "writable": writable}


def _ledger(settings: Any, problems: list[str]) -> dict[str, Any]:
    if settings is None:
        return {"readable": False, "error": "config could not be read"}
    from smart_search.budget.ledger import QUOTA_FILE, Ledger
    from smart_search.budget.reconcile import drift_rows
    from smart_search.errors import SearchError
    from smart_search.host.config import PROVIDERS

    path = os.path.join(settings.state_dir, QUOTA_FILE)
    out: dict[str, Any] = {"path": path, "exists": os.path.exists(path)}
    try:
        ledger = Ledger(settings, recover=False)  # doctor restores nothing: it reports
        setattr(ledger.store, "read_only", True)  # noqa: B010 - Redis: no witness refresh
        doc = ledger.snapshot()  # read once: the status and the drift both read it
        status = ledger.full_status(doc)
    except SearchError as err:
        problems.append(f"ledger: {err.message}")
        return {**out, "readable": False, "error": err.message}
    out.update(readable=True, error=None, day=status["date"])
    out["providers"] = {
        p: {"used": v["used"], "daily_limit": v["daily_limit"]}
        for p, v in status["providers"].items()
    }
    # Each provider's month against what its last answer reported (no provider is asked:
    # `smart-search reconcile` asks the usage endpoints).
    out["reconcile"] = drift_rows(doc, PROVIDERS, {}, time.time())
    if status.get("warning"):
        out["warning"] = status["warning"]
    return out


def _redis(settings: Any, problems: list[str]) -> dict[str, Any] | None:
    """For a Redis backend, what could make it forget the ledger (store/redis_health.py)."""
    if settings is None or settings.state_backend.get("kind") != "redis":
        return None
    from smart_search.store import redis_health

    facts = redis_health.inspect(settings)
    problems.extend(facts["problems"])
    return facts


def last_restore(settings: Any) -> dict[str, Any] | None:
    """RULINGS 8: the ledger's last restore after its store forgot it, and whether the store is
    marked lost now (refuse mode), as the store's identity of the ledger records them; None for
    the file backend (it keeps the ledger on this host: nothing to forget)."""
    if settings is None or settings.state_backend.get("kind", "files") == "files":
        return None
    from smart_search.errors import SearchError
    from smart_search.store import open_store
    from smart_search.text.stamps import utc_stamp

    try:
        meta = open_store(settings).identity("quota") or {}
    except SearchError as err:
        return {"error": err.message}
    records = meta.get("restored") or []
    lost = meta.get("lost")
    out: dict[str, Any] = {"error": None, "restores": len(records), "lost_now": lost is not None}
    if lost:
        out["lost"] = {"at": utc_stamp(lost["at"]), "host": lost["host"], "why": lost["kind"]}
    if records:
        r = records[0]
        out["last"] = {
            "at": utc_stamp(r["at"]), "host": r["host"], "why": r["why"],
            "unaccounted": r["unaccounted"], "in_flight": r["in_flight"],
            "found_later": r["found_later"], "hosts_folded": len(r["folded"]),
        }  # fmt: skip
    return out


def restore_line(info: dict[str, Any]) -> str:
    if info.get("error"):
        return f"Last restore: could not tell ({info['error']})"
    parts = []
    if info.get("lost_now"):
        lost = info["lost"]
        parts.append(
            f"Ledger LOST ({lost['why']}, found at {lost['at']} by {lost['host']}): API tiers "
            "refuse until `smart-search state restore`"
        )
    last = info.get("last")
    if last is None:
        parts.append("Last restore: none (the store never forgot the ledger)")
    else:
        parts.append(
            f"Last restore: {last['at']} from {last['host']} ({last['why']}), up to "
            f"{last['unaccounted']} units unaccounted ({last['in_flight']} held by calls in "
            f"flight, {last['found_later']} found by later hosts); {last['hosts_folded']} "
            "hosts have folded their witness in"
        )
    return "\n".join(parts)


def last_restore_line(settings: Any) -> str:
    info = last_restore(settings)
    return "" if info is None else restore_line(info)


def _cache(settings: Any) -> dict[str, Any] | None:
    """The result cache as `cache.cache_summary` sees it (read-only), or None without settings."""
    if settings is None:
        return None
    from smart_search.search.cache import cache_summary

    return cache_summary(settings)


def _breakers(settings: Any) -> list[dict[str, Any]]:
    if settings is None:
        return []
    from smart_search.budget.breaker import Breaker

    try:
        entries = Breaker(settings).snapshot()
    except Exception:  # noqa: BLE001 - advisory state: unreadable means nothing is open
        return []
    now = time.time()
    out = []
    for name, entry in entries.items():
        if entry["state"] != "closed":
            trial = entry["opened_at"] + settings.circuit_reset_seconds
            out.append(
                {
                    "name": name,
                    "state": entry["state"],
                    "failures": entry["failures"],
                    "trial_in_seconds": max(0, round(trial - now)),
                }
            )
    return out


def _render_sources(states: dict[str, Any] | None) -> list[str]:
    """Sources: which this install can use, which not (what switching OpenClaw's web_search to
    smart-search keeps)."""
    if states is None:
        return []
    used = [
        name + (f" ({s['key_from']})" if s["key_from"] else "")
        for name, s in states.items()
        if s["configured"]
    ]
    unused = [name for name, s in states.items() if not s["configured"]]
    return [
        "Sources configured: " + (", ".join(used) or "none"),
        "Sources not configured: " + (", ".join(unused) or "none"),
    ]


def render(report: dict[str, Any]) -> str:
    lines = ["smart-search doctor", ""]
    cfg = report["config"]
    state = "found" if cfg["exists"] else "missing"
    lines.append(f"Config file: {cfg['path']} ({state})")
    lines.extend(f"  - {step}" for step in cfg["steps"])
    for extra in cfg["files_read"][1:]:
        lines.append(f"  included: {extra}")
    if cfg["error"]:
        lines.append(f"  ERROR: {cfg['error']}")
    layout = report["layout"]
    lines.append("Layout: " + (", ".join(layout["found"]) or "no smart-search section (defaults)"))
    lines.extend(f"  REJECTED BY OPENCLAW: {r}" for r in layout["rejected_by_openclaw"])
    lines.append("API keys (values never shown):")
    for provider, record in report["api_keys"].items():
        if record["set"]:
            where = record["source"] or "unknown source"
            lines.append(
                f"  {provider}: {record['name']}: set ({record['length']} characters) from {where}"
            )
        else:
            lines.append(f"  {provider}: {record['name']}: not set (its tiers are skipped)")
        lines.extend(f"    NOT READ: {note}" for note in record["notes"])
    lines.extend(_render_sources(report.get("sources")))
    sd = report["state_dir"]
    lines.append(f"State dir: {sd['path']} ({sd['why']})")
    if not sd["exists"]:
        lines.append("  not created yet (created on first use, 0700)")
    if not sd["writable"]:
        lines.append("  NOT WRITABLE")
    if sd["legacy_ledger"]:
        lines.append(f"  per-workspace ledger {sd['legacy_ledger']} is merged on the next call")
    ledger = report["ledger"]
    if ledger.get("readable"):
        usage = ", ".join(
            f"{p} {v['used']}/{v['daily_limit']} used" for p, v in ledger["providers"].items()
        )
        fresh = "" if ledger["exists"] else " (no ledger file yet)"
        lines.append(f"Ledger: readable{fresh}, day {ledger['day']}: {usage}")
        reported = [r for r in ledger["reconcile"] if r["drift"] is not None]
        drift = ", ".join(
            f"{r['provider']}{'' if r['key'] == '-' else ' ' + r['key']} {r['drift']:+d}"
            for r in reported
        )
        lines.append(
            "Reconcile (provider minus ledger, this month, from the last answer): "
            + (drift or "no provider has reported its count yet")
            + "; `smart-search reconcile` asks the usage endpoints"
        )
    else:
        lines.append(f"Ledger: UNREADABLE: {ledger.get('error')}")
    if report.get("last_restore") is not None:
        lines.append(restore_line(report["last_restore"]))
    if report["breakers"]:
        for b in report["breakers"]:
            lines.append(
                f"Circuit breaker {b['name']}: {b['state']} after {b['failures']} failures, "
                f"trial in {b['trial_in_seconds']} s"
            )
    else:
        lines.append("Circuit breakers: none open")
    cache = report.get("cache")
    if cache is not None:
        if not cache["config"].get("enabled"):
            lines.append("Cache: off (cache.enabled is false)")
        elif not cache["ok"]:
            lines.append(f"Cache: UNUSABLE: {cache['error']} (searches run uncached)")
        else:
            lines.append(
                f"Cache: {cache['entries']} entries, {cache['bytes']} bytes; today "
                f"{cache['hits_today']} hits, {cache['misses_today']} misses, "
                f"{cache['units_saved_today']} units saved"
            )
    lines.extend(_render_redis(report.get("redis")))
    if report["unknown_keys"]:
        for u in report["unknown_keys"]:
            hint = f" (did you mean {u['nearest']}?)" if u["nearest"] else ""
            lines.append(f"Unknown config key: {u['key']}{hint}")
    else:
        lines.append("Unknown config keys: none")
    lines.append("")
    lines.append(f"Verdict: {report['verdict']}")
    return "\n".join(lines) + "\n"


def _render_redis(redis: dict[str, Any] | None) -> list[str]:
    """The Redis lines: where, persistence, memory, the ledger keys' expiry, replicas."""
    if redis is None:
        return []
    if not redis["reachable"]:
        return [f"Redis: UNREACHABLE: {redis['error']}"]
    lines = [f"Redis: {redis['where']}, {redis.get('server') or 'server version not told'}"]
    facts = redis["persistence"]
    persistence = facts["verdict"]
    if persistence == "NONE":
        persistence = 'NONE (appendonly no, save "")'
    elif persistence is None:  # the rest is among the "could not tell" lines
        known = facts["appendonly"]
        persistence = f"appendonly {known} (INFO)" if known else "could not tell"
    lines.append(f"  persistence: {persistence}")
    memory = redis["memory"]
    if memory["policy"] is None:
        lines.append("  maxmemory: could not tell (CONFIG GET and INFO refused)")
    else:
        limit = memory["maxmemory"]
        cap = f"{limit} bytes" if limit else "no limit (0)"
        lines.append(f"  maxmemory: {cap}, policy {memory['policy']}")
        if memory.get("note"):
            lines.append(f"    note: {memory['note']}")
    for key in redis["keys"]:
        if not key["exists"]:
            state = "not there (nothing written yet, or lost)"
        elif key["expires_in_days"] is None:
            state = "carries NO expiry (never removed; ours renew one on every write)"
        else:
            state = (
                f"expires in {key['expires_in_days']} days unless written again "
                f"(every write renews {key['renewed_days']:g} days)"
            )
        lines.append(f"  {key['name']} key {key['key']}: {state}")
    lines.append(f"  replicas: {_replica_line(redis['replicas'])}")
    lines.extend(f"  could not tell {what}" for what in redis["unknown"])
    lines.extend(f"  WARNING: {p.removeprefix('redis: ')}" for p in redis["problems"])
    return lines


def _replica_line(replicas: dict[str, Any]) -> str:
    parts = []
    if "connected" in replicas:
        parts.append(f"{replicas['connected']} connected to the {replicas['role']} (INFO)")
    if "sentinel_known" in replicas:
        parts.append(
            f"{replicas['sentinel_healthy']} healthy of {replicas['sentinel_known']} known to "
            f"the sentinels ({replicas['sentinels']} sentinels, quorum {replicas['quorum']})"
        )
    return "; ".join(parts) or "could not tell"
