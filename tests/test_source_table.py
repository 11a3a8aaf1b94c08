"""docs/sources.md's table of sources and openclaw-plugin/sources.json are what the registry writes
(smart_search/host/source_table.py), and every web-search provider OpenClaw 2026.9.6 offers is in
the registered table or in the table of those not registered yet (issue 30)."""

from __future__ import annotations

import json
import re
import subprocess
import sys

from smart_search.host import source_table
from smart_search.sources import registry
from tests.conftest import REPO

PAGE = REPO / "docs" / "sources.md"
# OpenClaw 2026.9.6's web-search providers (its docs/tools/web.md, "Choosing a provider"), by the
# name smart-search gives (or will give) the source; OpenClaw's own id where it differs.
OPENCLAW_PROVIDERS = {
    "brave": "brave", "duckduckgo": "duckduckgo", "exa": "exa", "firecrawl": "firecrawl",
    "gemini": "gemini", "grok": "grok", "kimi": "kimi", "minimax": "minimax", "ollama": "ollama",
    "parallel": "parallel", "perplexity": "perplexity", "searxng": "searxng", "tavily": "tavily",
}  # fmt: skip
REGENERATE = "run: python3 -m smart_search.host.source_table --write"


def test_the_committed_table_is_what_the_registry_writes() -> None:
    page = PAGE.read_text()
    assert source_table.markdown() in page, (
        f"docs/sources.md's sources table is stale: {REGENERATE}"
    )
    assert source_table.rewrite(page) == page


def test_the_plugins_list_is_what_the_registry_writes() -> None:
    committed = (REPO / "openclaw-plugin" / "sources.json").read_text()
    assert committed == source_table.plugin_sources(), f"sources.json is stale: {REGENERATE}"
    listed = json.loads(committed)["sources"]
    assert [s["name"] for s in listed] == [s.name for s in registry.sources()]
    apis = [s["keyVariable"] for s in listed if s["kind"] == "api"]
    assert apis and all(apis)  # every API names the variable its key is read from


def test_a_row_per_source_and_per_openclaw_provider() -> None:
    page = PAGE.read_text()
    start, end = page.index(source_table.BEGIN), page.index(source_table.END)
    registered = re.findall(r"^\| [^|]* \(`([a-z0-9_-]+)`\) \|", page[start:end], re.M)
    assert registered == [s.name for s in registry.sources()]
    pending_block = page[end:].split("\n\n## ", 1)[0]
    pending = re.findall(r"^\| [^|]* \(`([a-z0-9-]+)`[^|]*\) \|", pending_block, re.M)
    stale = [name for name in pending if name in registered]
    assert not stale, f"registered now, delete their rows from the second table: {stale}"
    missing = [p for p in OPENCLAW_PROVIDERS if p not in registered and p not in pending]
    assert not missing, f"OpenClaw providers in neither table: {missing}"
    for own in ("serper", "google", "bing"):  # smart-search's own, beside OpenClaw's
        assert own in registered


def run_module(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "smart_search.host.source_table", *args],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=REPO,
    )


def test_the_module_writes_the_table_on_its_command_line() -> None:
    proc = run_module("--markdown")
    assert proc.returncode == 0 and proc.stdout == source_table.markdown()
    bad = run_module("--nope")
    assert bad.returncode == 2 and "usage:" in bad.stderr
