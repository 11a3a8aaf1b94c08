"""The registry of sources: every search API and web engine, each declared once, in its own
module of `providers/` or `engines/`, as a `SOURCE` value (`source.py`).

The registry imports each module of those two packages and keeps the ones that declare a
`SOURCE`, in the order they declare; a provider with a keyless tier also declares `KEYLESS`, a
web source with its own engine functions (opt-in, as a self-hosted engine is: docs/sources.md).
Config defaults, routing, the tier walk, cache keys, deep legs, status, the report, doctor, MCP
and the argument forms read the sources from here, so a new source is one module (plus its
tests and its docs page) and nothing else in the package names it. The modules are light to
import: their wire code loads its own dependencies (http, lxml) when a request is built or a
page parsed.
"""

from __future__ import annotations

import importlib
import os
from functools import cache
from types import ModuleType

from smart_search.sources.source import Source

# The packages whose modules may declare a source: search APIs, then scraped engines.
PACKAGES = ("smart_search.sources.providers", "smart_search.sources.engines")


@cache
def _declared() -> tuple[tuple[Source, ModuleType], ...]:
    found: list[tuple[Source, ModuleType]] = []
    for package_name in PACKAGES:
        package = importlib.import_module(package_name)
        # The package's modules (a listing, not pkgutil: this runs on every call), less the
        # helpers it names (shared request, parsing and fetching code, loaded when used).
        helpers = set(getattr(package, "HELPERS", ()))
        names = sorted(
            entry.name[:-3]
            for folder in package.__path__
            for entry in os.scandir(folder)
            if entry.name.endswith(".py")
            and entry.name[:-3].isidentifier()  # not an editor's `.#x.py` or a `x-copy.py`
            and not entry.name.startswith("_")
            and entry.name[:-3] not in helpers
        )
        for name in names:
            module = importlib.import_module(f"{package_name}.{name}")
            declared = getattr(module, "SOURCE", None)
            if isinstance(declared, Source):
                found.append((declared, module))
            # A provider's keyless tier (`KEYLESS`): a web source of its own, declared in the
            # provider's module with the engine functions it runs (docs/sources.md).
            keyless = getattr(module, "KEYLESS", None)
            if keyless is not None and isinstance(getattr(keyless, "SOURCE", None), Source):
                found.append((keyless.SOURCE, keyless))
    found.sort(key=lambda pair: (pair[0].kind != "api", pair[0].order, pair[0].name))
    return tuple(found)


def sources(kind: str | None = None) -> tuple[Source, ...]:
    """Every declared source (APIs first, each kind in its declared order), or those of `kind`."""
    return tuple(s for s, _ in _declared() if kind is None or s.kind == kind)


@cache
def api_names() -> tuple[str, ...]:
    return tuple(s.name for s in sources("api"))


@cache
def default_chain() -> tuple[str, ...]:
    """The APIs a call walks when `provider_order` is unset, in the sources' order."""
    return tuple(s.name for s in sources("api") if s.default_chain)


@cache
def web_names() -> tuple[str, ...]:
    return tuple(s.name for s in sources("web"))


def source(name: str) -> Source:
    """The source called `name`; KeyError for none."""
    for declared, _ in _declared():
        if declared.name == name:
            return declared
    raise KeyError(name)


def module(name: str) -> ModuleType:
    """The module that declares `name` (its request builder, parser and error mapping); for a
    keyless tier, the namespace its provider's module declares as `KEYLESS`."""
    for declared, declaring in _declared():
        if declared.name == name:
            return declaring
    raise KeyError(name)


def label(name: str) -> str:
    """How messages name a source ("Gemini"); the name itself for anything else ("web_fetch")."""
    for declared, _ in _declared():
        if declared.name == name:
            return declared.label
    return name
