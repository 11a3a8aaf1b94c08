"""Quota arithmetic (RULINGS 4, the billing issue): pure functions over one ledger document.

Config owns the ceilings (`Ceilings`: windows' limits, allocations); the document owns the live
counters. Nothing here does I/O or reads a clock, so every rule is testable with plain dicts.

Document layout:

    {"format": "smart-search/quota@2",
     "date": "YYYY-MM-DD",                      # the agents' day (UTC or `timezone`)
     "agents": {id: {"completed": bool, "released": {p: n},
                     p: {"allocation": n, "pool": n, "direct": n}}},
     "carried": {p: {"used": n, "pool_used": n}},   # agents' day: units a predecessor's file
                                                    # spent that no agent can be charged with
     "windows": {p: {"day": "YYYY-MM-DD", "day_used": n,      # on the provider's own clock
                     "month": "YYYY-MM", "month_used": n,
                     "reported": null | {"remaining": n, "limit": n | null, "seen_at": t,
                                         "used_at_seen": n, "month": "YYYY-MM"},
                     "exhausted_until": null | t, "exhausted_why": null | text,
                     "holds": {id: {"agent": id, "units": n, "until": t}}}}}
                     # calls in flight: their worst case, held until they settle (optional key;
                     # a hold past `until` is no longer in flight and is dropped at a write)

Two kinds of window, each on its own clock:
- the agents' day (`timezone`): allocations, the shared pool and provider-direct headroom;
- each provider's day and month (`providers.<p>.reset_timezone`): what the provider counts.
A later day or month starts fresh counters; an earlier one (a clock moved back) never resets.

Per provider p, with L the daily limit, M the monthly limit, A the allocations of known agents:
- allocation: allocated(agent) - used from allocation (0 once completed);
- shared pool: released by completed agents - used from the pool;
- provider direct: L - A - used directly today;
- and above all three, the window headroom: min(L - day_used, M - month_used, what the provider
  last reported as remaining less what we spent since), and nothing while an exhaustion mark the
  provider gave us is in force.

Worst case (RULINGS 4): a call holds the most it may bill (`max_units_per_call`, W) before its
request leaves: W in every window, and W taken from the sources in order (allocation, then pool,
then direct), each capped. Sources that cannot hold W between them refuse the call. The answer
settles the hold to the truth: units not billed go back in the reverse order (direct first, the
allocation last). A hold nobody settles (the process died) stays charged its worst case.

Top-level keys differ from the first version's (`providers`), so an older smart-search reading
this file refuses it as corrupt instead of mistaking it for a predecessor's and resetting it.
"""

from __future__ import annotations

import math
from typing import Any, NamedTuple

from smart_search.budget import keys
from smart_search.errors import QuotaExhausted, UnknownAgent
from smart_search.host.config import PROVIDERS
from smart_search.sources import registry

FORMAT = "smart-search/quota@2"
FORMAT_PREFIX = "smart-search/quota@"
VERSION = 2
SOURCES = ("allocation", "pool", "direct")
# quota_source values in results, per source.
SOURCE_NAMES = {
    "allocation": "agent_allocation",
    "pool": "shared_pool",
    "direct": "provider_direct",
}

Document = dict[str, Any]


