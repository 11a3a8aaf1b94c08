"""One API call for the tier walk: `call_provider` builds, sends, parses and retries through the
provider's module, and records what was billed; `provider_module` finds it in the registry."""

from __future__ import annotations

import time
from collections.abc import Callable
from types import ModuleType
from typing import TYPE_CHECKING, Any, NamedTuple

from smart_search import errors
from smart_search.sources import cancel
from smart_search.sources.providers.parsing import Answer  # re-exported: what a provider found

if TYPE_CHECKING:
    from smart_search.host.config import Settings
    from smart_search.sources.http import HttpResponse

__all__ = ["Answer", "ProviderCall", "call_provider", "provider_module"]

# The most requests one attempt sends when a provider's `follow_up` asks for more: the last
# answer is parsed as it is (a provider still asking for a tool round is an empty answer).
MAX_EXCHANGES = 3


class ProviderCall(NamedTuple):
    """Everything one API tier's call produced: the answer or the error it ended with, and the
    telemetry and billing facts the tier walk records (nothing is written onto exceptions)."""

    answer: Answer | None
    error: errors.SearchError | None
    retries: int
    attempt_latencies_ms: list[int]
    units: int  # what the provider billed for every attempt (the ledger settles to this)
    http_status: int | None  # of the last response read, None when none was
    observation: dict[str, Any] | None  # what the provider said about our quota, if anything


def call_provider(
    name: str,
    query: str,
    settings: Settings,
    deadline: float,
    *,
    may_retry: Callable[[int], bool] = lambda billed: True,
    sleep: Callable[[float], object] = cancel.sleep,
    filters: dict[str, Any] | None = None,
) -> ProviderCall:
    """Search `name` ("gemini" | "brave") for `query` (already fitted to the provider), retrying
    what can heal, by `deadline`. Never raises a `SearchError`: the record says how it ended.

    Billing (RULINGS 4, the billing issue): an attempt answered 2xx costs what the provider
    bills for it (`billed_units`); a non-2xx costs nothing; an attempt whose request left but
    whose answer never came back (read timeout, reset) costs its worst case
    (`max_units_per_call`), since the provider may have billed that much; one that never left
    (DNS, refused, connect timeout) costs nothing. `may_retry(units billed so far)` is asked
    before each retry. `filters` (issue 15) go into
    the request through the provider's `build_request`.
    """
    from smart_search.sources import http
    from smart_search.sources.retry import run_with_retries

    module = provider_module(name)
    request = module.build_request(query, settings, filters=filters)
    latencies: list[int] = []
    worst = max(1, settings.max_units_per_call.get(name, 1))
    billed = [0]
    last: list[HttpResponse] = []
    # A provider whose answer takes more than one exchange (a tool call the client hands back)
    # says what to send next; each exchange bills what its answer says.
    follow_up = getattr(module, "follow_up", None)

    def attempt() -> Answer:
        started = time.monotonic()
        sending = request
        try:
            for _ in range(MAX_EXCHANGES):
                try:
                    response = http.send(
                        sending,
                        deadline=deadline,
                        request_timeout_s=settings.request_timeout_ms / 1000,
                    )
                except errors.SearchError as err:
                    billed[0] += worst if err.sent else 0
                    raise
                last.append(response)
                billed[0] += module.billed_units(response, settings)
                step = follow_up(sending, response, settings) if follow_up else None
                if step is None:
                    break
                sending = step
            return module.parse_response(response, settings)
        finally:
            latencies.append(round((time.monotonic() - started) * 1000))

    answer, error, retries = run_with_retries(
        attempt,
        max_attempts=settings.retry_max_attempts,
        base_delay_ms=settings.retry_base_delay,
        deadline=deadline,
        sleep=sleep,
        may_retry=lambda: may_retry(billed[0]),
    )
    response = last[-1] if last else None
    return ProviderCall(
        answer=answer,
        error=error,
        retries=retries,
        attempt_latencies_ms=latencies,
        units=billed[0],
        http_status=None if response is None else response.status,
        observation=None if response is None else module.observation(response),
    )


def provider_module(name: str) -> ModuleType:
    """The module that declares API provider `name` (the registry's); InternalError for a name
    that is none."""
    from smart_search.sources import registry

    if name not in registry.api_names():
        raise errors.InternalError(f"Unknown provider: {name[:40]!r}")
    return registry.module(name)
