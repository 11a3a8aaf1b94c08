"""Sanitizer speed (moved out of the tests, where wall-clock bounds flaked on loaded machines).

    python bench/sanitize_bench.py [--repeats 5]

Targets on the 2-core reference machine: a 10,000-character snippet in under 50 ms; each of the
adversarial 100,000-character strings from tests/test_sanitize.py in under 1.5 s. The tests keep
only a 30 s ceiling on the adversarial strings, which catches catastrophic backtracking without
depending on the machine's load.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))  # runnable from a checkout without installing

from smart_search.text.sanitize import sanitize_text  # noqa: E402
from tests.test_sanitize import ADVERSARIAL  # noqa: E402

SNIPPET_BUDGET_MS = 50.0
ADVERSARIAL_BUDGET_MS = 1500.0


def median_ms(text: str, repeats: int) -> float:
    sanitize_text(text)  # compile the rules this text needs
    times = []
    for _ in range(repeats):
        started = time.perf_counter()
        sanitize_text(text)
        times.append((time.perf_counter() - started) * 1000)
    return statistics.median(times)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    failures = 0
    snippet = ("Caffeine and sleep: what the research says. " * 230)[:10000]
    ms = median_ms(snippet, args.repeats)
    failures += ms > SNIPPET_BUDGET_MS
    print(f"| 10k snippet | {ms:.2f} ms | target < {SNIPPET_BUDGET_MS:.0f} ms |")
    for i, text in enumerate(ADVERSARIAL):
        ms = median_ms(text, args.repeats)
        failures += ms > ADVERSARIAL_BUDGET_MS
        print(f"| adversarial #{i} ({text[:12]!r}...) | {ms:.1f} ms | "
              f"target < {ADVERSARIAL_BUDGET_MS:.0f} ms |")  # fmt: skip
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
