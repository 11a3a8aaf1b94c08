// The resident worker: one long-lived `smart-search mcp` (MCP over stdio) per gateway process,
// started the first time a provider call needs it and reused by every later call.
//
// The client is the smallest JSON-RPC 2.0 client MCP's stdio transport needs, read top to
// bottom: spawn on first need (initialize, then notifications/initialized); one pending-request
// table keyed by id; a reader that settles each entry by its id, or fails every entry in flight
// when the worker dies, hangs or writes something that is not JSON-RPC; a new worker on the next
// call after that; a kill when the parent stops. The worker exits by itself when its stdin closes
// (the parent died), so it never outlives the gateway. See docs/openclaw-plugin.md.

import { spawn } from "node:child_process";

const PROTOCOL_VERSION = "2025-06-18";
const MAX_LINE_BYTES = 32 * 1024 * 1024; // a result is at most 16 MiB of JSON (the one-shot cap)
const STDERR_TAIL = 400; // characters of the worker's stderr kept to explain a failed start

/** The live worker per command (normally one: the plugin's configured command). */
const workers = new Map();
let exitHookInstalled = false;

/**
 * Run one tool call on the resident worker for `settings.command`; resolve to the product's
 * result object (the one the one-shot CLI prints). `fail(message, code)` builds the plugin's
 * error. An abort cancels the call inside the worker (notifications/cancelled) and rejects with
 * the signal's reason.
 */
export function callWorker(settings, call, signal, fail) {
  if (signal?.aborted) return Promise.reject(signal.reason ?? fail("The call was cancelled.", "cancelled"));
  let worker = workers.get(settings.command);
  if (!worker || worker.dead) {
    worker = new Worker(settings, fail);
    workers.set(settings.command, worker);
  }
  return worker.call(call, signal, settings);
}

/** Stop every worker (the gateway is stopping); calls in flight fail with `why`. */
export function stopWorkers(why = "smart-search worker stopped with the gateway.") {
  for (const worker of workers.values()) worker.stop(why);
  workers.clear();
}

/** The worker's process id per command (tests and the bench watch it). */
export function workerPids() {
  return Object.fromEntries([...workers].filter(([, w]) => !w.dead).map(([cmd, w]) => [cmd, w.child.pid]));
}

class Worker {
  constructor(settings, fail) {
    this.command = settings.command;
    this.killGraceMs = settings.killGraceMs;
    this.fail = fail;
    this.dead = false;
    this.pending = new Map(); // id -> { resolve, reject }
    this.nextId = 1;
    this.buffer = "";
    this.stderrTail = "";
    this.child = spawn(this.command, ["mcp"], { stdio: ["pipe", "pipe", "pipe"], shell: false });
    installExitHook();
    const child = this.child;
    child.stdout.setEncoding("utf8");
    child.stdout.on("data", (text) => this.read(text));
    child.stderr.setEncoding("utf8");
    child.stderr.on("data", (text) => (this.stderrTail = (this.stderrTail + text).slice(-STDERR_TAIL)));
    child.stdin.on("error", () => {}); // a worker gone before reading: reported on close
    child.on("error", (err) => {
      const why = err.code === "ENOENT" ? "not found (set plugins.entries.smart-search.config.command)" : err.message;
      this.die(fail(`Cannot run ${this.command}: ${why}`, "not_configured"));
    });
    child.on("close", (code, sig) => {
      const how = sig ? `was killed by ${sig}` : `exited with status ${code}`;
      const said = this.ready === true ? "" : this.stderrTail.trim().split("\n").pop() ?? "";
      // Installed without the MCP SDK (the `mcp` extra): it never served, so nothing was sent,
      // and the caller may run the call as a process of its own (index.js's callProduct).
      const noSdk = this.ready !== true && code === 1 && said.includes("[mcp]");
      this.die(fail(`smart-search worker ${how}${said ? `: ${said}` : ""}.`, noSdk ? "worker_unavailable" : "internal"));
    });
    this.ready = this.request("initialize", {
      protocolVersion: PROTOCOL_VERSION,
      capabilities: {},
      clientInfo: { name: "smart-search-openclaw", version: "0.1.0" },
    }).then(() => {
      this.send({ jsonrpc: "2.0", method: "notifications/initialized" });
      this.ready = true;
    });
    this.ready.catch(() => {}); // each call reports it
    this.hold();
  }

  /** tools/call for `call` ({tool, args}); the product's result object. */
  async call(call, signal, settings) {
    let id;
    let timer;
    let onAbort;
    const answer = new Promise((resolve, reject) => {
      timer = setTimeout(() => {
        reject(this.fail(`smart-search did not answer within ${settings.timeoutMs} ms.`, "timeout"));
        if (id !== undefined) this.cancel(id, "timeout");
        this.probe(); // one slow call is cancelled; a worker that no longer answers is replaced
      }, settings.timeoutMs);
      onAbort = () => {
        reject(signal.reason ?? this.fail("The call was cancelled.", "cancelled"));
        if (id !== undefined) this.cancel(id, "aborted");
      };
      signal?.addEventListener("abort", onAbort, { once: true });
    });
    answer.catch(() => {});
    try {
      if (this.ready !== true) await Promise.race([this.ready, answer]);
      if (signal?.aborted) throw signal.reason ?? this.fail("The call was cancelled.", "cancelled");
      id = this.nextId++;
      const sent = this.request("tools/call", { name: call.tool, arguments: call.args ?? {} }, id);
      return this.product(await Promise.race([sent, answer]));
    } finally {
      clearTimeout(timer);
      signal?.removeEventListener("abort", onAbort);
      if (id !== undefined && this.pending.delete(id)) this.hold();
    }
  }

