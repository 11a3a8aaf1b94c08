"""The registry of sources (issue 19, point 1): each source is declared once, in its own module,
and everything else learns about it from there. A throwaway provider added as ONE module to a
copy of the package is configured, routed to, billed, reported and listed with no other change.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from smart_search.host.config import ENGINES, PROVIDERS
from smart_search.sources import registry
from tests.conftest import REPO
from tests.fakes import FakeServer, Reply

# A whole provider: its declaration, request builder, parser, error mapping and billing.
THROWAWAY = '''
"""A throwaway search API for the registry's test: one module is the whole source."""

from __future__ import annotations

from typing import Any

import pytest

from smart_search import errors
from smart_search.sources.providers.parsing import Answer, json_object, status_error
from smart_search.sources.source import Source

NAME = "throwaway"
SOURCE = Source(
    name=NAME,
    label="Throwaway",
    kind="api",
    order=9,
    endpoint="https://api.throwaway.invalid",
    key_variable="THROWAWAY_API_KEY",
    not_configured="THROWAWAY_API_KEY is not configured.",
    daily_limit=7,
    monthly_limit=70,
)


def build_request(query: str, settings: Any, *, filters: dict[str, Any] | None = None) -> Any:
    from smart_search.sources.http import HttpRequest

    secret = settings.api_keys[NAME]
    return HttpRequest(
        "POST",
        settings.endpoints[NAME] + "/search",
        headers={"x-api-key": secret.reveal()},
        json={"query": query},
    )


def parse_response(resp: Any, settings: Any) -> Answer:
    data = json_object(SOURCE.label, resp)
    return Answer([{"title": r["title"], "url": r["url"], "snippet": r["content"]}
                   for r in data["results"]])


def classify_error(resp: Any) -> errors.SearchError:
    return status_error(SOURCE.label, resp)


def billed_units(resp: Any, settings: Any) -> int:
    return 1 if 200 <= resp.status < 300 else 0


def observation(resp: Any) -> dict[str, Any] | None:
    return None


def filter_params(filters: dict[str, Any] | None) -> tuple[dict[str, Any], list[str]]:
    return {}, sorted(filters or {})
