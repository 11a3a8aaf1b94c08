"""Deep mode's wall time against its slowest leg (issue 15), in one process, loopback fakes only.

    python bench/deep_bench.py [--runs 15] [--brave 0.10] [--gemini 0.30] [--duckduckgo 0.20]

Three fakes answer with known delays (seconds before the status line): Brave, Gemini and the
DuckDuckGo page. Each round, interleaved so machine noise hits them alike:

- `deep`: one `smart_search` call with `mode: "deep"`, all three legs in parallel;
- `slowest alone`: the slowest source asked alone, in first mode (`force_provider` for an API,
  no keys configured for the web page), the same call path with one tier;
- `sequential`: the three delays added, what asking one after another would at least cost.

Target: the deep call's median is no more than the slowest leg alone plus 50 ms. Calls go through
`runner.handle` in this process (imports and the first TLS-free connection are warmed first), so
the figures are the call's own work: ledger, breaker, three threads, parsing, merge, log.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "tests"))

from fakes import FakeServer, Reply, fixture_bytes  # noqa: E402

MODEL = "gemini-flash-latest"
PATHS = {
    "brave": "/res/v1/web/search",
    "gemini": f"/v1beta/models/{MODEL}:generateContent",
    "duckduckgo": "/html/",
}
MARGIN_S = 0.050


def replies(delays: dict[str, float]) -> dict[str, Reply]:
    serp = REPO / "tests" / "fixtures" / "serp" / "duckduckgo" / "html-results-caffeine.html"
    json_type = {"content-type": "application/json"}
    return {
        "brave": Reply(200, fixture_bytes("brave-ok.json"), json_type, delay=delays["brave"]),
        "gemini": Reply(200, fixture_bytes("gemini-ok.json"), json_type, delay=delays["gemini"]),
        "duckduckgo": Reply(
            200,
            serp.read_bytes(),
            {"content-type": "text/html; charset=utf-8"},
            delay=delays["duckduckgo"],
        ),
    }


def environ(root: Path, url: str, keys: bool) -> dict[str, str]:
    config = {
        "endpoints": {n: url for n in ("gemini", "brave", "google", "bing", "duckduckgo")},
        "web_fetch_min_interval_ms": 0,
        "circuit_failure_threshold": 1000,
        "cache": {"enabled": False},  # every round pays: the legs' own time is measured
        "agent_allocations": {"bench": {"gemini": 1_000_000, "brave": 1_000_000}},
        "providers": {
            "gemini": {"unit": "request", "daily_limit": 10**8, "monthly_limit": 10**8},
            "brave": {"daily_limit": 10**8, "monthly_limit": 10**8},
        },
    }
    home = root / "home"
    (home / ".openclaw").mkdir(parents=True, exist_ok=True)
    doc = {"skills": {"entries": {"smart-search": {"config": config}}}}
    (home / ".openclaw" / "openclaw.json").write_text(json.dumps(doc))
    env = {
        "HOME": str(home),
        "PATH": os.environ.get("PATH", ""),
        "SMART_SEARCH_STATE_DIR": str(root / "state"),
        "OPENCLAW_CONFIG_PATH": str(home / ".openclaw" / "openclaw.json"),
    }
    if keys:
        env["GEMINI_API_KEY"] = "BENCH-GEMINI-KEY"
        env["BRAVE_API_KEY"] = "BENCH-BRAVE-KEY"
    return env


def timed(env: dict[str, str], args: dict[str, object]) -> tuple[float, dict[str, object]]:
    from smart_search.shell.runner import handle

    raw = json.dumps({"tool": "smart_search", "args": args}).encode()
    started = time.perf_counter()
    result = handle(raw, env)
    elapsed = time.perf_counter() - started
    if result.get("error") is not None:
        raise SystemExit(f"benchmark call failed: {result['error']}")
    return elapsed, result


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--runs", type=int, default=15)
    for name, default in (("brave", 0.10), ("gemini", 0.30), ("duckduckgo", 0.20)):
        parser.add_argument(f"--{name}", type=float, default=default, help="delay, seconds")
    opts = parser.parse_args(argv)
    delays = {"brave": opts.brave, "gemini": opts.gemini, "duckduckgo": opts.duckduckgo}
    slowest = max(delays, key=delays.__getitem__)
    query = "python httpx timeout"
    deep_args = {"query": query, "agent_id": "bench", "mode": "deep"}
    alone_args: dict[str, object] = {"query": query, "agent_id": "bench"}
    if slowest != "duckduckgo":
        alone_args["force_provider"] = slowest

    with FakeServer() as fake, tempfile.TemporaryDirectory() as tmp:
        for name, reply in replies(delays).items():
            fake.route(PATHS[name], reply)
        deep_env = environ(Path(tmp) / "deep", fake.url, keys=True)
        # DuckDuckGo alone: no keys, so Strategy A's API tiers are skipped without I/O.
        alone_env = environ(Path(tmp) / "alone", fake.url, keys=slowest != "duckduckgo")
        _, sample = timed(deep_env, deep_args)  # warm imports, parsers, state files
        timed(alone_env, alone_args)
        legs = sorted({s["source"] for item in sample["results"] for s in item["sources"]})
        deep_s: list[float] = []
        alone_s: list[float] = []
        for _ in range(opts.runs):
            deep_s.append(timed(deep_env, deep_args)[0])
            alone_s.append(timed(alone_env, alone_args)[0])

    deep_median = statistics.median(deep_s)
    alone_median = statistics.median(alone_s)
    target = alone_median + MARGIN_S
    ms = 1000.0
    print("delays: " + ", ".join(f"{n} {d * ms:.0f} ms" for n, d in delays.items()))
    print(f"legs merged in the deep result: {', '.join(legs)}")
    print(f"runs: {opts.runs} (medians, interleaved)")
    print(f"  deep call             {deep_median * ms:8.1f} ms  (min {min(deep_s) * ms:.1f})")
    print(f"  {slowest} alone{' ' * (16 - len(slowest))}{alone_median * ms:8.1f} ms")
    print(f"  slowest delay         {delays[slowest] * ms:8.1f} ms  (deep's own work: "
          f"{(deep_median - delays[slowest]) * ms:+.1f} ms)")  # fmt: skip
    print(f"  sequential floor      {sum(delays.values()) * ms:8.1f} ms  (delays added)")
    print(f"  target                {target * ms:8.1f} ms  (slowest alone + 50 ms)")
    ok = deep_median <= target and len(legs) == 3
    print(f"deep - slowest alone: {(deep_median - alone_median) * ms:+.1f} ms: "
          f"{'PASS' if ok else 'FAIL'}")  # fmt: skip
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
