"""`smart-search report`: where the budget went, read from the JSONL search logs.

Three layers, one way:

1. **Reading** (`list_log_files`, `read_batches`): lists `<state_dir>/logs` once, picks the
   files whose name dates fall in the window the report needs, and streams each in 1 MiB chunks
   (a line longer than 1 MiB is skipped as `oversized`, never held in memory). Every line that
   cannot be counted is counted instead, by reason (`truncated`, `oversized`, `not_json`,
   `foreign`, `malformed`, `unknown_version`); nothing in a log directory can crash the report.
   Big reports share the files with one forked child (`build_report`), which sends its counts
   back pickled.
2. **Aggregating** (`Aggregator`, `summarize`, `budgets`): no I/O, lines in, one report
   document out (the `--json` output, `schemas/report.result.json`). Lines are counted once into a
   bucket per (day, agent); days, agents and totals are merged from the buckets.
3. **Rendering** (`report_tables`, `render_text`, `render_html`): both renderers print the same
   tables (the same formatted cells), so the text and the page always agree; the page adds inline
   SVG charts drawn here (no plotting library: see README, "Reports").

Rules (README, "Reports", documents them for operators):
- A line's day is the day in its file name (the ledger's day: UTC or `timezone`).
- A line's API units: per-attempt `units` when any attempt carries them (they say which provider
  and quota source paid), else the line's `units`, else (log version 1) one unit when
  `provider_used` is gemini or brave and `quota_source` is not `none`. A cache hit without `units`
  costs nothing.
- The report's months are the calendar months of its days. Each provider's month runs from
  midnight on the 1st in its `reset_timezone`; a line belongs to it by its `timestamp`, or by its
  file's day when the timestamp is missing or unreadable. The burn-down counts every agent (the
  budget is the provider's), also under `--agent`.
- Percentiles are nearest-rank over the attempts that ran (outcome `success` or `failed`).
"""

from __future__ import annotations

import math
import os
import re
import sys
import time
from collections.abc import Iterable, Iterator
from datetime import UTC, date, datetime, timedelta
from typing import Any

import orjson

from .config import DEFAULT_MONTHLY_LIMITS, DEFAULT_RESET_TIMEZONES
from .logline import log_version
from .logs import ROTATED_SEARCH_LOG as LOG_FILE
from .stamps import utc_stamp

REPORT_VERSION = 1
PROVIDERS = ("gemini", "brave")
SOURCES = ("agent_allocation", "shared_pool", "provider_direct", "unattributed")
ENGINES = ("google", "bing", "duckduckgo")
TIER_ORDER = ("cache", "gemini", "brave", "google", "bing", "duckduckgo", "web_fetch")
OUTCOMES = ("success", "failed", "skipped")
SKIP_REASONS = ("truncated", "oversized", "not_json", "foreign", "malformed", "unknown_version")
# Every log version this release writes or wrote, from 1 (no `log_version`) to the line schema's
# (schemas/search-log.json says what each added). A line is first mode unless `mode` says deep.
LOG_VERSIONS = tuple(range(1, log_version() + 1))
DEFAULT_DAYS = 7
MAX_DAYS = 100_000
MAX_LINE = 1 << 20
CHUNK = 1 << 20
# From this much log to read, two processes share the files (a month of 50 agents is ~100 MB).
PARALLEL_BYTES = 16 << 20
TEXT_WIDTH = 100
_AGENT_ID = re.compile(r"[a-z0-9-]+")
_TIER_OF_PROVIDER = {"gemini": "gemini", "brave": "brave", "cache": "cache"}
_SOURCE_INDEX = {s: i for i, s in enumerate(SOURCES)}
_OUTCOME_INDEX = {o: i for i, o in enumerate(OUTCOMES)}


class ReportError(Exception):
    """The report cannot be made (unreadable state directory, unwritable page); exit 1."""


# --- reading -------------------------------------------------------------------------------


class FileStats:
    """What the directory listing and the reads found, for the report's `files` block."""

    def __init__(self) -> None:
        self.matched = 0
        self.read = 0
        self.unreadable = 0
        self.ignored = 0


def list_log_files(directory: str, stats: FileStats) -> dict[str, list[str]]:
    """Day → paths of that day's log files (rotated copies included), from one listing.

    Raises OSError when the directory exists but cannot be listed; a missing one lists nothing.
    """
    by_day: dict[str, list[str]] = {}
    try:
        entries = os.scandir(directory)
    except FileNotFoundError:
        return by_day
    with entries:
        for entry in entries:
            match = LOG_FILE.fullmatch(entry.name)
            if match is None:
                stats.ignored += 1
                continue
            try:
                date.fromisoformat(match.group(1))
            except ValueError:
                stats.ignored += 1  # search-2026-13-45.jsonl is nobody's day
                continue
            stats.matched += 1
            by_day.setdefault(match.group(1), []).append(entry.path)
    for paths in by_day.values():
        paths.sort()
    return by_day


def read_batches(path: str, skipped: dict[str, int]) -> Iterator[tuple[list[bytes], bool]]:
    """Yield (lines, is_tail) from one file, streamed; `is_tail` marks a last line with no newline.

    A line over MAX_LINE bytes is dropped as it streams past and counted as `oversized`.
    """
    with _open_regular(path) as raw:
        fh: Any = raw
        if path.endswith(".gz"):
            import gzip

            fh = gzip.GzipFile(fileobj=raw, mode="rb")  # closing it leaves `raw` to the with
        yield from _split(fh, skipped)


def _open_regular(path: str) -> Any:
    """Open a regular file for reading; anything else (a FIFO, a directory) raises OSError.

    O_NONBLOCK keeps a FIFO named like a log from blocking the open until a writer comes.
    """
    import stat

    fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise OSError(f"{path} is not a regular file")
        return os.fdopen(fd, "rb")
    except BaseException:
        os.close(fd)
        raise


def _split(fh: Any, skipped: dict[str, int]) -> Iterator[tuple[list[bytes], bool]]:
    """The lines of a binary stream, in batches; see `read_batches`."""
    rest = b""
    dropping = False
    while True:
        chunk = fh.read(CHUNK)
        if not chunk:
            break
        parts = (rest + chunk if rest else chunk).split(b"\n")
        rest = parts.pop()
        if dropping and parts:
            skipped["oversized"] += 1
            del parts[0]  # the end of the oversized line
            dropping = False
        if dropping:
            rest = b""
        elif len(rest) > MAX_LINE:
            dropping, rest = True, b""
        if parts and max(map(len, parts)) > MAX_LINE:
            kept = [line for line in parts if len(line) <= MAX_LINE]
            skipped["oversized"] += len(parts) - len(kept)
            parts = kept
        if parts:
            yield parts, False
    if dropping:
        skipped["oversized"] += 1
    elif rest:
        yield [rest], True


# --- aggregating ---------------------------------------------------------------------------


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
        self.web: dict[str, int] = {}
        self.failures: dict[str, int] = {}
        # tier -> [success, failed, skipped, retries]
        self.tiers: dict[str, list[int]] = {}
        self.tier_latency: dict[str, list[float]] = {}
        self.call_latency: list[float] = []


