"""The retry policy on a fake clock: what is retried, how long it waits, when it gives up."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from hypothesis import given
from hypothesis import strategies as st

from smart_search import errors
from smart_search.sources.providers import brave
from smart_search.sources.retry import run_with_retries


class FakeClock:
    """time.monotonic + time.sleep that only move when slept."""

    def __init__(self) -> None:
        self.now = 1000.0
        self.sleeps: list[float] = []
        self.sleep_ends: list[float] = []

    def __call__(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        assert seconds >= 0
        self.sleeps.append(seconds)
        self.now += seconds
        self.sleep_ends.append(self.now)


def scripted(*outcomes: object) -> tuple[Callable[[], object], list[int]]:
    """An attempt that raises or returns each outcome in turn, and a call counter."""
    calls = [0]

    def attempt() -> object:
        outcome = outcomes[min(calls[0], len(outcomes) - 1)]
        calls[0] += 1
        if isinstance(outcome, BaseException):
            raise outcome
        return outcome

    return attempt, calls


def run(
    attempt: Callable[[], object],
    clock: FakeClock,
    *,
    max_attempts: int = 3,
    base_delay_ms: float = 500,
    budget: float = 30.0,
    rand: Callable[[], float] = lambda: 0.5,
    may_retry: Callable[[], bool] = lambda: True,
) -> tuple[object, int]:
    """(result, retries) on success; the error the loop ended with is raised, and its retry
    count is left in `ENDED` (the loop returns it beside the error, never on it)."""
    result, error, retries = run_with_retries(
        attempt,
        max_attempts=max_attempts,
        base_delay_ms=base_delay_ms,
        deadline=clock.now + budget,
        sleep=clock.sleep,
        rand=rand,
        clock=clock,
        may_retry=may_retry,
    )
    ENDED.append(retries)
    if error is not None:
        raise error
    return result, retries


ENDED: list[int] = []


def test_first_success_makes_no_retry() -> None:
    clock = FakeClock()
    attempt, calls = scripted("ok")
    assert run(attempt, clock) == ("ok", 0)
    assert calls[0] == 1 and clock.sleeps == []


def test_retries_overload_then_succeeds_with_growing_backoff() -> None:
    clock = FakeClock()
    attempt, calls = scripted(
        errors.ProviderOverloaded("x"), errors.ServerError("y"), errors.Timeout("z"), "ok"
    )
    assert run(attempt, clock, max_attempts=4, rand=lambda: 1.0) == ("ok", 3)
    assert calls[0] == 4
    # Ceiling doubles from the base delay: 0.5 s, 1 s, 2 s (rand() = 1 gives the ceiling).
    assert clock.sleeps == pytest.approx([0.5, 1.0, 2.0])


def test_jitter_keeps_at_least_half_the_backoff() -> None:
    clock = FakeClock()
    attempt, _ = scripted(errors.TransportFailure("x"), errors.TransportFailure("x"), "ok")
    run(attempt, clock, rand=lambda: 0.0)
    assert clock.sleeps == pytest.approx([0.25, 0.5])


@pytest.mark.parametrize(
    "error",
    [
        errors.AuthFailed("Gemini API error: 400", http_status=400),
        errors.ModelUnavailable("Gemini model m is unavailable.", http_status=404),
        errors.AuthFailed("Brave API error: 422", http_status=422),
        errors.QuotaExhausted("Gemini API error: 429", http_status=429, retry_after=1),
        errors.NoResults(brave.EMPTY),
        errors.ParseError("bad shape"),
    ],
    ids=lambda e: type(e).__name__,
)
def test_what_cannot_heal_is_raised_at_once(error: errors.SearchError) -> None:
    clock = FakeClock()
    attempt, calls = scripted(error, "ok")
    with pytest.raises(type(error)) as caught:
        run(attempt, clock)
    assert caught.value is error
    assert ENDED[-1] == 0
    assert calls[0] == 1 and clock.sleeps == []


def test_max_attempts_counts_the_first_attempt() -> None:
    clock = FakeClock()
    attempt, calls = scripted(errors.ServerError("boom"))
    with pytest.raises(errors.ServerError):
        run(attempt, clock, max_attempts=3)
    assert calls[0] == 3
    assert ENDED[-1] == 2


def test_one_attempt_means_no_retry() -> None:
    clock = FakeClock()
    attempt, calls = scripted(errors.Timeout("slow"), "ok")
    with pytest.raises(errors.Timeout):
        run(attempt, clock, max_attempts=1)
    assert calls[0] == 1


def test_last_error_is_the_one_raised() -> None:
    clock = FakeClock()
    last = errors.Timeout("third")
    attempt, _ = scripted(errors.ServerError("first"), errors.TransportFailure("second"), last)
    with pytest.raises(errors.Timeout) as caught:
        run(attempt, clock)
    assert caught.value is last


def test_retry_after_is_honoured_when_it_fits() -> None:
    clock = FakeClock()
    attempt, _ = scripted(errors.RateLimited("429", retry_after=7.5), "ok")
    assert run(attempt, clock, budget=30) == ("ok", 1)
    assert clock.sleeps == [7.5]


def test_retry_after_that_does_not_fit_stops_at_once() -> None:
    clock = FakeClock()
    attempt, calls = scripted(errors.RateLimited("429", retry_after=21), "ok")
    with pytest.raises(errors.RateLimited):
        run(attempt, clock, budget=20)
    assert clock.sleeps == [] and calls[0] == 1
    assert ENDED[-1] == 0


def test_backoff_that_does_not_fit_stops_at_once() -> None:
    clock = FakeClock()
    attempt, calls = scripted(errors.ServerError("500"), "ok")
    with pytest.raises(errors.ServerError):
        run(attempt, clock, base_delay_ms=5000, budget=2, rand=lambda: 0.0)
    assert clock.sleeps == [] and calls[0] == 1


def test_time_spent_in_attempts_counts_against_the_deadline() -> None:
    clock = FakeClock()

    def slow_failure() -> object:
        clock.now += 9  # each attempt eats 9 s of a 15 s budget
        raise errors.Timeout("slow")

    with pytest.raises(errors.Timeout):
        run(slow_failure, clock, max_attempts=10, budget=15, base_delay_ms=100)
    assert ENDED[-1] == 1


def test_a_bug_is_not_retried() -> None:
    clock = FakeClock()
    attempt, calls = scripted(KeyError("bug"), "ok")
    with pytest.raises(KeyError):
        run(attempt, clock)
    assert calls[0] == 1


@given(
    st.lists(
        st.one_of(
            st.builds(errors.ServerError, st.just("5xx")),
            st.builds(errors.Timeout, st.just("slow")),
            st.builds(
                errors.RateLimited,
                st.just("429"),
                retry_after=st.none() | st.floats(min_value=0, max_value=60),
            ),
        ),
        min_size=1,
        max_size=12,
    ),
    st.integers(min_value=1, max_value=10),
    st.integers(min_value=0, max_value=5000),
    st.floats(min_value=0.0, max_value=60.0),
    st.floats(min_value=0.0, max_value=1.0),
    st.floats(min_value=0.0, max_value=5.0),
)
def test_never_sleeps_past_the_deadline_nor_beyond_max_attempts(
    failures: list[errors.SearchError],
    max_attempts: int,
    base_delay_ms: int,
    budget: float,
    jitter: float,
    attempt_cost: float,
) -> None:
    clock = FakeClock()
    deadline = clock.now + budget
    calls = [0]

    def attempt() -> object:
        calls[0] += 1
        clock.now += attempt_cost
        if calls[0] <= len(failures):
            raise failures[calls[0] - 1]
        return "ok"

    _, _, retries = run_with_retries(
        attempt,
        max_attempts=max_attempts,
        base_delay_ms=base_delay_ms,
        deadline=deadline,
        sleep=clock.sleep,
        rand=lambda: jitter,
        clock=clock,
    )
    assert calls[0] <= max_attempts
    assert retries == calls[0] - 1
    assert len(clock.sleeps) <= retries  # a zero wait retries without sleeping
    # Every sleep ended before the deadline: no wait was spent on time that was not there.
    assert all(end < deadline for end in clock.sleep_ends)


def test_a_closed_quota_gate_ends_the_retrying_before_any_sleep() -> None:
    """`may_retry` is asked last, once per retry: a retry after an attempt that may have been
    billed needs a unit of its own, and without one nothing more is sent."""
    clock = FakeClock()
    attempt, calls = scripted(errors.ServerError("boom"), errors.ServerError("boom"), "ok")
    asked: list[int] = []
    gate = iter([True, False])

    def may_retry() -> bool:
        asked.append(calls[0])
        return next(gate)

    with pytest.raises(errors.ServerError):
        run(attempt, clock, max_attempts=5, may_retry=may_retry)
    assert calls[0] == 2 and asked == [1, 2]
    assert ENDED[-1] == 1 and len(clock.sleeps) == 1
