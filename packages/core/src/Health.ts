/** The health object (GET /v1/health and the gateway_health MCP tool). */
import { Effect, Schema } from "effect"
import { GatewayConfig } from "./Config.ts"

export const Health = Schema.Struct({ status: Schema.String, version: Schema.String, timestamp: Schema.String })
export type Health = typeof Health.Type

/** `ok`, the API version and the current UTC time (ISO 8601 with milliseconds). */
export const check: Effect.Effect<Health, never, GatewayConfig> = Effect.map(
  GatewayConfig,
  (c) => ({ status: "ok", version: c.version, timestamp: new Date().toISOString() })
)
