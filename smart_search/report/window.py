"""The report's window (its days, agent filter and the budgets' clocks) and the calendar
arithmetic it needs: zones, day starts, months."""

from __future__ import annotations

import time
from datetime import UTC, date, datetime, timedelta
from typing import Any

from smart_search.host.config import DEFAULT_MONTHLY_LIMITS, DEFAULT_RESET_TIMEZONES


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
        self.months = months_between(since, until)
        # Budgets need each month from its first day (two days of slack for the providers'
        # clocks against the ledger's); nothing after `until` is read.
        self.first_file_day = min(since, self.months[0] - timedelta(days=2))

    @property
    def as_of(self) -> float:
        """The moment the report describes: the end of `until` (ledger clock), or now if sooner."""
        end = day_start(self.until + timedelta(days=1), self.ledger_timezone)
        return min(self.now, end)


def zone_of(name: str | None) -> Any:
    if not name or name == "UTC":
        return UTC
    from zoneinfo import ZoneInfo

    return ZoneInfo(name)


def day_start(day: date, zone_name: str | None) -> float:
    return datetime(day.year, day.month, day.day, tzinfo=zone_of(zone_name)).timestamp()


def parse_stamp(stamp: str) -> datetime | None:
    try:
        moment = datetime.fromisoformat(stamp)
    except ValueError:
        return None
    return moment if moment.tzinfo is not None else moment.replace(tzinfo=UTC)


def days_between(first: date, last: date) -> list[str]:
    return [(first + timedelta(days=i)).isoformat() for i in range((last - first).days + 1)]


def next_month(month: date) -> date:
    return date(month.year + month.month // 12, month.month % 12 + 1, 1)


def months_between(since: date, until: date) -> list[date]:
    months = []
    month = date(since.year, since.month, 1)
    while month <= until:
        months.append(month)
        month = next_month(month)
    return months
