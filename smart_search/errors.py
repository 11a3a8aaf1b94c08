"""Every failure smart-search can report, as one shallow tree of exception classes.

Providers, engines, the ledger and the config loader translate whatever goes wrong at their edge
into one of these; the planner and the runner only ever see these classes. Each class carries its
`error_code` (the closed vocabulary in RULINGS 1, mirrored by `schemas/`) and two policy flags:

- `retryable`: the same request may succeed if sent again soon (timeouts, 5xx, 429 per-second).
- `counts_for_breaker`: the failure says the service is sick (RULINGS 5), so it feeds the
  circuit breaker. Auth errors, `no_results` and `parse_error` never do.

Runtime error strings from the spec live here as constants; input-validation strings live in the
argument schemas under `x-errors` (the schemas drive validation).
"""

from __future__ import annotations

# Spec 12 strings used at run time (input-validation strings are in schemas/*.args.json).
ALL_EXHAUSTED = "All search providers exhausted or unavailable."
FINANCE_BLOCKED = (
    "Finance and time-sensitive queries require Gemini or Brave API. "
    "web_fetch fallback is not permitted for this query type."
)
LOCKED = "Quota file is locked. Try again."
CANNOT_READ_CONFIG = "Cannot read openclaw.json. Check OPENCLAW_CONFIG_PATH."
INVALID_JSON = "Invalid JSON input."
NESTED_TOO_DEEP = "Input is nested too deeply."
WEB_FETCH_WARNING = "Result retrieved via web scraping. Quality may be lower than API results."

def unknown_agent(agent_id: str) -> str:
    return f'Unknown agent: "{agent_id}". Add it to openclaw.json to use it.'


def agent_not_found(agent_id: str) -> str:
    return f"Agent {agent_id} not found in quota."


def agent_already_complete(agent_id: str) -> str:
    return f"Agent {agent_id} is already marked complete for today."


def circuit_open(label: str) -> str:
    """`label`: how messages name the source ("Gemini"; the registry's `label`)."""
    return f"{label} circuit is open. Try again later."


def api_error(label: str, status: int) -> str:
    return f"{label} API error: {status}"


class SearchError(Exception):
    """Base of every failure smart-search reports; `str()` is the user-facing message."""

    error_code = "internal"
    retryable = False
    counts_for_breaker = False
    # A contract failure: the argument it names and its value as the message shows it.
    field: str | None = None
    shown: str | None = None

    def __init__(
        self,
        message: str,
        *,
        http_status: int | None = None,
        retry_after: float | None = None,
        sent: bool = False,
    ) -> None:
        super().__init__(message)
        self.message = message
        self.http_status = http_status
        # Seconds the server asked us to wait before trying again (Retry-After, RetryInfo, ...).
        self.retry_after = retry_after
        # The request left (a connection was made) before this went wrong, so a provider may
        # have answered and billed it (RULINGS 4). Set where the error is raised, never later.
        self.sent = sent


class InvalidInput(SearchError):
    """The caller's JSON or arguments break the contract."""

    error_code = "invalid_input"


class UnknownTool(SearchError):
    """`tool` names none of the three tools."""

    error_code = "unknown_tool"


class UnknownAgent(SearchError):
    """`strict_agents` is on and the agent is not configured."""

    error_code = "unknown_agent"


class ConfigError(SearchError):
    """openclaw.json is unreadable, malformed, or a value has the wrong type (the key is named)."""

    error_code = "config_error"


class NotConfigured(SearchError):
    """A provider's API key is missing."""

    error_code = "not_configured"


class AuthFailed(SearchError):
    """The provider refused the key or the request (400/401/403/422)."""

    error_code = "auth_failed"


class Transient(SearchError):
    """A failure that heals after a wait, and says the service is sick: retried, and counted by
    the breaker. Never raised itself: the classes below name what happened."""

    retryable = True
    counts_for_breaker = True


class RateLimited(Transient):
    """A short-window rate limit (429 per second/minute): heals after a wait."""

    error_code = "rate_limited"


class QuotaExhausted(SearchError):
    """Our ledger or the provider's own daily/monthly quota has no unit left: waiting won't help."""

    error_code = "quota_exhausted"


class ProviderOverloaded(Transient):
    """503 UNAVAILABLE / overloaded: heals after a wait."""

    error_code = "provider_overloaded"


class ServerError(Transient):
    """Any other 5xx."""

    error_code = "server_error"


class Timeout(Transient):
    """The attempt or the whole call ran out of time."""

    error_code = "timeout"


class TransportFailure(Transient):
    """Connection refused or reset, DNS failure, a truncated body."""

    error_code = "transport_failure"


class NoResults(SearchError):
    """The service answered properly, with nothing."""

    error_code = "no_results"


