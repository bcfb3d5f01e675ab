// Owns the test application's health route: Terminus, with Redial's readiness among the checks.
import { Controller, Get } from "@nestjs/common";
import { HealthCheck, HealthCheckService } from "@nestjs/terminus";
import { RedialHealthIndicator } from "@redial/nestjs/terminus";

@Controller("health")
export class HealthController {
  constructor(
    private readonly health: HealthCheckService,
    private readonly redial: RedialHealthIndicator,
  ) {}

  @Get()
  @HealthCheck()
  check() {
    return this.health.check([() => this.redial.isReady("redial", { timeoutMs: 5_000 })]);
  }
}
