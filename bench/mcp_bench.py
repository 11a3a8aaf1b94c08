"""Warm-call latency of the MCP server, measured from the SDK's own client (issue 13, point 6).

    python bench/mcp_bench.py [--calls 300] [--transport stdio,http,http-token]

Starts `python -m smart_search mcp` (stdio, and `--http 127.0.0.1:0`) in a throwaway state dir,
`http-token` with 32 `mcp.tokens` configured and the last one sent (issue 28: every request's
token checked against each of them),
warms it up, then times `--calls` sequential round trips of each kind from `session.call_tool`
to its parsed result (the client's output-schema validation included):

- search_quota_status (the full quota object): target p50 < 5 ms;
- smart_search answered by a loopback fake Brave (tests/fakes.py): target p50 < 20 ms.

Prints p50 and p95 per transport. Nothing leaves 127.0.0.1.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "tests"))
sys.path.insert(0, str(REPO))

AGENT = "bench-agent"
WARMUP = 20
TOKENS = [f"bench-token-{i:02d}-0123456789abcdef" for i in range(32)]
TARGETS_MS = {"search_quota_status": 5.0, "smart_search": 20.0}


def environment(root: Path, fake_url: str, calls: int) -> dict[str, str]:
    config = {
        "skills": {
            "entries": {
                "smart-search": {
                    "config": {
                        "endpoints": {"brave": fake_url, "gemini": fake_url},
                        "agent_allocations": {AGENT: {"gemini": 0, "brave": 10 * calls + 100}},
                        "providers": {
                            "brave": {"daily_limit": 10**6, "monthly_limit": 10**7},
                        },
                        "mcp": {"tokens": [{"value": t, "agents": "*"} for t in TOKENS]},
                    },
                    "env": {"BRAVE_API_KEY": "bench-key"},
                }
            }
        }
    }
    (root / "openclaw.json").write_text(json.dumps(config))
    return {
        "HOME": str(root / "home"),
        "PATH": os.environ.get("PATH", ""),
        "SMART_SEARCH_STATE_DIR": str(root / "state"),
        "OPENCLAW_CONFIG_PATH": str(root / "openclaw.json"),
        "PYTHONPATH": str(REPO),
    }


async def measure(session: Any, calls: int) -> dict[str, list[float]]:
    requests = {
        "search_quota_status": {},
        "smart_search": {"query": "space telescope news", "agent_id": AGENT},
    }
    times: dict[str, list[float]] = {}
    for tool, args in requests.items():
        # Each search asks something new, so the result cache never answers it: the fake does.
        def numbered(i: int, args: dict[str, Any] = args) -> dict[str, Any]:
            return {**args, "query": f"{args['query']} {i}"} if "query" in args else args

        for i in range(WARMUP):
            await session.call_tool(tool, numbered(-1 - i))
        samples = []
        for i in range(calls):
            started = time.perf_counter()
            result = await session.call_tool(tool, numbered(i))
            samples.append((time.perf_counter() - started) * 1000)
            if result.is_error:
                raise SystemExit(f"{tool} failed: {result.content[0].text}")
            if tool == "smart_search" and result.structured_content.get("cached"):
                raise SystemExit("a search was answered from the cache, not the fake")
        times[tool] = samples
    return times


async def over_stdio(env: dict[str, str], calls: int) -> dict[str, list[float]]:
    from mcp import ClientSession, StdioServerParameters
    from mcp.client.stdio import stdio_client

    params = StdioServerParameters(
        command=sys.executable, args=["-m", "smart_search", "mcp"], env=env
    )
    async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
        await session.initialize()
        return await measure(session, calls)


async def over_http(env: dict[str, str], calls: int) -> dict[str, list[float]]:
    """Without tokens: the config's `mcp` key is dropped for this run."""
    config = json.loads(Path(env["OPENCLAW_CONFIG_PATH"]).read_text())
    config["skills"]["entries"]["smart-search"]["config"].pop("mcp")
    Path(env["OPENCLAW_CONFIG_PATH"]).write_text(json.dumps(config))
    return await over_http_as(env, calls, None)


async def over_http_token(env: dict[str, str], calls: int) -> dict[str, list[float]]:
    return await over_http_as(env, calls, TOKENS[-1])


async def over_http_as(env: dict[str, str], calls: int, token: str | None) -> dict[str, Any]:
    from mcp import ClientSession
    from mcp.client.streamable_http import streamable_http_client
    from mcp.shared._httpx_utils import create_mcp_http_client

    proc = subprocess.Popen(
        [sys.executable, "-m", "smart_search", "mcp", "--http", "127.0.0.1:0"],
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    try:
        assert proc.stderr is not None
        url = ""
        for raw in proc.stderr:
            line = raw.decode()
            if "listening on " in line:
                url = line.split("listening on ", 1)[1].strip()
                break
        if not url:
            raise SystemExit("the HTTP server did not start")
        threading.Thread(target=proc.stderr.read, daemon=True).start()
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        async with (
            create_mcp_http_client(headers=headers) as client,
            streamable_http_client(url, http_client=client) as (read, write),
            ClientSession(read, write) as session,
        ):
            await session.initialize()
            return await measure(session, calls)
    finally:
        proc.terminate()
        proc.wait(timeout=10)


def percentile(samples: list[float], q: float) -> float:
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, int(round(q * (len(ordered) - 1))))]


def main() -> int:
    import anyio
    from fakes import FakeServer, Reply, fixture_bytes

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=300)
    parser.add_argument("--transport", default="stdio,http,http-token")
    opts = parser.parse_args()
    runners = {"stdio": over_stdio, "http": over_http, "http-token": over_http_token}
    print(f"{'transport':<10} {'tool':<22} {'p50 ms':>8} {'p95 ms':>8} {'target p50':>11}  verdict")
    failed = False
    for transport in opts.transport.split(","):
        with tempfile.TemporaryDirectory() as tmp, FakeServer() as fake:
            body = fixture_bytes("brave-ok.json")
            fake.route("/res/v1/web/search", Reply(200, body, {"content-type": "application/json"}))
            env = environment(Path(tmp), fake.url, opts.calls)
            times = anyio.run(runners[transport], env, opts.calls)
        for tool, samples in times.items():
            p50, p95 = statistics.median(samples), percentile(samples, 0.95)
            ok = p50 < TARGETS_MS[tool]
            failed |= not ok
            print(
                f"{transport:<10} {tool:<22} {p50:>8.2f} {p95:>8.2f} {TARGETS_MS[tool]:>9.0f} ms"
                f"  {'ok' if ok else 'OVER'}"
            )
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