class Ceilings:
    """The config side of the arithmetic: both windows' limits and who is allocated what."""

    def __init__(
        self,
        daily_limits: dict[str, int],
        configured: dict[str, dict[str, int]],
        default_allocation: dict[str, int],
        monthly_limits: dict[str, int] | None = None,
        max_unconfigured_agents: int | None = None,
        max_units_per_call: dict[str, int] | None = None,
        prices_per_1000: dict[str, float | None] | None = None,
        monthly_budgets: dict[str, float | None] | None = None,
        monthly_budget: float | None = None,
        pools: dict[str, tuple[keys.Account, ...]] | None = None,
    ) -> None:
        self.daily_limits = daily_limits
        self.monthly_limits = monthly_limits or {}
        # The most one call may bill (Gemini 3 runs several search queries for one prompt): a
        # call is sent only while every window has that much left, so settling the truth
        # afterwards cannot pass a window.
        self.max_units_per_call = max_units_per_call or {}
        # Budgets in money (issue 20): a provider's and the install's, each month, counted at
        # `prices_per_1000`; config guarantees a price wherever a budget is set.
        self.prices = prices_per_1000 or {}
        self.monthly_budgets = monthly_budgets or {}
        self.monthly_budget = monthly_budget
        # Key pools (keys.py): per provider with one, its accounts; the limits above are then
        # the sums of theirs.
        self.pools = {p: accounts for p, accounts in (pools or {}).items() if accounts}
        self.configured = configured
        self.default_allocation = default_allocation
        self.max_unconfigured_agents = max_unconfigured_agents
        # Summed once: a search must not walk 100,000 configured agents per reservation.
        self._configured_totals = {
            p: sum(alloc.get(p, 0) for alloc in configured.values()) for p in PROVIDERS
        }

    def allocation(self, agent_id: str, provider: str) -> int:
        return self.configured.get(agent_id, self.default_allocation).get(provider, 0)

    def monthly_limit(self, provider: str) -> float:
        return self.monthly_limits.get(provider, math.inf)

    def known_agents(self, doc: Document) -> list[str]:
        """Configured agents plus those registered today (configured first, in config order)."""
        agents = list(self.configured)
        agents.extend(a for a in doc["agents"] if a not in self.configured)
        return agents

    def allocated_total(self, doc: Document, provider: str) -> int:
        unconfigured = sum(1 for a in doc["agents"] if a not in self.configured)
        return self._configured_totals[provider] + unconfigured * self.default_allocation.get(
            provider, 0
        )


class Hold(NamedTuple):
    """A call's worst case, taken from its sources in order, and the windows it was counted in
    (so a late settle never touches a window that has since rolled over)."""

    id: str
    parts: tuple[tuple[str, int], ...]  # (source, units), in the order taken; every units > 0
    date: str
    day: str
    month: str
    account: str | None = None  # with a key pool: the account (keys.py) it was taken on
    key: str | None = None  # and the fingerprint of the key its request carries

    @property
    def units(self) -> int:
        return sum(n for _, n in self.parts)

    @property
    def source(self) -> str:
        """The source of the first unit (`quota_source`)."""
        return self.parts[0][0]

    def by_source(self, charged: int) -> dict[str, int]:
        """How many of `charged` units came from each source (`quota_source` names): refunds
        go back last-taken first, so the charge keeps the first-taken units."""
        out: dict[str, int] = {}
        left = charged
        for i, (source, n) in enumerate(self.parts):
            take = left if i == len(self.parts) - 1 else min(left, n)
            if take > 0:
                out[SOURCE_NAMES[source]] = take
            left -= take
        return out


class Windows(NamedTuple):
    """What the clock says: the agents' day and each provider's (day, month)."""

    date: str
    provider: dict[str, tuple[str, str]]


def new_window() -> dict[str, Any]:
    return {
        "day": "",
        "day_used": 0,
        "month": "",
        "month_used": 0,
        "reported": None,
        "exhausted_until": None,
        "exhausted_why": None,
        "holds": {},
    }


def worst_case(c: Ceilings, provider: str) -> int:
    """The most one call may bill (`max_units_per_call`, at least 1): what a call holds."""
    return max(1, c.max_units_per_call.get(provider, 1))


def holds(doc: Document, provider: str) -> dict[str, Any]:
    return doc["windows"][provider].setdefault("holds", {})


def in_flight(doc: Document, provider: str, now: float | None, agent_id: str | None = None) -> int:
    """Units held right now by calls in flight (holds not yet settled nor past their time)."""
    return sum(
        h["units"]
        for h in doc["windows"][provider].get("holds", {}).values()
        if (now is None or h["until"] > now) and (agent_id is None or h["agent"] == agent_id)
    )


