"""The quota ledger: reserve / settle / observe / complete / status over the state seam.

Every change is one `Store.update` of the "quota" document (atomic across processes, and hosts
with a networked store); the arithmetic is `quota.py`, reading other formats is `migrate.py`.

Windows: the agents' day is the UTC date (or `timezone`'s); each provider's day and month follow
`providers.<p>.reset_timezone` (Gemini: Pacific, Brave: UTC). Later windows start fresh; an
earlier one (a clock moved back) keeps counting into the newer one, never resetting.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from datetime import datetime
from typing import TYPE_CHECKING, Any
from zoneinfo import ZoneInfo

from smart_search.budget import keys, migrate, quota
from smart_search.errors import (
    AgentNotFound,
    AlreadyComplete,
    agent_already_complete,
    agent_not_found,
)
from smart_search.host.config import GENERAL_AGENT, PROVIDERS, Settings
from smart_search.text.stamps import utc_stamp

if TYPE_CHECKING:
    from smart_search.store import Store

QUOTA_DOC = "quota"
QUOTA_FILE = "search-quota.json"
# A hold counts as in flight until its call's total_timeout_ms has passed, plus this much: a
# call ends by its deadline, so a hold still there after it belongs to a process that died.
HOLD_GRACE_S = 60.0

Document = dict[str, Any]


def _day(now: float, zone: str | None) -> datetime:
    return datetime.fromtimestamp(now, ZoneInfo(zone or "UTC"))


def today(settings: Settings, now: float | None = None) -> str:
    """The ledger's (and the logs') day: UTC unless `timezone` names an IANA zone."""
    now = time.time() if now is None else now
    if not settings.timezone:
        return time.strftime("%Y-%m-%d", time.gmtime(now))
    return _day(now, settings.timezone).strftime("%Y-%m-%d")


def windows(settings: Settings, now: float) -> quota.Windows:
    """Every window's current name at `now`: the agents' day, each provider's day and month."""
    names: dict[str | None, tuple[str, str]] = {}  # per zone: providers mostly share one
    provider = {}
    for p in PROVIDERS:
        zone = settings.reset_timezones[p]
        if zone not in names:
            local = _day(now, zone)
            names[zone] = (local.strftime("%Y-%m-%d"), local.strftime("%Y-%m"))
        provider[p] = names[zone]
    return quota.Windows(today(settings, now), provider)


def next_reset(settings: Settings, provider: str, now: float, *, monthly: bool) -> float:
    """When `provider`'s day (or month) window next starts, as a Unix time."""
    from datetime import timedelta

    local = _day(now, settings.reset_timezones[provider])
    if monthly:
        year, month = (local.year + 1, 1) if local.month == 12 else (local.year, local.month + 1)
        start = local.replace(year=year, month=month, day=1, hour=0, minute=0, second=0)
    else:
        start = (local + timedelta(days=1)).replace(hour=0, minute=0, second=0)
    return start.replace(microsecond=0).timestamp()


def ceilings(settings: Settings) -> quota.Ceilings:
    return quota.Ceilings(
        settings.daily_limits,
        settings.agent_allocations,
        settings.default_allocation,
        settings.monthly_limits,
        settings.max_unconfigured_agents,
        settings.max_units_per_call,
        settings.prices_per_1000,
        settings.monthly_budgets,
        settings.monthly_budget,
        {p: keys.accounts_of(pool) for p, pool in settings.key_pools.items()},
    )


