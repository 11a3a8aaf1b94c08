"""Retrying one provider call inside the call's time budget (RULINGS 5).

Pure policy: the attempt, the sleep, the clock and the jitter source are all injected, so the
rules are tested without a network or a real clock.

- Only errors whose `retryable` flag is set are retried (timeouts, transport, 5xx, 429 short).
- The wait is the server's `retry_after` when it gave one, else exponential backoff from
  `base_delay_ms` with "equal jitter" (half fixed, half random), so concurrent agents spread out
  but never retry instantly.
- A wait that would not leave `min_attempt_s` before the deadline ends the retrying at once:
  sleeping until the deadline only to time out would replace the real error with a timeout.
- `max_attempts` counts every attempt, the first included (RULINGS 1).
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable
from typing import TypeVar

from smart_search.errors import SearchError

T = TypeVar("T")

# A retry is worth making only if this much time is left for it after the wait.
MIN_ATTEMPT_S = 0.2


def run_with_retries(
    attempt: Callable[[], T],
    *,
    max_attempts: int,
    base_delay_ms: float,
    deadline: float,
    sleep: Callable[[float], object] = time.sleep,
    rand: Callable[[], float] = random.random,
    clock: Callable[[], float] = time.monotonic,
    min_attempt_s: float = MIN_ATTEMPT_S,
    may_retry: Callable[[], bool] = lambda: True,
) -> tuple[T | None, SearchError | None, int]:
    """Call `attempt` until it succeeds: `(result, None, retries made)`, or `(None, the last
    error, retries made)` once nothing is left to try.

    `may_retry` is asked last, before each retry (the quota gate: a retry after an attempt that
    may have been billed needs a unit of its own). Anything that is not a `SearchError` is a bug
    and propagates untouched, without a retry.
    """
    retries = 0
    while True:
        try:
            return attempt(), None, retries
        except SearchError as err:
            wait = backoff_seconds(err, retries, base_delay_ms, rand)
            out_of_attempts = retries + 1 >= max_attempts
            if not err.retryable or out_of_attempts or clock() + wait + min_attempt_s > deadline:
                return None, err, retries
            if not may_retry():
                return None, err, retries
            if wait > 0:
                sleep(wait)
            retries += 1


def backoff_seconds(
    err: SearchError, retries: int, base_delay_ms: float, rand: Callable[[], float]
) -> float:
    """How long to wait before retry number `retries + 1`."""
    if err.retry_after is not None:
        return max(0.0, float(err.retry_after))
    ceiling = base_delay_ms / 1000.0 * (2**retries)
    return ceiling / 2 + ceiling / 2 * rand()
