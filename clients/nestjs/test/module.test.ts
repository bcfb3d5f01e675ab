// Owns RedialModule's wiring, with @nestjs/testing: forRoot and forRootAsync (ConfigService through
// useFactory, inject and imports) give one client, injected by its class, by REDIAL_CLIENT and with
// @InjectRedial(), that reaches the server they name with the token they give; global unless told
// otherwise; settings that cannot work stop the start, saying why.
import "reflect-metadata";
import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import { Controller, Injectable, Module, Post } from "@nestjs/common";
import { ConfigModule, ConfigService } from "@nestjs/config";
import { Test } from "@nestjs/testing";
import { Redial, RedialError } from "@redial/client";
import { InjectRedial, REDIAL_CLIENT, ReceiveRedialCallback, RedialModule } from "@redial/nestjs";
import { startServer, type Server } from "./helpers";

const TOKEN = "module-test-token";

@Injectable()
class ByClass {
  constructor(readonly redial: Redial) {}
}

@Injectable()
class ByDecorator {
  constructor(@InjectRedial() readonly redial: Redial) {}
}

// A module of the application that does not import RedialModule itself.
@Module({ providers: [ByClass], exports: [ByClass] })
class FeatureModule {}

@Controller("hooks")
class HooksController {
  @Post()
  @ReceiveRedialCallback()
  receive(): void {}
}

async function rejection(promise: Promise<unknown>): Promise<Error> {
  try {
    await promise;
  } catch (err) {
    assert.ok(err instanceof Error, String(err));
    return err;
  }
  assert.fail("it started");
}

describe("RedialModule", () => {
  let server: Server;

  before(async () => {
    delete process.env.REDIAL_TOKEN;
    delete process.env.REDIAL_SERVER;
    server = await startServer({ env: { REDIAL_TOKEN: TOKEN } });
  });

  after(async () => {
    await server?.stop();
  });

  test("forRoot: one client, by its class, by REDIAL_CLIENT and with @InjectRedial(), in every module", async () => {
    const moduleRef = await Test.createTestingModule({
      imports: [RedialModule.forRoot({ baseUrl: server.url, token: TOKEN }), FeatureModule],
      providers: [ByDecorator],
    }).compile();
    const client = moduleRef.get(Redial);
    assert.ok(client instanceof Redial);
    assert.equal(moduleRef.get(REDIAL_CLIENT), client);
    assert.equal(moduleRef.get(ByDecorator).redial, client);
    assert.equal(moduleRef.get(ByClass).redial, client, "FeatureModule gets it without importing RedialModule");
    const job = await client.enqueue({ id: "for-root", request: { method: "GET", url: "http://127.0.0.1:9/" }, run_at: "2999-01-01T00:00:00Z" });
    assert.equal((await client.getJob(job.id)).state, "scheduled");
    await moduleRef.close();
  });

  test("forRootAsync: the server and token come from ConfigService (useFactory, inject, imports)", async () => {
    const moduleRef = await Test.createTestingModule({
      imports: [
        RedialModule.forRootAsync({
          imports: [ConfigModule.forRoot({ ignoreEnvFile: true, load: [() => ({ redial: { url: server.url, token: TOKEN } })] })],
          inject: [ConfigService],
          useFactory: (config: ConfigService) => ({
            baseUrl: config.getOrThrow<string>("redial.url"),
            token: config.getOrThrow<string>("redial.token"),
          }),
        }),
      ],
      providers: [ByDecorator],
    }).compile();
    const client = moduleRef.get(ByDecorator).redial;
    const job = await client.enqueue({ id: "for-root-async", request: { method: "GET", url: "http://127.0.0.1:9/" }, run_at: "2999-01-01T00:00:00Z" });
    assert.equal(job.id, "for-root-async");
    await moduleRef.close();
  });

  test("forRootAsync: useClass, a class whose create() gives the options", async () => {
    @Injectable()
    class RedialSettings {
      constructor(private readonly config: ConfigService) {}

      create() {
        return { baseUrl: this.config.getOrThrow<string>("redial.url"), token: TOKEN };
      }
    }
    const moduleRef = await Test.createTestingModule({
      imports: [
        ConfigModule.forRoot({ isGlobal: true, ignoreEnvFile: true, load: [() => ({ redial: { url: server.url } })] }),
        RedialModule.forRootAsync({ useClass: RedialSettings }),
      ],
    }).compile();
    assert.equal(typeof (await moduleRef.get(Redial).stats()), "object");
    await moduleRef.close();
  });

  test("the token is the one given: without it the server answers 401", async () => {
    const moduleRef = await Test.createTestingModule({ imports: [RedialModule.forRoot({ baseUrl: server.url })] }).compile();
    const err = await rejection(moduleRef.get(Redial).stats());
    assert.ok(err instanceof RedialError);
    assert.equal(err.status, 401);
    await moduleRef.close();
  });

  test("isGlobal: false keeps the client to the modules that import RedialModule", async () => {
    const err = await rejection(
      Test.createTestingModule({ imports: [RedialModule.forRoot({ baseUrl: server.url, isGlobal: false }), FeatureModule] }).compile(),
    );
    assert.match(err.message, /Redial/);
    assert.match(err.message, /FeatureModule/);
  });

  test("callback secrets that cannot verify anything stop the start", async () => {
    for (const secrets of [[], [""], "whsec_"]) {
      const err = await rejection(
        Test.createTestingModule({ imports: [RedialModule.forRoot({ callbacks: { secrets } })] }).compile(),
      );
      assert.match(err.message, /callbacks secret|callbacks\.secrets is empty/, JSON.stringify(secrets));
    }
  });

  test("a callback route in an application whose RedialModule has no callbacks stops the start", async () => {
    const err = await rejection(
      Test.createTestingModule({ imports: [RedialModule.forRoot({ baseUrl: server.url })], controllers: [HooksController] }).compile(),
    );
    assert.match(err.message, /RedialModule has no callbacks/);
  });
});
