// Owns the Terminus indicator in the test application: up while redial serve is ready, down once
// it is stopped (and down, not hanging, when nothing answers in time).
import "reflect-metadata";
import assert from "node:assert/strict";
import net, { type AddressInfo } from "node:net";
import { after, before, describe, test } from "node:test";
import { Test } from "@nestjs/testing";
import { HealthCheckService, TerminusModule } from "@nestjs/terminus";
import { RedialModule } from "@redial/nestjs";
import { RedialHealthIndicator } from "@redial/nestjs/terminus";
import { startApp, type App } from "./app";
import { startServer, type Server } from "./helpers";

// Terminus logs every failed check; this one fails on purpose.
const quiet = { log() {}, error() {}, warn() {} };

interface Health {
  status: string;
  info?: Record<string, { status: string }>;
  error?: Record<string, { status: string; reason?: string }>;
}

async function health(app: App): Promise<{ status: number; body: Health }> {
  const response = await fetch(`${app.url}/health`);
  return { status: response.status, body: (await response.json()) as Health };
}

describe("RedialHealthIndicator", () => {
  let server: Server;
  let app: App;

  before(async () => {
    server = await startServer();
    app = await startApp({ REDIAL_SERVER: server.url, REDIAL_CALLBACK_SECRETS: "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw", PAYMENTS_URL: "http://127.0.0.1:9" });
  });

  after(async () => {
    await app?.close();
    await server?.stop();
  });

  test("up while the server is ready, down once it is stopped", async () => {
    const up = await health(app);
    assert.equal(up.status, 200, JSON.stringify(up.body));
    assert.equal(up.body.status, "ok");
    assert.equal(up.body.info?.redial?.status, "up");

    await server.stop();
    const down = await health(app);
    assert.equal(down.status, 503, JSON.stringify(down.body));
    assert.equal(down.body.status, "error");
    assert.equal(down.body.error?.redial?.status, "down");
    assert.match(down.body.error?.redial?.reason ?? "", /Redial could not be reached: .*ECONNREFUSED/);
  });

  test("a server that does not answer in time is down", async () => {
    // Accepts connections and never answers.
    const silent = net.createServer(() => {});
    await new Promise<void>((resolve) => silent.listen(0, "127.0.0.1", resolve));
    const url = `http://127.0.0.1:${(silent.address() as AddressInfo).port}`;
    const moduleRef = await Test.createTestingModule({
      imports: [RedialModule.forRoot({ baseUrl: url }), TerminusModule],
      providers: [RedialHealthIndicator],
    })
      .setLogger(quiet)
      .compile();
    try {
      const indicator = moduleRef.get(RedialHealthIndicator);
      const result = await moduleRef.get(HealthCheckService).check([() => indicator.isReady("queue", { timeoutMs: 100 })]);
      assert.fail(`reported ${JSON.stringify(result)}`);
    } catch (err) {
      const response = (err as { getResponse?: () => Health }).getResponse?.();
      assert.equal(response?.error?.queue?.status, "down", String(err));
      assert.equal(response?.error?.queue?.reason, "no answer from Redial within 100 ms");
    } finally {
      await moduleRef.close();
      silent.close();
    }
  });
});
