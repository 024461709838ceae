/** The gateway API (spec: gateway-api.md) under /v1. */
import { Effect, Schema } from "effect"
import { GatewayConfig } from "../Config.ts"
import { accessRoutes } from "./AccessRoutes.ts"
import { completionRoutes } from "./CompletionRoutes.ts"
import { openAiRoutes } from "./OpenAiRoutes.ts"
import { open } from "./Route.ts"

const Health = Schema.Struct({ status: Schema.String, version: Schema.String, timestamp: Schema.String })

export const healthRoute = open({
  method: "GET",
  path: "/v1/health",
  tag: "Health",
  envelope: "none",
  summary: "Health check for load balancers (unauthenticated, not enveloped)",
  success: Health,
  handle: () =>
    Effect.map(GatewayConfig, (c) => ({ status: "ok", version: c.version, timestamp: new Date().toISOString() }))
})

export const gatewayRoutes = [healthRoute, ...accessRoutes, ...completionRoutes, ...openAiRoutes]