def drop_stale_holds(doc: Document, provider: str, now: float) -> None:
    """Forget holds past their time: their calls ended long ago or died. Their units stay
    charged (a dead call's worst case); they are only no longer shown as in flight."""
    held = holds(doc, provider)
    for key in [k for k, h in held.items() if h["until"] <= now]:
        del held[key]


def new_day(date: str, windows: dict[str, Any] | None = None) -> Document:
    return {
        "format": FORMAT,
        "date": date,
        "agents": {},
        "carried": {p: {"used": 0, "pool_used": 0} for p in PROVIDERS},
        "windows": windows if windows is not None else {p: new_window() for p in PROVIDERS},
    }


def roll(doc: Document, now: Windows) -> Document:
    """The document as of `now`: later windows start fresh, earlier ones never reset."""
    if doc["date"] < now.date:
        doc = new_day(now.date, doc["windows"])
    for p, (day, month) in now.provider.items():
        window = doc["windows"][p]
        if window["day"] < day:
            window["day"], window["day_used"] = day, 0
        if window["month"] < month:
            window["month"], window["month_used"] = month, 0
            window["reported"] = None
        keys.roll(window, day, month)
    return doc


def new_agent() -> dict[str, Any]:
    record: dict[str, Any] = {"completed": False, "released": {p: 0 for p in PROVIDERS}}
    for p in PROVIDERS:
        record[p] = {s: 0 for s in SOURCES}
    return record


def ensure_agent(doc: Document, c: Ceilings, agent_id: str) -> bool:
    """Register `agent_id` in today's document; True when that changed the document.

    Unconfigured agents are capped per day (`max_unconfigured_agents`): an endless stream of
    invented ids must not grow the ledger, and with it every search's cost, without bound."""
    if agent_id in doc["agents"]:
        return False
    cap = c.max_unconfigured_agents
    if cap is not None and agent_id not in c.configured:
        unconfigured = sum(1 for a in doc["agents"] if a not in c.configured)
        if unconfigured >= cap:
            raise UnknownAgent(
                f'Agent "{agent_id}" is not in openclaw.json and {cap} unconfigured agents '
                "have already searched today (max_unconfigured_agents). Add it to "
                "agent_allocations or raise the cap."
            )
    doc["agents"][agent_id] = new_agent()
    return True


def _agent(doc: Document, agent_id: str) -> dict[str, Any]:
    return doc["agents"].get(agent_id) or new_agent()


def agent_used(doc: Document, agent_id: str, provider: str) -> int:
    counts = _agent(doc, agent_id)[provider]
    return counts["allocation"] + counts["pool"] + counts["direct"]


def allocation_remaining(doc: Document, c: Ceilings, agent_id: str, provider: str) -> int:
    record = _agent(doc, agent_id)
    if record["completed"]:
        return 0
    return max(0, c.allocation(agent_id, provider) - record[provider]["allocation"])


def total_used(doc: Document, provider: str) -> int:
    """Units spent in the agents' day, by every agent and carried over."""
    extra = doc["carried"][provider]["used"]
    return extra + sum(agent_used(doc, a, provider) for a in doc["agents"])


def allocated_total(doc: Document, c: Ceilings, provider: str) -> int:
    return c.allocated_total(doc, provider)


def pool_size(doc: Document, provider: str) -> int:
    return sum(rec["released"][provider] for rec in doc["agents"].values())


def pool_remaining(doc: Document, provider: str) -> int:
    used = doc["carried"][provider]["pool_used"]
    used += sum(rec[provider]["pool"] for rec in doc["agents"].values())
    return max(0, pool_size(doc, provider) - used)


def direct_headroom(doc: Document, c: Ceilings, provider: str) -> int:
    used = doc["carried"][provider]["used"]
    used += sum(rec[provider]["direct"] for rec in doc["agents"].values())
    return max(0, c.daily_limits[provider] - allocated_total(doc, c, provider) - used)


def reported_remaining(doc: Document, provider: str) -> float:
    """What the provider last said is left this month, less what we spent since it said so."""
    return keys.reported_left(doc["windows"][provider])


