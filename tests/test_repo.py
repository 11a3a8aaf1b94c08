"""Repository-level checks: lint, SKILL.md's manifest and examples, the installed package."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from smart_search import contract
from tests.conftest import REPO


def test_ruff_is_clean() -> None:
    ruff = shutil.which("ruff")
    assert ruff, "ruff is a test dependency: pip install -e '.[test]'"
    proc = subprocess.run([ruff, "check", str(REPO)], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stdout[-3000:]


def frontmatter() -> dict[str, str]:
    text = (REPO / "SKILL.md").read_text()
    assert text.startswith("---\n")
    block = text.split("---\n")[1]
    # OpenClaw's embedded parser reads single-line keys only.
    fields = {}
    for line in block.strip().splitlines():
        key, sep, value = line.partition(": ")
        assert sep and re.fullmatch(r"[a-z-]+", key), f"not a single-line key: {line!r}"
        fields[key] = value
    return fields


# What OpenClaw 2026.9.6 reads from metadata.openclaw (dist/frontmatter-2H_F0IFB.mjs); anything
# else (the old `envVars`) is silently dropped.
OPENCLAW_METADATA_KEYS = {
    "always", "emoji", "homepage", "skillKey", "primaryEnv", "os", "requires", "install",
}  # fmt: skip


def test_skill_manifest() -> None:
    fields = frontmatter()
    assert fields["name"] == "smart-search"
    assert len(fields["description"]) > 40
    meta = json.loads(fields["metadata"])["openclaw"]
    assert set(meta) <= OPENCLAW_METADATA_KEYS, set(meta) - OPENCLAW_METADATA_KEYS
    assert meta["requires"] == {"bins": ["smart-search"]}  # nothing else is truly required
    assert meta["primaryEnv"] in ("GEMINI_API_KEY", "BRAVE_API_KEY")
    # No install spec may name a package that is not this project: this project is published
    # nowhere, so there is none, and SKILL.md gives the exact commands instead.
    assert "install" not in meta
    text = (REPO / "SKILL.md").read_text()
    assert "python3 -m venv" in text and "bin/pip install /path/to/smart-search" in text


def test_distribution_name_is_not_the_strangers_package() -> None:
    import tomllib

    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    assert project["name"] == "openclaw-smart-search"
    assert project["scripts"] == {"smart-search": "smart_search.__main__:main"}


TOOLS = {"smart_search", "search_quota_status", "search_mark_agent_complete", "smart_fetch"}


def tools_called(calls: list[str]) -> set[str]:
    """The tools the example calls name, each call checked against the contract."""
    tools = set()
    for raw in calls:
        request = json.loads(raw)
        contract.check("request.json", request)
        contract.check(f"{request['tool']}.args.json", request.get("args", {}))
        tools.add(request["tool"])
    return tools


def test_skill_examples_are_valid_calls() -> None:
    text = (REPO / "SKILL.md").read_text()
    calls = re.findall(r"smart-search <<'JSON'\n(.*?)\nJSON", text, re.S)
    assert len(calls) >= 4
    assert tools_called(calls) == TOOLS
    assert "yieldMs" in text and "35000" in text


def readme_block(marker: str) -> str:
    """The fenced block right after `<!-- marker -->` in README.md, as .ci/run reads it."""
    readme = (REPO / "README.md").read_text()
    match = re.search(rf"^<!-- {marker} -->\n```[a-z]*\n(.*?)^```", readme, re.S | re.M)
    assert match, f"README.md lost its <!-- {marker} --> block"
    return match.group(1)


def test_readme_opens_with_the_two_commands_and_ci_runs_them() -> None:
    readme = (REPO / "README.md").read_text()
    first = readme_block("install-and-search").strip()
    # README opens with them: the first two code blocks, before any section.
    blocks = re.findall(r"```(?:bash|sh)\n(.*?)```", readme.split("\n## ", 1)[0], re.S)
    assert [b.strip() for b in blocks[:2]] == [first, readme_block("test-command").strip()]
    # A stock Debian python refuses a bare pip install (PEP 668): the first command makes a venv
    # and runs the command from it.
    assert "\n" not in first
    assert first.startswith("python3 -m venv .venv && .venv/bin/pip install . && ")
    assert first.endswith("| .venv/bin/smart-search")
    request = json.loads(first.split("echo '", 1)[1].split("' |", 1)[0])
    assert request["args"]["agent_id"] == "general"
    contract.check("request.json", request)
    install, test_command = readme_block("test-command").strip().splitlines()
    assert install.startswith("python3 -m venv .venv && . .venv/bin/activate && ")
    # Two steps that together run every test: the multi-process ones on their own.
    assert test_command == (
        'python3 -m pytest -m "not multiprocess" && python3 -m pytest -m multiprocess'
    )
    # CI runs the blocks it reads from README, not copies of them.
    ci = (REPO / ".ci" / "run").read_text()
    assert "readme_block install-and-search" in ci and "readme_block test-command" in ci
    assert test_command not in ci and first not in ci


def test_readme_tool_calls_are_valid_calls() -> None:
    """The front door shows one call of each tool; each is a request the contract accepts."""
    readme = (REPO / "README.md").read_text()
    calls = re.findall(r"^echo '(\{.*?\})' \| smart-search$", readme, re.M)
    assert len(calls) == 4
    assert tools_called(calls) == TOOLS


def test_readme_is_a_front_door() -> None:
    """At most 400 lines; the reference lives in docs/, and every relative link resolves."""
    readme = (REPO / "README.md").read_text()
    assert len(readme.splitlines()) <= 400
    for doc in [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]:
        for target in re.findall(r"\]\(([^)#\s]+)(?:#[^)]*)?\)", doc.read_text()):
            if "://" not in target:
                assert (doc.parent / target).exists(), f"{doc.name} links to missing {target}"


def _outer_import_paths(
    entries: list[str] | None = None, prefixes: list[str] | None = None, repo: Path = REPO
) -> list[str]:
    """The directories this interpreter imports from, the checkout's own source excepted:
    wherever the suite runs (a venv, a venv with system packages, the base interpreter with
    PYTHONPATH or --user packages), these hold the build backend, pip and the runtime
    dependencies it has. A venv made inside the checkout, as README's commands make `.venv`, is
    an environment, not source: its directories stay."""
    envs = [Path(p).resolve() for p in (prefixes or [sys.prefix, sys.exec_prefix])]
    envs = [env for env in envs if repo in env.parents]
    paths = []
    for entry in sys.path if entries is None else entries:
        path = Path(entry or ".").resolve()
        in_env = any(path == env or env in path.parents for env in envs)
        source = path == repo or (repo in path.parents and not in_env)
        if path.is_dir() and not source and str(path) not in paths:
            paths.append(str(path))
    return paths


def test_outer_import_paths_keep_a_venv_inside_the_checkout(tmp_path: Path) -> None:
    """README's `.venv` lies inside the checkout: its site-packages (pip, the build backend) must
    reach the nested venv below, while the checkout's own directories must not."""
    checkout = tmp_path / "checkout"
    venv = checkout / ".venv"
    site = venv / "lib" / "python3.11" / "site-packages"
    outside = tmp_path / "elsewhere" / "site-packages"
    for directory in (site, checkout / "tests", outside):
        directory.mkdir(parents=True)
    entries = [str(checkout), str(checkout / "tests"), str(site), str(outside), str(site)]
    assert _outer_import_paths(entries, [str(venv)], checkout) == [str(site), str(outside)]
    # A venv elsewhere: everything under the checkout is its source.
    other = tmp_path / "elsewhere"
    assert _outer_import_paths(entries, [str(other)], checkout) == [str(outside)]


