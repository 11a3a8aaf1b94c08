"""Config parse time (issue 7 item 8: a typical JSON5 config must parse in under 10 ms).

    python bench/config_bench.py [--repeats 200]

Builds a typical hand-edited openclaw.json (comments, trailing commas, unquoted keys, 30 agents,
~2 KiB) and times, in this process: orjson on its JSON twin, smart-search's JSON5 path
(`openclaw.parse_config_text`), the json5 package alone, and a whole `load_settings`. Also the
refusal of a file just over the 1 MiB bound (read at most 1 MiB + 1 byte, never parsed).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))  # runnable from a checkout without installing

from smart_search.errors import ConfigError  # noqa: E402
from smart_search.host import openclaw  # noqa: E402
from smart_search.host.config import load_settings  # noqa: E402

BUDGET_MS = 10.0


def typical_json5() -> str:
    agents = ",\n".join(
        f"        'agent-{i}': {{ gemini: {i % 7}, brave: {i % 3}, }}, // cron {i}"
        for i in range(30)
    )
    return f"""// openclaw.json, edited by hand
{{
  gateway: {{ port: 18789, mode: 'local', }},
  env: {{ vars: {{ GEMINI_API_KEY: "${{GEMINI_API_KEY}}", BRAVE_API_KEY: "bsa-example", }}, }},
  agents: {{ list: [ {{ id: 'main', workspace: '~/work/main' }}, {{ id: 'cron' }}, ], }},
  /* the skill */
  skills: {{ entries: {{ "smart-search": {{
    enabled: true,
    config: {{
      default_provider: "brave",
      finance_keywords: ["stock", "share price", "ipo", "earnings", "dividend",],
      providers: {{ gemini: {{ daily_limit: 1500 }}, brave: {{ daily_limit: 66, }}, }},
      agent_allocations: {{
{agents}
      }},
    }},
  }} }} }},
}}
"""


def timed(fn, repeats: int) -> list[float]:
    out = []
    for _ in range(repeats):
        started = time.perf_counter()
        fn()
        out.append((time.perf_counter() - started) * 1000)
    return out


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeats", type=int, default=200)
    repeats = parser.parse_args().repeats
    import json5
    import orjson

    text = typical_json5()
    raw = text.encode()
    doc = json5.loads(text)
    as_json = json.dumps(doc).encode()
    assert openclaw.parse_config_text(raw, "openclaw.json") == doc
    print(f"typical config: {len(raw)} bytes JSON5, {len(as_json)} bytes as JSON")
    rows = [
        ("orjson on the JSON twin", lambda: orjson.loads(as_json), max(repeats, 50)),
        ("smart-search JSON5 path", lambda: openclaw.parse_config_text(raw, "x"), repeats),
        ("json5 package alone", lambda: json5.loads(text), max(10, repeats // 10)),
    ]
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "openclaw.json"
        path.write_text(text)
        environ = {"HOME": tmp, "OPENCLAW_CONFIG_PATH": str(path), "GEMINI_API_KEY": "k"}
        rows.append(("load_settings (whole)", lambda: load_settings(environ), repeats))
        big = Path(tmp) / "big.json"
        big.write_text("{" + " " * (1024 * 1024) + "}")
        big_env = {"HOME": tmp, "OPENCLAW_CONFIG_PATH": str(big)}

        def refuse() -> None:
            try:
                load_settings(big_env)
            except ConfigError:
                return
            raise AssertionError("a config over 1 MiB was accepted")

        rows.append(("refuse a 1 MiB + 2 B file", refuse, max(10, repeats // 10)))
        print(f"{'what':32} {'median ms':>10} {'max ms':>10}")
        verdict = 0
        for name, fn, n in rows:
            times = timed(fn, n)
            median = statistics.median(times)
            print(f"{name:32} {median:10.3f} {max(times):10.3f}")
            if name == "smart-search JSON5 path" and median > BUDGET_MS:
                verdict = 1
    print(f"budget: JSON5 path median under {BUDGET_MS} ms: {'OK' if not verdict else 'OVER'}")
    return verdict


if __name__ == "__main__":
    sys.exit(main())
