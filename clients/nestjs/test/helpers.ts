// Owns the tests' fixtures: a real `redial serve` on a free port, a node:http receiver whose answers
// a test sets, a Redis server for the BullMQ examples, and waiting on a condition within a bound.
import { spawn, spawnSync, type ChildProcess } from "node:child_process";
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import http from "node:http";
import net, { type AddressInfo } from "node:net";
import { tmpdir } from "node:os";
import path from "node:path";

// dist/test/helpers.js -> clients/nestjs -> repository root
const defaultBin = path.resolve(__dirname, "../../../../target/debug/redial");
export const redialBin = process.env.REDIAL_BIN ? path.resolve(process.env.REDIAL_BIN) : defaultBin;
/** The package's folder (clients/nestjs). */
export const packageDir = path.resolve(__dirname, "../..");

export interface Server {
  url: string;
  /** Stops the server (SIGTERM) and removes its data; safe to call twice. */
  stop(): Promise<void>;
}

/** Starts `redial serve` on 127.0.0.1:0 with a fresh data dir; resolves once it prints its URL. */
export async function startServer(opts: { config?: string; env?: NodeJS.ProcessEnv } = {}): Promise<Server> {
  const dir = await mkdtemp(path.join(tmpdir(), "redial-nestjs-"));
  const args = ["serve", "--listen", "127.0.0.1:0", "--data-dir", path.join(dir, "data"), "--allow-private-networks"];
  if (opts.config !== undefined) {
    const configPath = path.join(dir, "redial.toml");
    await writeFile(configPath, opts.config);
    args.push("--config", configPath);
  }
  const child = spawn(redialBin, args, { env: serverEnv(opts.env), stdio: ["ignore", "ignore", "pipe"] });
  const url = await new Promise<string>((resolve, reject) => {
    let seen = "";
    const timer = setTimeout(() => reject(new Error(`redial did not start within 60 s:\n${seen}`)), 60_000);
    child.stderr!.setEncoding("utf8");
    child.stderr!.on("data", (chunk: string) => {
      seen += chunk;
      const match = /redial listening on (http:\/\/\S+)/.exec(seen);
      if (match) {
        clearTimeout(timer);
        resolve(match[1]!);
      }
    });
    child.on("error", (err) => {
      clearTimeout(timer);
      reject(new Error(`could not start ${redialBin}: ${err.message}; set REDIAL_BIN`));
    });
    child.on("exit", (code) => {
      clearTimeout(timer);
      reject(new Error(`redial exited (${code}) before listening:\n${seen}`));
    });
  });
  return {
    url,
    async stop() {
      await stopChild(child);
      await rm(dir, { recursive: true, force: true });
    },
  };
}

/** `redial config check --config FILE`: the exit code and what it printed. */
export function configCheck(file: string, env: NodeJS.ProcessEnv = {}): { code: number; out: string } {
  const result = spawnSync(redialBin, ["config", "check", "--config", file], { env: serverEnv(env), encoding: "utf8" });
  return { code: result.status ?? -1, out: `${result.stdout}${result.stderr}` };
}

// Nothing inherited that would change what the server resolves.
function serverEnv(extra: NodeJS.ProcessEnv = {}): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = { ...process.env, REDIAL_LOG: "warn" };
  for (const key of Object.keys(env)) if (key.startsWith("REDIAL_") && key !== "REDIAL_LOG") delete env[key];
  return { ...env, ...extra };
}

function stopChild(child: ChildProcess): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return Promise.resolve();
  return new Promise((resolve) => {
    const kill = setTimeout(() => child.kill("SIGKILL"), 30_000);
    child.once("exit", () => {
      clearTimeout(kill);
      resolve();
    });
    child.kill("SIGTERM");
  });
}

export interface Received {
  method: string;
  path: string;
  headers: http.IncomingHttpHeaders;
  body: string;
}

export interface Answer {
  status: number;
  headers?: Record<string, string>;
  body?: string;
}

export interface Receiver {
  /** The origin, e.g. http://127.0.0.1:41234: also the endpoint's name in Redial. */
  origin: string;
  received: Received[];
  /** How to answer a request; default 200 with an empty JSON object. */
  answer: (request: Received) => Answer;
  close(): Promise<void>;
}