class Ledger:
    """Quota operations for one call (or one server request); each change is one atomic step."""

    def __init__(
        self,
        settings: Settings,
        store: Store | None = None,
        *,
        clock: Callable[[], float] = time.time,
        recover: bool = True,
    ) -> None:
        if store is None:
            from smart_search.store import open_store

            store = open_store(settings)
        self.settings = settings
        self.store = store
        self.ceilings = ceilings(settings)
        self.clock = clock
        self.today = today(settings, clock())
        # Restores and folds of a forgotten ledger done during this call (RULINGS 8):
        # budget/recovery.py's notes, for the result's warning and the log line.
        self.restored: list[dict[str, Any]] = []
        # False (doctor, read-only): a forgotten ledger raises StateLost instead of restoring.
        self.recover = recover

    @property
    def where(self) -> str:
        return f"{self.store.where()}/{QUOTA_FILE}" if self.store.kind == "files" else (
            self.store.where()
        )

    # -- reads ---------------------------------------------------------------------------------
    def snapshot(self) -> Document:
        """The document as it stands now (not locked: every write is whole)."""
        return self._current(self._read(), self.clock())

    def agent_status(self, agent_id: str) -> dict[str, Any]:
        doc = self.snapshot()
        self._require_known(doc, agent_id)
        return quota.agent_status(doc, self.ceilings, agent_id)

    def full_status(self, doc: Document | None = None) -> dict[str, Any]:
        """Every agent, provider and window; of `doc` (a `snapshot`) when the caller read it."""
        now = self.clock()
        if doc is None:
            doc = self._current(self._read(), now)
        status = quota.full_status(doc, self.ceilings, now)
        status["windows"] = {p: self._window_status(doc, p, now) for p in PROVIDERS}
        if self.settings.monthly_budget is not None:
            spent = sum(quota.month_spend(doc, self.ceilings, p) for p in PROVIDERS)
            status["monthly_budget"] = {
                "limit": self.settings.monthly_budget,
                "spent": round(spent, 4),
                "currency": self.settings.currencies[PROVIDERS[0]],
            }
        return status

    def _window_status(self, doc: Document, p: str, now: float) -> dict[str, Any]:
        s, c, window = self.settings, self.ceilings, doc["windows"][p]
        seen = window["reported"]
        current = seen if seen and seen["month"] == window["month"] else None
        until = window["exhausted_until"]
        price = s.prices_per_1000[p]
        return {
            "unit": s.units[p],
            "reset_timezone": s.reset_timezones[p],
            "daily": {
                "used": window["day_used"],
                "limit": c.daily_limits[p],
                "resets_at": utc_stamp(next_reset(s, p, now, monthly=False)),
            },
            "monthly": {
                "used": window["month_used"],
                "limit": s.monthly_limits[p],
                "resets_at": utc_stamp(next_reset(s, p, now, monthly=True)),
            },
            "headroom": quota.window_headroom(doc, c, p, now),
            "provider_reported_remaining": (
                None if current is None else int(max(0, quota.reported_remaining(doc, p)))
            ),
            "provider_reported_age_s": (
                None if current is None else round(max(0.0, now - current["seen_at"]), 1)
            ),
            "exhausted_until": utc_stamp(until) if until is not None and until > now else None,
            "estimated_spend": (
                None if price is None else round(window["month_used"] * price / 1000, 4)
            ),
            "currency": None if price is None else s.currencies[p],
            "monthly_budget": s.monthly_budgets[p],
            # Key pools: each key by fingerprint (never the key), present only with a pool.
            **({"keys": keys.status(doc, c.pools[p], p, now, utc_stamp)} if p in c.pools else {}),
        }

    # -- changes -------------------------------------------------------------------------------
    def reserve(
        self,
        agent_id: str,
        provider: str,
        *,
        key: str | None = None,
        exclude: tuple[str, ...] = (),
    ) -> tuple[quota.Hold, int]:
        """Hold the call's worst case (`max_units_per_call`) in every window and from the
        sources in order, in one atomic step; returns (the hold, queries_remaining after it).

        Raises QuotaExhausted (the worst case does not fit a window or the sources, or the
        provider said it is exhausted) or UnknownAgent (past the cap of unconfigured agents).
        With a key pool the hold names its key (`hold.key`): the one with the most headroom, or
        `key` (a retry keeps its request's key), never one of `exclude`."""
        import os

        hold_id = os.urandom(8).hex()
        lifetime = self.settings.total_timeout_ms / 1000 + HOLD_GRACE_S

        def change(raw: Document | None) -> tuple[Document, tuple[quota.Hold, int]]:
            now = self.clock()
            doc = self._current(raw, now)
            quota.drop_stale_holds(doc, provider, now)
            hold = quota.reserve(
                doc, self.ceilings, agent_id, provider, now, hold_id=hold_id, until=now + lifetime,
                key=key, exclude=exclude,
            )
            left = quota.queries_remaining(doc, self.ceilings, agent_id, provider, hold.source)
            return doc, (hold, left)

        return self._update(change)

    def settle(
        self,
        agent_id: str,
        provider: str,
        charges: list[tuple[quota.Hold, int]],
        observation: dict[str, Any] | None = None,
    ) -> int | None:
        """Settle each hold to what was really billed against it, and record what the provider
        reported, in one atomic step. `observation`: `remaining`/`limit` (its monthly window)
        and/or `exhausted` ("day" or "month": the provider said so; no request goes to it
        before that window resets). Returns queries_remaining afterwards, or None when there
        was nothing to settle."""
        if not charges:
            return None

        def change(raw: Document | None) -> tuple[Document | None, int]:
            now = self.clock()
            doc = self._current(raw, now)
            changed = False
            for hold, charged in charges:
                changed = quota.settle(doc, agent_id, provider, hold, charged) or changed
            if observation:
                self._observe(doc, provider, observation, now, charges[-1][0])
                changed = True
            source = charges[0][0].source
            left = quota.queries_remaining(doc, self.ceilings, agent_id, provider, source)
            return (doc if changed else None), left

        # A settle that charges no more than was held only gives units back or clears the hold
        # (and records what the provider reported, which its next answer reports again): lost in
        # an OS crash, it leaves the worst case charged, never less than was billed, so it skips
        # the directory's fsync (its file is synced all the same: statefile.update). One that
        # charges more than it held is flushed.
        durable = any(charged > hold.units for hold, charged in charges)
        return self._update(change, durable=durable)

    def refund(self, agent_id: str, provider: str, hold: quota.Hold) -> None:
        """Give back a whole hold nothing was billed for."""
        self.settle(agent_id, provider, [(hold, 0)])

    def complete(self, agent_id: str) -> dict[str, int]:
        """Mark the agent complete and release its unused allocation to the pool."""

        def change(raw: Document | None) -> tuple[Document, dict[str, int]]:
            doc = self._current(raw, self.clock())
            self._require_known(doc, agent_id)
            record = doc["agents"].get(agent_id)
            if record is not None and record["completed"]:
                raise AlreadyComplete(agent_already_complete(agent_id))
            return doc, quota.complete(doc, self.ceilings, agent_id)

        return self._update(change)

    def adopt_reports(self, reports: dict[tuple[str, str], dict[str, Any]]) -> None:
        """Record what providers reported of their month (`{"used", "limit"}` from a usage
        endpoint), by (provider, account: "-" for the provider's own window, else the label of
        an account of its key pool), in one atomic step: a provider that says less is left than
        we think wins; one without its use or its limit says nothing about what is left."""
        usable = {
            k: r
            for k, r in reports.items()
            if r.get("used") is not None and r.get("limit") is not None
        }
        if not usable:
            return

        def change(raw: Document | None) -> tuple[Document, None]:
            now = self.clock()
            doc = self._current(raw, now)
            for (p, account), r in usable.items():
                left = max(0, r["limit"] - r["used"])
                if account == "-":
                    quota.observe(doc, p, now, remaining=left, limit=r["limit"])
                else:
                    keys.observe(doc, p, account, None, now, remaining=left, limit=r["limit"])
            return doc, None

        self._update(change)

    def merge(self, incoming: Document, *, add: bool) -> None:
        """Fold another ledger (as `current` reads it) into this one, in one atomic step of the
        store: `add` counts its units on top of ours, else each counter takes the larger."""
        from smart_search.budget.quota_merge import merge_quota

        def change(raw: Document | None) -> tuple[Document, None]:
            return merge_quota(self._current(raw, self.clock()), incoming, add=add), None

        self._update(change)

    def current(self, raw: Document | None, now: float | None = None) -> Document:
        """`raw` (any ledger version this package reads, or None) as a current document.
        Raises StateCorrupt for anything else."""
        return self._current(raw, self.clock() if now is None else now)

    # -- internals -----------------------------------------------------------------------------
    def _read(self) -> Document | None:
        if self.store.kind == "files":  # the file backend cannot forget: no witness to ask
            return self.store.read(QUOTA_DOC)
        return self._guarded(lambda: self.store.read(QUOTA_DOC))

    def _update(self, change: Any, *, durable: bool = True) -> Any:
        if self.store.kind == "files":
            return self.store.update(QUOTA_DOC, change, durable=durable)
        return self._guarded(lambda: self.store.update(QUOTA_DOC, change, durable=durable))

    def _guarded(self, op: Callable[[], Any]) -> Any:
        """`op` after a forgotten ledger was restored, or refused (budget/recovery.py)."""
        if not self.recover:
            return op()
        from smart_search.budget.recovery import guarded

        return guarded(self.store, QUOTA_DOC, op, self.current, self.restored)

    def _observe(
        self, doc: Document, p: str, seen: dict[str, Any], now: float, hold: quota.Hold
    ) -> None:
        """Record what the provider said: on the provider's windows, or with a key pool on the
        account and key the call's last hold was taken on (`disable`: the key was refused, so
        it rests until its day resets)."""
        until = None
        if seen.get("exhausted"):
            until = next_reset(self.settings, p, now, monthly=seen["exhausted"] == "month")
        if hold.account is not None:
            keys.observe(
                doc,
                p,
                hold.account,
                hold.key,
                now,
                remaining=seen.get("remaining"),
                limit=seen.get("limit"),
                exhausted_until=until,
                why=seen.get("why"),
                disabled_until=next_reset(self.settings, p, now, monthly=False)
                if seen.get("disable")
                else None,
            )
            return
        quota.observe(
            doc,
            p,
            now,
            remaining=seen.get("remaining"),
            limit=seen.get("limit"),
            exhausted_until=until,
            why=seen.get("why"),
        )

    def _require_known(self, doc: Document, agent_id: str) -> None:
        known = agent_id in doc["agents"] or agent_id in self.ceilings.configured
        if not known and agent_id != GENERAL_AGENT:
            raise AgentNotFound(agent_not_found(agent_id))

    def _current(self, raw: Document | None, now: float) -> Document:
        """The document as of `now` from whatever the store holds (nothing, ours, older ones)."""
        if raw is None:
            doc = quota.new_day(today(self.settings, now))
        else:
            path = self.where
            version = migrate.version_of(raw, path)
            if version == quota.VERSION:
                doc = migrate.checked(raw, path)
            elif version == 1:
                doc = migrate.from_v1(raw, path)
            else:
                doc = migrate.from_node(raw, self.ceilings, today(self.settings, now), path)
        return quota.roll(doc, windows(self.settings, now))

