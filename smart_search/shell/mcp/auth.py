"""Bearer tokens on the HTTP transport (issue 28), through the SDK's own resource-server support
(imports the SDK, only when called).

`streamable_http_app(auth=AuthSettings(...), token_verifier=Verifier(...))` makes the SDK wrap the
endpoint in its `RequireAuthMiddleware` (401 and `WWW-Authenticate: Bearer` for a request
without a valid `Authorization: Bearer` token), authenticate with its `BearerAuthBackend` (which
calls our verifier), put the result in its auth context (`get_access_token()`, read by the
handlers) and bind each MCP session to the token that opened it. No authorization-server
routes are served and no protected-resource metadata: the tokens are static, from
`mcp.tokens`, so `AuthSettings.resource_server_url` stays None and `issuer_url`, which the
model requires, names this server itself and is used by nothing.
"""

from __future__ import annotations

from typing import Any

from smart_search.shell.mcp.identity import Identity, find_token
from smart_search.shell.mcp.service import Service


class Verifier:
    """The SDK's `TokenVerifier`: a bearer token → an `AccessToken` whose claims hold the
    identity (label, agents) and whose `token` field holds the entry's config path, not the
    token. The token list is read live, so adding, rotating or removing a token needs no
    restart."""

    def __init__(self, service: Service) -> None:
        self.service = service

    async def verify_token(self, token: str) -> Any:
        import anyio.to_thread
        from mcp.server.auth.provider import AccessToken

        tokens = await anyio.to_thread.run_sync(self.service.tokens)
        found = find_token(tokens, token)
        if found is None:
            return None
        agents = None if found.agents is None else list(found.agents)
        return AccessToken(
            token=found.path,
            client_id=found.path,  # one principal per entry: the SDK binds sessions to it
            scopes=[],
            claims={"label": found.label, "agents": agents},
        )


def auth_settings(url: str) -> Any:
    """The SDK's `AuthSettings` for a resource server with static tokens (see the module doc)."""
    from mcp.server.auth.settings import AuthSettings

    return AuthSettings(issuer_url=url, resource_server_url=None)


def current_identity() -> Identity | None:
    """The identity of the request being handled (the SDK's auth context), None without one."""
    from mcp.server.auth.middleware.auth_context import get_access_token

    access = get_access_token()
    if access is None or not access.claims:
        return None
    agents = access.claims.get("agents")
    return Identity(access.claims["label"], None if agents is None else tuple(agents))
