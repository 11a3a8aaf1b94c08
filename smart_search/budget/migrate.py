"""Reading ledgers written by someone else: the Node skill we replace, and our own version 1.

Only a document that really has one of these shapes is converted; anything else (no `format`
and not the Node shape, a newer version, a negative, fractional or absurd count) is
`StateCorrupt`, and the file stays byte for byte as it was. An edited or downgraded ledger must
never read as "nothing spent yet".

- Node skill: `providers.<p>.{daily_limit, remaining, used, shared_pool}`,
  `agent_allocations.<id>.{gemini, brave, gemini_used, brave_used, completed}`, a date under one
  of a few names (else the file's mtime). Today's counts carry over (see `from_node`).
- `smart-search/quota@1`: one day's counters with `providers.<p>.{unattributed_used,
  pool_used_unattributed}`. Upgraded in place under the lock; today's counts also seed the
  provider windows (day and month), so the month starts with what today already spent.
"""

from __future__ import annotations

import os
import time
from typing import Any

from smart_search.budget import quota
from smart_search.errors import StateCorrupt
from smart_search.host.config import MAX_COUNT, PROVIDERS

Document = dict[str, Any]

NODE_DATE_KEYS = ("date", "last_reset", "lastReset", "reset_date", "day")
_NODE_TOP = frozenset(("providers", "agent_allocations", *NODE_DATE_KEYS))
_NODE_PROVIDERS = frozenset(("gemini", "brave", "perplexity"))
_NODE_PROVIDER_KEYS = frozenset(("daily_limit", "remaining", "used", "shared_pool"))
_NODE_AGENT_KEYS = frozenset(
    ("gemini", "brave", "perplexity", "gemini_used", "brave_used", "perplexity_used", "completed")
)


def corrupt(path: str, why: str) -> StateCorrupt:
    return StateCorrupt(
        f"Quota file {path} is corrupt ({why}). It was left in place: repair or move it aside."
    )


def is_count(value: Any) -> bool:
    """A whole number of units we can trust: 0 to 10^9 (a counter of 2^64 is damage)."""
    return isinstance(value, int) and not isinstance(value, bool) and 0 <= value <= MAX_COUNT


def version_of(raw: Document, path: str) -> int:
    """1 or 2 for our own formats, 0 for the Node skill's; anything else is refused."""
    fmt = raw.get("format")
    if fmt is None:
        if _is_node(raw):
            return 0
        raise corrupt(path, "unknown layout")
    if isinstance(fmt, str) and fmt.startswith(quota.FORMAT_PREFIX):
        tail = fmt[len(quota.FORMAT_PREFIX) :]
        if tail.isdigit() and 1 <= int(tail) <= quota.VERSION:
            return int(tail)
        if tail.isdigit():
            raise corrupt(path, f"written by a newer smart-search, format {fmt[:40]}")
    raise corrupt(path, "unknown format")


def _is_node(raw: Document) -> bool:
    """The predecessor's shape exactly: both maps present, known keys only, counts in range."""
    if set(raw) - _NODE_TOP or "providers" not in raw or "agent_allocations" not in raw:
        return False
    providers, agents = raw["providers"], raw["agent_allocations"]
    if not isinstance(providers, dict) or not isinstance(agents, dict):
        return False
    for name, entry in providers.items():
        if name not in _NODE_PROVIDERS or not isinstance(entry, dict):
            return False
        if set(entry) - _NODE_PROVIDER_KEYS or not all(map(is_count, entry.values())):
            return False
    for agent_id, entry in agents.items():
        if not isinstance(agent_id, str) or not isinstance(entry, dict):
            return False
        if set(entry) - _NODE_AGENT_KEYS:
            return False
        for key, value in entry.items():
            ok = isinstance(value, bool) if key == "completed" else is_count(value)
            if not ok:
                return False
    return True


def node_date(raw: Document, path: str) -> str | None:
    for key in NODE_DATE_KEYS:
        value = raw.get(key)
        if isinstance(value, str) and len(value) >= 10 and value[4] == "-" and value[7] == "-":
            return value[:10]
    try:
        return time.strftime("%Y-%m-%d", time.gmtime(os.stat(path).st_mtime))
    except OSError:
        return None


