"""The two search APIs (Gemini, Brave) behind one call: build, send, parse, retry.

Each provider module only builds an `HttpRequest` and parses an `HttpResponse` into an `Answer`
or one of our `errors` classes; `call_provider` does the I/O through `http.send` under
`retry.run_with_retries`. Quota, the circuit breaker and logging belong to the planner: nothing
here touches them.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from types import ModuleType
from typing import TYPE_CHECKING, Any

import orjson

from .. import errors

if TYPE_CHECKING:
    from ..config import Settings
    from ..http import HttpResponse

_NOT_CONFIGURED = {"gemini": errors.GEMINI_NOT_CONFIGURED, "brave": errors.BRAVE_NOT_CONFIGURED}


@dataclass(slots=True)
class Answer:
    """What a provider found: Gemini's answer text or Brave's `[{title, url, snippet}]`."""

    results: str | list[dict[str, str]]
    citations: list[dict[str, str]] = field(default_factory=list)
    warning: str | None = None
    # Wall time of each attempt (send + parse), in order; filled in by call_provider.
    attempt_latencies_ms: list[int] = field(default_factory=list)


def json_object(provider: str, response: HttpResponse) -> dict[str, Any]:
    """The body of a 2xx answer as a JSON object, or `parse_error` saying what it was instead."""
    try:
        data = orjson.loads(response.body)
    except orjson.JSONDecodeError:
        raise errors.ParseError(
            f"{errors.PROVIDER_LABELS[provider]} returned a response that is not JSON.",
            http_status=response.status,
        ) from None
    if not isinstance(data, dict):
        raise shape_error(provider, response)
    return data


def shape_error(provider: str, response: HttpResponse) -> errors.ParseError:
    """JSON that parsed but is not the shape the provider documents."""
    return errors.ParseError(
        f"{errors.PROVIDER_LABELS[provider]} returned JSON in an unexpected shape.",
        http_status=response.status,
    )


def status_error(provider: str, response: HttpResponse) -> errors.SearchError:
    """What an error status means once nothing provider-specific applies (RULINGS §5): 408 a
    timeout, 503 overloaded, other 5xx a server error (all with any `Retry-After`), any other
    4xx a refusal of the key or the request, anything else an answer we cannot read."""
    from ..http import retry_after_seconds

    status = response.status
    message = errors.api_error(provider, status)
    if status == 408:
        return errors.Timeout(message, http_status=status)
    wait = retry_after_seconds(response.headers)
    if status == 503:
        return errors.ProviderOverloaded(message, http_status=status, retry_after=wait)
    if status >= 500:
        return errors.ServerError(message, http_status=status, retry_after=wait)
    if 400 <= status < 500:
        return errors.AuthFailed(message, http_status=status)
    # 1xx/3xx: redirects are not followed for API calls; this is not an answer we can read.
    label = errors.PROVIDER_LABELS[provider]
    return errors.ParseError(
        f"{label} answered with unexpected status {status}.", http_status=status
    )


def call_provider(
    name: str,
    query: str,
    settings: Settings,
    deadline: float,
    *,
    sleep: Callable[[float], object] = time.sleep,
) -> tuple[Answer, int]:
    """Search `name` ("gemini" | "brave") for `query`, retrying what can heal, by `deadline`.

    Returns `(answer, retries made)`. Raises a `SearchError` carrying `.retries`, `.http_status`
    (None when no response was read) and `.attempt_latencies_ms`.
    """
    from .. import http
    from ..retry import run_with_retries

    module = _provider_module(name)
    if settings.api_keys.get(name) is None:
        raise errors.NotConfigured(_NOT_CONFIGURED[name])
    warning = None
    if name == "brave":
        query, warning = module.fit_query(query)
    request = module.build_request(query, settings)
    latencies: list[int] = []

    def attempt() -> Answer:
        started = time.monotonic()
        try:
            response = http.send(
                request, deadline=deadline, request_timeout_s=settings.request_timeout_ms / 1000
            )
            return module.parse_response(response, settings)
        finally:
            latencies.append(round((time.monotonic() - started) * 1000))

    try:
        answer, retries = run_with_retries(
            attempt,
            max_attempts=settings.retry_max_attempts,
            base_delay_ms=settings.retry_base_delay,
            deadline=deadline,
            sleep=sleep,
        )
    except errors.SearchError as err:
        err.attempt_latencies_ms = latencies
        raise
    answer.warning = warning
    answer.attempt_latencies_ms = latencies
    return answer, retries


def _provider_module(name: str) -> ModuleType:
    # Imported on demand: the provider modules import `Answer` from this package.
    if name == "gemini":
        from . import gemini

        return gemini
    if name == "brave":
        from . import brave

        return brave
    raise errors.InternalError(f"Unknown provider: {name[:40]!r}")
