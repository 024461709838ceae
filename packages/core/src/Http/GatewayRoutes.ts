/** The gateway API (spec: gateway-api.md) under /v1. */
import { Effect } from "effect"
import { check, Health } from "../Health.ts"
import { accessRoutes } from "./AccessRoutes.ts"
import { completionRoutes } from "./CompletionRoutes.ts"
import { jobRoutes } from "./JobRoutes.ts"
import { openAiRoutes } from "./OpenAiRoutes.ts"
import { embeddingRoutes } from "./EmbeddingRoutes.ts"
import { memoryRoutes } from "./MemoryRoutes.ts"
import { orchestrationRoutes } from "./OrchestrationRoutes.ts"
import { mediaRoutes } from "./MediaRoutes.ts"
import { open, Reply } from "./Route.ts"
import { toolRoutes } from "./ToolRoutes.ts"
import { taskRoutes } from "./TaskRoutes.ts"

export const healthRoute = open({
  method: "GET",
  path: "/v1/health",
  tag: "Health",
  envelope: "none",
  summary: "Readiness for load balancers (unauthenticated, not enveloped): 200 ok, or 503 naming the failed dependency",
  description: "`checks.database` is `ok` or `failed` (a `SELECT 1` within 2 s, cached for 1 s). While the database fails the answer is 503 with status `unavailable`.",
  success: Health,
  handle: () => Effect.map(check, (health) => (health.status === "ok" ? health : new Reply(health, null, 503)))
})

export const gatewayRoutes = [healthRoute, ...accessRoutes, ...completionRoutes, ...embeddingRoutes, ...taskRoutes, ...memoryRoutes, ...orchestrationRoutes, ...mediaRoutes, ...toolRoutes, ...openAiRoutes, ...jobRoutes]
