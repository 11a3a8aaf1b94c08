// OpenClaw plugin: the provider behind the host's built-in `web_search` and `web_fetch` tools
// is the installed `smart-search` command (plain JavaScript, no build step, no dependency).
//
// Each call goes to one resident `smart-search mcp` per gateway (worker.js: MCP over stdio).
// With `spawnPerCall: true` each call spawns `smart-search` with an argument list (never a
// shell), writes ONE JSON call to its stdin and reads ONE JSON result from its stdout
// (docs/calling.md). Either way the result is the same object. The agent charged is
// taken from the host (the agent directory OpenClaw passes), never from the model's arguments;
// where the host names none (`openclaw infer web search`, every web_fetch) it is the configured
// `defaultAgent`. See docs/openclaw-plugin.md.

import { spawn } from "node:child_process";
import path from "node:path";
import { KEY_VARIABLES, sourcesHint } from "./sources.js";
import { callWorker, stopWorkers } from "./worker.js";

export const PROVIDER_ID = "smart-search";
export const DEFAULTS = Object.freeze({
  command: "smart-search",
  defaultAgent: "general",
  timeoutMs: 60000,
  killGraceMs: 2000,
  spawnPerCall: false,
});
const MAX_OUTPUT_BYTES = 16 * 1024 * 1024;
const SEARCH_ARGS = ["count", "freshness", "country", "language"];

/** A failure the model may read: the product's own message, never a stack trace. */
export class SmartSearchError extends Error {
  constructor(message, code) {
    super(message);
    this.name = "SmartSearchError";
    this.code = code ?? null;
    // A tool error shows the product's words only: no frame of this file is worth a token.
    this.stack = `${this.name}: ${message}`;
  }
}

/** The plugin's settings: plugins.entries["smart-search"].config over DEFAULTS. */
export function readSettings(pluginConfig) {
  const given = pluginConfig && typeof pluginConfig === "object" ? pluginConfig : {};
  const pick = (key, ok) => (ok(given[key]) ? given[key] : DEFAULTS[key]);
  const text = (v) => typeof v === "string" && v.trim() !== "";
  const whole = (v) => Number.isInteger(v) && v >= 0;
  return {
    command: pick("command", text),
    defaultAgent: pick("defaultAgent", text),
    timeoutMs: pick("timeoutMs", whole),
    killGraceMs: pick("killGraceMs", whole),
    spawnPerCall: pick("spawnPerCall", (v) => typeof v === "boolean"),
  };
}

function expandHome(dir, env) {
  if (dir === "~" || dir.startsWith("~/")) return path.join(env.HOME ?? "", dir.slice(1));
  return dir;
}

/** Configured agents as [id, agentDir] pairs: `agents.entries` (keyed by id) and the legacy
 * `agents.list` array. */
function configuredAgentDirs(config) {
  const pairs = [];
  const entries = config?.agents?.entries;
  if (entries && typeof entries === "object" && !Array.isArray(entries)) {
    for (const [id, entry] of Object.entries(entries)) pairs.push([id, entry?.agentDir]);
  }
  const listed = config?.agents?.list;
  if (Array.isArray(listed)) for (const entry of listed) pairs.push([entry?.id, entry?.agentDir]);
  return pairs.filter(([id, dir]) => typeof id === "string" && typeof dir === "string" && dir.trim());
}

/**
 * The agent id for a call, from the agent directory OpenClaw passed (absent: `fallback`).
 * An agent configured with its own `agentDir` is matched by that directory; otherwise
 * OpenClaw's layout `<state dir>/agents/<ID>/agent` names it. Anything else is an error: a
 * guess would charge the wrong agent.
 */
export function agentFromDir(agentDir, config, fallback, env = process.env) {
  if (typeof agentDir !== "string" || agentDir.trim() === "") return fallback;
  const dir = path.resolve(agentDir.trim());
  for (const [id, own] of configuredAgentDirs(config)) {
    if (path.resolve(expandHome(own.trim(), env)) === dir) return id.trim().toLowerCase();
  }
  const parent = path.dirname(dir);
  if (path.basename(dir) === "agent" && path.basename(path.dirname(parent)) === "agents") {
    return path.basename(parent).toLowerCase();
  }
  throw new SmartSearchError(
    `Cannot tell the agent from the agent directory ${dir}: expected <state dir>/agents/<ID>/agent ` +
      "or a configured agent with that agentDir.",
    "invalid_input",
  );
}

function cancelled() {
  return new SmartSearchError("The call was cancelled.", "cancelled");
}

/**
 * Run `command` with no argument, `call` as JSON on stdin; resolve to the parsed result.
 * An abort (or the timeout) sends SIGTERM, then SIGKILL after `killGraceMs`, and rejects.
 */
