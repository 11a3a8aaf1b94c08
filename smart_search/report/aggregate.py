"""Counting log lines: every line into one bucket per (day, agent), its API units into the
budget counts per (provider, local day in its reset zone). No I/O but the reading it is handed.

This module alone reads the fields of a log line (RULINGS 6): it reads nothing that
`schemas/search-log.json` does not declare (tests/test_report.py checks it). A line's version is
one the schema allows (1 up to its `log_version`); a line without `mode` is a first-mode call.
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime, timedelta
from typing import Any

import orjson

from smart_search.host.config import PROVIDERS
from smart_search.logs.line import log_version
from smart_search.report.reading import FileStats, read_batches
from smart_search.report.window import Window, parse_stamp, zone_of

SOURCES = ("agent_allocation", "shared_pool", "provider_direct", "unattributed")
OUTCOMES = ("success", "failed", "skipped")
SKIP_REASONS = ("truncated", "oversized", "not_json", "foreign", "malformed", "unknown_version")
# Every log version this release writes or wrote, from 1 (no `log_version`) to the line schema's
# (schemas/search-log.json says what each added).
LOG_VERSIONS = tuple(range(1, log_version() + 1))
_TIER_OF_PROVIDER = {**{p: p for p in PROVIDERS}, "cache": "cache"}
_SOURCE_INDEX = {s: i for i, s in enumerate(SOURCES)}
_OUTCOME_INDEX = {o: i for i, o in enumerate(OUTCOMES)}


class Bucket:
    """Counters for one (day, agent); merged into days, agents and totals at the end."""

    __slots__ = (
        "searches",
        "succeeded",
        "deep",
        "fallback",
        "cache_hits",
        "units_saved",
        "units",
        "keys",
        "web",
        "failures",
        "tiers",
        "tier_latency",
        "call_latency",
    )

    def __init__(self) -> None:
        self.searches = 0
        self.succeeded = 0
        self.deep = 0
        self.fallback = 0
        self.cache_hits = 0
        self.units_saved = 0
        # provider -> [units per SOURCES entry]
        self.units: dict[str, list[int]] = {}
        # provider -> key fingerprint (or project) of a key pool -> units (attempts' `key`)
        self.keys: dict[str, dict[str, int]] = {}
        self.web: dict[str, int] = {}
        self.failures: dict[str, int] = {}
        # tier -> [success, failed, skipped, retries]
        self.tiers: dict[str, list[int]] = {}
        self.tier_latency: dict[str, list[float]] = {}
        self.call_latency: list[float] = []


def count_keys(into: dict[str, int], other: dict[str, int]) -> None:
    for key, n in other.items():
        into[key] = into.get(key, 0) + n


def merge_bucket(into: Bucket, other: Bucket) -> None:
    for name in ("searches", "succeeded", "deep", "fallback", "cache_hits", "units_saved"):
        setattr(into, name, getattr(into, name) + getattr(other, name))
    for mine, theirs in ((into.units, other.units), (into.tiers, other.tiers)):
        for key, row in theirs.items():
            if key in mine:
                mine[key] = [a + b for a, b in zip(mine[key], row, strict=True)]
            else:
                mine[key] = row
    for mine_counts, their_counts in ((into.web, other.web), (into.failures, other.failures)):
        for key, n in their_counts.items():
            mine_counts[key] = mine_counts.get(key, 0) + n
    for provider, by_key in other.keys.items():
        count_keys(into.keys.setdefault(provider, {}), by_key)
    for key, values in other.tier_latency.items():
        into.tier_latency.setdefault(key, []).extend(values)
    into.call_latency.extend(other.call_latency)

class Aggregator:
    """Feeds lines into buckets and budget counts (`summary.document` shapes the result)."""

    def __init__(self, window: Window) -> None:
        self.window = window
        self.since = window.since.isoformat()
        self.until = window.until.isoformat()
        self.buckets: dict[tuple[str, str], Bucket] = {}
        self.skipped = dict.fromkeys(SKIP_REASONS, 0)
        self.read = 0
        self.counted = 0
        self.not_counted = 0
        self.by_version = {str(v): 0 for v in LOG_VERSIONS}
        # (provider, local day in its reset timezone) -> units
        self.budget_units: dict[tuple[str, str], int] = {}
        self._zones = [(p, zone_of(window.reset_timezones.get(p))) for p in PROVIDERS]
        self._local_days: dict[str, dict[str, str] | None] = {}

    def read_files(self, todo: list[tuple[str, str]], files: FileStats) -> None:
        """Feed each (day, path); a file that cannot be read is counted, never raised."""
        for day, path in todo:
            files.read += 1
            try:
                self.feed(day, read_batches(path, self.skipped))
            except (OSError, EOFError, ValueError):
                # Unreadable, or a damaged .gz: the lines read before the damage still count.
                files.unreadable += 1

    def state(self) -> tuple[Any, ...]:
        return (self.buckets, self.skipped, self.read, self.counted, self.not_counted,
                self.by_version, self.budget_units)  # fmt: skip

    def merge(self, state: tuple[Any, ...], files_read: int, unreadable: int, files: FileStats
              ) -> None:  # fmt: skip
        """Add another Aggregator's `state()` (same window) to this one's counts."""
        buckets, skipped, read, counted, not_counted, by_version, budget_units = state
        for key, other in buckets.items():
            mine = self.buckets.get(key)
            if mine is None:
                self.buckets[key] = other
            else:
                merge_bucket(mine, other)
        for name, n in skipped.items():
            self.skipped[name] += n
        for name, n in by_version.items():
            self.by_version[name] += n
        for key, n in budget_units.items():
            self.budget_units[key] = self.budget_units.get(key, 0) + n
        self.read += read
        self.counted += counted
        self.not_counted += not_counted
        files.read += files_read
        files.unreadable += unreadable

    def feed(self, day: str, batches: Iterable[tuple[list[bytes], bool]]) -> None:
        """Count every line of one file dated `day` (its name's date)."""
        in_range = self.since <= day <= self.until
        agent_filter = self.window.agent
        loads = orjson.loads
        decode_error = orjson.JSONDecodeError
        skipped = self.skipped
        for lines, is_tail in batches:
            for raw in lines:
                if not raw or raw.isspace():
                    continue
                self.read += 1
                try:
                    rec = loads(raw)
                except decode_error:
                    skipped["truncated" if is_tail else "not_json"] += 1
                    continue
                if type(rec) is not dict or ("agent_id" not in rec and "success" not in rec):
                    skipped["foreign"] += 1
                    continue
                version = rec.get("log_version", 1)
                if type(version) is not int or version not in LOG_VERSIONS:
                    skipped["unknown_version"] += 1
                    continue
                agent = rec.get("agent_id")
                success = rec.get("success")
                provider = rec.get("provider_used")
                if (
                    type(agent) is not str
                    or not agent
                    or type(success) is not bool
                    or (provider is not None and type(provider) is not str)
                ):
                    skipped["malformed"] += 1
                    continue
                self.by_version[str(version)] += 1
                counted = in_range and (agent_filter is None or agent == agent_filter)
                self._line(rec, day, agent, success, provider, counted)
                if counted:
                    self.counted += 1
                else:
                    self.not_counted += 1

    def _line(
        self, rec: dict[str, Any], day: str, agent: str, success: bool, provider: Any, counted: bool
    ) -> None:
        get = rec.get
        cached = get("cached") is True
        quota_source = get("quota_source")
        bucket = None
        if counted:
            bucket = self.buckets.get((day, agent))
            if bucket is None:
                bucket = self.buckets[(day, agent)] = Bucket()
        # (provider, source, units) charged by this call: the attempts' when any carries units.
        charges = _attempt_charges(get("attempts"), quota_source, bucket)
        if charges is None:
            charges = _line_charges(get("units"), provider, quota_source, cached)
        if charges:
            local = self._local_days_of(get("timestamp"))
            budget = self.budget_units
            for p, _source, units in charges:
                key = (p, local[p] if local is not None else day)
                budget[key] = budget.get(key, 0) + units
        if bucket is not None:
            _count(bucket, rec, success, provider, cached, charges)

    def _local_days_of(self, stamp: Any) -> dict[str, str] | None:
        """Provider → its local day of `stamp`; None when the stamp says no time.

        Cached per UTC hour when no provider's midnight falls inside that hour, else per minute
        (every real zone offset is a whole number of minutes).
        """
        if type(stamp) is not str:
            return None
        utc = len(stamp) > 16 and stamp[-1] == "Z"
        if utc:
            hour = self._local_days.get(stamp[:13], False)
            if hour is False:
                hour = self._hour(stamp[:13])
            if hour is not None:
                return hour
        key = stamp[:16] if utc else stamp
        hit = self._local_days.get(key, False)
        if hit is not False:
            return hit  # type: ignore[return-value]
        local = self._days_at(parse_stamp(key + ":00+00:00" if utc else stamp))
        if len(self._local_days) < 200_000:
            self._local_days[key] = local
        return local

    def _hour(self, key: str) -> dict[str, str] | None:
        """The hour's local days when they hold for all of it (cached), else None."""
        start = parse_stamp(key + ":00:00+00:00")
        first = self._days_at(start)
        if start is None or first != self._days_at(start + timedelta(minutes=59)):
            first = None
        self._local_days[key] = first
        return first

    def _days_at(self, moment: datetime | None) -> dict[str, str] | None:
        if moment is None:
            return None
        return {p: moment.astimezone(zone).date().isoformat() for p, zone in self._zones}


def _attempt_charges(
    attempts: Any, quota_source: Any, bucket: Bucket | None
) -> list[tuple[str, Any, int]] | None:
    """The charges the attempts carry (None when none carries `units`: an older line); one pass
    that also counts, for a counted line, each attempt's tier outcome."""
    if type(attempts) is not list:
        return None
    charges: list[tuple[str, Any, int]] = []
    attempt_units = False
    for att in attempts:
        if type(att) is not dict:
            continue
        p = att.get("provider")
        if "units" in att:
            attempt_units = True
            units = att["units"]
            if type(units) is int and units > 0 and p in PROVIDERS:
                charges.append((p, att.get("quota_source") or quota_source, units))
                key = att.get("key")
                if bucket is not None and type(key) is str and key:
                    by_key = bucket.keys.setdefault(p, {})
                    by_key[key] = by_key.get(key, 0) + units
        if bucket is not None:
            _count_attempt(bucket, att, p)
    return charges if attempt_units else None


def _count_attempt(bucket: Bucket, att: dict[str, Any], p: Any) -> None:
    """One attempt's outcome, retries and latency, under its tier."""
    outcome = att.get("outcome")
    index = _OUTCOME_INDEX.get(outcome) if type(outcome) is str else None
    if index is None:
        return
    tier = _TIER_OF_PROVIDER.get(p) if type(p) is str else None
    if tier is None:
        tier = tier_name(att)
    counts = bucket.tiers.get(tier)
    if counts is None:
        counts = bucket.tiers[tier] = [0, 0, 0, 0]
    counts[index] += 1
    retries = att.get("retries")
    if type(retries) is int and retries > 0:
        counts[3] += retries
    if index != 2:
        latency = att.get("latency_ms")
        if (type(latency) is float or type(latency) is int) and latency >= 0:
            lat = bucket.tier_latency.get(tier)
            if lat is None:
                bucket.tier_latency[tier] = [latency]
            else:
                lat.append(latency)


def _line_charges(
    units: Any, provider: Any, quota_source: Any, cached: bool
) -> list[tuple[str, Any, int]]:
    """The line's own charge when no attempt carried units: its `units`, else (version 1) one
    unit for an API answer that a quota source paid."""
    if provider not in PROVIDERS:
        return []
    if type(units) is not int or units < 0:
        api_source = quota_source is not None and quota_source != "none"
        units = 1 if api_source and not cached else 0
    return [(provider, quota_source, units)] if units else []


def _count(
    bucket: Bucket,
    rec: dict[str, Any],
    success: bool,
    provider: Any,
    cached: bool,
    charges: list[tuple[str, Any, int]],
) -> None:
    """A counted line's searches, outcome, cache use, units and latency."""
    get = rec.get
    bucket.searches += 1
    if get("mode") == "deep":
        bucket.deep += 1
    if get("fallback_used") is True:
        bucket.fallback += 1
    if cached:
        bucket.cache_hits += 1
        saved = get("units_saved")
        if type(saved) is int and saved > 0:
            bucket.units_saved += saved
    if success:
        bucket.succeeded += 1
        if provider == "web_fetch" and not cached:
            engine = get("web_fetch_engine")
            engine = engine if type(engine) is str and engine else "unknown"
            bucket.web[engine] = bucket.web.get(engine, 0) + 1
    else:
        code = get("error_code")
        code = code if type(code) is str and code else "unknown"
        bucket.failures[code] = bucket.failures.get(code, 0) + 1
    for p, source, units in charges:
        row = bucket.units.get(p)
        if row is None:
            row = bucket.units[p] = [0, 0, 0, 0]
        row[_SOURCE_INDEX.get(source, 3) if type(source) is str else 3] += units
    latency = get("latency_ms")
    if (type(latency) is float or type(latency) is int) and latency >= 0:
        bucket.call_latency.append(latency)


def tier_name(att: dict[str, Any]) -> str:
    """The tier an attempt counts under: its API, its engine, or the cache."""
    provider = att.get("provider")
    tier = _TIER_OF_PROVIDER.get(provider) if type(provider) is str else None
    if tier is not None:
        return tier
    engine = att.get("engine")
    if provider == "web_fetch":
        return engine if type(engine) is str and engine else "web_fetch"
    return provider if type(provider) is str and provider else "unknown"