class ParseError(SearchError):
    """An answer we cannot read: unexpected shape, HTML error page, over the size bound."""

    error_code = "parse_error"


class Blocked(SearchError):
    """A search engine served a CAPTCHA, consent wall or JavaScript shell instead of results."""

    error_code = "blocked"
    counts_for_breaker = True


class InvalidUrl(SearchError):
    """smart_fetch was given, or redirected to, a URL that is not a fetchable http(s) URL."""

    error_code = "invalid_url"


class BlockedAddress(SearchError):
    """smart_fetch refused a host that resolves to a private, loopback, link-local, reserved,
    multicast or metadata address (`fetch.allow_private_hosts` lets them through)."""

    error_code = "blocked_address"


class FetchLimit(SearchError):
    """The agent has spent today's fetch allocation (`fetch.daily_allocation`)."""

    error_code = "fetch_limit"


class AgentNotFound(SearchError):
    """Status or completion named an agent that is neither configured nor registered today."""

    error_code = "unknown_agent"


class AlreadyComplete(SearchError):
    """search_mark_agent_complete was called twice for one agent on one day."""

    error_code = "invalid_input"


class CircuitOpen(SearchError):
    """The provider's circuit breaker is open; it was not called."""

    error_code = "circuit_open"


class ModelUnavailable(SearchError):
    """Gemini answered 404 for the configured model."""

    error_code = "model_unavailable"


class FinanceBlocked(SearchError):
    """A finance query reached Strategy A's web_fetch tier, which it may not use."""

    error_code = "finance_blocked"


class StateError(SearchError):
    """The shared state (ledger, breaker, pacing, cache) cannot be used safely right now.

    A search never spends blind: any StateError from the ledger ends the call at once."""

    error_code = "state_corrupt"


class LockTimeout(StateError):
    """A shared state file stayed locked past `lock_timeout_ms`."""

    error_code = "lock_timeout"


class StateCorrupt(StateError):
    """Shared state is unreadable or of an unknown version; it is left in place for the operator."""

    error_code = "state_corrupt"


class StateUnavailable(StateError):
    """The configured state store cannot be reached (a Redis server down, refusing or slow)."""

    error_code = "state_unavailable"


class StateLost(StateError):
    """The shared ledger came back smaller than this host's witness of it (RULINGS 8: a Redis
    restarted without persistence, flushed, its key evicted or deleted, or a stale replica
    promoted). `loss` is the store's account of it (`store/witness.Loss`), None once it is only
    a message (a result read back); the budget layer restores the ledger from it or refuses."""

    error_code = "state_lost"

    def __init__(self, message: str, *, loss: object = None) -> None:
        super().__init__(message)
        self.loss = loss


class StateUnsafe(StateCorrupt):
    """A state path is a symbolic link, not a regular file or directory, owned by another user, or
    writable by group/other: refused and left as it is. A subclass of StateCorrupt so that every
    layer that stops the call on a damaged ledger stops it here too."""

    error_code = "state_unsafe"


class StateUnwritable(StateCorrupt):
    """The state directory cannot be written (read-only file system, disk full, permission
    denied, ...). The write is abandoned before the rename, so nothing was changed or spent."""

    error_code = "state_unwritable"


class AllExhausted(SearchError):
    """Every tier was tried and none answered."""

    error_code = "all_exhausted"


class InternalError(SearchError):
    """A bug: an exception nobody translated."""

    error_code = "internal"


def error_class(code: str) -> type[SearchError]:
    """The class that stands for `error_code` (the first defined, where several share one)."""
    pending: list[type[SearchError]] = [SearchError]
    while pending:
        cls = pending.pop(0)
        if cls.error_code == code and cls is not SearchError:
            return cls
        pending.extend(cls.__subclasses__())
    return InternalError


CANCELLED = "The call was cancelled by its caller."


class Cancelled(BaseException):
    """The caller cancelled the call (an MCP client's `notifications/cancelled`); raised by
    `http.send` under a cancelled `http.CancelScope`.

    Deliberately NOT a SearchError (it derives from BaseException, like KeyboardInterrupt): no
    tier may catch it and walk on to the next tier, the breaker must not read it as an answer, and
    the retry loop must not retry it. It unwinds the whole call; `tiers._api_tier`'s
    `except BaseException` gives back the hold of a request that never left (`sent` False) and
    keeps the worst case of one that may have reached the provider. It never becomes a result:
    the MCP server drops the answer to a cancelled request, as the protocol asks.
    """

    def __init__(self, message: str = CANCELLED, *, sent: bool = False) -> None:
        super().__init__(message)
        self.message = message
        # A connection was made before the cancel: the provider may have billed the request.
        self.sent = sent