def _merge_bucket(into: Bucket, other: Bucket) -> None:
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
    for key, values in other.tier_latency.items():
        into.tier_latency.setdefault(key, []).extend(values)
    into.call_latency.extend(other.call_latency)


class Window:
    """What to read and count: the report's days, its agent filter, the budgets' clocks."""

    def __init__(
        self,
        since: date,
        until: date,
        *,
        agent: str | None = None,
        ledger_timezone: str | None = None,
        monthly_limits: dict[str, int] | None = None,
        reset_timezones: dict[str, str] | None = None,
        prices_per_1000: dict[str, float | None] | None = None,
        now: float | None = None,
    ) -> None:
        if since > until:
            raise ValueError(f"the report's first day {since} is after its last day {until}")
        self.since = since
        self.until = until
        self.agent = agent
        self.ledger_timezone = ledger_timezone
        self.monthly_limits = dict(monthly_limits or DEFAULT_MONTHLY_LIMITS)
        self.reset_timezones = dict(reset_timezones or DEFAULT_RESET_TIMEZONES)
        self.prices_per_1000 = dict(prices_per_1000 or {})
        self.now = time.time() if now is None else now
        self.months = _months(since, until)
        # Budgets need each month from its first day (two days of slack for the providers'
        # clocks against the ledger's); nothing after `until` is read.
        self.first_file_day = min(since, self.months[0] - timedelta(days=2))

    @property
    def as_of(self) -> float:
        """The moment the report describes: the end of `until` (ledger clock), or now if sooner."""
        end = _day_start(self.until + timedelta(days=1), self.ledger_timezone)
        return min(self.now, end)


class Aggregator:
    """Feeds lines into buckets and budget counts; `report()` shapes the result document."""

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
        self._zones = [(p, _zone(window.reset_timezones.get(p))) for p in PROVIDERS]
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
                _merge_bucket(mine, other)
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
        attempts = get("attempts")
        if type(attempts) is not list:
            attempts = ()
        bucket = None
        if counted:
            bucket = self.buckets.get((day, agent))
            if bucket is None:
                bucket = self.buckets[(day, agent)] = Bucket()
        # (provider, source, units) charged by this call; one pass over the attempts collects
        # the charges and, for a counted line, the tier outcomes.
        charges: list[tuple[str, Any, int]] = []
        attempt_units = False
        for att in attempts:
            if type(att) is not dict:
                continue
            p = att.get("provider")
            if "units" in att:
                attempt_units = True
                units = att["units"]
                if type(units) is int and units > 0 and (p == "gemini" or p == "brave"):
                    charges.append((p, att.get("quota_source") or quota_source, units))
            if bucket is None:
                continue
            outcome = att.get("outcome")
            index = _OUTCOME_INDEX.get(outcome) if type(outcome) is str else None
            if index is None:
                continue
            tier = _TIER_OF_PROVIDER.get(p) if type(p) is str else None
            if tier is None:
                tier = _tier_name(att)
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
        if not attempt_units and (provider == "gemini" or provider == "brave"):
            units = get("units")
            if type(units) is not int or units < 0:
                api_source = quota_source is not None and quota_source != "none"
                units = 1 if api_source and not cached else 0
            if units:
                charges.append((provider, quota_source, units))
        if charges:
            local = self._local_days_of(get("timestamp"))
            budget = self.budget_units
            for p, _source, units in charges:
                key = (p, local[p] if local is not None else day)
                budget[key] = budget.get(key, 0) + units
        if bucket is None:
            return
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
        local = self._days_at(_parse_stamp(key + ":00+00:00" if utc else stamp))
        if len(self._local_days) < 200_000:
            self._local_days[key] = local
        return local

    def _hour(self, key: str) -> dict[str, str] | None:
        """The hour's local days when they hold for all of it (cached), else None."""
        start = _parse_stamp(key + ":00:00+00:00")
        first = self._days_at(start)
        if start is None or first != self._days_at(start + timedelta(minutes=59)):
            first = None
        self._local_days[key] = first
        return first

    def _days_at(self, moment: datetime | None) -> dict[str, str] | None:
        if moment is None:
            return None
        return {p: moment.astimezone(zone).date().isoformat() for p, zone in self._zones}

    # --- shaping ---------------------------------------------------------------------------

    def report(self, files: FileStats, days_with_logs: set[str]) -> dict[str, Any]:
        window = self.window
        all_days = _days(window.since, window.until)
        missing = [d for d in all_days if d not in days_with_logs]
        by_day: dict[str, list[tuple[str, Bucket]]] = {d: [] for d in all_days}
        by_agent: dict[str, list[Bucket]] = {}
        for (day, agent), bucket in self.buckets.items():
            by_day[day].append((agent, bucket))
            by_agent.setdefault(agent, []).append(bucket)
        tiers = _tier_names(self.buckets.values())
        engines = _engine_names(self.buckets.values())
        return {
            "report_version": REPORT_VERSION,
            "generated_at": utc_stamp(window.now),
            "since": self.since,
            "until": self.until,
            "days": len(all_days),
            "timezone": window.ledger_timezone or "UTC",
            "agent": window.agent,
            "files": {
                "matched": files.matched,
                "read": files.read,
                "unreadable": files.unreadable,
                "ignored": files.ignored,
                "days_without_logs": len(missing),
                "missing_days": missing,
            },
            "lines": {
                "read": self.read,
                "counted": self.counted,
                "not_counted": self.not_counted,
                "skipped": sum(self.skipped.values()),
                "skipped_by_reason": dict(self.skipped),
                "by_version": dict(self.by_version),
            },
            "tiers": tiers,
            "engines": engines,
            "totals": summarize(list(self.buckets.values()), tiers, engines),
            "by_day": [
                {
                    "day": d,
                    **summarize([b for _, b in bs], tiers, engines),
                    "units_by_agent": _units_by_agent(bs),
                }
                for d, bs in by_day.items()
            ],
            "by_agent": [
                {"agent_id": a, **summarize(by_agent[a], tiers, engines)} for a in sorted(by_agent)
            ],
            "budgets": budgets(self.budget_units, window),
        }


