"""Monthly budgets: per provider and report month, the units used against `monthly_limit` on the
provider's own clock (its `reset_timezone`), the daily burn, and the projection to month end.

Every agent counts (the budget is the provider's), also under `--agent`.
"""

from __future__ import annotations

import math
from datetime import date, datetime, timedelta
from typing import Any

from smart_search.host.config import PROVIDERS
from smart_search.report.window import Window, days_between, next_month, zone_of


def budgets(budget_units: dict[tuple[str, str], int], window: Window) -> list[dict[str, Any]]:
    """Per provider and report month: use against `monthly_limit`, daily burn, projection."""
    out = []
    for provider in PROVIDERS:
        for month in window.months:
            out.append(_month_budget(provider, month, budget_units, window))
    return out


def _month_budget(
    provider: str, month: date, budget_units: dict[tuple[str, str], int], window: Window
) -> dict[str, Any]:
    as_of = window.as_of
    zone_name = window.reset_timezones.get(provider, "UTC")
    zone = zone_of(zone_name)
    limit = window.monthly_limits.get(provider, 0)
    price = window.prices_per_1000.get(provider)
    start = datetime(month.year, month.month, 1, tzinfo=zone)
    following = next_month(month)
    end = datetime(following.year, following.month, 1, tzinfo=zone)
    span = end.timestamp() - start.timestamp()
    fraction = min(1.0, max(0.0, (as_of - start.timestamp()) / span))
    month_days = (following - month).days
    last_day = None
    if fraction > 0:
        last_day = datetime.fromtimestamp(min(as_of, end.timestamp() - 1), zone).date()
    daily, used, reached_on = _burn(provider, month, following, limit, last_day, budget_units)
    projected = None
    projected_on = None
    if fraction >= 1:
        projected = used
    elif fraction > 0:
        projected = math.floor(used / fraction + 0.5)
        if reached_on is None and used > 0 and used / fraction > limit:
            hit = start.timestamp() + (limit / used) * (as_of - start.timestamp())
            projected_on = datetime.fromtimestamp(hit, zone).date().isoformat()
    return {
        "provider": provider,
        "month": f"{month.year:04d}-{month.month:02d}",
        "reset_timezone": zone_name,
        "limit": limit,
        "used": used,
        "used_pct": pct(used, limit),
        "days_in_month": month_days,
        "elapsed_days": round(fraction * month_days, 3),
        "complete": fraction >= 1,
        "projected": projected,
        "projected_pct": None if projected is None else pct(projected, limit),
        "limit_reached_on": reached_on,
        "projected_to_reach_on": projected_on,
        "price_per_1000": price,
        "cost_used": None if price is None else round(used * price / 1000, 2),
        "cost_projected": (
            None if price is None or projected is None else round(projected * price / 1000, 2)
        ),
        "daily": daily,
    }


def _burn(
    provider: str,
    month: date,
    following: date,
    limit: int,
    last_day: date | None,
    budget_units: dict[tuple[str, str], int],
) -> tuple[list[dict[str, Any]], int, str | None]:
    """(the daily points up to `last_day`, units used in the month, the day the limit was met)."""
    daily = []
    used = 0
    reached_on = None
    for d in days_between(month, following - timedelta(days=1)):
        units = budget_units.get((provider, d), 0)
        used += units
        if last_day is not None and d <= last_day.isoformat():
            daily.append({"day": d, "units": units, "cumulative": used})
        if reached_on is None and used >= limit and used > 0:
            reached_on = d
    return daily, used, reached_on


def pct(part: int, whole: int) -> float | None:
    return round(100 * part / whole, 1) if whole else None