def from_node(raw: Document, c: quota.Ceilings, day: str, path: str) -> Document:
    """Carry today's counts over from the Node skill's file so nobody's budget resets mid-day.

    Per agent, `<p>_used` units count as spent from its allocation up to the Node allocation and
    as provider-direct beyond it (the Node file does not say which); a completed agent released
    the rest of its allocation. Provider `used` beyond what agents account for is carried as
    unattributed use, and pool units the Node file shows as already drawn likewise: every unit
    the old skill spent still counts against the daily limit.
    """
    date = node_date(raw, path) or day
    doc = quota.new_day(date)
    if date < day:
        return doc
    for agent_id, entry in raw["agent_allocations"].items():
        rec = quota.new_agent()
        rec["completed"] = entry.get("completed") is True
        for p in PROVIDERS:
            allocated = entry.get(p, 0)
            used = entry.get(f"{p}_used", 0)
            rec[p]["allocation"] = min(used, allocated)
            rec[p]["direct"] = used - rec[p]["allocation"]
            if rec["completed"]:
                rec["released"][p] = allocated - rec[p]["allocation"]
        doc["agents"][agent_id] = rec
    for p in PROVIDERS:
        entry = raw["providers"].get(p) or {}
        used = entry.get("used", 0)
        by_agents = sum(quota.agent_used(doc, a, p) for a in doc["agents"])
        doc["carried"][p]["used"] = max(0, used - by_agents)
        pool_left = entry.get("shared_pool")
        if pool_left is not None:
            doc["carried"][p]["pool_used"] = max(0, quota.pool_size(doc, p) - pool_left)
    _seed_windows(doc)
    return doc


def from_v1(raw: Document, path: str) -> Document:
    """Our first format: same agents, `providers` becomes `carried`, windows seeded."""
    adopt_new_providers(raw, "providers")
    try:
        ok = isinstance(raw["date"], str) and len(raw["date"]) == 10
        carried = {}
        for p in PROVIDERS:
            entry = raw["providers"][p]
            used, pool_used = entry["unattributed_used"], entry["pool_used_unattributed"]
            ok = ok and is_count(used) and is_count(pool_used)
            carried[p] = {"used": used, "pool_used": pool_used}
        ok = ok and _agents_ok(raw["agents"])
    except (KeyError, TypeError, AttributeError):
        ok = False
    if not ok:
        raise corrupt(path, "unexpected structure")
    doc = quota.new_day(raw["date"])
    doc["agents"] = raw["agents"]
    doc["carried"] = carried
    _seed_windows(doc)
    return doc


def _seed_windows(doc: Document) -> None:
    """The day's spending so far also counts in the provider's day and month windows. Their
    dates are set at the next roll (an empty date is earlier than any), so seed them with the
    file's date and let `quota.roll` decide whether they are still current."""
    for p in PROVIDERS:
        window = doc["windows"][p]
        used = quota.total_used(doc, p)
        window["day"], window["day_used"] = doc["date"], used
        window["month"], window["month_used"] = doc["date"][:7], used


# The three sources of an agent's counters, named once (a fourth one fails here, at import).
_SOURCE_A, _SOURCE_B, _SOURCE_C = quota.SOURCES


def _agents_ok(agents: Any) -> bool:
    if not isinstance(agents, dict):
        return False
    # is_count inlined (`type(v) is int`: a JSON integer, never a bool): this walk runs on every
    # read of the ledger, three times per search, over agents x providers x sources counters.
    for agent_id, rec in agents.items():
        if not isinstance(agent_id, str) or not isinstance(rec["completed"], bool):
            return False
        released = rec["released"]
        for p in PROVIDERS:
            counts = rec[p]
            for v in (released[p], counts[_SOURCE_A], counts[_SOURCE_B], counts[_SOURCE_C]):
                if type(v) is not int or not 0 <= v <= MAX_COUNT:
                    return False
    return True