export function runProduct(settings, call, signal) {
  return new Promise((resolve, reject) => {
    if (signal?.aborted) {
      reject(signal.reason ?? cancelled());
      return;
    }
    let child;
    try {
      child = spawn(settings.command, [], { stdio: ["pipe", "pipe", "pipe"], shell: false });
    } catch (err) {
      reject(new SmartSearchError(`Cannot run ${settings.command}: ${err.message}`, "not_configured"));
      return;
    }
    const out = [];
    let outBytes = 0;
    let settled = false;
    let killTimer;
    let stopReason;
    const stop = (reason) => {
      if (stopReason || child.exitCode !== null || child.signalCode !== null) return;
      stopReason = reason;
      child.kill("SIGTERM");
      killTimer = setTimeout(() => child.kill("SIGKILL"), settings.killGraceMs);
      killTimer.unref?.();
    };
    const onAbort = () => stop("aborted");
    const timer = setTimeout(() => stop("timeout"), settings.timeoutMs);
    timer.unref?.();
    signal?.addEventListener("abort", onAbort, { once: true });
    const finish = (fn, value) => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      signal?.removeEventListener("abort", onAbort);
      fn(value);
    };
    child.stdout.on("data", (chunk) => {
      outBytes += chunk.length;
      if (outBytes > MAX_OUTPUT_BYTES) stop("oversized");
      else out.push(chunk);
    });
    child.stderr.resume(); // the product writes nothing a model needs there; never a key
    child.stdin.on("error", () => {}); // a child that exits before reading: reported on close
    child.on("error", (err) => {
      const why = err.code === "ENOENT" ? "not found (set plugins.entries.smart-search.config.command)" : err.message;
      finish(reject, new SmartSearchError(`Cannot run ${settings.command}: ${why}`, "not_configured"));
    });
    child.on("close", (code, sig) => {
      clearTimeout(killTimer);
      if (stopReason === "aborted") {
        finish(reject, signal?.reason ?? cancelled());
        return;
      }
      if (stopReason === "timeout") {
        finish(reject, new SmartSearchError(`smart-search did not answer within ${settings.timeoutMs} ms.`, "timeout"));
        return;
      }
      const text = Buffer.concat(out).toString("utf8").trim();
      try {
        finish(resolve, JSON.parse(text));
      } catch {
        const how = sig ? `was killed by ${sig}` : `exited with status ${code}`;
        finish(reject, new SmartSearchError(`smart-search ${how} without a JSON result.`, "internal"));
      }
    });
    child.stdin.end(JSON.stringify(call));
  });
}

/** One call to the product: on the resident worker (worker.js), or with `spawnPerCall` a
 * process of its own (runProduct). Either way the product's result object. */
export async function callProduct(settings, call, signal) {
  if (settings.spawnPerCall || perCallOnly.has(settings.command)) return runProduct(settings, call, signal);
  try {
    return await callWorker(settings, call, signal, (message, code) => new SmartSearchError(message, code));
  } catch (err) {
    if (err?.code !== "worker_unavailable") throw err;
    // An install without the `mcp` extra cannot keep a worker: a process per call, as before
    // the worker existed (the worker never started, so this call was not sent twice).
    perCallOnly.add(settings.command);
    return runProduct(settings, call, signal);
  }
}

/** Commands whose worker cannot start (no MCP SDK): every call runs as a process of its own. */
const perCallOnly = new Set();

/** OpenClaw's web_search arguments -> the product's smart_search args. */
export function searchArgs(args, agentId) {
  const query = typeof args?.query === "string" ? args.query : "";
  const out = { query, agent_id: agentId };
  for (const key of SEARCH_ARGS) {
    if (args?.[key] !== undefined && args[key] !== null) out[key] = args[key];
  }
  return out;
}

/** The product's smart_search result -> OpenClaw's web_search result (or its error shape). */
export function searchResult(product, query, tookMs) {
  const common = { query, provider: PROVIDER_ID, tookMs };
  if (product?.error) {
    // Returned, not thrown: OpenClaw replaces a thrown provider error by a generic message,
    // while a returned `error` reaches the model (and `openclaw infer`) as it is.
    return { error: String(product.error), code: product.error_code ?? null, provider: PROVIDER_ID };
  }
  const extra = {
    smartSearch: {
      providerUsed: product.provider_used ?? null,
      fallbackUsed: product.fallback_used ?? null,
      queriesRemaining: product.queries_remaining ?? null,
    },
  };
  if (typeof product.results === "string") {
    const citations = Array.isArray(product.citations)
      ? product.citations
          .filter((c) => c && typeof c.url === "string")
          .map((c) => (typeof c.title === "string" ? { url: c.url, title: c.title } : { url: c.url }))
      : [];
    return { ...common, content: product.results, citations, ...extra, ...(product.truncated ? { truncated: true } : {}) };
  }
  const rows = Array.isArray(product.results) ? product.results : [];
  const results = rows
    .filter((r) => r && typeof r.url === "string")
    .map((r) => ({ title: typeof r.title === "string" ? r.title : "", url: r.url, snippet: typeof r.snippet === "string" ? r.snippet : "" }));
  return { ...common, count: results.length, results, ...extra, ...(product.truncated ? { truncated: true } : {}) };
}