  /** A tools/call result -> the product's result object (structuredContent, else its text). */
  product(result) {
    if (result?.structuredContent && typeof result.structuredContent === "object") return result.structuredContent;
    const text = Array.isArray(result?.content) ? result.content.find((c) => c?.type === "text")?.text : undefined;
    try {
      const parsed = JSON.parse(text);
      if (parsed && typeof parsed === "object" && !Array.isArray(parsed)) return parsed;
    } catch {}
    if (result?.isError && typeof text === "string") throw this.fail(text, "internal");
    throw this.garbage();
  }

  /** Send a request; a promise settled by the reader (or failed when the worker dies). */
  request(method, params, id = this.nextId++) {
    if (this.dead) return Promise.reject(this.deathError);
    const settled = new Promise((resolve, reject) => this.pending.set(id, { resolve, reject }));
    this.hold();
    this.send({ jsonrpc: "2.0", id, method, params });
    return settled;
  }

  send(message) {
    if (!this.dead) this.child.stdin.write(`${JSON.stringify(message)}\n`);
  }

  /** notifications/cancelled: the worker cancels the call's scope and refunds what never left. */
  cancel(id, reason) {
    if (this.pending.delete(id)) this.hold();
    this.send({ jsonrpc: "2.0", method: "notifications/cancelled", params: { requestId: id, reason } });
  }

  /** After a timeout: a worker that does not answer a ping within the grace is hung: replaced. */
  probe() {
    if (this.dead || this.probing) return;
    this.probing = true;
    const grace = Math.max(this.killGraceMs, 1000);
    const timer = setTimeout(() => this.die(this.fail("smart-search worker stopped answering.", "timeout")), grace);
    this.request("ping", {})
      .catch(() => {})
      .finally(() => {
        clearTimeout(timer);
        this.probing = false;
      });
  }

  /** The reader: one JSON-RPC message per line. */
  read(text) {
    let start = 0;
    let newline;
    while ((newline = text.indexOf("\n", start)) >= 0) {
      const line = (this.buffer + text.slice(start, newline)).trim();
      this.buffer = "";
      start = newline + 1;
      if (line) this.receive(line);
      if (this.dead) return;
    }
    this.buffer += text.slice(start); // only the new text is searched: a long line costs O(n)
    if (this.buffer.length > MAX_LINE_BYTES) this.die(this.garbage());
  }

  receive(line) {
    let message;
    try {
      message = JSON.parse(line);
    } catch {
      return this.die(this.garbage());
    }
    if (!message || typeof message !== "object" || message.jsonrpc !== "2.0") return this.die(this.garbage());
    if (typeof message.method === "string") {
      // The server asks something of us (ping) or tells us something (logging): answer pings.
      if (message.id !== undefined && message.id !== null) {
        const reply = message.method === "ping" ? { result: {} } : { error: { code: -32601, message: "Method not found" } };
        this.send({ jsonrpc: "2.0", id: message.id, ...reply });
      }
      return;
    }
    const entry = this.pending.get(message.id);
    if (!entry) return; // the answer to a call that was cancelled or timed out: dropped
    this.pending.delete(message.id);
    this.hold();
    if (message.error && typeof message.error === "object") {
      entry.reject(this.fail(String(message.error.message ?? "smart-search worker error."), "internal"));
    } else if ("result" in message) {
      entry.resolve(message.result);
    } else {
      this.die(this.garbage());
      entry.reject(this.garbage());
    }
  }

  garbage() {
    return this.fail("smart-search worker answered something that is not JSON-RPC.", "internal");
  }

  /** The worker is gone or unusable: every call in flight on it fails with `error`; it is
   * stopped (stdin closed, SIGKILL after the grace) and the next call starts a new one. */
  die(error) {
    if (this.dead) return;
    this.dead = true;
    this.deathError = error;
    if (workers.get(this.command) === this) workers.delete(this.command);
    const entries = [...this.pending.values()];
    this.pending.clear();
    for (const entry of entries) entry.reject(error);
    this.stop();
  }

  /** Close stdin (the worker cancels what is in flight and exits), SIGKILL after the grace. */
  stop(why) {
    if (!this.dead) return this.die(this.fail(why, "internal"));
    const child = this.child;
    child.stdin.destroy();
    if (child.exitCode === null && child.signalCode === null) {
      const timer = setTimeout(() => child.kill("SIGKILL"), this.killGraceMs);
      timer.unref();
      child.once("exit", () => clearTimeout(timer));
    }
    this.release(child);
  }

  /** Keep the parent's event loop alive only while a call waits on the worker: an idle worker
   * never keeps a one-shot `openclaw infer` from exiting. */
  hold() {
    if (this.dead) return;
    if (this.pending.size > 0) for (const h of handles(this.child)) h.ref?.();
    else this.release(this.child);
  }

  release(child) {
    for (const h of handles(child)) h.unref?.();
  }
}

function handles(child) {
  return [child, child.stdin, child.stdout, child.stderr].filter(Boolean);
}

/** The parent exits: every worker is killed (its stdin closes with the parent anyway). */
function installExitHook() {
  if (exitHookInstalled) return;
  exitHookInstalled = true;
  process.once("exit", () => {
    for (const worker of workers.values()) {
      try {
        worker.child.kill("SIGTERM");
      } catch {}
    }
  });
}