def adopt_new_providers(doc: Document, providers_key: str = "carried") -> Document:
    """A provider registered after `doc` was written (issue 20: a new source) starts at zero in
    it. Only a provider the document names nowhere is added, and only to a document that names
    others: one present anywhere but damaged elsewhere, or a document naming none, is still
    corruption, so a file that lost counters never reads as "nothing spent yet"."""
    try:
        known = doc[providers_key]
        agents = doc["agents"]
        windows = doc.get("windows", {})
        if not isinstance(known, dict) or not isinstance(agents, dict) or not known:
            return doc  # a document that names no provider at all is damage, not an old file
        for p in PROVIDERS:
            named = p in known or p in windows
            named = named or any(
                isinstance(rec, dict)
                and (p in rec or p in (rec.get("released") or {}))
                for rec in agents.values()
            )
            if named:
                continue
            known[p] = (
                {"used": 0, "pool_used": 0}
                if providers_key == "carried"
                else {"unattributed_used": 0, "pool_used_unattributed": 0}
            )
            if isinstance(windows, dict) and "windows" in doc:
                windows[p] = quota.new_window()
            for rec in agents.values():
                if isinstance(rec, dict) and isinstance(rec.get("released"), dict):
                    rec["released"][p] = 0
                    rec[p] = {s: 0 for s in quota.SOURCES}
    except (KeyError, TypeError, AttributeError):
        pass  # the check that follows names the damage
    return doc


def checked(doc: Document, path: str) -> Document:
    """A version-2 document whose every counter the arithmetic can trust, or StateCorrupt."""
    adopt_new_providers(doc)
    try:
        ok = isinstance(doc["date"], str) and len(doc["date"]) == 10
        ok = ok and _agents_ok(doc["agents"])
        for p in PROVIDERS:
            carried = doc["carried"][p]
            ok = ok and is_count(carried["used"]) and is_count(carried["pool_used"])
            window = doc["windows"][p]
            ok = ok and isinstance(window["day"], str) and isinstance(window["month"], str)
            ok = ok and is_count(window["day_used"]) and is_count(window["month_used"])
            ok = ok and _optional_time(window["exhausted_until"])
            ok = ok and _holds_ok(window.get("holds", {}))
            ok = ok and _reported_ok(window["reported"])
            ok = ok and _accounts_ok(window.get("keys", {}))
    except (KeyError, TypeError, AttributeError):
        ok = False
    if not ok:
        raise corrupt(path, "unexpected structure")
    return doc


def _reported_ok(reported: Any) -> bool:
    if reported is None:
        return True
    ok = is_count(reported["remaining"]) and is_count(reported["used_at_seen"])
    return ok and _optional_time(reported["seen_at"]) and isinstance(reported["month"], str)


# Accounts of one provider's key pool (budget/keys.py): far more than any pool holds.
MAX_ACCOUNTS = 1_000


def _accounts_ok(accounts: Any) -> bool:
    """A key pool's accounts (keys.py): each label's windows, what the provider reported, its
    exhaustion mark, and the end time of each disabled key (by fingerprint)."""
    if not isinstance(accounts, dict) or len(accounts) > MAX_ACCOUNTS:
        return False
    for label, e in accounts.items():
        ok = isinstance(label, str) and 0 < len(label) <= 80 and isinstance(e, dict)
        ok = ok and isinstance(e["day"], str) and isinstance(e["month"], str)
        ok = ok and is_count(e["day_used"]) and is_count(e["month_used"])
        ok = ok and _optional_time(e["exhausted_until"]) and _reported_ok(e["reported"])
        why = e["exhausted_why"]
        ok = ok and (why is None or isinstance(why, str))
        disabled = e["disabled"]
        ok = ok and isinstance(disabled, dict) and len(disabled) <= MAX_ACCOUNTS
        ok = ok and all(
            isinstance(fp, str) and t is not None and _optional_time(t)
            for fp, t in disabled.items()
        )
        if not ok:
            return False
    return True


# Calls in flight at once: far more than any install runs, few enough to bound the document.
MAX_HOLDS = 100_000


def _holds_ok(holds: Any) -> bool:
    """Calls in flight (`quota.Hold`): each id names its agent, units held and an end time."""
    if not isinstance(holds, dict) or len(holds) > MAX_HOLDS:
        return False
    return all(
        isinstance(key, str)
        and isinstance(h, dict)
        and isinstance(h.get("agent"), str)
        and is_count(h.get("units"))
        and h.get("until") is not None
        and _optional_time(h["until"])
        and isinstance(h.get("key", ""), str)
        for key, h in holds.items()
    )


def _optional_time(value: Any) -> bool:
    if value is None:
        return True
    return isinstance(value, int | float) and not isinstance(value, bool) and 0 <= value < 1e11
