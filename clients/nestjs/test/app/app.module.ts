// Owns the test application, wired as a NestJS application is: configuration from the environment
// (ConfigService), RedialModule.forRootAsync reading it, a callback route, Terminus.
import { Module, type MiddlewareConsumer, type NestModule } from "@nestjs/common";
import { ConfigModule, ConfigService } from "@nestjs/config";
import { TerminusModule } from "@nestjs/terminus";
import { RedialModule } from "@redial/nestjs";
import { RedialHealthIndicator } from "@redial/nestjs/terminus";
import { CallbacksController } from "./callbacks.controller";
import { Deliveries, KeepDeliveries } from "./deliveries";
import { HealthController } from "./health.controller";
import { Ledger } from "./ledger";
import { OrdersService } from "./orders.service";

@Module({
  imports: [
    ConfigModule.forRoot({ isGlobal: true, ignoreEnvFile: true }),
    RedialModule.forRootAsync({
      imports: [ConfigModule],
      inject: [ConfigService],
      useFactory: (config: ConfigService) => ({
        baseUrl: config.getOrThrow<string>("REDIAL_SERVER"),
        // Several secrets while rotating, comma-separated in one variable.
        callbacks: { secrets: config.getOrThrow<string>("REDIAL_CALLBACK_SECRETS").split(",") },
      }),
    }),
    TerminusModule,
  ],
  controllers: [CallbacksController, HealthController],
  providers: [OrdersService, Ledger, Deliveries, RedialHealthIndicator],
})
export class AppModule implements NestModule {
  configure(consumer: MiddlewareConsumer): void {
    consumer.apply(KeepDeliveries).forRoutes(CallbacksController);
  }
}