@pytest.mark.slow
def test_non_editable_install_ships_the_schemas(tmp_path: Path) -> None:
    """`pip install .` (not editable) in a fresh venv: console script, -m, schemas inside."""
    venv = tmp_path / "venv"
    # Not --system-site-packages: run from inside a venv, that would show the nested venv the BASE
    # interpreter's packages, not the ones this suite runs with. A .pth file gives it exactly this
    # interpreter's import path instead; it comes after the venv's own site-packages, so the copy
    # installed below is the one imported (checked below).
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    py = venv / "bin" / "python"
    own_site = subprocess.run(
        [str(py), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    (Path(own_site) / "outer-environment.pth").write_text("\n".join(_outer_import_paths()) + "\n")
    proc = subprocess.run(
        [
            str(py),
            "-m",
            "pip",
            "install",
            "--quiet",
            "--no-deps",
            "--no-index",
            "--no-build-isolation",
            str(REPO),
        ],
        capture_output=True,
        text=True,
        cwd=tmp_path,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    where = subprocess.run(
        [str(py), "-c", "import smart_search.contract as c; print(c.schema_dir())"],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        check=True,
    ).stdout.strip()
    assert where.startswith(str(venv)) and (Path(where) / "smart_search.args.json").is_file()
    env = {"HOME": str(tmp_path), "SMART_SEARCH_STATE_DIR": str(tmp_path / "state")}
    for cmd in ([str(venv / "bin" / "smart-search")], [str(py), "-m", "smart_search"]):
        out = subprocess.run(
            cmd,
            input=b'{"tool": "smart_search", "args": {"query": ""}}',
            capture_output=True,
            env=env,
            cwd=tmp_path,
            check=True,
        ).stdout
        assert json.loads(out)["error"] == "query is required and must be a non-empty string."
