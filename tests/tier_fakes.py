"""Fakes at the `tiers.RealBackends` seam: scripted providers and engines, nothing on the network.

Shared by the tier-walk and tools tests; everything else they use is real (ledger, breaker,
pacing, cache, logs).
"""

from __future__ import annotations

from typing import Any

from smart_search import errors
from tests.conftest import EXAMPLE_ALLOCATIONS, Env

WEB = [{"title": "A page", "url": "https://example.org/a", "snippet": "About a."}]


def FakeAnswer(results: Any, citations: list | None = None) -> Any:  # noqa: N802 - a stand-in
    from smart_search.sources.providers.parsing import Answer

    return Answer(results, citations or [])


class FakeBackends:
    """Scripted providers and engines: name → result or exception (default: not reached).

    A scripted API answer is a 2xx billed one unit; a scripted API error was not billed (a
    non-2xx, or a request that never left), exactly as `providers.call_provider` records them."""

    def __init__(self, **script: Any) -> None:
        self.script = script
        self.calls: list[str] = []

    def _next(self, name: str) -> Any:
        self.calls.append(name)
        outcome = self.script.get(name)
        if outcome is None:
            raise AssertionError(f"{name} was not expected to be called")
        return outcome

    def call_api(
        self,
        provider: str,
        query: str,
        settings: Any,
        deadline: float,
        may_retry: Any,
        filters: Any = None,
    ) -> Any:
        from smart_search.sources.providers.calls import ProviderCall

        outcome = self._next(provider)
        if isinstance(outcome, errors.SearchError):
            return ProviderCall(None, outcome, 0, [5], 0, outcome.http_status, None)
        if isinstance(outcome, BaseException):
            raise outcome
        return ProviderCall(outcome, None, 0, [5], 1, 200, None)

    def fetch_engine(
        self,
        engine: str,
        query: str,
        settings: Any,
        deadline: float,
        before_send: Any,
        filters: Any = None,
    ) -> Any:
        from smart_search.sources.engines.fetch import EngineCall

        try:
            before_send()
        except errors.SearchError as err:
            return EngineCall(None, err, False, [], None)
        outcome = self._next(engine)
        if isinstance(outcome, errors.SearchError):
            return EngineCall(None, outcome, True, [5], outcome.http_status)
        return EngineCall(outcome, None, True, [5], 200)


def blocked(engine: str) -> errors.Blocked:
    return errors.Blocked(f"{engine} served a CAPTCHA page.")


def base_config(**extra: Any) -> dict[str, Any]:
    return {
        "web_fetch_min_interval_ms": 0,
        "providers": {"gemini": {"daily_limit": 1500}, "brave": {"daily_limit": 66}},
        "agent_allocations": EXAMPLE_ALLOCATIONS,
        **extra,
    }


def keyed_env(env: Env) -> Env:
    env.environ["GEMINI_API_KEY"] = "test-gemini-key"
    env.environ["BRAVE_API_KEY"] = "test-brave-key"
    env.write_config(base_config())
    return env


def search(env: Env, backends: FakeBackends, query: str, agent: str, **args: Any) -> dict:
    return env.call("smart_search", {"query": query, "agent_id": agent, **args}, backends=backends)


