// Owns keeping each callback delivery as it came (headers and raw body), so that a test can send it
// again, changed or not. Middleware runs before guards, after the body parser kept the raw body.
import { Injectable, type NestMiddleware } from "@nestjs/common";
import type { NextFunction, Request, Response } from "express";

export interface Delivery {
  headers: Record<string, string>;
  body: Buffer;
}

@Injectable()
export class Deliveries {
  readonly kept: Delivery[] = [];
}

@Injectable()
export class KeepDeliveries implements NestMiddleware {
  constructor(private readonly deliveries: Deliveries) {}

  use(req: Request & { rawBody?: Buffer }, _res: Response, next: NextFunction): void {
    if (req.rawBody) this.deliveries.kept.push({ headers: { ...(req.headers as Record<string, string>) }, body: req.rawBody });
    next();
  }
}
