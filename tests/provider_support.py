"""What the per-provider test modules (tests/test_providers_<p>.py) share: settings loaded the
real way from an openclaw.json that points one provider at a loopback fake, a call through
`call_provider`, a bare `HttpResponse`, and the scan that no key was written anywhere."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import orjson

from smart_search.host.config import Settings, load_settings
from smart_search.sources.http import HttpResponse
from smart_search.sources.providers.calls import ProviderCall, call_provider
from tests.conftest import Env
from tests.fakes import FakeServer, Reply, fixture_bytes


def provider_settings(
    tmp_path: Path, fake: FakeServer, name: str, key: str, **config: Any
) -> Settings:
    """Settings with `name` pointed at `fake`, its key `key` in the environment, and fast
    retries; `config` adds or replaces keys of the skill's config block."""
    section = {
        "endpoints": {name: fake.url},
        "retry_base_delay": 10,
        "request_timeout_ms": 3000,
        "total_timeout_ms": 10000,
        **config,
    }
    path = tmp_path / "openclaw.json"
    path.write_bytes(orjson.dumps({"skills": {"entries": {"smart-search": {"config": section}}}}))
    from smart_search.sources import registry

    variable = registry.source(name).key_variable or f"{name.upper()}_API_KEY"
    env = {"OPENCLAW_CONFIG_PATH": str(path), "HOME": str(tmp_path), variable: key}
    return load_settings(env)


def provider_call(
    name: str, settings: Settings, query: str = "james webb launch", **kw: Any
) -> ProviderCall:
    return call_provider(name, query, settings, time.monotonic() + 10, **kw)


def response(status: int, body: bytes = b"{}", headers: dict[str, str] | None = None):
    return HttpResponse(status=status, headers=headers or {}, body=body)


def assert_api_error(
    record: ProviderCall, kind: type[Exception], label: str, status: int, key: str, log: str
) -> None:
    """`record` ended with `kind` for HTTP `status`, in the product's message, billed nothing,
    and neither the error nor the log (`caplog.text`) carries `key`."""
    assert type(record.error) is kind
    assert str(record.error) == f"{label} API error: {status}"
    assert record.error.http_status == status
    assert record.units == 0  # an error status bills nothing
    assert key not in repr(vars(record.error)) and key not in log


def assert_key_never_written(env: Env, key: str, *outputs: str | bytes) -> None:
    """`key` is in none of `outputs` (a CLI's stdout, stderr...) and no file of the state."""
    for output in outputs:
        assert key not in (output.decode() if isinstance(output, bytes) else output)
    for file in env.state_dir.rglob("*"):
        if file.is_file():
            assert key.encode() not in file.read_bytes(), file


def assert_walked_only_when_named(
    env: Env, fake: FakeServer, name: str, path: str, install: Any, key: str
) -> None:
    """A scheduled agent's plan asks API `name` (not of the default chain) only once
    `provider_order` names it: then after the routed provider and the rest of the chain, from the
    agent's allocation. `install(env, fake, **config)` points the provider at `fake`."""
    fake.route(path, Reply(200, body=fixture_bytes(f"{name}-ok.json")))
    fake.route("/html/", Reply(404, b"no"))
    # Without provider_order the plan is the spec's pair, then the web: it is never asked.
    install(env, fake, agent_allocations={"cron": {name: 2}})
    found = env.call("smart_search", {"query": "webb telescope", "agent_id": "cron"})
    assert name not in [a["provider"] for a in found["attempts"]]
    assert not fake.requests_to(path)
    # Named in the chain, it is walked after the routed provider and the rest of the chain.
    install(env, fake, agent_allocations={"cron": {name: 2}}, provider_order=["gemini", name])
    found = env.call("smart_search", {"query": "webb telescope", "agent_id": "cron"})
    assert found["error"] is None, found
    assert (found["provider_used"], found["quota_source"]) == (name, "agent_allocation")
    # No other key: Brave (routed) and Gemini are skipped, then it answers.
    assert [a["provider"] for a in found["attempts"]] == ["brave", "gemini", name]
    assert found["queries_remaining"] == 1
    assert env.call("search_quota_status")["agents"]["cron"][name] == {
        "allocated": 2, "used": 1, "remaining": 1}  # fmt: skip
    assert_key_never_written(env, key)



