"""smart_fetch's second extractor (issue 30, point 4): a page whose main text the local
extractor cannot find (a JavaScript-rendered page answers an empty shell) is asked of a scrape
API instead, when `fetch.fallback` names one, as OpenClaw's own `web_fetch` falls back to a
scrape provider. Without the setting nothing here runs.

`fetch.fallback` names an API source whose module offers a scrape (`scrape_request`,
`parse_scrape`, `scrape_credits`); the config key's choices come from the registry. The scrape
is billed in that provider's units under the same ledger as its searches: the provider's worst
case (`max_units_per_call`) is held from the agent's allocation, the pool or direct headroom in
every window before the request leaves, then settled to what the answer says it cost (its
worst case when the request left and no answer came). A spent budget, an exhausted provider or a
missing key sends nothing.

**Decision** (docs/fetch.md): the address rule holds for the scrape too. A page is only ever
handed over after our own fetch of it passed the rule, so without `fetch.allow_private_hosts`
the URL is public. With it, a page on a private host may be fetched here, but its URL is sent
only to a scrape endpoint that is itself on a private host (a self-hosted instance on the
operator's network): a hosted service is refused with `blocked_address` before any call, since
it cannot reach the page and would learn the intranet's URL.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from smart_search import errors

if TYPE_CHECKING:
    from smart_search.budget import quota
    from smart_search.host.config import Settings
    from smart_search.sources.pages import Resolver
    from smart_search.store import Store


def scrape(
    settings: Settings,
    store: Store,
    agent_id: str,
    url: str,
    *,
    deadline: float,
    resolver: Resolver,
    clock: Any,
) -> dict[str, Any]:
    """`{"text", "title", "final_url", "status"}` for `url` from the `fetch.fallback` source,
    charged to `agent_id` under the ledger; raises the `errors` class it ended with."""
    from smart_search.budget.ledger import Ledger
    from smart_search.sources import http, registry

    name = settings.fetch["fallback"]
    module = registry.module(name)
    _check_address(settings, name, url, resolver)
    if settings.api_keys.get(name) is None:
        raise errors.NotConfigured(registry.source(name).not_configured or name)
    ledger = Ledger(settings, store, clock=clock)
    hold, _ = ledger.reserve(agent_id, name)  # QuotaExhausted / UnknownAgent: nothing sent
    billed, seen = 0, None
    try:
        request = module.scrape_request(_key_settings(settings, name, hold), url)
        billed = hold.units  # from here the request may leave: kept whole unless it never did
        try:
            response = http.send(
                request, deadline=deadline, request_timeout_s=settings.request_timeout_ms / 1000
            )
        except errors.SearchError as err:
            billed = hold.units if err.sent else 0
            raise
        billed, seen = module.scrape_credits(response), module.observation(response)
        found: dict[str, Any] = module.parse_scrape(response)
        return found
    finally:
        ledger.settle(agent_id, name, [(hold, billed)], seen)


def _check_address(settings: Settings, name: str, url: str, resolver: Resolver) -> None:
    """Refuse, before any call, a page on a private host unless the scrape endpoint is on a
    private host too (module docstring)."""
    if not settings.fetch["allow_private_hosts"]:
        return  # our own fetch of the page passed the address rule at every hop
    from urllib.parse import urlsplit

    from smart_search.sources.pages import check_url, checked_address
    from smart_search.text.urls import is_private_host

    if is_private_host(urlsplit(settings.endpoints[name]).hostname):
        return  # a self-hosted scraper on the operator's own network
    _, host, port = check_url(url)
    try:
        checked_address(host, port, allow_private=False, resolver=resolver)
    except errors.BlockedAddress:
        from smart_search.sources import registry

        raise errors.BlockedAddress(
            f"Refused to send {host} to {registry.label(name)}: it resolves to a private, "
            "loopback, link-local or metadata address, which a hosted scraper must not be "
            "given (a self-hosted one on a private address may)."
        ) from None


def _key_settings(settings: Settings, name: str, hold: quota.Hold) -> Settings:
    """With a key pool, the settings whose key for `name` is the one the hold was taken on."""
    if hold.key is None:
        return settings
    for key in settings.key_pools[name]:
        if key.fingerprint == hold.key:
            return settings._replace(api_keys={**settings.api_keys, name: key.secret})
    raise errors.InternalError("The ledger chose a key the config no longer has.")