/** A node:http server on 127.0.0.1:0 recording every request and answering as `answer` says. */
export async function startReceiver(answer: (request: Received) => Answer = () => ({ status: 200 })): Promise<Receiver> {
  const receiver = { received: [] as Received[], answer } as Receiver;
  const server = http.createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on("data", (c: Buffer) => chunks.push(c));
    req.on("end", () => {
      const request = { method: req.method!, path: req.url!, headers: req.headers, body: Buffer.concat(chunks).toString("utf8") };
      receiver.received.push(request);
      const { status, headers, body } = receiver.answer(request);
      res.writeHead(status, { "content-type": "application/json", ...headers });
      res.end(body ?? "{}");
    });
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const port = (server.address() as AddressInfo).port;
  return Object.assign(receiver, {
    origin: `http://127.0.0.1:${port}`,
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  });
}

/** Polls `check` until it returns a value other than undefined/false, or fails after `timeoutMs`. */
export async function waitFor<T>(
  what: string,
  check: () => Promise<T | undefined | false> | T | undefined | false,
  timeoutMs = 60_000,
): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  let last: unknown;
  for (;;) {
    try {
      const value = await check();
      if (value !== undefined && value !== false) return value as T;
    } catch (err) {
      last = err;
    }
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}${last ? `: ${String(last)}` : ""}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

/** A port nothing listens on now (bound, then closed), for a program that takes a port number. */
export async function freePort(): Promise<number> {
  const server = net.createServer();
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const port = (server.address() as AddressInfo).port;
  await new Promise<void>((resolve) => server.close(() => resolve()));
  return port;
}

export interface Redis {
  port: number;
  stop(): Promise<void>;
}

/** Whether redis-server is installed; the BullMQ examples run only where it is. */
export function haveRedis(): boolean {
  return spawnSync("redis-server", ["--version"]).status === 0;
}

/** A throwaway redis-server (no persistence) on a free port; resolves once it accepts connections. */
export async function startRedis(): Promise<Redis> {
  const dir = await mkdtemp(path.join(tmpdir(), "redial-nestjs-redis-"));
  const port = await freePort();
  const child = spawn("redis-server", ["--port", String(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no", "--dir", dir], {
    stdio: ["ignore", "pipe", "pipe"],
  });
  await new Promise<void>((resolve, reject) => {
    let seen = "";
    const timer = setTimeout(() => reject(new Error(`redis-server did not start within 30 s:\n${seen}`)), 30_000);
    child.stdout!.setEncoding("utf8");
    child.stdout!.on("data", (chunk: string) => {
      seen += chunk;
      if (seen.includes("Ready to accept connections")) {
        clearTimeout(timer);
        resolve();
      }
    });
    child.on("exit", (code) => {
      clearTimeout(timer);
      reject(new Error(`redis-server exited (${code}):\n${seen}`));
    });
  });
  return {
    port,
    async stop() {
      await stopChild(child);
      await rm(dir, { recursive: true, force: true });
    },
  };
}

/**
 * Starts the compiled `main.js` of a page's application (in `cwd`, listening on a free port) and
 * posts an unsigned callback to `route` until it answers: the answer's status and body, once it
 * does. The process is stopped before this returns.
 */
export async function unsignedCallbackAnswer(mainJs: string, cwd: string, route: string): Promise<{ status: number; body: string }> {
  const port = await freePort();
  const child = spawn(process.execPath, [mainJs], {
    cwd,
    env: { ...process.env, PORT: String(port), APP_URL: `http://127.0.0.1:${port}` },
    stdio: ["ignore", "ignore", "pipe"],
  });
  let stderr = "";
  child.stderr!.on("data", (chunk: Buffer) => (stderr += chunk.toString("utf8")));
  try {
    const post = () =>
      fetch(`http://127.0.0.1:${port}${route}`, { method: "POST", headers: { "content-type": "application/json" }, body: "{}" });
    const answer = await waitFor(`main.ts to listen on ${port} (${stderr})`, () => post().catch(() => undefined));
    return { status: answer.status, body: await answer.text() };
  } finally {
    child.kill("SIGTERM");
    if (child.exitCode === null && child.signalCode === null) await new Promise((resolve) => child.once("exit", resolve));
  }
}