def api_reply(fixture: str, status: int = 200, **headers: str) -> Reply:
    """A fixture of tests/fixtures/api/ served as JSON with `status` and `headers`."""
    return Reply(status, fixture_bytes(fixture), headers={"content-type": "application/json",
                                                          **headers})  # fmt: skip


def assert_key_only_in_headers(fake: FakeServer, key: str, *texts: str) -> None:
    """No request to `fake` carried `key` in its URL or body, and none of `texts` holds it."""
    for request in fake.requests:
        assert key not in request.target and key.encode() not in request.body
    for text in texts:
        assert key not in text


def modules_naming(*words: str) -> list[str]:
    """The package's modules whose text names any of `words` (case-insensitive)."""
    from tests.conftest import REPO

    return sorted(
        str(path.relative_to(REPO))
        for path in (REPO / "smart_search").rglob("*.py")
        if any(word in path.read_text().lower() for word in words)
    )


def forced_call(env: Env, fake: FakeServer, name: str, key: str, **args: Any) -> dict[str, Any]:
    """`smart_search` forced to API `name` (pointed at `fake`, its key `key`) through the CLI,
    for an agent allowed 3 of it; the key is checked never to be printed or written."""
    import json

    from smart_search.sources import registry

    env.environ[registry.source(name).key_variable or ""] = key
    env.write_config({"endpoints": {name: fake.url, "duckduckgo": fake.url},
                      "web_fetch_min_interval_ms": 0, "retry_base_delay": 10,
                      "agent_allocations": {"a": {name: 3}}})  # fmt: skip
    call = {
        "tool": "smart_search",
        "args": {"query": "webb", "agent_id": "a", "force_provider": name, **args},
    }
    proc = env.run_cli(json.dumps(call))
    assert_key_never_written(env, key, proc.stdout, proc.stderr)
    return json.loads(proc.stdout)


def bound(name: str, key: str) -> tuple[Any, Any]:
    """`(make_settings, search)` for API `name` with key `key`: settings pointed at a fake
    (`make_settings(tmp_path, fake, **config)`) and one call through `call_provider`
    (`search(settings, **filters)`)."""

    def make_settings(tmp_path: Path, fake: FakeServer, **config: Any) -> Settings:
        return provider_settings(tmp_path, fake, name, key, **config)

    def search(settings: Settings, **filters: Any) -> ProviderCall:
        return provider_call(name, settings, filters=filters or None)

    return make_settings, search
def install_key(env: Env, fake: FakeServer, name: str, key: str, **config: Any) -> None:
    """Provider `name` (and DuckDuckGo, the fallback) pointed at `fake`, its key in
    openclaw.json's top-level `env.vars`; `config` adds keys of the skill's block."""
    import json

    env.write_config({"endpoints": {name: fake.url, "duckduckgo": fake.url},
                      "web_fetch_min_interval_ms": 0, **config})  # fmt: skip
    doc = json.loads(env.config_path.read_text())
    doc["env"] = {"vars": {f"{name.upper()}_API_KEY": key}}
    env.config_path.write_text(json.dumps(doc))


def forced_cli(env: Env, name: str, query: str = "james webb launch", **args: Any) -> Any:
    """One CLI process forced to `name`: (its result, the finished process)."""
    import json

    call = {"query": query, "agent_id": "desk", "force_provider": name, **args}
    proc = env.run_cli(json.dumps({"tool": "smart_search", "args": call}))
    return json.loads(proc.stdout), proc


def assert_echoed_key_stays_secret(
    env: Env, fake: FakeServer, name: str, path: str, key: str, reply: Reply
) -> None:
    """`reply` (an error whose body echoes the key back) ends `name`'s tier, and the key is in
    no URL sent, no output, no log line and no state file."""
    fake.route(path, reply)
    fake.route("/html/", Reply(404, b"no"))
    install_key(env, fake, name, key, retry_max_attempts=1)
    found, proc = forced_cli(env, name)
    first = found["attempts"][0]
    assert first["provider"] == name and first["outcome"] == "failed", found
    assert key.encode() in reply.body_bytes()  # the fake did echo it
    for seen in fake.requests:
        assert key not in seen.target
    assert_key_never_written(env, key, proc.stdout, proc.stderr)
