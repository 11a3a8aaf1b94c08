"""The sources table of docs/sources.md and the plugin's list of sources, both written from the
registry (issue 30) and compared with the committed files by tests/test_source_table.py:

    python3 -m smart_search.host.source_table --markdown   # the table between the markers
    python3 -m smart_search.host.source_table --write      # rewrites both files in place

Each row: the source, its billed units, its free allowance (the default windows, on its clock),
its key variable and every place a key may come from, smart-search's own first, then OpenClaw's
(host_keys.places). The plugin's `openclaw-plugin/sources.json` carries the names, labels, kinds
and key variables, so what the plugin tells OpenClaw is what the product reads.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from smart_search.host.host_keys import places
from smart_search.sources import registry
from smart_search.sources.source import Source

BEGIN = "<!-- sources-table: written by python3 -m smart_search.host.source_table -->"
END = "<!-- /sources-table -->"
OWN = 'smart-search\'s env (environment, `skills.entries["smart-search"].env`, `env.vars`)'


def _allowance(source: Source) -> str:
    if source.kind != "api":
        return "none billed (paced)"
    unit = source.units[0].replace("_", " ")
    units = unit[:-1] + "ies" if unit.endswith("y") else unit + "s"
    parts = []
    if source.daily_limit:
        parts.append(f"{source.daily_limit:,} {units} a day")
    if source.monthly_limit:
        parts.append(f"{source.monthly_limit:,} a month")
    return (", ".join(parts) or "none") + f" ({source.reset_timezone})"


def _where(source: Source) -> str:
    found = []
    if source.kind == "api":
        found.append(OWN)
    elif source.self_hosted:
        found.append(f"`endpoints.{source.name}`")
    for place in places(source):
        if place == f"${source.key_variable}":
            found.append("OpenClaw's `.env`")
        elif place.startswith("$"):
            found.append(f"`{place[1:]}` (environment, OpenClaw's `.env`, `env.vars`)")
        else:
            found.append(f"`{place}`")
    return "; ".join(found) or "needs none"


def rows() -> list[str]:
    out = [
        "| Source | Kind | Unit | Free allowance (default windows) | Key variable | "
        "Where a key may come from, in order |",
        "|---|---|---|---|---|---|",
    ]
    for source in registry.sources():
        kind = "API" if source.kind == "api" else "engine"
        if source.self_hosted:
            kind += ", self-hosted"
        units = (
            ", ".join(u.replace("_", " ") for u in source.units) if source.kind == "api" else "-"
        )
        variable = f"`{source.key_variable}`" if source.key_variable else "-"
        out.append(
            f"| {source.label} (`{source.name}`) | {kind} | {units} | {_allowance(source)} | "
            f"{variable} | {_where(source)} |"
        )
    return out


def markdown() -> str:
    return "\n".join([BEGIN, *rows(), END]) + "\n"


def plugin_sources() -> str:
    listed = [
        {"name": s.name, "label": s.label, "kind": s.kind, "keyVariable": s.key_variable}
        for s in registry.sources()
    ]
    return json.dumps({"sources": listed}, indent=2) + "\n"


def rewrite(page: str) -> str:
    """`page` with the text between the markers replaced by the current table."""
    start, end = page.index(BEGIN), page.index(END) + len(END) + 1
    return page[:start] + markdown() + page[end:]


def main(argv: list[str]) -> int:
    repo = Path(__file__).resolve().parents[2]
    if argv == ["--markdown"]:
        sys.stdout.write(markdown())
    elif argv == ["--write"]:
        page = repo / "docs" / "sources.md"
        page.write_text(rewrite(page.read_text()))
        (repo / "openclaw-plugin" / "sources.json").write_text(plugin_sources())
    else:
        sys.stderr.write("usage: python3 -m smart_search.host.source_table --markdown|--write\n")
        return 2
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
