"""Parse time of every engine on every saved results page (budget: 30 ms median per page).

    python bench/parse_bench.py [--repeats 30]

For each page under tests/fixtures/serp/<engine>/: the cold time (the first parse in a fresh
Python process, lxml's import included: what one smart-search call pays) and, in this process,
the median, min and max over `--repeats` warm parses. The outcome (result count or error class)
is printed too, so a parser regression shows up here as well as in the tests.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
SERP = REPO / "tests" / "fixtures" / "serp"
sys.path.insert(0, str(REPO))  # runnable from a checkout without installing

from smart_search import errors  # noqa: E402
from smart_search.host.config import ENGINES  # noqa: E402
from smart_search.sources.engines.fetch import engine_module  # noqa: E402

BUDGET_MS = 30.0

# Runs in a fresh interpreter: prints the first parse's wall time in ms.
_COLD = """
import sys, time
sys.path.insert(0, {repo!r})
body = open({path!r}, "rb").read()
started = time.perf_counter()
from smart_search.sources.engines.fetch import engine_module
try:
    engine_module({engine!r}).parse(body)
except Exception:
    pass
print((time.perf_counter() - started) * 1000)
"""


def outcome(engine: str, body: bytes) -> str:
    try:
        return f"{len(engine_module(engine).parse(body))} results"
    except errors.SearchError as exc:
        return exc.error_code


def warm_times(engine: str, body: bytes, repeats: int) -> list[float]:
    parse = engine_module(engine).parse
    times = []
    for _ in range(repeats):
        started = time.perf_counter()
        try:
            parse(body)
        except errors.SearchError:
            pass
        times.append((time.perf_counter() - started) * 1000)
    return times


def cold_time(engine: str, path: Path) -> float:
    code = _COLD.format(repo=str(REPO), path=str(path), engine=engine)
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    return float(done.stdout.strip())


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeats", type=int, default=30, help="warm parses per page")
    args = parser.parse_args()

    header = f"{'engine':<11} {'page':<34} {'KB':>5} {'cold':>7} {'median':>7} {'min':>6} "
    print(header + f"{'max':>6}  outcome")
    over = []
    for engine in ENGINES:
        for path in sorted((SERP / engine).glob("*.html")):
            body = path.read_bytes()
            cold = cold_time(engine, path)
            result = outcome(engine, body)  # also the warm-up: lxml's import is not timed here
            times = warm_times(engine, body, args.repeats)
            median = statistics.median(times)
            if median > BUDGET_MS:
                over.append(path.name)
            print(
                f"{engine:<11} {path.name:<34} {len(body) / 1024:>5.0f} {cold:>6.1f}m "
                f"{median:>6.2f}m {min(times):>5.2f}m {max(times):>5.2f}m  {result}"
            )
    print(
        f"\ntimes in ms (m); cold = first parse in a fresh process, lxml import included; "
        f"warm over {args.repeats} repeats; budget {BUDGET_MS:.0f} ms median"
    )
    if over:
        print("OVER BUDGET: " + ", ".join(over))
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
