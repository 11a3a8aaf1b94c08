"""The result cache's benchmarks (issue 11), measured in ONE run against loopback fakes.

    python bench/cache_bench.py [--runs 21] [--burst 32] [--rounds 5] [--latency 0.3]

- Cold calls: a cached `smart_search` (a hit, in a fresh process) against a cold
  `search_quota_status` (the one-agent call, which never opens the cache, and the full object,
  which shows the cache's size). Target: the hit costs no more than 1.1x the quota call. Medians
  over `--runs` fresh processes, interleaved round by round so that noise hits them alike.
- Burst: `--burst` processes asking the same question at once, the fake Brave answering after
  `--latency` seconds (a real API's round trip), with the cache (single-flight: one request, the
  others wait for it) and without (`cache.enabled: false`: every process pays). Target: the
  cached burst takes less wall time. Median of `--rounds` bursts each, alternating.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "tests"))
sys.path.insert(0, str(REPO / "bench"))

from bench import PY, config_env, table  # noqa: E402

# This checkout's package, whatever is installed: -E -s ignore PYTHON* variables and the user
# site as -I does, and `-m` with cwd=REPO puts this checkout first on sys.path (-I would not).
SKILL = [PY, "-E", "-s", "-m", "smart_search"]
FLOOR = [PY, "-E", "-s", "-c", "import filelock, orjson"]


CPU: dict[str, list[float]] = {}  # CPU seconds (user + system) of each case's processes


def run(cmd: list[str], stdin: bytes, env: dict[str, str]) -> tuple[float, bytes]:
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    proc = subprocess.run(cmd, input=stdin, capture_output=True, env=env, cwd=REPO)
    elapsed = time.perf_counter() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    run.cpu = (after.ru_utime + after.ru_stime) - (before.ru_utime + before.ru_stime)  # type: ignore[attr-defined]
    if proc.returncode != 0:
        raise SystemExit(f"benchmark command failed: {cmd}\n{proc.stderr.decode()[-2000:]}")
    return elapsed, proc.stdout


def medians(cases: dict, env: dict[str, str], runs: int, check: dict) -> dict[str, float]:
    times: dict[str, list[float]] = {name: [] for name in cases}
    for cmd, stdin in cases.values():  # warm the page cache once, untimed
        run(cmd, stdin, env)
    for _ in range(runs):
        for name, (cmd, stdin) in cases.items():
            elapsed, out = run(cmd, stdin, env)
            if name in check:
                check[name](out)
            times[name].append(elapsed)
            CPU.setdefault(name, []).append(run.cpu)  # type: ignore[attr-defined]
    return {name: statistics.median(values) for name, values in times.items()}


QUERY = b'{"tool":"smart_search","args":{"query":"nasa news","agent_id":"cron"}}'
QUOTA_ONE = b'{"tool":"search_quota_status","args":{"agent_id":"cron"}}'
QUOTA_FULL = b'{"tool":"search_quota_status"}'


def brave_config(fake_url: str, **extra: object) -> dict:
    return {
        "endpoints": {"brave": fake_url},
        "providers": {"brave": {"daily_limit": 100000}},
        "agent_allocations": {"cron": {"gemini": 0, "brave": 100000}},
        "lock_timeout_ms": 60000,
        **extra,
    }


def bench_cold(runs: int) -> list[str]:
    from fakes import FakeServer, Reply, fixture_bytes

    tmp = Path(tempfile.mkdtemp(prefix="ss-cache-bench-"))
    with FakeServer() as brave:
        brave.route(
            "/res/v1/web/search",
            Reply(200, fixture_bytes("brave-ok.json"), {"content-type": "application/json"}),
        )
        env = config_env(tmp, brave_config(brave.url))
        env["BRAVE_API_KEY"] = "bench-key"
        first = json.loads(run(SKILL, QUERY, env)[1])
        assert first["provider_used"] == "brave" and not first["cached"], first

        def hit(out: bytes) -> None:
            result = json.loads(out)
            assert result["cached"] is True and result["results"], out[:300]

        def ok(out: bytes) -> None:
            assert json.loads(out)["error"] is None, out[:300]

        floor = 'python -E -s -c "import filelock, orjson"  (floor)'
        cases = {
            floor: (FLOOR, b""),
            "search_quota_status (one agent)": (SKILL, QUOTA_ONE),
            "search_quota_status (full object, with cache size)": (SKILL, QUOTA_FULL),
            "smart_search answered from the cache": (SKILL, QUERY),
        }
        figures = medians(
            cases,
            env,
            runs,
            {
                "search_quota_status (one agent)": ok,
                "search_quota_status (full object, with cache size)": ok,
                "smart_search answered from the cache": hit,
            },
        )
        assert len(brave.requests_to("/res/v1/web/search")) == 1, "a hit reached the provider"
    lines = table(f"Cold calls (median of {runs})", figures, floor, None)
    hit_s = figures["smart_search answered from the cache"]
    for name in ("search_quota_status (one agent)", "search_quota_status (full object, with "
                 "cache size)"):  # fmt: skip
        ratio = hit_s / figures[name]
        mark = "ok" if ratio <= 1.1 else "OVER 1.1x"
        cpu = statistics.median(CPU["smart_search answered from the cache"]) / statistics.median(
            CPU[name]
        )
        lines.append(
            f"cached smart_search / {name}: wall {ratio:.2f}  {mark}  (CPU time {cpu:.2f})"
        )
    return lines


def bench_burst(burst: int, rounds: int, latency: float) -> list[str]:
    from fakes import FakeServer, Reply, fixture_bytes

    walls: dict[str, list[float]] = {"cache": [], "no cache": []}
    requests: dict[str, list[int]] = {"cache": [], "no cache": []}
    with FakeServer() as brave:
        brave.route(
            "/res/v1/web/search",
            Reply(
                200,
                fixture_bytes("brave-ok.json"),
                {"content-type": "application/json"},
                delay=latency,
            ),
        )
        for r in range(rounds):
            for kind in ("cache", "no cache") if r % 2 == 0 else ("no cache", "cache"):
                tmp = Path(tempfile.mkdtemp(prefix="ss-cache-burst-"))
                extra = {} if kind == "cache" else {"cache": {"enabled": False}}
                env = config_env(tmp, brave_config(brave.url, **extra))
                env["BRAVE_API_KEY"] = "bench-key"
                before = len(brave.requests_to("/res/v1/web/search"))
                started = time.perf_counter()
                procs = [
                    subprocess.Popen(
                        SKILL, stdin=subprocess.PIPE, stdout=subprocess.PIPE, env=env, cwd=REPO
                    )
                    for _ in range(burst)
                ]
                outs = [p.communicate(QUERY)[0] for p in procs]
                walls[kind].append(time.perf_counter() - started)
                results = [json.loads(o) for o in outs]
                assert all(x["provider_used"] == "brave" for x in results), results[0]
                requests[kind].append(len(brave.requests_to("/res/v1/web/search")) - before)
    cached = statistics.median(walls["cache"])
    uncached = statistics.median(walls["no cache"])
    return [
        f"\n## Identical burst: {burst} processes at once, Brave answering in {latency * 1000:.0f}"
        f" ms (median of {rounds} bursts each)",
        f"{'without the cache (every process pays)':58} {uncached * 1000:10.1f} "
        f"requests {max(requests['no cache'])}",
        f"{'with the cache (single-flight)':58} {cached * 1000:10.1f} "
        f"requests {max(requests['cache'])}",
        f"cached / uncached wall time: {cached / uncached:.2f}"
        + ("  ok" if cached < uncached else "  NOT FASTER"),
    ]


# The alternative measured against SQLite: one file per entry (a JSON header line, then the
# value), written to a temp name and renamed; LRU by mtime, found by listing the directory.
FILE_PER_ENTRY = """
import hashlib, os, sys, time, orjson
d = sys.argv[1]
def path(key): return os.path.join(d, hashlib.sha256(key.encode()).hexdigest())
def put(key, value, max_entries):
    tmp = path(key) + ".tmp"
    with open(tmp, "wb") as fh:
        fh.write(orjson.dumps({"expires_at": time.time() + 3600}) + b"\\n" + value)
    os.replace(tmp, path(key))
    names = os.listdir(d)
    if len(names) > max_entries:
        aged = sorted(names, key=lambda n: os.stat(os.path.join(d, n)).st_mtime)
        for n in aged[: len(names) - max_entries]:
            os.remove(os.path.join(d, n))