def window_headroom(doc: Document, c: Ceilings, provider: str, now: float | None = None) -> int:
    """Units left in every window at once: ours (day, month), the provider's own word, what
    the month's budgets in money still buy, and with a key pool the sum of its accounts'."""
    window = doc["windows"][provider]
    left = min(
        c.daily_limits[provider] - window["day_used"],
        c.monthly_limit(provider) - window["month_used"],
        reported_remaining(doc, provider),
        budget_headroom(doc, c, provider),
    )
    if provider in c.pools:
        left = min(left, keys.pool_headroom(doc, c.pools[provider], provider, now))
    return int(max(0, left))


def month_spend(doc: Document, c: Ceilings, provider: str) -> float:
    """What the provider's month has cost at its price (0 without a price)."""
    price = c.prices.get(provider)
    return 0.0 if price is None else doc["windows"][provider]["month_used"] * price / 1000


def budget_headroom(doc: Document, c: Ceilings, provider: str) -> float:
    """Units the provider's monthly budget and the install's still buy (inf without either).
    Whole units only: a unit the money cannot pay for in full is not spent."""
    price = c.prices.get(provider)
    if not price:  # no price, or free: budgets count nothing
        return math.inf
    left = math.inf
    own = c.monthly_budgets.get(provider)
    if own is not None:
        left = min(left, (own - month_spend(doc, c, provider)) * 1000 / price)
    if c.monthly_budget is not None:
        spent = sum(month_spend(doc, c, p) for p in doc["windows"])
        left = min(left, (c.monthly_budget - spent) * 1000 / price)
    # A hair under a whole unit from float rounding (0.1 + 0.2) is still that unit.
    return math.floor(left + 1e-9) if left != math.inf else left


def exhausted(doc: Document, provider: str, now: float | None) -> bool:
    until = doc["windows"][provider]["exhausted_until"]
    return until is not None and now is not None and now < until


def take_sources(
    doc: Document, c: Ceilings, agent_id: str, provider: str, need: int
) -> tuple[tuple[str, int], ...] | None:
    """`need` units from the sources in order (allocation, pool, direct), each capped by what
    it has left; None when they cannot hold `need` between them."""
    parts = []
    left = need
    for source, available in (
        ("allocation", allocation_remaining(doc, c, agent_id, provider)),
        ("pool", pool_remaining(doc, provider)),
        ("direct", direct_headroom(doc, c, provider)),
    ):
        take = min(left, available)
        if take > 0:
            parts.append((source, take))
            left -= take
    return tuple(parts) if left == 0 else None


def pick_source(
    doc: Document, c: Ceilings, agent_id: str, provider: str, now: float | None = None
) -> str | None:
    """The source of the first unit a call would take now, or None when the call's worst case
    does not fit every window and the sources between them."""
    need = worst_case(c, provider)
    if exhausted(doc, provider, now) or window_headroom(doc, c, provider, now) < need:
        return None
    parts = take_sources(doc, c, agent_id, provider, need)
    return None if parts is None else parts[0][0]


def exhausted_message(doc: Document, c: Ceilings, provider: str, now: float | None) -> str:
    """Why `provider` has no unit: the provider's own word, a window, or our sources."""
    label = registry.label(provider)
    window = doc["windows"][provider]
    if exhausted(doc, provider, now):
        from datetime import UTC, datetime

        when = datetime.fromtimestamp(window["exhausted_until"], UTC).strftime("%Y-%m-%dT%H:%MZ")
        return f"{label} reported its quota exhausted; it resets at {when}."
    if provider in c.pools and keys.all_out(doc, c.pools[provider], provider, now):
        return f"{label} has no usable key: each key of its pool is refused or out of quota."
    if window["month_used"] >= c.monthly_limit(provider):
        return f"{label} quota is exhausted for this month."
    if budget_headroom(doc, c, provider) < worst_case(c, provider):
        return f"{label} monthly budget is spent (a call may cost more than is left)."
    if reported_remaining(doc, provider) <= 0:
        return f"{label} reported no quota left for this month."
    return f"{label} quota is exhausted for today."