/** The product's smart_fetch result -> OpenClaw's web_fetch provider payload. A product error
 * is thrown: OpenClaw's web_fetch reads a returned payload as page text. */
export function fetchResult(product, url, tookMs) {
  if (product?.error) throw new SmartSearchError(String(product.error), product.error_code ?? null);
  const text = typeof product?.text === "string" ? product.text : "";
  return {
    url,
    finalUrl: typeof product?.final_url === "string" ? product.final_url : url,
    status: Number.isInteger(product?.http_status) ? product.http_status : 200,
    ...(typeof product?.title === "string" && product.title ? { title: product.title } : {}),
    extractor: PROVIDER_ID,
    text,
    tookMs,
    ...(product?.truncated ? { truncated: true } : {}),
  };
}

const SEARCH_PARAMETERS = {
  type: "object",
  properties: {
    query: { type: "string", description: "Search query." },
    count: { type: "integer", description: "Number of results (1-10).", minimum: 1, maximum: 10 },
    freshness: { type: "string", description: "Time filter: day, week, month or year." },
    country: { type: "string", description: "2-letter country code." },
    language: { type: "string", description: "ISO 639-1 language code." },
  },
  required: ["query"],
  additionalProperties: true,
};

const FETCH_PARAMETERS = {
  type: "object",
  properties: {
    url: { type: "string", description: "The http(s) URL to fetch." },
    maxChars: { type: "integer", description: "Most characters of text to return.", minimum: 1 },
  },
  required: ["url"],
  additionalProperties: true,
};

function credentialFields(envVars = []) {
  // smart-search reads its own keys from its own config, then those OpenClaw holds for each
  // provider (docs/configuration.md); the plugin holds none, so OpenClaw never has a credential to
  // store for it. envVars: for search, the variables the product reads keys from (sources.js).
  return {
    requiresCredential: false,
    envVars,
    placeholder: "",
    signupUrl: "https://docs.openclaw.ai/tools/web",
    credentialPath: "plugins.entries.smart-search.config.command",
    getCredentialValue: () => undefined,
    setCredentialValue: () => {},
  };
}

export function createSearchProvider(pluginConfig) {
  return {
    id: PROVIDER_ID,
    label: "smart-search",
    hint: sourcesHint(),
    configPath: null,
    ...credentialFields([...KEY_VARIABLES]),
    createTool: (ctx) => {
      const settings = readSettings(pluginConfig);
      return {
        description:
          "Search the web through smart-search (Gemini, Brave, then web engines), charged to this agent's quota.",
        parameters: SEARCH_PARAMETERS,
        execute: async (args, context) => {
          const started = Date.now();
          const query = typeof args?.query === "string" ? args.query : "";
          let product;
          try {
            const agentId = agentFromDir(ctx?.agentDir, ctx?.config, settings.defaultAgent);
            product = await callProduct(
              settings,
              { tool: "smart_search", args: searchArgs(args, agentId) },
              context?.signal,
            );
          } catch (err) {
            if (context?.signal?.aborted) throw err;
            const message = String(err?.message ?? err);
            return { error: message, code: err?.code ?? "internal", provider: PROVIDER_ID };
          }
          return searchResult(product, query, Date.now() - started);
        },
      };
    },
  };
}

export function createFetchProvider(pluginConfig) {
  return {
    id: PROVIDER_ID,
    label: "smart-search",
    hint: "Fetch a page through smart-search, charged to the default agent.",
    ...credentialFields(),
    createTool: () => {
      const settings = readSettings(pluginConfig);
      return {
        description: "Fetch one page through smart-search and return its readable text.",
        parameters: FETCH_PARAMETERS,
        execute: async (args, context) => {
          const started = Date.now();
          const url = typeof args?.url === "string" ? args.url : "";
          const fetchArgs = { url, agent_id: settings.defaultAgent };
          if (Number.isInteger(args?.maxChars) && args.maxChars > 0) fetchArgs.max_chars = args.maxChars;
          const product = await callProduct(
            settings,
            { tool: "smart_fetch", args: fetchArgs },
            context?.signal,
          );
          return fetchResult(product, url, Date.now() - started);
        },
      };
    },
  };
}

export default {
  id: PROVIDER_ID,
  name: "smart-search",
  description: "web_search and web_fetch through the smart-search command",
  register(api) {
    api.registerWebSearchProvider(createSearchProvider(api.pluginConfig));
    api.registerWebFetchProvider(createFetchProvider(api.pluginConfig));
    // The gateway stops: its worker with it (a worker also exits when its stdin closes).
    api.on?.("gateway_stop", () => stopWorkers());
  },
};
