"""Key pools in the ledger (issue 20, point 3): pure functions over one ledger document.

A provider with a key pool (`Settings.key_pools`, host/config_pools.py) has *accounts*: each
key, or each project for keys that share one, with its own day and month on the provider's
clock. They live under the provider's window, by account label (a key's fingerprint "…WXYZ",
or the project's name):

    doc["windows"][p]["keys"] = {label: {"day", "day_used", "month", "month_used",
                                         "reported": null | {...as the provider's...},
                                         "exhausted_until": null | t, "exhausted_why": null | text,
                                         "disabled": {fingerprint: until}}}

The provider's own windows stay the sum of its accounts' (every unit is counted in both), and its
limits are the sum of theirs (config does that sum), so everything that reads provider windows
keeps working. A call's hold is taken on one account and one key: the key with the most headroom
(ties: config order); a key answering 401/403 is disabled until its day resets, a quota 429
exhausts its account until the reset the provider named. Without a pool none of this runs and
the document has no `keys`.

Keys never appear here: only fingerprints and project names (config made them).
"""

from __future__ import annotations

import math
from typing import Any

Document = dict[str, Any]


class Account:
    """One account of a pool: its label, its own limits, and its keys' fingerprints in config
    order. (A plain slotted class: a NamedTuple costs every call ~0.1 ms to define.)"""

    __slots__ = ("label", "daily_limit", "monthly_limit", "keys")

    def __init__(self, label: str, daily_limit: int, monthly_limit: int, keys: tuple[str, ...]):
        self.label = label
        self.daily_limit = daily_limit
        self.monthly_limit = monthly_limit
        self.keys = keys

    def __repr__(self) -> str:
        return f"Account({self.label!r}, {self.daily_limit}, {self.monthly_limit}, {self.keys!r})"


def accounts_of(pool: Any) -> tuple[Account, ...]:
    """The accounts of a `Settings.key_pools[p]` pool, in the order their first key is listed."""
    found: dict[str, Account] = {}
    for key in pool:
        had = found.get(key.account)
        if had is None:
            found[key.account] = Account(key.account, key.daily_limit, key.monthly_limit, ())
            had = found[key.account]
        had.keys = (*had.keys, key.fingerprint)
    return tuple(found.values())


def new_entry(day: str, month: str) -> dict[str, Any]:
    return {
        "day": day,
        "day_used": 0,
        "month": month,
        "month_used": 0,
        "reported": None,
        "exhausted_until": None,
        "exhausted_why": None,
        "disabled": {},
    }


def entry(doc: Document, provider: str, label: str) -> dict[str, Any]:
    """The account's counters (created empty on the provider's current day and month)."""
    window = doc["windows"][provider]
    accounts = window.setdefault("keys", {})
    if label not in accounts:
        accounts[label] = new_entry(window["day"], window["month"])
    found: dict[str, Any] = accounts[label]
    return found


def roll(window: dict[str, Any], day: str, month: str) -> None:
    """Later windows start fresh for every account; earlier ones never reset."""
    for e in window.get("keys", {}).values():
        if e["day"] < day:
            e["day"], e["day_used"] = day, 0
        if e["month"] < month:
            e["month"], e["month_used"] = month, 0
            e["reported"] = None


def reported_left(window: dict[str, Any]) -> float:
    """What the provider last said is left this month, less what we spent since it said so
    (a provider's window, or an account's)."""
    seen = window["reported"]
    if not seen or seen["month"] != window["month"]:
        return math.inf
    left: float = seen["remaining"] - max(0, window["month_used"] - seen["used_at_seen"])
    return left


def _live(until: float | None, now: float | None) -> bool:
    return until is not None and now is not None and now < until


def usable_key(
    e: dict[str, Any], account: Account, now: float | None, exclude: Any = ()
) -> str | None:
    """The account's first key that is not disabled (nor excluded), or None."""
    for fp in account.keys:
        if fp not in exclude and not _live(e["disabled"].get(fp), now):
            return fp
    return None


def headroom(
    doc: Document, provider: str, account: Account, now: float | None, exclude: Any = ()
) -> int:
    """Units the account has left in every window: 0 while the provider says it is exhausted
    or while none of its keys is usable."""
    e = entry(doc, provider, account.label)
    if _live(e["exhausted_until"], now) or usable_key(e, account, now, exclude) is None:
        return 0
    left = min(
        account.daily_limit - e["day_used"],
        account.monthly_limit - e["month_used"],
        reported_left(e),
    )
    return int(max(0, left))


def pool_headroom(
    doc: Document, accounts: tuple[Account, ...], provider: str, now: float | None
) -> int:
    """The pool's headroom: the sum of its accounts'."""
    return sum(headroom(doc, provider, a, now) for a in accounts)


