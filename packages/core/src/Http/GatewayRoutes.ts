/** The gateway API (spec: gateway-api.md) under /v1. */
import { Effect } from "effect"
import { check, Health, Readiness, ready } from "../Health.ts"
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
  ignoresQuery: true,
  summary: "Readiness for load balancers (unauthenticated, not enveloped): 200 ok, or 503 naming the failed dependency",
  description: "`checks.database` is `ok` or `failed` (a `SELECT 1` within 2 s, cached for 1 s). While the database fails the answer is 503 with status `unavailable`.",
  success: Health,
  handle: () => Effect.map(check, (health) => (health.status === "ok" ? health : new Reply(health, null, 503)))
})

export const readyRoute = open({
  method: "GET",
  path: "/v1/ready",
  tag: "Health",
  envelope: "none",
  ignoresQuery: true,
  summary: "Readiness (unauthenticated, not enveloped): 200 when the database answers and its migrations are applied, else 503 naming the failed check",
  description: "`checks.database` is `ok` or `failed` (a `SELECT 1` within 2 s, cached for 1 s); `checks.migrations` is `ok` when the newest migration in `aigw_migrations` is the newest this build knows. `/v1/health` stays the liveness-plus-database check.",
  success: Readiness,
  handle: () => Effect.map(ready, (r) => (r.status === "ready" ? r : new Reply(r, null, 503)))
})

export const gatewayRoutes = [healthRoute, readyRoute, ...accessRoutes, ...completionRoutes, ...embeddingRoutes, ...taskRoutes, ...memoryRoutes, ...orchestrationRoutes, ...mediaRoutes, ...toolRoutes, ...openAiRoutes, ...jobRoutes]
