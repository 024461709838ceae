/**
 * Which metered routes the node host's fast lane serves (Http/Lane.ts): every metered call whose
 * work is a plan over the engine's promise calls or in-process work, and every route whose check and
 * handler need only the avatar and a JSON body and answer JSON (`onLane`: the lane runs those same
 * Effects on the app's runtime). The rest stay on the Effect route, each for the reason named here,
 * so that moving a route (or adding one) is a decision.
 */
import { describe, expect, it } from "vitest"
import { routes } from "../../src/Http/App.ts"

/** The metered routes left to the Effect route, and why. */
const effectOnly: Record<string, string> = {
  "POST /v1/audio/speech": "a binary answer (the audio bytes), not a JSON envelope",
  "POST /v1/audio/transcriptions": "a multipart upload read by the Effect platform",
  "POST /v1/code/execute": "its check takes a sandbox slot the request holds until it ends (Route.ts Held), which the lane's checks cannot hand over",
  "POST /v1/documents/parse": "a multipart upload read by the Effect platform"
}

describe("the fast lane's routes", () => {
  it("serves every metered route but the Effect-only ones named with their reason", () => {
    const metered = routes.filter((r) => r.metered)
    const onEffect = metered.filter((r) => r.lane === undefined).map((r) => `${r.method} ${r.path}`).sort()
    expect(onEffect).toEqual(Object.keys(effectOnly).sort())
    expect(metered.filter((r) => r.lane !== undefined).map((r) => r.path).sort()).toEqual([
      "/anthropic/v1/messages",
      "/openai/v1/chat/completions",
      "/openai/v1/embeddings",
      "/openai/v1/images/generations",
      "/openai/v1/moderations",
      "/v1/batch/submit",
      "/v1/classify",
      "/v1/complete",
      "/v1/complete/stream",
      "/v1/complete/tool-result",
      "/v1/embeddings",
      "/v1/extract",
      "/v1/fine-tuning/jobs",
      "/v1/graphrag/query",
      "/v1/guardrails/check",
      "/v1/images/generate",
      "/v1/memory/query",
      "/v1/memory/store",
      "/v1/moderation",
      "/v1/orchestrate/conversation",
      "/v1/orchestrate/crew",
      "/v1/orchestrate/graph-node",
      "/v1/prompts/optimise",
      "/v1/reasoning-network/dispatch",
      "/v1/rerank",
      "/v1/translate",
      "/v1/video/generate"
    ])
  })

  it("claims POST routes only (the lane reads a JSON body)", () => {
    for (const r of routes.filter((r) => r.lane !== undefined)) expect([r.path, r.method]).toEqual([r.path, "POST"])
  })
})
