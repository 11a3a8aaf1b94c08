"""Who an HTTP caller is (issue 28), free of the SDK: the `Identity` a bearer token maps to, the
token lookup (constant time over every token), which agent a call acts as, and the refusal of a
call that acts for an agent its token does not name.

The rest of the server sees an `Identity` (a label and the agents it may act for), never a
token: the verifier (auth.py) turns the `Authorization` header into one and forgets the token.
"""

from __future__ import annotations

import hashlib
import hmac
from typing import Any, NamedTuple

# The agent a call acts as when it reads the whole ledger (search_quota_status without agent_id,
# the status resource): only a token whose agents are "*" may.
EVERY_AGENT = "*"


class Identity(NamedTuple):
    """A caller a token vouched for: `label` (the logs' `client`) and `agents`, the ids it may
    act for (None: every agent, and the whole ledger)."""

    label: str
    agents: tuple[str, ...] | None

    def allows(self, agent: str) -> bool:
        """Whether a call acting as `agent` (EVERY_AGENT: the whole ledger) may run."""
        return self.agents is None or (agent != EVERY_AGENT and agent in self.agents)


def find_token(tokens: Any, given: str) -> Any:
    """The configured token (a config_tokens.McpToken) equal to `given`, or None. Every token is
    compared, each as a digest through `hmac.compare_digest`, so neither the time taken nor an
    early exit tells a caller how close a guess came or which entry it nearly matched."""
    probe = hashlib.sha256(given.encode("utf-8", "surrogateescape")).digest()
    found = None
    for token in tokens:
        if token.secret is None:  # its variable is unset: it matches nothing
            continue
        digest = hashlib.sha256(token.secret.reveal().encode()).digest()
        if hmac.compare_digest(digest, probe) and found is None:
            found = token
    return found


def acting_agent(tool: str, args: Any) -> str | None:
    """The agent a valid call acts as: its `agent_id`, else the tool's own default ("general" for
    smart_fetch, the whole ledger for search_quota_status); None when the call names none and
    the tool has no default (it fails validation: nothing to authorize)."""
    from smart_search.host.config import GENERAL_AGENT

    agent = args.get("agent_id") if isinstance(args, dict) else None
    if isinstance(agent, str):
        return agent
    if tool == "smart_fetch":
        return GENERAL_AGENT
    if tool == "search_quota_status":
        return EVERY_AGENT
    return None


def refusal(identity: Identity | None, request: dict[str, Any]) -> Any:
    """The error (an errors.UnknownAgent) for a call `identity` may not make, else None. Only a
    request that passes validation is judged: anything else gets the CLI's own error, which
    touches no state. The message is the spec's unknown-agent one, naming the agent (or "*" for
    the whole ledger), never the token."""
    if identity is None or identity.agents is None:
        return None
    from smart_search import contract
    from smart_search.errors import SearchError, UnknownAgent, unknown_agent

    tool = request.get("tool")
    try:
        contract.check("request.json", request)
        contract.check(f"{tool}.args.json", request.get("args", {}))
    except (SearchError, RecursionError):
        return None
    agent = acting_agent(tool, request.get("args", {}))
    if agent is None or identity.allows(agent):
        return None
    return UnknownAgent(unknown_agent(agent))
