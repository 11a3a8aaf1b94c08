"""The Redis state backend against its floors, on a private redis-server on loopback.

    python bench/redis_bench.py [--runs 21] [--burst 64] [--hosts 3] [--rounds 5]

Targets (issue 12, on the 2-core reference machine):

- a cold quota call (a fresh CLI process, state in Redis): within 1.25x of
  `python -I -c "import orjson, redis"`;
- `--burst` processes spread over `--hosts` "hosts" (separate state directories, configs and
  environments sharing one server), one reservation each, all at once: counters exact, and no
  more wall time than the file backend's burst of as many processes on one host.

Figures are medians over fresh processes, interleaved round by round so machine noise hits every
command alike. The skill runs from this checkout (`python -E -s -m smart_search` in the repo
root: `-I` would ignore the checkout for whatever is installed); the floor runs with `-I`, as the
issue states it. Needs a `redis-server` binary and the redis client (`pip install redis`).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

PY = sys.executable
SKILL = [PY, "-E", "-s", "-m", "smart_search"]
FLOOR_CODE = "import orjson, redis"
FLOOR = [PY, "-I", "-c", FLOOR_CODE]
FILE_FLOOR = "import filelock, orjson"  # the file backend's reference floor (bench/bench.py)

RESERVE_ONE = (
    "import os, sys, time\n"
    "from smart_search.host.config import load_settings\n"
    "from smart_search.budget.ledger import Ledger\n"
    "ledger = Ledger(load_settings(os.environ))  # opens the store: the redis client if set\n"
    "if ledger.store.kind == 'files':\n"
    "    from smart_search.store import lock  # what the file backend's first update imports\n"
    "started = time.perf_counter()\n"
    "ledger.reserve(sys.argv[1], 'brave')\n"
    "print(time.perf_counter() - started)\n"
)
RESERVE = [PY, "-E", "-s", "-c", RESERVE_ONE, "cron"]


def config_env(tmp: Path, config: dict) -> dict[str, str]:
    tmp.mkdir(parents=True, exist_ok=True)
    path = tmp / "openclaw.json"
    path.write_text(json.dumps({"skills": {"entries": {"smart-search": {"config": config}}}}))
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTHON")}
    env.update(
        {
            "HOME": str(tmp / "home"),
            "OPENCLAW_CONFIG_PATH": str(path),
            "SMART_SEARCH_STATE_DIR": str(tmp / "state"),
        }
    )
    return env


def timed(cmd: list[str], stdin: bytes, env: dict[str, str]) -> tuple[float, bytes]:
    started = time.perf_counter()
    proc = subprocess.run(cmd, input=stdin, capture_output=True, env=env, cwd=REPO)
    elapsed = time.perf_counter() - started
    if proc.returncode != 0:
        raise SystemExit(f"benchmark command failed: {cmd}\n{proc.stderr.decode()[-2000:]}")
    return elapsed, proc.stdout


def cold_calls(tmp: Path, url: str, runs: int) -> list[str]:
    backend = {"kind": "redis", "url": url, "prefix": "bench-cold"}
    env = config_env(
        tmp / "cold",
        {"agent_allocations": {"cron": {"gemini": 5, "brave": 5}}, "state_backend": backend},
    )
    timed(SKILL, b'{"tool":"search_mark_agent_complete","args":{"agent_id":"general"}}', env)
    cases = {
        f'python -I -c "{FLOOR_CODE}"  (floor)': (FLOOR, b""),
        "search_quota_status (full object)": (SKILL, b'{"tool":"search_quota_status"}'),
        "search_quota_status (one agent)": (
            SKILL,
            b'{"tool":"search_quota_status","args":{"agent_id":"cron"}}',
        ),
    }
    times: dict[str, list[float]] = {name: [] for name in cases}
    for cmd, stdin in cases.values():
        timed(cmd, stdin, env)  # warm the page cache, untimed
    for _ in range(runs):
        for name, (cmd, stdin) in cases.items():
            elapsed, out = timed(cmd, stdin, env)
            if cmd is SKILL:
                assert json.loads(out)["error"] is None, out
            times[name].append(elapsed)
    figures = {name: statistics.median(v) for name, v in times.items()}
    floor = figures[f'python -I -c "{FLOOR_CODE}"  (floor)']
    lines = [f"\n## Cold calls, state in Redis (median of {runs})",
             f"{'command':58} {'median ms':>10} {'x floor':>8}"]  # fmt: skip
    for name, value in figures.items():
        ratio = value / floor
        mark = "" if "floor" in name else ("  ok" if ratio <= 1.25 else "  OVER 1.25x")
        lines.append(f"{name:58} {value * 1000:10.1f} {ratio:8.2f}{mark}")
    return lines


def burst_once(
    envs: list[dict[str, str]],
    count: int,
    cmd: list[str] = RESERVE,
    steps: list[float] | None = None,
) -> float:
    """Wall time of `count` processes started at once; `steps` gets each one's printed
    seconds (for RESERVE: the time inside Ledger(...).reserve, the shared-state step)."""
    started = time.perf_counter()
    procs = [
        subprocess.Popen(
            cmd, env=envs[i % len(envs)], cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE
        )
        for i in range(count)
    ]
    for proc in procs:
        out, err = proc.communicate()
        if proc.returncode != 0:
            raise SystemExit(f"a reservation failed:\n{err.decode()[-2000:]}")
        if steps is not None:
            steps.append(float(out))
    return time.perf_counter() - started


def used(env: dict[str, str]) -> int:
    _, out = timed(SKILL, b'{"tool":"search_quota_status"}', env)
    return json.loads(out)["providers"]["brave"]["used"]


def bursts(tmp: Path, url: str, count: int, hosts: int, rounds: int) -> list[str]:
    walls: dict[str, list[float]] = {"files": [], "redis": [], "files floor": [],
                                     "redis floor": []}  # fmt: skip
    steps: dict[str, list[float]] = {"files": [], "redis": []}
    exact = True
    for r in range(rounds):
        config = {
            "providers": {"brave": {"daily_limit": count * 2}},
            "agent_allocations": {"cron": {"gemini": 0, "brave": count // 2}},
            "lock_timeout_ms": 30000,
        }
        files = [config_env(tmp / f"files{r}", config)]
        backend = {"kind": "redis", "url": url, "prefix": f"bench-burst-{r}"}
        fleet = [
            config_env(tmp / f"redis{r}-host{h}", {**config, "state_backend": backend})
            for h in range(hosts)
        ]
        for kind, envs in (("files", files), ("redis", fleet)):
            walls[kind].append(burst_once(envs, count, steps=steps[kind]))
            exact = exact and all(used(env) == count for env in envs)
        walls["files floor"].append(burst_once(files, count, [PY, "-I", "-c", FILE_FLOOR]))
        walls["redis floor"].append(burst_once(fleet, count, FLOOR))
    wall = {kind: statistics.median(values) for kind, values in walls.items()}
    files_wall, redis_wall = wall["files"], wall["redis"]
    ok = "  ok" if redis_wall <= files_wall else "  OVER the file backend"
    return [
        f"\n## Burst: {count} processes at once, one reservation each (median of {rounds})",
        f"{'command':58} {'wall ms':>10} {'x its floor':>12}",
        f"{f'floor: {count} x python -I -c {FILE_FLOOR!r}':58} {wall['files floor'] * 1000:10.1f}",
        f"{f'floor: {count} x python -I -c {FLOOR_CODE!r}':58} {wall['redis floor'] * 1000:10.1f}",
        f"{'file backend, one host':58} {files_wall * 1000:10.1f} "
        f"{files_wall / wall['files floor']:12.2f}",
        f"{f'redis backend, {hosts} hosts':58} {redis_wall * 1000:10.1f} "
        f"{redis_wall / wall['redis floor']:12.2f}",
        f"redis burst / file burst: {redis_wall / files_wall:.2f}x{ok}",
        *(
            f"time inside reserve() (imports done), {kind}: "
            f"median {statistics.median(v) * 1000:.1f} ms, max {max(v) * 1000:.1f} ms"
            for kind, v in steps.items()
        ),
        f"counters exact ({count} used, seen from every host, every round): "
        + ("yes" if exact else "NO"),
    ]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=21)
    parser.add_argument("--burst", type=int, default=64)
    parser.add_argument("--hosts", type=int, default=3)
    parser.add_argument("--rounds", type=int, default=5)
    opts = parser.parse_args()
    if shutil.which("redis-server") is None:
        raise SystemExit("redis-server is not installed (Debian: apt-get install redis-server)")
    from tests.redis_support import RedisServer

    tmp = Path(tempfile.mkdtemp(prefix="ss-redis-bench-"))
    server = RedisServer(tmp / "redis").start()
    try:
        lines = [f"smart-search Redis benchmarks, python {sys.version.split()[0]}, "
                 f"{os.cpu_count()} cores, redis-server on 127.0.0.1:{server.port}"]  # fmt: skip
        lines += cold_calls(tmp, server.url, opts.runs)
        lines += bursts(tmp, server.url, opts.burst, opts.hosts, opts.rounds)
    finally:
        server.stop()
        shutil.rmtree(tmp, ignore_errors=True)
    print("\n".join(lines))


if __name__ == "__main__":
    main()