'''


def test_the_registry_holds_every_source_once_in_declared_order() -> None:
    assert registry.api_names() == PROVIDERS == (
        "gemini", "brave", "tavily", "exa", "serper", "perplexity", "parallel", "grok",
        "kimi", "minimax", "ollama", "firecrawl")  # fmt: skip
    assert registry.web_names() == ENGINES == (
        "searxng", "google", "parallel_free", "bing", "duckduckgo", "ollama_local",
        "firecrawl_free")  # fmt: skip
    names = [s.name for s in registry.sources()]
    assert len(names) == len(set(names)) == 19
    for source in registry.sources():
        module = registry.module(source.name)
        assert module.SOURCE is source and module.NAME == source.name
        assert registry.label(source.name) == source.label
        assert callable(module.build_request) and callable(module.filter_params)
    for source in registry.sources("api"):
        assert source.key_variable and source.not_configured and source.units
        assert source.daily_limit > 0 and source.monthly_limit >= source.daily_limit


def test_an_api_declaration_derives_its_key_variable_and_message_unless_it_says_otherwise() -> None:
    from smart_search.sources.source import Source

    acme = Source(name="acme", label="Acme", kind="api", order=9, endpoint="https://acme.test")
    assert acme.key_variable == "ACME_API_KEY"
    assert acme.not_configured == (
        "Acme is not configured. Add ACME_API_KEY to openclaw.json to enable it."
    )
    assert (acme.units, acme.reset_timezone) == (("request",), "UTC")
    own = Source(name="acme", label="Acme", kind="api", order=9, endpoint=None,
                 key_variable="ACME_TOKEN", not_configured="No Acme.")  # fmt: skip
    assert (own.key_variable, own.not_configured) == ("ACME_TOKEN", "No Acme.")
    web = Source(name="acme", label="Acme", kind="web", order=9, endpoint=None)
    assert (web.key_variable, web.not_configured) == (None, None)
    # The spec's own messages stay as the spec writes them (RULINGS 1).
    assert registry.source("gemini").not_configured == (
        "GEMINI_API_KEY is not configured in openclaw.json."
    )
    assert registry.source("brave").not_configured.startswith("Brave Search is not configured.")


def _package_copy_with(tmp_path: Path, module_name: str, text: str) -> Path:
    root = tmp_path / "copy"
    shutil.copytree(REPO / "smart_search", root / "smart_search",
                    ignore=shutil.ignore_patterns("__pycache__"))  # fmt: skip
    shutil.copytree(REPO / "schemas", root / "schemas")
    (root / "smart_search" / "sources" / "providers" / f"{module_name}.py").write_text(text)
    return root


def _cli(root: Path, environ: dict[str, str], call: dict[str, Any]) -> dict[str, Any]:
    proc = subprocess.run(
        [sys.executable, "-m", "smart_search"],
        input=json.dumps(call).encode(),
        capture_output=True,
        env={**environ, "PYTHONPATH": str(root)},
        cwd=str(root),
        timeout=60,
    )
    assert proc.returncode == 0 and not proc.stderr, proc.stderr.decode()[-2000:]
    return json.loads(proc.stdout)


def test_a_new_provider_is_one_module(tmp_path: Path) -> None:
    root = _package_copy_with(tmp_path, "throwaway", THROWAWAY)
    with FakeServer() as fake:
        fake.route("/search", Reply(200, json={"results": [
            {"title": "Webb telescope news", "url": "https://news.example/webb", "content": "x"}]}))
        fake.route("/html/", Reply(404, b"no"))  # the web fallback finds nothing
        config = {
            "endpoints": {"throwaway": fake.url, "duckduckgo": fake.url},
            "agent_allocations": {"cron": {"throwaway": 2}},
            "web_fetch_min_interval_ms": 0,
            # Outside the default chain, a new API is walked when the chain names it.
            "provider_order": ["gemini", "throwaway"],
        }
        path = tmp_path / "openclaw.json"
        path.write_text(json.dumps({"skills": {"entries": {"smart-search": {"config": config}}}}))
        environ = {
            "HOME": str(tmp_path / "home"),
            "PATH": os.environ.get("PATH", ""),
            "SMART_SEARCH_STATE_DIR": str(tmp_path / "state"),
            "OPENCLAW_CONFIG_PATH": str(path),
            "THROWAWAY_API_KEY": "SENTINEL-THROWAWAY-KEY-0001",
        }
        # No Gemini or Brave key: a scheduled agent's plan walks the chain, the new one last.
        found = _cli(root, environ, {"tool": "smart_search",
                                     "args": {"query": "webb telescope", "agent_id": "cron"}})
        assert found["error"] is None, found
        assert (found["provider_used"], found["quota_source"]) == ("throwaway", "agent_allocation")
        assert found["results"][0]["url"] == "https://news.example/webb"
        # The routed (default) provider, then the chain: keyless, skipped before it.
        attempted = [a["provider"] for a in found["attempts"]]
        assert attempted == ["brave", "gemini", "throwaway"]
        assert found["attempts"][-1]["units"] == 1 and found["queries_remaining"] == 1
        sent = fake.requests_to("/search")
        assert len(sent) == 1 and sent[0].headers["x-api-key"] == "SENTINEL-THROWAWAY-KEY-0001"
        status = _cli(root, environ, {"tool": "search_quota_status"})
        assert status["providers"]["throwaway"]["daily_limit"] == 7
        assert status["providers"]["throwaway"]["used"] == 1
        assert status["windows"]["throwaway"]["monthly"]["limit"] == 70
        assert status["agents"]["cron"]["throwaway"] == {"allocated": 2, "used": 1, "remaining": 1}
        # Its config section is checked like the others'.
        config["providers"] = {"throwaway": {"daily_limit": -1}}
        path.write_text(json.dumps({"skills": {"entries": {"smart-search": {"config": config}}}}))
        refused = _cli(root, environ, {"tool": "search_quota_status"})
        assert refused["error_code"] == "config_error"
        assert "providers.throwaway.daily_limit" in refused["error"]
    # The key never reached what was printed or written.
    for file in (tmp_path / "state").rglob("*"):
        if file.is_file():
            assert b"SENTINEL-THROWAWAY" not in file.read_bytes(), file


def test_the_contract_lets_every_registered_provider_be_forced() -> None:
    """Issue 20, point 2: `force_provider` accepts every registered API provider (the schema
    enumerates them: a new provider that agents may force adds its name there)."""
    args = json.loads((REPO / "schemas" / "smart_search.args.json").read_text())
    allowed = set(args["properties"]["force_provider"]["enum"]) - {None}
    assert allowed == set(registry.api_names())


# Issue 30, point 5: each source issue 30 added is named in no package module but its own
# (`budget/migrate.py` reads the Node skill's ledger, whose format names Perplexity).
OWN_MODULES = {
    "parallel_free": (("parallel_free", "search.parallel.ai"), {"parallel_free.py", "parallel.py"}),
    "perplexity": (("perplexity",), {"perplexity.py", "migrate.py"}),
    "grok": (("grok", "xai_api_key", "api.x.ai"), {"grok.py"}),
    "kimi": (("kimi", "moonshot"), {"kimi.py"}),
    "parallel": (("parallel.ai", "parallel_api_key", "providers.parallel", "parallel_free"),
                 {"parallel.py", "parallel_free.py"}),
    # A keyless tier is declared in its provider's module (`KEYLESS`): ollama_local, firecrawl_free.
    "minimax": (("minimax",), {"minimax.py"}),
    "ollama": (("ollama", "ollama_local"), {"ollama.py"}),
    "firecrawl": (("firecrawl", "firecrawl_free"), {"firecrawl.py"}),
}


@pytest.mark.parametrize("name", sorted(OWN_MODULES))
def test_each_new_source_is_named_only_in_its_own_module(name: str) -> None:
    from tests.provider_support import modules_naming

    words, allowed = OWN_MODULES[name]
    naming = {Path(p).name for p in modules_naming(*words)}
    assert f"{name}.py" in naming and naming <= allowed, naming
