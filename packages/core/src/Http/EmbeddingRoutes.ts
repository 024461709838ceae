/** POST /v1/embeddings. */
import { Effect } from "effect"
import { Embeddings, EmbeddingsBody } from "../Capabilities/Embeddings.ts"
import type { RoutingError } from "../Routing.ts"
import { authed } from "./Route.ts"
import { EmbeddingsResult } from "./ResponseSchemas.ts"

export const embeddingRoutes = [
  authed({
    method: "POST",
    path: "/v1/embeddings",
    success: EmbeddingsResult,
    tag: "Embeddings",
    metered: true,
    summary: "Embed texts with the named provider/model or the best fit for the plan (auto)",
    description: "Result: { provider, model, embeddings: number[][] (one per text, in order), dimensions, usage, costUSD }.",
    body: EmbeddingsBody,
    check: ({ avatar, body }) => Effect.flatMap(Embeddings, (e) => e.check(avatar, body)),
    handle: ({ avatar, body }) => Effect.flatMap(Embeddings, (e) => e.embed(avatar, body)),
    lane: {
      plan: ({ calls, embeddings }, avatar, body) => {
        const targets = embeddings.laneTargets(avatar, body)
        if (targets === undefined) return undefined
        if (!Array.isArray(targets)) return targets as RoutingError
        return (lane) => calls.embed({ ...lane.call(targets), texts: body.texts })
      }
    }
  })
]