def choose(
    doc: Document,
    accounts: tuple[Account, ...],
    provider: str,
    need: int,
    now: float | None,
    *,
    key: str | None = None,
    exclude: Any = (),
) -> tuple[str, str] | None:
    """(account label, key fingerprint) for a call that needs `need` units: the account with the
    most headroom (ties: config order) and its first usable key; with `key`, that key only (a
    retry keeps the key its request carries). None when no account can hold `need`."""
    best: tuple[int, str, str] | None = None
    for account in accounts:
        e = entry(doc, provider, account.label)
        if key is None:
            fp = usable_key(e, account, now, exclude)
        elif key in account.keys and key not in exclude:
            fp = None if _live(e["disabled"].get(key), now) else key
        else:
            fp = None
        if fp is None:
            continue
        room = headroom(doc, provider, account, now)
        if room >= need and (best is None or room > best[0]):
            best = (room, account.label, fp)
    return None if best is None else (best[1], best[2])


def all_out(doc: Document, accounts: tuple[Account, ...], provider: str, now: float | None) -> bool:
    """True when no key of the pool may be sent anything now (each disabled or exhausted)."""
    for account in accounts:
        e = entry(doc, provider, account.label)
        if not _live(e["exhausted_until"], now) and usable_key(e, account, now) is not None:
            return False
    return True


def count(doc: Document, provider: str, label: str, day: str, month: str, units: int) -> None:
    """Count `units` (negative: give back) in the account's windows named `day` and `month`;
    a window that has rolled over since is left alone."""
    e = doc["windows"][provider].get("keys", {}).get(label)
    if e is None:
        return
    if day == e["day"]:
        e["day_used"] = max(0, e["day_used"] + units)
    if month == e["month"]:
        e["month_used"] = max(0, e["month_used"] + units)


def record(
    e: dict[str, Any],
    held: int,
    now: float,
    *,
    remaining: int | None,
    limit: int | None,
    exhausted_until: float | None,
    why: str | None,
) -> None:
    """What a provider said of a window or an account `e` (quota.observe, observe): its monthly
    remaining, counted against what we had spent when it answered less `held`, the units of
    calls in flight that may not have reached it yet; or that it is exhausted until a reset."""
    if remaining is not None:
        e["reported"] = {
            "remaining": max(0, remaining),
            "limit": limit,
            "seen_at": now,
            "used_at_seen": max(0, e["month_used"] - held),
            "month": e["month"],
        }
    if exhausted_until is not None and exhausted_until > now:
        e["exhausted_until"] = max(exhausted_until, e["exhausted_until"] or 0)
        e["exhausted_why"] = why


def in_flight(doc: Document, provider: str, label: str, now: float) -> int:
    return sum(
        h["units"]
        for h in doc["windows"][provider].get("holds", {}).values()
        if h["until"] > now and h.get("key") == label
    )


def observe(
    doc: Document,
    provider: str,
    label: str,
    fingerprint: str | None,
    now: float,
    *,
    remaining: int | None = None,
    limit: int | None = None,
    exhausted_until: float | None = None,
    why: str | None = None,
    disabled_until: float | None = None,
) -> None:
    """What the provider said about one account (its remaining, its exhaustion) and one key
    (refused: disabled until `disabled_until`)."""
    e = entry(doc, provider, label)
    held = in_flight(doc, provider, label, now) if remaining is not None else 0
    record(e, held, now, remaining=remaining, limit=limit, exhausted_until=exhausted_until, why=why)
    if disabled_until is not None and fingerprint is not None and disabled_until > now:
        e["disabled"][fingerprint] = max(disabled_until, e["disabled"].get(fingerprint) or 0)


def status(
    doc: Document, accounts: tuple[Account, ...], provider: str, now: float, stamp: Any
) -> dict[str, Any]:
    """`windows.<p>.keys` of the full status: per key fingerprint, its account's windows, what
    it has left, and its state (`active`, `disabled` until its day resets, `exhausted`)."""
    out: dict[str, Any] = {}
    for account in accounts:
        e = entry(doc, provider, account.label)
        room = headroom(doc, provider, account, now)
        for fp in account.keys:
            disabled = e["disabled"].get(fp)
            if _live(disabled, now):
                state, until = "disabled", disabled
            elif _live(e["exhausted_until"], now):
                state, until = "exhausted", e["exhausted_until"]
            else:
                state, until = "active", None
            out[fp] = {
                "project": None if account.label == fp else account.label,
                "daily": {"used": e["day_used"], "limit": account.daily_limit},
                "monthly": {"used": e["month_used"], "limit": account.monthly_limit},
                "remaining": 0 if state != "active" else room,
                "state": state,
                "until": None if until is None else stamp(until),
            }
    return out