def summarize(buckets: list[Bucket], tiers: list[str], engines: list[str]) -> dict[str, Any]:
    """One summary block (a day's, an agent's or the totals) from its buckets."""
    searches = succeeded = deep = fallback = hits = saved = 0
    units = {p: [0, 0, 0, 0] for p in PROVIDERS}
    web = dict.fromkeys(engines, 0)
    failures: dict[str, int] = {}
    tier_counts = {t: [0, 0, 0, 0] for t in tiers}
    tier_latency: dict[str, list[float]] = {t: [] for t in tiers}
    call_latency: list[float] = []
    for b in buckets:
        searches += b.searches
        succeeded += b.succeeded
        deep += b.deep
        fallback += b.fallback
        hits += b.cache_hits
        saved += b.units_saved
        for p, row in b.units.items():
            total = units.setdefault(p, [0, 0, 0, 0])
            for i, n in enumerate(row):
                total[i] += n
        for engine, n in b.web.items():
            web[engine] = web.get(engine, 0) + n
        for code, n in b.failures.items():
            failures[code] = failures.get(code, 0) + n
        for tier, counts in b.tiers.items():
            total = tier_counts[tier]
            for i, n in enumerate(counts):
                total[i] += n
        for tier, values in b.tier_latency.items():
            tier_latency[tier].extend(values)
        call_latency.extend(b.call_latency)
    call_p50, call_p95 = percentiles(call_latency)
    tier_block = {}
    for tier in tiers:
        p50, p95 = percentiles(tier_latency[tier])
        ok, failed, skipped, retries = tier_counts[tier]
        tier_block[tier] = {
            "success": ok,
            "failed": failed,
            "skipped": skipped,
            "retries": retries,
            "latency_p50_ms": p50,
            "latency_p95_ms": p95,
        }
    return {
        "searches": searches,
        "succeeded": succeeded,
        "failed": searches - succeeded,
        "deep": deep,
        "fallback": {"count": fallback, "rate": _rate(fallback, searches)},
        "units": {
            p: {"total": sum(row), **dict(zip(SOURCES, row, strict=True))}
            for p, row in units.items()
        },
        "units_total": sum(sum(row) for row in units.values()),
        "web_answers": web,
        "cache": {"hits": hits, "units_saved": saved},
        "failures": dict(sorted(failures.items(), key=lambda kv: (-kv[1], kv[0]))),
        "latency_ms": {"p50": call_p50, "p95": call_p95},
        "tiers": tier_block,
    }


def percentiles(values: list[float]) -> tuple[float | None, float | None]:
    """Nearest-rank p50 and p95 (values that occurred, never interpolated); None when empty."""
    if not values:
        return None, None
    ordered = sorted(values)
    n = len(ordered)
    return ordered[math.ceil(0.5 * n) - 1], ordered[math.ceil(0.95 * n) - 1]


def budgets(budget_units: dict[tuple[str, str], int], window: Window) -> list[dict[str, Any]]:
    """Per provider and report month: use against `monthly_limit`, daily burn, projection."""
    out = []
    as_of = window.as_of
    for provider in PROVIDERS:
        zone_name = window.reset_timezones.get(provider, "UTC")
        zone = _zone(zone_name)
        limit = window.monthly_limits.get(provider, 0)
        price = window.prices_per_1000.get(provider)
        for month in window.months:
            start = datetime(month.year, month.month, 1, tzinfo=zone)
            following = _next_month(month)
            end = datetime(following.year, following.month, 1, tzinfo=zone)
            span = end.timestamp() - start.timestamp()
            fraction = min(1.0, max(0.0, (as_of - start.timestamp()) / span))
            month_days = (following - month).days
            last_day = None
            if fraction > 0:
                moment = datetime.fromtimestamp(min(as_of, end.timestamp() - 1), zone)
                last_day = moment.date()
            daily = []
            used = 0
            reached_on = None
            for d in _days(month, following - timedelta(days=1)):
                units = budget_units.get((provider, d), 0)
                used += units
                if last_day is not None and d <= last_day.isoformat():
                    daily.append({"day": d, "units": units, "cumulative": used})
                if reached_on is None and used >= limit and used > 0:
                    reached_on = d
            projected = None
            projected_on = None
            if fraction >= 1:
                projected = used
            elif fraction > 0:
                projected = math.floor(used / fraction + 0.5)
                if reached_on is None and used > 0 and used / fraction > limit:
                    hit = start.timestamp() + (limit / used) * (as_of - start.timestamp())
                    projected_on = datetime.fromtimestamp(hit, zone).date().isoformat()
            out.append(
                {
                    "provider": provider,
                    "month": f"{month.year:04d}-{month.month:02d}",
                    "reset_timezone": zone_name,
                    "limit": limit,
                    "used": used,
                    "used_pct": _pct(used, limit),
                    "days_in_month": month_days,
                    "elapsed_days": round(fraction * month_days, 3),
                    "complete": fraction >= 1,
                    "projected": projected,
                    "projected_pct": None if projected is None else _pct(projected, limit),
                    "limit_reached_on": reached_on,
                    "projected_to_reach_on": projected_on,
                    "price_per_1000": price,
                    "cost_used": None if price is None else round(used * price / 1000, 2),
                    "cost_projected": (
                        None
                        if price is None or projected is None
                        else round(projected * price / 1000, 2)
                    ),
                    "daily": daily,
                }
            )
    return out


def build_report(
    directory: str, window: Window, files: FileStats | None = None, *, workers: int | None = None
) -> dict[str, Any]:
    """Read `directory` (a logs directory) for `window`; the report document.

    From PARALLEL_BYTES of logs on, a forked child reads half the files while this process reads
    the other half (`workers` 1 or 2 forces the choice); a child that fails is redone here.
    """
    files = files or FileStats()
    by_day = list_log_files(directory, files)
    first = window.first_file_day.isoformat()
    until = window.until.isoformat()
    todo = [(day, path) for day in sorted(by_day) if first <= day <= until for path in by_day[day]]
    if workers is None:
        workers = 2 if (os.cpu_count() or 1) > 1 and _size(todo) >= PARALLEL_BYTES else 1
    agg = Aggregator(window)
    if workers > 1 and len(todo) > 1 and hasattr(os, "fork"):
        mine, theirs = todo[0::2], todo[1::2]
        child = _Child.start(window, theirs)
        agg.read_files(mine, files)
        state = child.result() if child is not None else None
        if state is None:
            agg.read_files(theirs, files)
        else:
            agg.merge(*state, files)
    else:
        agg.read_files(todo, files)
    return agg.report(files, {day for day, _ in todo})


def _size(todo: list[tuple[str, str]]) -> int:
    total = 0
    for _, path in todo:
        try:
            total += os.stat(path).st_size
        except OSError:
            pass
    return total


class _Child:
    """A forked process that reads some files and sends back its counts, pickled, on a pipe."""

    def __init__(self, pid: int, fd: int) -> None:
        self.pid = pid
        self.fd = fd

    @classmethod
    def start(cls, window: Window, todo: list[tuple[str, str]]) -> _Child | None:
        try:
            read_end, write_end = os.pipe()
        except OSError:
            return None
        try:
            pid = os.fork()
        except OSError:
            os.close(read_end)
            os.close(write_end)
            return None
        if pid == 0:  # the child: never returns, never flushes the parent's buffers
            code = 1
            try:
                import pickle

                os.close(read_end)
                agg, stats = Aggregator(window), FileStats()
                agg.read_files(todo, stats)
                with os.fdopen(write_end, "wb") as out:
                    out.write(pickle.dumps((agg.state(), stats.read, stats.unreadable), 5))
                code = 0
            finally:
                os._exit(code)
        os.close(write_end)
        return cls(pid, read_end)

    def result(self) -> tuple[Any, ...] | None:
        """The child's (state, files read, files unreadable), or None if it failed."""
        import pickle

        with os.fdopen(self.fd, "rb") as pipe:
            data = pipe.read()
        _, status = os.waitpid(self.pid, 0)
        if status != 0 or not data:
            return None
        return pickle.loads(data)  # noqa: S301 - our own child, over our own pipe


