"""The one UTC timestamp format smart-search writes (log lines, exports, cache and report dates):
ISO 8601 with a `Z`, `2026-12-01T19:57:13Z`, or with milliseconds, `2026-12-01T19:57:13.042Z`."""

from __future__ import annotations

import time


def utc_stamp(moment: float | None = None, *, millis: bool = False) -> str:
    """`moment` (seconds since the epoch; now when None) as a UTC ISO 8601 stamp."""
    moment = time.time() if moment is None else moment
    whole = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(moment))
    return f"{whole}.{int(moment * 1000) % 1000:03d}Z" if millis else f"{whole}Z"
