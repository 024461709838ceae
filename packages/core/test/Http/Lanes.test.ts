/**
 * Which metered routes the node host's fast lane serves (Http/Lane.ts): every metered call whose
 * work is a plan over the engine's promise calls, or in-process work. The rest stay on the Effect
 * route, each for the reason named here, so that moving a route (or adding one) is a decision.
 */
import { describe, expect, it } from "vitest"
import { routes } from "../../src/Http/App.ts"

/** The metered routes left to the Effect route, and why. */
const effectOnly: Record<string, string> = {
  "POST /openai/v1/images/generations": "media: the Media service's Effect adapters, upstreams that take seconds",
  "POST /v1/images/generate": "media: the Media service's Effect adapters, upstreams that take seconds",
  "POST /v1/video/generate": "an asynchronous job over Effect adapters",
  "POST /v1/audio/speech": "media: binary answers from the Media service's Effect adapters",
  "POST /v1/audio/transcriptions": "a multipart upload read by the Effect platform",
  "POST /openai/v1/moderations": "the Media service's Effect adapters (a vendor's own client, or the OpenAI format)",
  "POST /v1/moderation": "the Media service's Effect adapters (a vendor's own client, or the OpenAI format)",
  "POST /v1/documents/parse": "a multipart upload read by the Effect platform",
  "POST /v1/code/execute": "a sandboxed run that takes its own time",
  "POST /v1/batch/submit": "a job: answered at once, run later",
  "POST /v1/fine-tuning/jobs": "a job on the vendor's side",
  "POST /v1/memory/store": "the document store and embedder services",
  "POST /v1/memory/query": "the document store and embedder services",
  "POST /v1/graphrag/query": "a graph of calls over the document store",
  "POST /v1/orchestrate/conversation": "several calls orchestrated in Effect",
  "POST /v1/orchestrate/crew": "several calls orchestrated in Effect",
  "POST /v1/orchestrate/graph-node": "several calls orchestrated in Effect",
  "POST /v1/reasoning-network/dispatch": "several calls orchestrated in Effect"
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
      "/v1/classify",
      "/v1/complete",
      "/v1/complete/stream",
      "/v1/complete/tool-result",
      "/v1/embeddings",
      "/v1/extract",
      "/v1/guardrails/check",
      "/v1/prompts/optimise",
      "/v1/rerank",
      "/v1/translate"
    ])
  })

  it("claims POST routes only (the lane reads a JSON body)", () => {
    for (const r of routes.filter((r) => r.lane !== undefined)) expect([r.path, r.method]).toEqual([r.path, "POST"])
  })
})
