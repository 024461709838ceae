/** The gateway API (spec: gateway-api.md) under /v1. */
import { check, Health } from "../Health.ts"
import { accessRoutes } from "./AccessRoutes.ts"
import { completionRoutes } from "./CompletionRoutes.ts"
import { jobRoutes } from "./JobRoutes.ts"
import { openAiRoutes } from "./OpenAiRoutes.ts"
import { embeddingRoutes } from "./EmbeddingRoutes.ts"
import { memoryRoutes } from "./MemoryRoutes.ts"
import { orchestrationRoutes } from "./OrchestrationRoutes.ts"
import { mediaRoutes } from "./MediaRoutes.ts"
import { open } from "./Route.ts"
import { toolRoutes } from "./ToolRoutes.ts"
import { taskRoutes } from "./TaskRoutes.ts"

export const healthRoute = open({
  method: "GET",
  path: "/v1/health",
  tag: "Health",
  envelope: "none",
  summary: "Health check for load balancers (unauthenticated, not enveloped)",
  success: Health,
  handle: () => check
})

export const gatewayRoutes = [healthRoute, ...accessRoutes, ...completionRoutes, ...embeddingRoutes, ...taskRoutes, ...memoryRoutes, ...orchestrationRoutes, ...mediaRoutes, ...toolRoutes, ...openAiRoutes, ...jobRoutes]