# --- small helpers -------------------------------------------------------------------------


def _tier_name(att: dict[str, Any]) -> str:
    provider = att.get("provider")
    tier = _TIER_OF_PROVIDER.get(provider) if type(provider) is str else None
    if tier is not None:
        return tier
    engine = att.get("engine")
    if provider == "web_fetch":
        return engine if type(engine) is str and engine else "web_fetch"
    return provider if type(provider) is str and provider else "unknown"


def _units_by_agent(buckets: list[tuple[str, Bucket]]) -> dict[str, int]:
    units = {agent: sum(sum(row) for row in b.units.values()) for agent, b in buckets}
    return {agent: units[agent] for agent in sorted(units) if units[agent]}


def _tier_names(buckets: Iterable[Bucket]) -> list[str]:
    seen: set[str] = set()
    for b in buckets:
        seen.update(b.tiers)
    return [t for t in TIER_ORDER if t in seen] + sorted(seen - set(TIER_ORDER))


def _engine_names(buckets: Iterable[Bucket]) -> list[str]:
    seen: set[str] = set()
    for b in buckets:
        seen.update(b.web)
    return list(ENGINES) + sorted(seen - set(ENGINES))


# The code that reads log lines: it reads no field schemas/search-log.json lacks (a test checks).
LINE_READERS = (Aggregator.feed, Aggregator._line, _tier_name)


def _rate(part: int, whole: int) -> float | None:
    return round(part / whole, 4) if whole else None


def _pct(part: int, whole: int) -> float | None:
    return round(100 * part / whole, 1) if whole else None


def _zone(name: str | None) -> Any:
    if not name or name == "UTC":
        return UTC
    from zoneinfo import ZoneInfo

    return ZoneInfo(name)


def _day_start(day: date, zone_name: str | None) -> float:
    return datetime(day.year, day.month, day.day, tzinfo=_zone(zone_name)).timestamp()


def _parse_stamp(stamp: str) -> datetime | None:
    try:
        moment = datetime.fromisoformat(stamp)
    except ValueError:
        return None
    return moment if moment.tzinfo is not None else moment.replace(tzinfo=UTC)


def _days(first: date, last: date) -> list[str]:
    return [(first + timedelta(days=i)).isoformat() for i in range((last - first).days + 1)]


