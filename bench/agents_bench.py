"""What many agents cost a search (the hardening issue, item 9).

    python bench/agents_bench.py [--runs 9]

Times one reservation in a fresh process (`Ledger.reserve`, what every API tier does) against:
an empty install; a config with as many configured agents as fit under the 1 MiB config cap;
and a ledger already holding `max_unconfigured_agents` (1,000) unconfigured agents that spent
today. Before the fix, 100,000 invented ids made a 30 MB ledger and 4 s searches; now only
spending agents are stored and unconfigured ones are capped, so the ledger stays small.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
RESERVE = (
    "import os, sys\n"
    "from smart_search.host.config import load_settings\n"
    "from smart_search.budget.ledger import Ledger\n"
    "Ledger(load_settings(os.environ)).reserve(sys.argv[1], 'gemini')\n"
)


def install(root: Path, agents: int) -> dict[str, str]:
    root.mkdir(parents=True, exist_ok=True)
    config = {
        "providers": {"gemini": {"daily_limit": 10**9, "monthly_limit": 10**9}},
        "agent_allocations": {f"a{i}": {"gemini": 1} for i in range(agents)},
    }
    path = root / "openclaw.json"
    path.write_text(
        json.dumps({"skills": {"entries": {"smart-search": {"config": config}}}}, indent=None)
    )
    return {
        "HOME": str(root),
        "PATH": os.environ.get("PATH", ""),
        "PYTHONPATH": str(REPO),
        "OPENCLAW_CONFIG_PATH": str(path),
        "SMART_SEARCH_STATE_DIR": str(root / "state"),
    }


def timed(env: dict[str, str], agent: str, runs: int) -> float:
    samples = []
    for _ in range(runs):
        started = time.perf_counter()
        subprocess.run([sys.executable, "-c", RESERVE, agent], env=env, check=True)
        samples.append(time.perf_counter() - started)
    return statistics.median(samples) * 1000


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=9)
    runs = parser.parse_args().runs
    tmp = Path(tempfile.mkdtemp(prefix="ss-bench-agents-"))
    base = timed(install(tmp / "empty", 0), "cron", runs)
    # ~40 bytes per configured agent: the largest config under the 1 MiB cap.
    many = install(tmp / "configured", 24_000)
    size = Path(many["OPENCLAW_CONFIG_PATH"]).stat().st_size
    configured = timed(many, "a5", runs)
    stored = install(tmp / "stored", 1)  # a0 is configured: the cap is for the others
    for i in range(1000):
        subprocess.run([sys.executable, "-c", RESERVE, f"u{i}"], env=stored, check=True)
    ledger_kb = (tmp / "stored" / "state" / "search-quota.json").stat().st_size / 1024
    with_stored = timed(stored, "a0", runs)
    print(f"{'one reservation, fresh process':56} {'median ms':>10} {'ratio':>7}")
    print(f"{'empty install':56} {base:10.1f} {1.0:7.2f}")
    print(f"{f'{24_000} configured agents ({size / 1024:.0f} KiB config)':56} "
          f"{configured:10.1f} {configured / base:7.2f}")  # fmt: skip
    print(f"{f'1,000 unconfigured agents stored ({ledger_kb:.0f} KiB ledger)':56} "
          f"{with_stored:10.1f} {with_stored / base:7.2f}")  # fmt: skip


if __name__ == "__main__":
    main()
