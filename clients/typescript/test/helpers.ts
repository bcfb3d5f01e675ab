// Owns the tests' fixtures: a real `redial serve` on a free port, a node:http receiver, a TCP proxy
// whose connections a test can cut, polling, and reading an async iterator within a bound.
import { spawn, type ChildProcess } from "node:child_process";
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import http from "node:http";
import net, { type AddressInfo } from "node:net";
import { tmpdir } from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";

const here = path.dirname(fileURLToPath(import.meta.url));
// dist/test/helpers.js -> clients/typescript -> repository root
const defaultBin = path.resolve(here, "../../../../target/debug/redial");
export const redialBin = process.env.REDIAL_BIN ? path.resolve(process.env.REDIAL_BIN) : defaultBin;

export interface Server {
  url: string;
  stop(): Promise<void>;
}

/**
 * Starts `redial serve` on 127.0.0.1:0 with a fresh data dir; resolves once it prints its URL.
 * `flags` replaces the default flags (`--allow-private-networks`, and `--config` with `config`), as a
 * README gives them: the word `redial.toml` in them names the file `config` is written to.
 */
export async function startServer(opts: { token?: string; config?: string; flags?: string[] } = {}): Promise<Server> {
  const dir = await mkdtemp(path.join(tmpdir(), "redial-ts-"));
  const args = ["serve", "--listen", "127.0.0.1:0", "--data-dir", path.join(dir, "data")];
  const configPath = path.join(dir, "redial.toml");
  if (opts.config !== undefined) await writeFile(configPath, opts.config);
  if (opts.flags) {
    args.push(...opts.flags.map((flag) => (flag === "redial.toml" ? configPath : flag)));
  } else {
    args.push("--allow-private-networks");
    if (opts.config !== undefined) args.push("--config", configPath);
  }
  const env: NodeJS.ProcessEnv = { ...process.env, REDIAL_LOG: "warn" };
  delete env.REDIAL_TOKEN;
  delete env.REDIAL_CONFIG;
  delete env.REDIAL_DATABASE_URL;
  delete env.REDIAL_SERVER;
  if (opts.token) env.REDIAL_TOKEN = opts.token;

  const child = spawn(redialBin, args, { env, stdio: ["ignore", "ignore", "pipe"] });
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
  body: Buffer;
}

export interface Receiver {
  /** The origin, e.g. http://127.0.0.1:41234: also the endpoint's name in Redial. */
  origin: string;
  received: Received[];
  /** The status to answer for a path (default 200). */
  statusFor: (path: string) => number;
  close(): Promise<void>;
}

/** A node:http server on 127.0.0.1:0 recording every request. */
export async function startReceiver(statusFor: (path: string) => number = () => 200): Promise<Receiver> {
  const received: Received[] = [];
  const receiver = { statusFor } as Receiver;
  const server = http.createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on("data", (c: Buffer) => chunks.push(c));
    req.on("end", () => {
      received.push({ method: req.method!, path: req.url!, headers: req.headers, body: Buffer.concat(chunks) });
      res.writeHead(receiver.statusFor(req.url!), { "content-type": "text/plain" });
      res.end("ok");
    });
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const port = (server.address() as AddressInfo).port;
  return Object.assign(receiver, {
    origin: `http://127.0.0.1:${port}`,
    received,
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
    await new Promise((r) => setTimeout(r, 100));
  }
}

export interface Proxy {
  /** The proxy's URL: give it to the client instead of the server's. */
  url: string;
  /** What each connection's client sent first (the request head), in the order they came. */
  heads: string[];
  /** Connections open now that carried a request (fetch may open one ahead and leave it idle). */
  connections(): number;
  /** Breaks every open connection, both ways, as a network failure would. */
  cut(): void;
  close(): Promise<void>;
}

/** A TCP proxy on 127.0.0.1:0 to the server at `target`, forwarding bytes as they are. */
export async function startProxy(target: string): Promise<Proxy> {
  const { hostname, port } = new URL(target);
  const open = new Set<net.Socket>();
  const clients = new Set<net.Socket>();
  const heads: string[] = [];
  const server = net.createServer((client) => {
    const upstream = net.connect(Number(port), hostname);
    open.add(client);
    open.add(upstream);
    client.on("close", () => clients.delete(client));
    let index: number | undefined;
    client.on("data", (chunk: Buffer) => {
      if (index === undefined) {
        index = heads.push("") - 1;
        if (!client.destroyed) clients.add(client);
      }
      if (!heads[index]!.includes("\r\n\r\n")) heads[index] += chunk.toString("latin1");
    });
    client.pipe(upstream);
    upstream.pipe(client);
    for (const [a, b] of [
      [client, upstream],
      [upstream, client],
    ] as const) {
      a.on("error", () => b.destroy());
      a.on("close", () => {
        open.delete(a);
        b.destroy();
      });
    }
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const cut = () => {
    for (const socket of open) socket.resetAndDestroy();
  };
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    heads,
    connections: () => clients.size,
    cut,
    close() {
      cut();
      return new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}

/** The next `n` values of `it`, failing after `timeoutMs`; the iterator stays open for more. */
export async function take<T>(it: AsyncIterator<T>, n: number, what: string, timeoutMs = 60_000): Promise<T[]> {
  const out: T[] = [];
  let timer: NodeJS.Timeout | undefined;
  const late = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`timed out waiting for ${what}: got ${out.length} of ${n}`)), timeoutMs);
  });
  try {
    while (out.length < n) {
      const next = await Promise.race([it.next(), late]);
      if (next.done) throw new Error(`the iterator ended while waiting for ${what}: got ${out.length} of ${n}`);
      out.push(next.value);
    }
    return out;
  } finally {
    clearTimeout(timer);
  }
}