def _charge(doc: Document, agent_id: str, provider: str, source: str, units: int) -> None:
    doc["agents"][agent_id][provider][source] += units
    window = doc["windows"][provider]
    window["day_used"] += units
    window["month_used"] += units


def reserve(
    doc: Document,
    c: Ceilings,
    agent_id: str,
    provider: str,
    now: float | None = None,
    *,
    hold_id: str = "",
    until: float | None = None,
    key: str | None = None,
    exclude: tuple[str, ...] = (),
) -> Hold:
    """Hold the call's worst case for `agent_id` at `provider` (mutates doc): in every window,
    from the sources in order. Raises QuotaExhausted when it does not fit, UnknownAgent past
    the cap of unconfigured agents. `until`: when the hold stops counting as in flight.
    With a key pool, the hold is taken on the key with the most headroom (`key`: that key only;
    `exclude`: keys this call already tried)."""
    need = worst_case(c, provider)
    if pick_source(doc, c, agent_id, provider, now) is None:
        raise QuotaExhausted(exhausted_message(doc, c, provider, now))
    ensure_agent(doc, c, agent_id)
    # Registering an unconfigured agent sets its default allocation aside from direct headroom:
    # take the sources again as they stand now.
    parts = take_sources(doc, c, agent_id, provider, need)
    if parts is None:
        raise QuotaExhausted(exhausted_message(doc, c, provider, now))
    chosen: tuple[str | None, str | None] = (None, None)
    if provider in c.pools:
        found = keys.choose(doc, c.pools[provider], provider, need, now, key=key, exclude=exclude)
        if found is None:
            raise QuotaExhausted(exhausted_message(doc, c, provider, now))
        chosen = found
    for source, units in parts:
        _charge(doc, agent_id, provider, source, units)
    window = doc["windows"][provider]
    if chosen[0] is not None:
        keys.count(doc, provider, chosen[0], window["day"], window["month"], need)
    if until is not None:
        record = {"agent": agent_id, "units": need, "until": until, "key": chosen[0]}
        holds(doc, provider)[hold_id] = {k: v for k, v in record.items() if v is not None}
    return Hold(hold_id, parts, doc["date"], window["day"], window["month"], *chosen)


def settle(doc: Document, agent_id: str, provider: str, hold: Hold, charged: int) -> bool:
    """Turn `hold` into the real charge (mutates doc); True when anything changed.

    Fewer units than held: the difference goes back to its sources in the reverse order they
    were taken (direct first, the allocation last); a completed agent's allocation unit goes on
    to the pool it released. More (the provider billed past `max_units_per_call`, a config
    mistake): the extra is charged to the last source and the windows, even past a cap: the
    provider has already billed it. A unit whose window has rolled over since it was taken
    belongs to a reset counter and is left alone.
    """
    changed = doc["windows"][provider].get("holds", {}).pop(hold.id, None) is not None
    if charged == hold.units:
        return changed
    record = doc["agents"].get(agent_id)
    today = record is not None and hold.date == doc["date"]
    if charged > hold.units:
        extra = charged - hold.units
        if today:
            record[provider][hold.parts[-1][0]] += extra
        _count_in_windows(doc, provider, hold, extra)
        return True
    back = hold.units - charged
    for source, units in reversed(hold.parts):
        give = min(back, units)
        back -= give
        if today and give:
            give_here = min(give, record[provider][source])
            record[provider][source] -= give_here
            if source == "allocation" and record["completed"]:
                record["released"][provider] += give_here
        _count_in_windows(doc, provider, hold, -give)
    return True


def _count_in_windows(doc: Document, provider: str, hold: Hold, units: int) -> None:
    window = doc["windows"][provider]
    if hold.day == window["day"]:
        window["day_used"] = max(0, window["day_used"] + units)
    if hold.month == window["month"]:
        window["month_used"] = max(0, window["month_used"] + units)
    if hold.account is not None:
        keys.count(doc, provider, hold.account, hold.day, hold.month, units)


