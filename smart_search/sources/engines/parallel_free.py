"""Parallel's keyless free tier: its Search MCP (`https://search.parallel.ai/mcp`), asked as a
web engine (docs/sources/parallel.md#keyless-tier-parallel_free). The paid Search API with a
key is the `parallel` provider (`providers/parallel.py`).

A keyless tier costs no units, so it is an engine, not an API: it answers as
`provider_used: "web_fetch"`, is paced across processes and has a circuit breaker like the
scraped engines, and a refusal or a throttle is `blocked`, never "no results". It is opt-in
(**Decision**, docs/decisions.md): like a self-hosted engine it has no default endpoint and
joins the plans only once `endpoints.parallel_free` names the server, then leads the web tiers.

The wire is MCP's Streamable HTTP transport (JSON-RPC 2.0 over POST), two exchanges in one
pacing slot:
- `handshake`: `initialize`; the server may answer an `Mcp-Session-Id` header;
- `build_request` + `with_session`: `tools/call` of its `web_search` tool with the same
  `objective` and `search_queries` as the paid API, carrying that session id when one came.
The answer is JSON or a `text/event-stream` of `data:` lines; the tool's result is its
`structuredContent`, else its first text part, holding the paid API's `results[]` shape.
A JSON-RPC error or a tool result flagged `isError` that speaks of limits is `blocked`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from smart_search.sources.source import Source

if TYPE_CHECKING:
    from smart_search.host.config import Settings
    from smart_search.sources.http import HttpRequest, HttpResponse

NAME = "parallel_free"
LABEL = "Parallel Search (Free)"
SOURCE = Source(name=NAME, label=LABEL, kind="web", order=1, endpoint=None, self_hosted=True,
                host_plugin=None)  # OpenClaw holds no endpoint for it
SERVER = "https://search.parallel.ai/mcp"  # what an operator sets `endpoints.parallel_free` to
PROTOCOL = "2025-06-18"
TOOL = "web_search"
HEADERS = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}
_LIMIT_WORDS = ("rate", "limit", "too many", "quota", "throttl")


def _post(settings: Settings, message: dict[str, Any], extra: dict[str, str]) -> HttpRequest:
    from smart_search.sources.http import HttpRequest

    return HttpRequest("POST", settings.endpoints[NAME], headers={**HEADERS, **extra},
                       json={"jsonrpc": "2.0", **message})  # fmt: skip


def handshake(settings: Settings) -> HttpRequest:
    """MCP's `initialize`, which opens the session the search runs in."""
    params = {"protocolVersion": PROTOCOL, "capabilities": {},
              "clientInfo": {"name": "smart-search", "version": "1"}}  # fmt: skip
    return _post(settings, {"id": 1, "method": "initialize", "params": params}, {})


def build_request(
    query: str, settings: Settings, *, filters: dict[str, Any] | None = None
) -> HttpRequest:
    """`tools/call` of the server's `web_search` with the paid API's `objective` and
    `search_queries` (the server returns a fixed-size list: `count` is served by cutting it)."""
    from smart_search.sources.providers.parallel import fit_query

    fitted = fit_query(query)[0]
    arguments = {"objective": fitted, "search_queries": [fitted]}
    params = {"name": TOOL, "arguments": arguments}
    return _post(settings, {"id": 2, "method": "tools/call", "params": params}, {})


def with_session(request: HttpRequest, answer: HttpResponse) -> HttpRequest:
    """`request` carrying the session the handshake opened (`Mcp-Session-Id`, when the server
    gave one: a stateless server gives none) and the protocol version agreed."""
    from smart_search.sources.http import HttpRequest

    extra = {"MCP-Protocol-Version": PROTOCOL}
    session = answer.headers.get("mcp-session-id", "")
    if session and session.isprintable() and len(session) <= 200:
        extra["Mcp-Session-Id"] = session
    return HttpRequest(request.method, request.url, headers={**request.headers, **extra},
                       json=request.json)  # fmt: skip


def classify_status(resp: HttpResponse) -> None:
    """A non-2xx answer as the engines' error tree, except that a 400 or 404 after the
    handshake (a session the server no longer knows, a protocol it refuses) is `blocked`:
    the free tier turned the client away, which no result list can stand for."""
    from smart_search import errors
    from smart_search.sources.engines.fetch import classify_status as engine_status

    if resp.status in (400, 404):
        raise errors.Blocked(f"{LABEL} refused the request (HTTP {resp.status}).",
                             http_status=resp.status)  # fmt: skip
    engine_status(SOURCE, resp)


def parse(body: bytes) -> list[dict[str, Any]]:
    """The tool's results as `{title, url, snippet}`, or Blocked (a JSON-RPC error, or a tool
    error about limits), NoResults (an empty list) or ParseError (anything else)."""
    from smart_search import errors
    from smart_search.sources.providers.parallel import excerpted

    message = _rpc_message(body)
    if "error" in message:
        raise errors.Blocked(f"{LABEL} refused the search (JSON-RPC error).")
    result = message.get("result")
    if not isinstance(result, dict):
        raise errors.ParseError(f"{LABEL} returned JSON in an unexpected shape.")
    payload = _payload(result)
    if result.get("isError") is True:
        text = str(payload).lower() if payload is not None else ""
        if any(word in text for word in _LIMIT_WORDS):
            raise errors.Blocked(f"{LABEL} is rate limiting this client.")
        raise errors.ServerError(f"{LABEL} reported a tool error.")
    found = payload.get("results") if isinstance(payload, dict) else None
    if not isinstance(found, list):
        raise errors.ParseError(f"{LABEL} returned results in an unexpected shape.")
    results = [r for r in map(excerpted, found) if r is not None]
    if not results:
        raise errors.NoResults(f"{LABEL} returned no results.")
    return results


def _rpc_message(body: bytes) -> dict[str, Any]:
    """The JSON-RPC response in `body`: the body itself, or the last `data:` event of a
    server-sent event stream that holds a response."""
    import orjson

    from smart_search import errors

    text = body.decode("utf-8", "replace").lstrip()
    chunks = [text] if text.startswith("{") else [
        line[5:].strip() for line in text.splitlines() if line.startswith("data:")]  # fmt: skip
    for chunk in reversed(chunks):
        try:
            data = orjson.loads(chunk)
        except orjson.JSONDecodeError:
            continue
        if isinstance(data, dict) and ("result" in data or "error" in data):
            return data
    raise errors.ParseError(f"{LABEL} returned a response that is not a JSON-RPC answer.")


def _payload(result: dict[str, Any]) -> object:
    """What the tool returned: its `structuredContent`, else its first text part read as JSON
    (else that text)."""
    import orjson

    structured = result.get("structuredContent")
    if structured is not None:
        return structured
    content = result.get("content")
    for part in content if isinstance(content, list) else []:
        text = part.get("text") if isinstance(part, dict) and part.get("type") == "text" else None
        if isinstance(text, str):
            try:
                return orjson.loads(text)
            except orjson.JSONDecodeError:
                return text
    return None


def filter_params(filters: dict[str, Any] | None) -> tuple[dict[str, Any], list[str]]:
    """Nothing to send: the tool takes no filters. `count` is served by cutting the list;
    freshness, country and language are unsupported."""
    from smart_search.sources.filters import normalise, valid_count

    wanted = normalise(filters)
    kept = "count" in wanted and valid_count(wanted["count"]) is not None
    return {}, [name for name in wanted if not (name == "count" and kept)]
