"""Keys the host already holds (issue 30, point 2): when smart-search's own config names no key
for a source, the key OpenClaw holds for that provider's web search.

A source declares where OpenClaw may keep its key (`host_plugin`, `host_keys` in its SOURCE:
sources/source.py); this module turns that into places, in OpenClaw's documented order, and reads
them; the source never learns where its key came from. For an API the places are

1. `plugins.entries.<plugin>.config.webSearch.apiKey` (what `openclaw configure --section web`
   writes; docs/tools/web.md);
2. the legacy `tools.web.search.<name>.apiKey` (before `openclaw doctor --fix` moves it);
3. the source's further `host_keys`, in the order OpenClaw reads them: openclaw.json paths (a
   model provider's key, an older layout) and `$VAR` for another variable OpenClaw reads;
4. its key variable in OpenClaw's global `.env` (the process environment and `env.vars` are
   smart-search's own walk already, config_entry.api_key_sources).

A self-hosted engine's places hold its `baseUrl` instead of an `apiKey`. Every config value is a
secret input (`${VAR}`, `$VAR`, a SecretRef: openclaw/secret_refs.py). As in OpenClaw, a place
that names a secret which cannot be read ends the walk: that source has no key, and the note says
why (doctor shows it; the value never appears anywhere).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any, NamedTuple

from smart_search.host.openclaw.dotenv import global_env_path, read_global_env
from smart_search.host.openclaw.secret_refs import Unresolved, resolve
from smart_search.sources.source import Source

OPENCLAW = "(OpenClaw)"


class Found(NamedTuple):
    """Where a key was found (a label doctor prints) and the key; or, with `value` None, no key
    and `notes` saying what stood in the way."""

    value: str | None
    origin: str | None
    notes: tuple[str, ...] = ()


class HostEnv(Mapping[str, str]):
    """The environment OpenClaw's process would hold: the process environment, then its global
    `.env`, then openclaw.json's `env.vars` (none overrides an earlier one). The `.env` file is read
    once, and only when asked for something the others lack."""

    def __init__(self, env: Mapping[str, Any], root: Mapping[str, Any]) -> None:
        self.env = env
        top = root.get("env") if isinstance(root.get("env"), dict) else {}
        self.vars = top.get("vars") if isinstance(top.get("vars"), dict) else {}
        self._dotenv: tuple[str, dict[str, str]] | None = None
        # Every file the walk read or tried to (the global .env, SecretRef files): a long-running
        # server re-reads the config when one of them changes (Settings.config_files).
        self.files: list[str] = []

    @property
    def dotenv(self) -> tuple[str, dict[str, str]]:
        """The global `.env`'s path and variables, read on first use."""
        if self._dotenv is None:
            path = global_env_path(self.env)
            self._dotenv = (path, read_global_env(self.env, path))
            self.files.append(path)
        return self._dotenv

    def where(self, name: str) -> tuple[str, str] | None:
        """(label, value) of the first non-empty `name`."""
        value = self.env.get(name)
        if isinstance(value, str) and value.strip():
            return "environment", value.strip()
        path, variables = self.dotenv
        for label, source in ((path, variables), ("env.vars", self.vars)):
            value = source.get(name)
            if isinstance(value, str) and value.strip():
                return label, value.strip()
        return None

    def __getitem__(self, name: str) -> str:
        found = self.where(name)
        if found is None:
            raise KeyError(name)
        return found[1]

    def __iter__(self) -> Iterator[str]:
        return iter({*self.env, *self.dotenv[1], *self.vars})

    def __len__(self) -> int:
        return len({*self.env, *self.dotenv[1], *self.vars})


def places(source: Source) -> tuple[str, ...]:
    """Where OpenClaw may hold `source`'s key, in the order read: dotted openclaw.json paths, and
    `$VAR` for a variable of OpenClaw's environment. Empty for a source it holds nothing for."""
    if source.host_plugin is None and not source.host_keys:
        return ()
    field = "apiKey" if source.kind == "api" else "baseUrl"
    found: list[str] = []
    if source.host_plugin is not None:
        found.append(f"plugins.entries.{source.host_plugin}.config.webSearch.{field}")
        found.append(f"tools.web.search.{source.name}.{field}")
    found.extend(source.host_keys)
    if source.key_variable:
        found.append("$" + source.key_variable)
    return tuple(dict.fromkeys(found))


def find(source: Source, root: Mapping[str, Any], host_env: HostEnv) -> Found:
    """The key OpenClaw holds for `source` (module docstring), or why there is none."""
    for place in places(source):
        if place.startswith("$"):
            hit = host_env.where(place[1:])
            if hit is None:
                continue
            label = f"{place[1:]} from {hit[0]}"
            raw: Any = hit[1]
        else:
            raw = _at(root, place)
            if raw is None or raw == "":
                continue
            label = place
        try:
            value = resolve(raw, root, host_env, host_env.files)
        except Unresolved as err:
            return Found(None, None, (f"{label} {OPENCLAW} {err.why}",))
        if value:
            return Found(value, f"{label} {OPENCLAW}")
    return Found(None, None)


def _at(root: Mapping[str, Any], dotted: str) -> Any:
    value: Any = root
    for part in dotted.split("."):
        if not isinstance(value, dict):
            return None
        value = value.get(part)
    return value


def source_states(settings: Any) -> dict[str, dict[str, Any]]:
    """Every registered source and whether this install can use it (issue 30, point 3): for an
    API, whether it has a key and where the key came from; for a web engine, whether it is
    reachable (a self-hosted one needs an endpoint). search_quota_status and doctor show it, so
    an operator sees what switching OpenClaw's web_search to smart-search keeps."""
    from smart_search.sources import registry

    out: dict[str, dict[str, Any]] = {}
    for source in registry.sources():
        if source.kind == "api":
            configured = settings.api_keys.get(source.name) is not None
        else:
            configured = source.name in settings.endpoints
        origin = settings.key_origins.get(source.name)
        if origin is None and configured and source.self_hosted:
            origin = f"endpoints.{source.name}"
        notes = settings.key_notes.get(source.name, ())
        out[source.name] = {
            "configured": configured,
            "kind": source.kind,
            "key_from": origin if configured else None,
            "note": "; ".join(notes) or None,
        }
    return out
