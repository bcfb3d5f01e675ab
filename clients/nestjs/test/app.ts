// Owns starting the test application as a NestJS application is started, through @nestjs/testing:
// its configuration in the environment, the raw body kept (or not), listening on loopback.
import type { INestApplication } from "@nestjs/common";
import { Test } from "@nestjs/testing";
import { AppModule } from "./app/app.module";

export interface App {
  nest: INestApplication;
  /** Where it listens, e.g. http://127.0.0.1:41234. */
  url: string;
  close(): Promise<void>;
}

/** Compiles AppModule with `env` in the environment (as ConfigModule reads it) and listens on 127.0.0.1:0. */
export async function startApp(env: Record<string, string>, options: { rawBody?: boolean } = {}): Promise<App> {
  Object.assign(process.env, env);
  const moduleRef = await Test.createTestingModule({ imports: [AppModule] }).compile();
  const nest = moduleRef.createNestApplication({
    rawBody: options.rawBody ?? true,
    logger: process.env.TEST_NEST_LOGS ? undefined : false,
  });
  await nest.listen(0, "127.0.0.1");
  const url = (await nest.getUrl()).replace("[::1]", "127.0.0.1");
  return { nest, url, close: () => nest.close() };
}