def refund(doc: Document, agent_id: str, provider: str, hold: Hold) -> bool:
    """Give back a whole hold nothing was billed for; False when there was nothing to give back
    (the windows rolled over in between, so its units belong to reset counters)."""
    return settle(doc, agent_id, provider, hold, 0)


def observe(
    doc: Document,
    provider: str,
    now: float,
    *,
    remaining: int | None = None,
    limit: int | None = None,
    exhausted_until: float | None = None,
    why: str | None = None,
) -> None:
    """Record what the provider itself said: its monthly remaining, or that it is exhausted
    until a reset time. A provider that says less is left than we think wins; one that says
    more never raises our limit (headroom is the smaller of the two)."""
    # Other calls' holds may not have reached the provider when it answered: count them as not
    # yet in its figure, so what they settle to still counts down from it.
    held = in_flight(doc, provider, now) if remaining is not None else 0
    keys.record(doc["windows"][provider], held, now, remaining=remaining, limit=limit,
                exhausted_until=exhausted_until, why=why)  # fmt: skip


def queries_remaining(
    doc: Document, c: Ceilings, agent_id: str, provider: str, source: str | None
) -> int:
    """RULINGS 4: the pool's remainder when the unit came from it, else the agent's allocation."""
    if source == "pool":
        return pool_remaining(doc, provider)
    return allocation_remaining(doc, c, agent_id, provider)


def complete(doc: Document, c: Ceilings, agent_id: str) -> dict[str, int]:
    """Mark the agent done and move its unused allocation into the pool; returns what moved."""
    released = {p: allocation_remaining(doc, c, agent_id, p) for p in PROVIDERS}
    ensure_agent(doc, c, agent_id)
    record = doc["agents"][agent_id]
    record["released"] = released
    record["completed"] = True
    return released


def agent_status(doc: Document, c: Ceilings, agent_id: str) -> dict[str, Any]:
    status: dict[str, Any] = {"agent_id": agent_id}
    for p in PROVIDERS:
        status[p] = {
            "allocated": c.allocation(agent_id, p),
            "used": agent_used(doc, agent_id, p),
            "remaining": allocation_remaining(doc, c, agent_id, p),
        }
    status["completed"] = _agent(doc, agent_id)["completed"]
    return status


def provider_totals(
    doc: Document, c: Ceilings, provider: str, now: float | None = None
) -> dict[str, Any]:
    """The spec's per-provider totals (agents' day) for the full status object, and the units
    held right now by calls in flight (already counted in `used`)."""
    return {
        "daily_limit": c.daily_limits[provider],
        "used": total_used(doc, provider),
        "remaining": window_headroom(doc, c, provider, now),
        "allocated": allocated_total(doc, c, provider),
        "shared_pool": pool_remaining(doc, provider),
        "direct_headroom": direct_headroom(doc, c, provider),
        "in_flight": in_flight(doc, provider, now),
    }


def full_status(doc: Document, c: Ceilings, now: float | None = None) -> dict[str, Any]:
    providers = {p: provider_totals(doc, c, p, now) for p in PROVIDERS}
    agents = {a: agent_status(doc, c, a) for a in c.known_agents(doc)}
    for status in agents.values():
        del status["agent_id"]
    return {
        "date": doc["date"],
        "providers": providers,
        "agents": agents,
        "warning": overcommit_warning(doc, c),
    }


def overcommit_warning(doc: Document, c: Ceilings) -> str | None:
    """Allocations that add up past a daily limit are a config mistake worth saying out loud."""
    over = [
        f"{p} allocations total {allocated_total(doc, c, p)} > daily_limit {c.daily_limits[p]}"
        for p in PROVIDERS
        if allocated_total(doc, c, p) > c.daily_limits[p]
    ]
    if not over:
        return None
    return "Agent allocations exceed the daily limit (" + "; ".join(over) + "); the limit wins."