def _next_month(month: date) -> date:
    return date(month.year + month.month // 12, month.month % 12 + 1, 1)


def _months(since: date, until: date) -> list[date]:
    months = []
    month = date(since.year, since.month, 1)
    while month <= until:
        months.append(month)
        month = _next_month(month)
    return months


# --- rendering: shared tables --------------------------------------------------------------


class Table:
    """A titled grid of already formatted cells; the text and the HTML print exactly these."""

    def __init__(
        self,
        key: str,
        title: str,
        columns: list[str],
        rows: list[list[str]],
        note: str = "",
        align: str = "l",
        total: bool = False,
    ) -> None:
        self.key = key
        self.title = title
        self.columns = columns
        self.rows = rows
        self.note = note
        # one letter per leading column, l(eft) or r(ight); the rest are right-aligned numbers
        self.align = align
        self.total = total  # the last row is the totals row


_UNPRINTABLE = re.compile(r"[\x00-\x1f\x7f-\x9f\u2028\u2029]")


def label_of(text: str) -> str:
    """A name read from the logs, safe for a terminal and short: control characters become ?."""
    text = _UNPRINTABLE.sub("?", text)
    return text if len(text) <= 40 else text[:39] + "~"


def fmt_int(n: int | None) -> str:
    return "-" if n is None else f"{n:,}"


def fmt_rate(rate: float | None) -> str:
    return "-" if rate is None else f"{rate * 100:.1f}%"


def fmt_pct(pct: float | None) -> str:
    return "-" if pct is None else f"{pct:.1f}%"


def fmt_ms(ms: float | None) -> str:
    return "-" if ms is None else f"{ms:.0f}"


def fmt_money(value: float | None) -> str:
    return "-" if value is None else f"{value:,.2f}"


def _p50_p95(p50: float | None, p95: float | None) -> str:
    return "-" if p50 is None else f"{fmt_ms(p50)}/{fmt_ms(p95)}"


def report_tables(report: dict[str, Any]) -> list[Table]:
    """Every table of the report, in print order."""
    tables = [_summary_table(report), *_budget_tables(report), _tier_table(report)]
    tables.append(_failure_table(report))
    for dim, key, label in (("by_day", "day", "day"), ("by_agent", "agent_id", "agent")):
        rows = report[dim]
        tables.append(_searches_table(report, rows, key, label))
        tables.append(_units_table(report, rows, key, label))
        tables.append(_latency_table(report, rows, key, label))
        tables.append(_failures_by_table(rows, key, label))
    return tables


def _summary_table(report: dict[str, Any]) -> Table:
    t = report["totals"]
    lines = report["lines"]
    files = report["files"]
    reasons = ", ".join(
        f"{reason} {fmt_int(n)}" for reason, n in lines["skipped_by_reason"].items() if n
    )
    missing = files["missing_days"]
    shown = ", ".join(missing[:3]) + (", ..." if len(missing) > 3 else "")
    rows = [
        ["days", f"{report['since']} to {report['until']} ({report['days']}, "
                 f"{report['timezone']})"],
        ["agent", label_of(report["agent"] or "all")],
        ["searches", f"{fmt_int(t['searches'])} (ok {fmt_int(t['succeeded'])}, "
                     f"failed {fmt_int(t['failed'])}, deep {fmt_int(t['deep'])})"],
        ["fallback", f"{fmt_int(t['fallback']['count'])} ({fmt_rate(t['fallback']['rate'])})"],
        ["API units", ", ".join(
            f"{p} {fmt_int(t['units'][p]['total'])}" for p in t["units"]
        ) + f" (total {fmt_int(t['units_total'])})"],
        ["web answers", ", ".join(
            f"{label_of(e)} {fmt_int(n)}" for e, n in t["web_answers"].items()
        )],
        ["cache", f"{fmt_int(t['cache']['hits'])} hits, {fmt_int(t['cache']['units_saved'])} "
                  "units saved"],
        ["latency ms", f"p50/p95 {_p50_p95(t['latency_ms']['p50'], t['latency_ms']['p95'])}"],
        ["log lines", f"{fmt_int(lines['read'])} read, {fmt_int(lines['counted'])} counted, "
                      f"{fmt_int(lines['not_counted'])} outside the days or agent, "
                      f"{fmt_int(lines['skipped'])} skipped"],
        ["skipped", reasons or "none"],
        ["log files", f"{fmt_int(files['read'])} read of {fmt_int(files['matched'])}, "
                      f"{fmt_int(files['unreadable'])} unreadable, "
                      f"{fmt_int(files['ignored'])} other files"],
        ["days without logs", f"{fmt_int(files['days_without_logs'])}"
                              + (f" ({shown})" if missing else "")],
    ]  # fmt: skip
    return Table("summary", "Summary", ["", ""], rows)


def _budget_tables(report: dict[str, Any]) -> list[Table]:
    used_rows, projection_rows = [], []
    for b in report["budgets"]:
        used_rows.append(
            [
                b["provider"],
                b["month"],
                b["reset_timezone"],
                fmt_int(b["used"]),
                fmt_int(b["limit"]),
                fmt_pct(b["used_pct"]),
                f"{b['elapsed_days']:.1f} of {b['days_in_month']}",
                b["limit_reached_on"] or "-",
                fmt_money(b["cost_used"]),
            ]
        )
        projection_rows.append(
            [
                b["provider"],
                b["month"],
                fmt_int(b["projected"]),
                fmt_int(b["limit"]),
                fmt_pct(b["projected_pct"]),
                b["projected_to_reach_on"] or "-",
                fmt_money(b["cost_projected"]),
            ]
        )
    return [
        Table(
            "budgets",
            "Monthly budgets",
            ["provider", "month", "reset zone", "used", "budget", "used%", "days elapsed",
             "reached on", "cost"],
            used_rows,
            "all agents; each provider's month runs in its reset zone; cost at price_per_1000",
            align="lll",
        ),
        Table(
            "projections",
            "Projection to month end (at the month's rate so far)",
            ["provider", "month", "projected", "budget", "proj%", "would reach on", "proj. cost"],
            projection_rows,
            align="ll",
        ),
    ]  # fmt: skip


def _tier_table(report: dict[str, Any]) -> Table:
    columns = ["tier", "success", "failed", "skipped", "retries", "p50 ms", "p95 ms"]
    rows = []
    for tier, c in report["totals"]["tiers"].items():
        rows.append(
            [label_of(tier), fmt_int(c["success"]), fmt_int(c["failed"]), fmt_int(c["skipped"]),
             fmt_int(c["retries"]), fmt_ms(c["latency_p50_ms"]), fmt_ms(c["latency_p95_ms"])]
        )  # fmt: skip
    return Table("tiers", "Outcomes by tier", columns, rows)


def _failure_table(report: dict[str, Any]) -> Table:
    t = report["totals"]
    rows = [
        [label_of(code), fmt_int(n), fmt_rate(_rate(n, t["searches"]))]
        for code, n in t["failures"].items()
    ]
    return Table("failures", "Failures by error_code", ["error_code", "searches", "share"], rows)


def _searches_table(
    report: dict[str, Any], rows: list[dict[str, Any]], key: str, label: str
) -> Table:
    engines = report["engines"]
    columns = [label, "searches", "ok", "failed", "deep", "fallbk", "fallbk%",
               *map(label_of, engines),
               "cache", "saved"]  # fmt: skip

    def cells(name: str, s: dict[str, Any]) -> list[str]:
        return [
            name,
            fmt_int(s["searches"]),
            fmt_int(s["succeeded"]),
            fmt_int(s["failed"]),
            fmt_int(s["deep"]),
            fmt_int(s["fallback"]["count"]),
            fmt_rate(s["fallback"]["rate"]),
            *(fmt_int(s["web_answers"][e]) for e in engines),
            fmt_int(s["cache"]["hits"]),
            fmt_int(s["cache"]["units_saved"]),
        ]

    body = [cells(label_of(r[key]), r) for r in rows] + [cells("total", report["totals"])]
    return Table(f"{label}-searches", f"Searches by {label}", columns, body,
                 "web columns: answers by engine", total=True)  # fmt: skip


def _units_table(report: dict[str, Any], rows: list[dict[str, Any]], key: str, label: str) -> Table:
    units = report["totals"]["units"]
    other = any(units[p]["unattributed"] for p in units)
    short = {"agent_allocation": "alloc", "shared_pool": "pool", "provider_direct": "direct",
             "unattributed": "other"}  # fmt: skip
    sources = [s for s in SOURCES if s != "unattributed" or other]
    columns = [label]
    for p in units:
        columns += [p] + [f"{p[0]}.{short[s]}" for s in sources]
    columns.append("total")

    def cells(name: str, s: dict[str, Any]) -> list[str]:
        out = [name]
        for p in units:
            out += [fmt_int(s["units"][p]["total"])] + [fmt_int(s["units"][p][x]) for x in sources]
        return [*out, fmt_int(s["units_total"])]

    body = [cells(label_of(r[key]), r) for r in rows] + [cells("total", report["totals"])]
    note = "alloc: agent allocation, pool: shared pool, direct: provider headroom"
    return Table(f"{label}-units", f"API units by {label}", columns, body, note, total=True)


def _latency_table(
    report: dict[str, Any], rows: list[dict[str, Any]], key: str, label: str
) -> Table:
    tiers = report["tiers"]
    columns = [label, "call", *map(label_of, tiers)]

    def cells(name: str, s: dict[str, Any]) -> list[str]:
        out = [name, _p50_p95(s["latency_ms"]["p50"], s["latency_ms"]["p95"])]
        for tier in tiers:
            c = s["tiers"][tier]
            out.append(_p50_p95(c["latency_p50_ms"], c["latency_p95_ms"]))
        return out

    body = [cells(label_of(r[key]), r) for r in rows] + [cells("total", report["totals"])]
    return Table(f"{label}-latency", f"Latency by {label} (ms, p50/p95)", columns, body, total=True)


def _failures_by_table(rows: list[dict[str, Any]], key: str, label: str) -> Table:
    body = [
        [label_of(r[key]), label_of(code), fmt_int(n)]
        for r in rows
        for code, n in r["failures"].items()
    ]
    return Table(f"{label}-failures", f"Failures by {label}", [label, "error_code", "searches"],
                 body, align="ll")  # fmt: skip


# --- rendering: text -----------------------------------------------------------------------


def render_text(report: dict[str, Any], width: int = TEXT_WIDTH) -> str:
    """The report as plain text, every line at most `width` columns."""
    out = [
        _clip(f"smart-search report  {report['since']} to {report['until']}  "
              f"(agent: {report['agent'] or 'all'})", width),
        "",
    ]  # fmt: skip
    for table in report_tables(report):
        out.append(_clip(table.title, width))
        out.append(_clip("-" * len(table.title), width))
        if not table.rows:
            out.append("(none)")
        else:
            out.extend(_grid(table, width))
        if table.note:
            out.append(_clip(f"({table.note})", width))
        out.append("")
    return "\n".join(out)


def _grid(table: Table, width: int) -> list[str]:
    header = table.columns if any(table.columns) else None
    grid = ([header] if header else []) + table.rows
    widths = [max(len(row[i]) for row in grid) for i in range(len(table.columns))]
    # The first column (a day, an agent, a label) gives way when the line would pass `width`.
    rest = sum(widths[1:]) + 2 * (len(widths) - 1)
    widths[0] = max(8, min(widths[0], width - rest))
    lines = []
    for n, row in enumerate(grid):
        cells = []
        for i, cell in enumerate(row):
            if i == 0:
                cells.append(_clip(cell, widths[0]).ljust(widths[0]))
            elif header is None or (i < len(table.align) and table.align[i] == "l"):
                cells.append(cell.ljust(widths[i]))
            else:
                cells.append(cell.rjust(widths[i]))
        lines.append(_clip("  ".join(cells).rstrip(), width))
        if header and n == 0:
            lines.append(_clip("  ".join("-" * w for w in widths), width))
    return lines


def _clip(text: str, width: int) -> str:
    return text if len(text) <= width else text[: width - 1] + "~"


# --- rendering: HTML and SVG ---------------------------------------------------------------

COLORS = {
    "gemini": "#0072b2",
    "brave": "#e69f00",
    "success": "#009e73",
    "failed": "#d55e00",
    "skipped": "#9a9a9a",
    "limit": "#c0392b",
    "grid": "#e3e3e3",
    "axis": "#555555",
}
AGENT_COLORS = ("#0072b2", "#e69f00", "#009e73", "#cc79a7", "#56b4e9", "#d55e00", "#f0e442")
OTHER_COLOR = "#b0b0b0"
CHART_W, CHART_H = 920, 260
PAD_L, PAD_R, PAD_T, PAD_B = 60, 20, 34, 44


def _esc(text: Any) -> str:
    return (
        str(text)
        .replace("&", "&amp;")
        .replace("<", "&lt;")
        .replace(">", "&gt;")
        .replace('"', "&quot;")
    )


def _scale(value: float) -> tuple[int, int]:
    """(top, step) of a count axis: a 1, 2 or 5 × 10^k step, at most four steps to the top."""
    if value <= 0:
        return 4, 1
    step = 1
    while step * 4 < value:
        step = step * 5 // 2 if str(step)[0] == "2" else step * 2  # 1, 2, 5, 10, 20, 50, ...
    return step * math.ceil(value / step), step


def _svg_open(title: str, key: str, legend: list[tuple[str, str, str]]) -> list[str]:
    parts = [
        f'<svg class="chart" id="chart-{_esc(key)}" xmlns="http://www.w3.org/2000/svg" '
        f'width="{CHART_W}" height="{CHART_H}" viewBox="0 0 {CHART_W} {CHART_H}" role="img" '
        f'aria-label="{_esc(title)}">',
        f"<title>{_esc(title)}</title>",
        f'<text x="{PAD_L}" y="18" class="ct">{_esc(title)}</text>',
    ]
    x = CHART_W - PAD_R
    for label, color, dash in reversed(legend):
        x -= 12 + 7 * len(label) + 18
        if dash:
            parts.append(
                f'<line x1="{x}" y1="14" x2="{x + 12}" y2="14" stroke="{color}" '
                f'stroke-width="2" stroke-dasharray="{dash}"/>'
            )
        else:
            parts.append(f'<rect x="{x}" y="8" width="12" height="12" fill="{color}"/>')
        parts.append(f'<text x="{x + 16}" y="18" class="lg">{_esc(label)}</text>')
    return parts


def _y_axis(top: int, step: int, label: str) -> list[str]:
    plot_h = CHART_H - PAD_T - PAD_B
    parts = []
    for value in range(0, top + 1, step):
        y = CHART_H - PAD_B - plot_h * value / top
        parts.append(
            f'<line x1="{PAD_L}" y1="{y:.1f}" x2="{CHART_W - PAD_R}" y2="{y:.1f}" '
            f'stroke="{COLORS["grid"]}"/>'
        )
        text = f"{value:,.0f}"
        parts.append(f'<text x="{PAD_L - 6}" y="{y + 4:.1f}" class="yt">{text}</text>')
    parts.append(
        f'<text x="14" y="{PAD_T + plot_h / 2:.0f}" class="al" '
        f'transform="rotate(-90 14 {PAD_T + plot_h / 2:.0f})">{_esc(label)}</text>'
    )
    return parts


def _x_labels(labels: list[str], centers: list[float]) -> list[str]:
    every = max(1, math.ceil(len(labels) * 44 / (CHART_W - PAD_L - PAD_R)))
    return [
        f'<text x="{x:.1f}" y="{CHART_H - PAD_B + 16}" class="xt">{_esc(label)}</text>'
        for i, (label, x) in enumerate(zip(labels, centers, strict=True))
        if i % every == 0
    ]


def stacked_bars(
    key: str, title: str, labels: list[str], series: list[tuple[str, str, list[int]]], unit: str
) -> str:
    """Vertical stacked bars: one bar per label, one colored part per series."""
    totals = [sum(s[2][i] for s in series) for i in range(len(labels))]
    top, step = _scale(max(totals, default=0))
    plot_w = CHART_W - PAD_L - PAD_R
    plot_h = CHART_H - PAD_T - PAD_B
    slot = plot_w / max(1, len(labels))
    bar_w = max(1.0, slot * 0.7)
    parts = _svg_open(title, key, [(name, color, "") for name, color, _ in series])
    parts += _y_axis(top, step, unit)
    parts.append('<g class="plot">')
    centers = []
    for i, label in enumerate(labels):
        x = PAD_L + slot * i + (slot - bar_w) / 2
        centers.append(x + bar_w / 2)
        base = CHART_H - PAD_B
        for name, color, values in series:
            value = values[i]
            if value <= 0:
                continue
            h = plot_h * value / top
            base -= h
            parts.append(
                f'<rect x="{x:.1f}" y="{base:.1f}" width="{bar_w:.1f}" height="{h:.1f}" '
                f'fill="{color}"><title>{_esc(label)} {_esc(name)}: {value:,}</title></rect>'
            )
    parts.append("</g>")
    parts += _x_labels(labels, centers)
    parts.append(_axis_line())
    parts.append("</svg>")
    return "\n".join(parts)


def tier_bars(key: str, title: str, tiers: dict[str, dict[str, Any]]) -> str:
    """Horizontal stacked bars: per tier, attempts that succeeded, failed, were skipped."""
    names = list(tiers)
    totals = [sum(tiers[t][o] for o in OUTCOMES) for t in names]
    top = max(totals, default=0) or 1
    left = 110
    plot_w = CHART_W - left - PAD_R - 60
    plot_h = CHART_H - PAD_T - 20
    row = plot_h / max(1, len(names))
    bar_h = min(28.0, row * 0.7)
    parts = _svg_open(title, key, [(o, COLORS[o], "") for o in OUTCOMES])
    parts.append('<g class="plot">')
    for i, tier in enumerate(names):
        name = _esc(label_of(tier))
        y = PAD_T + row * i + (row - bar_h) / 2
        x = float(left)
        for outcome in OUTCOMES:
            n = tiers[tier][outcome]
            if n <= 0:
                continue
            w = plot_w * n / top
            parts.append(
                f'<rect x="{x:.1f}" y="{y:.1f}" width="{w:.1f}" height="{bar_h:.1f}" '
                f'fill="{COLORS[outcome]}"><title>{name} {outcome}: {n:,}</title></rect>'
            )
            x += w
        parts.append(
            f'<text x="{x + 6:.1f}" y="{y + bar_h / 2 + 4:.1f}" class="lg">{totals[i]:,}</text>'
        )
    parts.append("</g>")
    for i, tier in enumerate(names):
        y = PAD_T + row * i + row / 2 + 4
        parts.append(f'<text x="{left - 8}" y="{y:.1f}" class="yt">{_esc(label_of(tier))}</text>')
    if not names:
        parts.append(f'<text x="{left}" y="{PAD_T + 40}" class="lg">no attempts</text>')
    parts.append("</svg>")
    return "\n".join(parts)


def burn_down(key: str, budget: dict[str, Any]) -> str:
    """Cumulative units over the month, the budget line, and the projection to month end."""
    days = budget["days_in_month"]
    used, limit, projected = budget["used"], budget["limit"], budget["projected"]
    top, step = _scale(max(used, limit, projected or 0) * 1.05)
    plot_w = CHART_W - PAD_L - PAD_R
    plot_h = CHART_H - PAD_T - PAD_B

    def px(day: float) -> str:
        return f"{PAD_L + plot_w * day / days:.1f}"

    def py(units: float) -> str:
        return f"{CHART_H - PAD_B - plot_h * units / top:.1f}"

    title = (
        f"{budget['provider']} {budget['month']} ({budget['reset_timezone']}): "
        f"{used:,} of {limit:,} units"
    )
    color = COLORS[budget["provider"]]
    legend = [("used", color, ""), ("projection", "#333333", "6 4"),
              ("budget", COLORS["limit"], "2 3")]  # fmt: skip
    parts = _svg_open(title, key, legend)
    parts += _y_axis(top, step, "units")
    parts.append('<g class="plot">')
    daily = budget["daily"]
    points = [f"{px(0)},{py(0)}"]
    # A day's point sits at its end, or at the report's moment for the day still running.
    elapsed = budget["elapsed_days"]
    points += [f"{px(min(i + 1, elapsed))},{py(d['cumulative'])}" for i, d in enumerate(daily)]
    area = " ".join([*points, f"{px(min(len(daily), elapsed))},{py(0)}"])
    parts.append(f'<polygon points="{area}" fill="{color}" fill-opacity="0.18"/>')
    parts.append(
        f'<polyline points="{" ".join(points)}" fill="none" stroke="{color}" '
        f'stroke-width="2.5"><title>used: {used:,}</title></polyline>'
    )
    if projected is not None and not budget["complete"]:
        parts.append(
            f'<line x1="{px(budget["elapsed_days"])}" y1="{py(used)}" x2="{px(days)}" '
            f'y2="{py(projected)}" stroke="#333333" stroke-width="2" stroke-dasharray="6 4">'
            f"<title>projected: {projected:,}</title></line>"
        )
    parts.append(
        f'<line x1="{PAD_L}" y1="{py(limit)}" x2="{CHART_W - PAD_R}" y2="{py(limit)}" '
        f'stroke="{COLORS["limit"]}" stroke-width="2" stroke-dasharray="2 3">'
        f"<title>budget: {limit:,}</title></line>"
    )
    parts.append("</g>")
    labels = [str(i) for i in range(1, days + 1)]
    centers = [PAD_L + plot_w * (i + 0.5) / days for i in range(days)]
    parts += _x_labels(labels, centers)
    parts.append(_axis_line())
    parts.append("</svg>")
    return "\n".join(parts)


def _axis_line() -> str:
    return (
        f'<line x1="{PAD_L}" y1="{CHART_H - PAD_B}" x2="{CHART_W - PAD_R}" '
        f'y2="{CHART_H - PAD_B}" stroke="{COLORS["axis"]}"/>'
    )


def report_charts(report: dict[str, Any]) -> list[str]:
    """The page's charts, as SVG strings."""
    days = report["by_day"]
    labels = [d["day"][5:] for d in days]
    charts = [
        stacked_bars(
            "units-by-provider",
            "API units per day, by provider",
            labels,
            [(p, COLORS[p], [d["units"][p]["total"] for d in days]) for p in PROVIDERS],
            "units",
        )
    ]
    agents = sorted(report["by_agent"], key=lambda a: (-a["units_total"], a["agent_id"]))
    top = [a["agent_id"] for a in agents[: len(AGENT_COLORS)] if a["units_total"] > 0]
    per_day: dict[str, list[int]] = {a: [0] * len(days) for a in top}
    others = [0] * len(days)
    for i, d in enumerate(days):
        for agent, units in d["units_by_agent"].items():
            if agent in per_day:
                per_day[agent][i] += units
            else:
                others[i] += units
    series = [(label_of(a), AGENT_COLORS[n], per_day[a]) for n, a in enumerate(top)]
    if any(others):
        series.append(("other agents", OTHER_COLOR, others))
    charts.append(stacked_bars("units-by-agent", "API units per day, by agent", labels, series,
                               "units"))  # fmt: skip
    charts.append(tier_bars("outcomes-by-tier", "Attempts by tier and outcome",
                            report["totals"]["tiers"]))  # fmt: skip
    for b in report["budgets"]:
        charts.append(burn_down(f"burn-{b['provider']}-{b['month']}", b))
    return charts


_CSS = """
body{font:14px/1.4 system-ui,-apple-system,"Segoe UI",Roboto,sans-serif;color:#222;
background:#fff;margin:0;padding:24px 32px;max-width:1000px}
h1{font-size:22px;margin:0 0 4px}h2{font-size:17px;margin:28px 0 6px}
.meta{color:#555;margin:0 0 16px}.note{color:#666;font-size:12px;margin:4px 0 0}
figure{margin:0 0 18px}svg.chart{max-width:100%;height:auto;display:block}
svg .ct{font-size:14px;font-weight:600;fill:#222}svg .lg{font-size:12px;fill:#333}
svg .yt{font-size:11px;fill:#555;text-anchor:end}svg .xt{font-size:11px;fill:#555;
text-anchor:middle}svg .al{font-size:11px;fill:#555;text-anchor:middle}
table{border-collapse:collapse;font-variant-numeric:tabular-nums;font-size:13px}
th,td{padding:3px 9px;border-bottom:1px solid #e6e6e6;text-align:right;white-space:nowrap}
th.l,td.l{text-align:left}th{background:#f4f4f4;font-weight:600}
tr.total td{font-weight:600;border-top:2px solid #bbb}
"""


_LEFT = ' class="l"'


def render_html(report: dict[str, Any]) -> str:
    """One self-contained page: no script, no external resource (its CSP forbids any)."""
    title = f"smart-search report {report['since']} to {report['until']}"
    parts = [
        "<!DOCTYPE html>",
        '<html lang="en"><head><meta charset="utf-8">',
        '<meta http-equiv="Content-Security-Policy" content="default-src \'none\'; '
        "style-src 'unsafe-inline'\">",
        '<meta name="viewport" content="width=device-width, initial-scale=1">',
        f"<title>{_esc(title)}</title><style>{_CSS}</style></head><body>",
        f"<h1>{_esc(title)}</h1>",
        f'<p class="meta">agent: {_esc(report["agent"] or "all")} · ledger days in '
        f"{_esc(report['timezone'])} · generated {_esc(report['generated_at'])}</p>",
        '<section id="charts">',
    ]
    for svg in report_charts(report):
        parts.append(f"<figure>{svg}</figure>")
    parts.append("</section>")
    for table in report_tables(report):
        parts.append(f'<section class="table" id="table-{_esc(table.key)}">')
        parts.append(f"<h2>{_esc(table.title)}</h2>")
        if not table.rows:
            parts.append("<p>(none)</p>")
        else:
            parts.append(f'<table data-key="{_esc(table.key)}">')
            left = [
                not any(table.columns) or (i < len(table.align) and table.align[i] == "l")
                for i in range(len(table.columns))
            ]
            if any(table.columns):
                header = "".join(
                    f"<th{_LEFT if left[i] else ''}>{_esc(c)}</th>"
                    for i, c in enumerate(table.columns)
                )
                parts.append(f"<thead><tr>{header}</tr></thead>")
            parts.append("<tbody>")
            for n, row in enumerate(table.rows):
                css = ' class="total"' if table.total and n == len(table.rows) - 1 else ""
                cells = "".join(
                    f"<td{_LEFT if left[i] else ''}>{_esc(c)}</td>" for i, c in enumerate(row)
                )
                parts.append(f"<tr{css}>{cells}</tr>")
            parts.append("</tbody></table>")
        if table.note:
            parts.append(f'<p class="note">{_esc(table.note)}</p>')
        parts.append("</section>")
    parts.append("</body></html>\n")
    return "\n".join(parts)


# --- command line --------------------------------------------------------------------------

USAGE = (
    "smart-search report [--days N | --since DATE [--until DATE]] [--agent ID] [--json] "
    "[--html FILE] [--state-dir DIR]"
)


def _parser() -> Any:
    import argparse

    parser = argparse.ArgumentParser(
        prog="smart-search report",
        usage=USAGE,
        description="Where the search budget went, from the JSONL search logs.",
    )
    parser.add_argument("--days", type=_positive_days, help=f"last N days (default {DEFAULT_DAYS})")
    parser.add_argument("--since", type=_iso_date, help="first day, YYYY-MM-DD")
    parser.add_argument("--until", type=_iso_date, help="last day, YYYY-MM-DD (default today)")
    parser.add_argument("--agent", type=_agent_id, help="only this agent's searches")
    parser.add_argument("--json", action="store_true", help="the report as JSON")
    parser.add_argument("--html", metavar="FILE", help="also write the report as an HTML page")
    parser.add_argument("--state-dir", metavar="DIR", help="read this state directory's logs")
    return parser


def _positive_days(text: str) -> int:
    import argparse

    try:
        n = int(text)
    except ValueError:
        n = 0
    if not 1 <= n <= MAX_DAYS:
        raise argparse.ArgumentTypeError(f"must be a whole number from 1 to {MAX_DAYS}")
    return n


def _iso_date(text: str) -> date:
    import argparse

    if not re.fullmatch(r"\d{4}-\d{2}-\d{2}", text):
        raise argparse.ArgumentTypeError(f"{text[:40]!r} is not a date like 2026-11-30")
    try:
        return date.fromisoformat(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a real date") from None


def _agent_id(text: str) -> str:
    import argparse

    if not _AGENT_ID.fullmatch(text):
        raise argparse.ArgumentTypeError("must contain only lowercase letters, numbers, hyphens")
    return text


def resolve_days(
    days: int | None, since: date | None, until: date | None, today: date
) -> tuple[date, date]:
    """The report's first and last day from the options (ValueError says what is wrong)."""
    if days is not None and (since is not None or until is not None):
        raise ValueError("--days cannot be combined with --since or --until")
    if since is None and until is None:
        n = days or DEFAULT_DAYS
        return today - timedelta(days=n - 1), today
    if since is None:
        assert until is not None
        return until - timedelta(days=DEFAULT_DAYS - 1), until
    until = until or today
    if since > until:
        raise ValueError(f"--since {since} is after --until {until}")
    if (until - since).days >= MAX_DAYS:
        raise ValueError(f"the report covers at most {MAX_DAYS} days")
    return since, until


def main(argv: list[str], *, now: float | None = None) -> int:
    """`smart-search report ...`: 0 on success, 1 when the report cannot be made, 2 on usage."""
    parser = _parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as stop:  # argparse has printed usage and the error (or --help)
        return int(stop.code or 0)
    try:
        return _run(args, parser, now)
    except ReportError as err:
        sys.stderr.write(f"smart-search report: {err}\n")
        return 1
    except BrokenPipeError:
        # `smart-search report | head`: the reader has what it wanted; say nothing more.
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return 0


def _run(args: Any, parser: Any, now: float | None) -> int:
    from .config import load_settings
    from .errors import ConfigError
    from .ledger import today

    try:
        settings = load_settings(os.environ)
    except ConfigError as err:
        raise ReportError(err.message) from None
    now = time.time() if now is None else now
    try:
        since, until = resolve_days(
            args.days, args.since, args.until, date.fromisoformat(today(settings, now))
        )
        if since.year < 2 or until.year > 9998:
            raise OverflowError
    except (ValueError, OverflowError) as err:
        why = "dates must fall between the years 2 and 9998" if type(err) is OverflowError else err
        parser.print_usage(sys.stderr)
        sys.stderr.write(f"smart-search report: error: {why}\n")
        return 2
    state_dir = os.path.expanduser(args.state_dir) if args.state_dir else settings.state_dir
    if not os.path.isdir(state_dir):
        what = "is not a directory" if os.path.exists(state_dir) else "does not exist"
        raise ReportError(
            f"state directory {state_dir} {what} (set SMART_SEARCH_STATE_DIR or --state-dir)"
        )
    window = Window(
        since,
        until,
        agent=args.agent,
        ledger_timezone=settings.timezone,
        monthly_limits=settings.monthly_limits,
        reset_timezones=settings.reset_timezones,
        prices_per_1000=settings.prices_per_1000,
        now=now,
    )
    from .logs import log_dir

    directory = log_dir(state_dir)
    if os.path.exists(directory) and not os.path.isdir(directory):
        raise ReportError(f"log directory {directory} is not a directory")
    try:
        report = build_report(directory, window)
    except OSError as err:
        raise ReportError(f"cannot read log directory {directory}: {err.strerror}") from None
    if args.html:
        _write_page(args.html, render_html(report))
    out = sys.stdout
    if args.json:
        out.write(orjson.dumps(report, option=orjson.OPT_INDENT_2).decode() + "\n")
    else:
        out.write(render_text(report))
    out.flush()
    return 0


def _write_page(path: str, page: str) -> None:
    """Write the page whole or not at all (temp file, then rename)."""
    target = os.path.abspath(os.path.expanduser(path))
    temp = f"{target}.{os.getpid()}.tmp"
    try:
        with open(temp, "w", encoding="utf-8") as fh:
            fh.write(page)
        os.replace(temp, target)
    except OSError as err:
        try:
            os.remove(temp)
        except OSError:
            pass
        raise ReportError(f"cannot write {path}: {err.strerror or err}") from None