def get(key):
    try:
        with open(path(key), "rb") as fh:
            head, _, value = fh.read().partition(b"\\n")
    except FileNotFoundError:
        return None
    if orjson.loads(head)["expires_at"] <= time.time():
        return None
    os.utime(path(key))
    return value
"""
SQLITE = """
import sys, time
from smart_search.store import CacheEntry
from smart_search.store.sqlite_cache import SqliteCache
c = SqliteCache(sys.argv[1], 5000)
def put(key, value, max_entries):
    now = time.time()
    c.put(key, CacheEntry(value, now, now + 3600), max_entries, 1 << 30)
def get(key):
    e = c.get(key, time.time())
    return None if e is None else e.value
"""
MANY = """
n = int(sys.argv[2]); value = b"x" * 4000; m = 200
for i in range(n): put(f"key {i}", value, n)
t = time.perf_counter()
for i in range(n, n + m): put(f"key {i}", value, n)  # at the limit: each put evicts one
t_put = time.perf_counter() - t
t = time.perf_counter()
for i in range(n, n + m): assert get(f"key {i}") == value
print(t_put / m * 1e3, (time.perf_counter() - t) / m * 1e3)
"""
ONE_GET = """
assert get("key 2100") is not None
"""


def bench_store(runs: int, entries: int = 2000) -> list[str]:
    """SQLite against a file per entry: a cold process's import + one lookup, and in-process
    put (with eviction at the limit) and get over `entries` entries of 4 KB."""
    lines = [f"\n## Storage: SQLite (WAL) against a file per entry ({entries} entries of 4 KB)"]
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTHON")}
    per_op: dict[str, tuple[float, float]] = {}
    cold: dict[str, list[float]] = {"sqlite": [], "files": []}
    dirs = {}
    for name, code in (("sqlite", SQLITE), ("files", FILE_PER_ENTRY)):
        d = tempfile.mkdtemp(prefix=f"ss-store-{name}-")
        dirs[name] = d
        out = subprocess.run([PY, "-E", "-s", "-c", code + MANY, d, str(entries)], env=env,
                             cwd=REPO, capture_output=True, check=True).stdout  # fmt: skip
        put_ms, get_ms = map(float, out.split())
        per_op[name] = (put_ms, get_ms)
    for _ in range(runs):
        for name, code in (("sqlite", SQLITE), ("files", FILE_PER_ENTRY)):
            started = time.perf_counter()
            subprocess.run([PY, "-E", "-s", "-c", code + ONE_GET, dirs[name]], env=env,
                           cwd=REPO, check=True)  # fmt: skip
            cold[name].append(time.perf_counter() - started)
    for name in ("sqlite", "files"):
        put_ms, get_ms = per_op[name]
        lines.append(
            f"{name:8} cold process + one hit {statistics.median(cold[name]) * 1000:7.1f} ms"
            f"   put (evicting) {put_ms:7.3f} ms   get {get_ms:7.3f} ms"
        )
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=21)
    parser.add_argument("--burst", type=int, default=32)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--latency", type=float, default=0.3)
    parser.add_argument("--only", default="cold,burst,store")
    opts = parser.parse_args()
    parts = opts.only.split(",")
    lines = [
        f"# smart-search cache bench ({os.cpu_count()} cores, Python {sys.version.split()[0]})"
    ]
    if "cold" in parts:
        lines += bench_cold(opts.runs)
    if "burst" in parts:
        lines += bench_burst(opts.burst, opts.rounds, opts.latency)
    if "store" in parts:
        lines += bench_store(opts.runs)
    print("\n".join(lines))


if __name__ == "__main__":
    main()
