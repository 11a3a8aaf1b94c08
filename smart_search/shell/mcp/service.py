"""The MCP server's work, free of the SDK: the settings, parsed again only when a config file's
stat stamp (mtime, ctime, size, inode) changes, so an edit is picked up without a restart; each
call run as the CLI would run it, under a cancel scope; and the status snapshot.
"""

from __future__ import annotations

import os
import threading
from typing import Any

from smart_search.shell.mcp.catalog import DEFAULTED_TOOLS
from smart_search.shell.mcp.identity import Identity, refusal


class Service:
    """Everything the MCP handlers call, free of the SDK (tests and the bench use it directly)."""

    def __init__(self, environ: Any = None, agent_id: str | None = None) -> None:
        self.environ = os.environ if environ is None else environ
        self.flag_agent = agent_id
        self._lock = threading.Lock()
        self._stamp: tuple[Any, ...] | None = None
        self._cached: tuple[Any, str | None] | None = None
        self.loads = 0  # how many times the config was parsed (tests read it)
        self._idle = threading.Condition()
        self._running = 0  # calls in their worker threads now

    # Settings, re-read when the config file changes.

    def _config_stamp(self) -> tuple[Any, ...] | None:
        """Every config file's identity: the main file OpenClaw's rules pick now, and each file
        the last load read (its $includes). None (never cached) when the main file is missing."""
        from smart_search.host.config import config_file
        from smart_search.host.openclaw.dotenv import global_env_path

        path, _ = config_file(self.environ)
        # OpenClaw's global .env may hold keys (issue 30): watched from the first stamp on.
        files = [path, global_env_path(self.environ)]
        if self._cached is not None:
            files += [f for f in self._cached[0].config_files if f not in files]
        stamp: list[Any] = []
        for name in files:
            try:
                st = os.stat(name)
            except OSError:
                if name == path:
                    return None  # no file (defaults) or unreadable (an error): not cached
                stamp.append((name, None))  # an include that went away: reload to say so
                continue
            stamp.append((name, st.st_mtime_ns, st.st_ctime_ns, st.st_size, st.st_ino))
        return tuple(stamp)

    def settings_and_agent(self) -> tuple[Any, str | None]:
        """`Settings` and the config's default agent id; raises ConfigError like load_settings."""
        stamp = self._config_stamp()
        with self._lock:
            if stamp is not None and stamp == self._stamp and self._cached is not None:
                return self._cached
        loaded = self._load()
        with self._lock:
            # The stamp taken BEFORE loading: a change made meanwhile is seen next call. A load
            # that found new $includes makes the next stamp longer, so it reloads once more.
            self._stamp, self._cached = stamp, loaded
        return loaded

    def _load(self) -> tuple[Any, str | None]:
        from smart_search.host.config import load_settings

        settings = load_settings(self.environ)
        self.loads += 1
        return settings, settings.mcp_agent_id

    def settings(self) -> Any:
        return self.settings_and_agent()[0]

    def default_agent(self, *, strict: bool = False) -> str | None:
        """--agent-id, else the config key; None when neither. A broken config raises its
        ConfigError when `strict`, else reads as no default."""
        if self.flag_agent:
            return self.flag_agent
        from smart_search.errors import SearchError

        try:
            return self.settings_and_agent()[1]
        except SearchError:
            if strict:
                raise
            return None

    # Calls.

    def request(self, tool: str, arguments: dict[str, Any] | None) -> dict[str, Any]:
        """The request object the CLI would have read for this MCP call."""
        request: dict[str, Any] = {"tool": tool}
        if arguments is not None:
            request["args"] = dict(arguments)
        if tool in DEFAULTED_TOOLS and "agent_id" not in (arguments or {}):
            agent = self.default_agent(strict=True)
            if agent:
                request["args"] = {**(arguments or {}), "agent_id": agent}
        return request

    def call(
        self,
        tool: str,
        arguments: dict[str, Any] | None,
        scope: Any = None,
        identity: Identity | None = None,
    ) -> Any:
        """Run one call (blocking) under the cancel scope; the CLI's result object. Raises
        errors.Cancelled when the scope was cancelled before an answer came. `identity`: the
        HTTP caller's token (None: stdio, or HTTP without tokens); a call acting for an agent it
        does not name is refused before anything runs, and its label is the log's `client`."""
        from smart_search.errors import SearchError
        from smart_search.search.tools import failure_result
        from smart_search.shell.runner import handle_request
        from smart_search.sources.http import CancelScope, cancel_scope

        try:
            request = self.request(tool, arguments)
        except SearchError as err:  # the config that holds the default is broken
            return failure_result(tool, err)
        refused = refusal(identity, request)
        if refused is not None:
            return failure_result(tool, refused)
        options = {} if identity is None else {"client": identity.label}
        with self._idle:
            self._running += 1
        try:
            with cancel_scope(scope or CancelScope()):
                return handle_request(
                    request, self.environ, settings_loader=self.settings, **options
                )
        finally:
            with self._idle:
                self._running -= 1
                self._idle.notify_all()

    def wait_idle(self, timeout: float) -> bool:
        """Until no call runs (True) or `timeout` seconds passed (False)."""
        with self._idle:
            return self._idle.wait_for(lambda: self._running == 0, timeout)

    def tokens(self) -> tuple[Any, ...]:
        """The configured `mcp.tokens` (config_tokens.McpToken), read live; none when the config
        cannot be read, so a broken config lets no one in."""
        from smart_search.errors import SearchError

        try:
            return tuple(self.settings().mcp["tokens"])
        except SearchError:
            return ()

    def status(self) -> dict[str, Any]:
        """The resource: the full quota object and every circuit breaker, read live."""
        from smart_search.shell.runner import handle_request

        quota = handle_request(
            {"tool": "search_quota_status", "args": {}},
            self.environ,
            settings_loader=self.settings,
        )
        return {
            "quota": quota,
            "breakers": self._breakers(),
            "default_agent_id": self.default_agent(),
        }

    def _breakers(self) -> dict[str, Any]:
        from smart_search.budget.breaker import BREAKER_DOC, Breaker, breaker_entry
        from smart_search.errors import SearchError
        from smart_search.host.config import PROVIDERS, engines

        try:
            settings = self.settings()
            doc = Breaker(settings).store.read(BREAKER_DOC)
        except SearchError as err:
            return {"error": err.message, "error_code": err.error_code}
        closed = {"state": "closed", "failures": 0, "opened_at": 0.0, "trial_at": 0.0}
        # The engines this config reaches: an unconfigured self-hosted engine is not listed.
        names = PROVIDERS + engines(settings)
        return {name: breaker_entry(doc, name) or dict(closed) for name in names}
