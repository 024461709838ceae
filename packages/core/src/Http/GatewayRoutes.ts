/** The gateway API (spec: gateway-api.md) under /v1. */
import { check, Health } from "../Health.ts"
import { accessRoutes } from "./AccessRoutes.ts"
import { completionRoutes } from "./CompletionRoutes.ts"
import { jobRoutes } from "./JobRoutes.ts"
import { openAiRoutes } from "./OpenAiRoutes.ts"
import { open } from "./Route.ts"

export const healthRoute = open({
  method: "GET",
  path: "/v1/health",
  tag: "Health",
  envelope: "none",
  summary: "Health check for load balancers (unauthenticated, not enveloped)",
  success: Health,
  handle: () => check
})

export const gatewayRoutes = [healthRoute, ...accessRoutes, ...completionRoutes, ...openAiRoutes, ...jobRoutes]
