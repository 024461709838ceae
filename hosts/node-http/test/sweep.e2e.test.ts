/**
 * The provider sweep (issue 15): every catalogued provider whose wire family has a shared
 * wire-format mock is configured against it, and every endpoint type the registry says it serves
 * is called through the gateway's own routes with a model named for the provider (forwarded as
 * named). Each call must answer 200 and reach the mock as that provider: its key in its auth
 * header, its model in the body. The counts per endpoint type are printed for the closing note;
 * providers of families with their own mocks are swept in their adapter tests (listed at the end).
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { data } from "../../../packages/core/src/Catalog/Catalog.ts"
import { envPrefix } from "../../../packages/core/src/Config.ts"
import { servedBy } from "../../../packages/core/src/Providers/Registry.ts"
import {
  type MockUpstream,
  type RecordedRequest,
  startAnthropicMock,
  startGeminiMock,
  startOpenAiMock
} from "../../../packages/core/test/support/mockUpstreams.ts"
import { adminEnv, adminToken, signUp, type TestAvatar } from "./support/accounts.ts"
import { call, type RunningServer, startServer } from "./support/server.ts"

type Family = "openai" | "anthropic" | "gemini"

/** The family mock a provider speaks to, when its chat and embeddings are the family's (no module of its own replaces them). */
const familyOf = (p: (typeof data.providers)[number]): Family | undefined => {
  if (p.adapter !== "openai" && p.adapter !== "anthropic" && p.adapter !== "gemini") return undefined
  // A module with its own authorization (Vertex AI's OAuth tokens) has its own mock and test.
  if (servedBy(p).authorize !== undefined) return undefined
  return p.adapter
}

/** "ok", or the envelope's error message (shown when a provider fails). */
const outcome = (res: { body: { isError?: boolean; message?: string } }) => (res.body.isError ? res.body.message : "ok")

const keyOf = (id: string) => `sk-sweep-${id}`
const modelOf = (id: string) => `sweep-${id}`
const keyless = (id: string) => servedBy({ id, adapter: "openai" }).credentials !== undefined

/** The credential a recorded request carried, whatever header the provider's auth style uses. */
const credentialOf = (r: RecordedRequest) =>
  String(r.headers["authorization"] ?? r.headers["api-key"] ?? r.headers["x-api-key"] ?? r.headers["x-goog-api-key"] ?? "")

describe("provider sweep", () => {
  const mocks = {} as Record<Family, MockUpstream>
  let server: RunningServer
  let user: TestAvatar
  const swept = data.providers.filter((p) => familyOf(p) !== undefined)
  const served: Record<string, Array<string>> = {}

  beforeAll(async () => {
    mocks.openai = await startOpenAiMock()
    mocks.anthropic = await startAnthropicMock()
    mocks.gemini = await startGeminiMock()
    const env: Record<string, string> = { ...adminEnv }
    for (const p of swept) {
      const mock = mocks[familyOf(p)!]
      env[`${envPrefix(p.id)}_BASE_URL`] = mock.url
      if (!keyless(p.id)) env[`${envPrefix(p.id)}_API_KEY`] = keyOf(p.id)
    }
    server = await startServer(env)
    user = await signUp(server, "sweep")
    const plan = await call(server.url, "PUT", `/v1/admin/avatars/${user.id}/plan`, { token: await adminToken(server), body: { plan: "Enterprise" } })
    expect(plan.status).toBe(200)
  }, 120_000)

  afterAll(async () => {
    await server?.stop()
    await Promise.all(Object.values(mocks).map((m) => m.close()))
    const counts = Object.entries(served).map(([type, ids]) => `${type}: ${ids.length}`).join(", ")
    console.log(`provider sweep: ${swept.length} providers swept through the gateway; served per endpoint type: ${counts}`)
  })

  /** Asserts the last request of the provider's mock came from this provider. */
  const reached = (id: string, check: (r: RecordedRequest) => void) => {
    const p = swept.find((x) => x.id === id)!
    const last = mocks[familyOf(p)!].requests.at(-1)!
    if (keyless(id)) expect(credentialOf(last)).toBe("")
    else expect(credentialOf(last)).toContain(keyOf(id))
    check(last)
  }
  const count = (type: string, id: string) => (served[type] ??= []).push(id)
  const post = (path: string, body: unknown) => call(server.url, "POST", path, { apiKey: user.apiKey, body })

  it("serves chat (plain and streamed) for every provider of the shared families", async () => {
    for (const p of swept.filter((x) => x.capabilities.includes("chat"))) {
      const model = modelOf(p.id)
      const res = await post("/v1/complete", { provider: p.id, model, messages: [{ role: "user", content: "hi" }] })
      expect([p.id, res.status, outcome(res)]).toEqual([p.id, 200, "ok"])
      expect(res.body.result).toMatchObject({ provider: p.id, model, costKnown: false })
      expect(res.body.result.content.length).toBeGreaterThan(0)
      reached(p.id, (r) => expect(JSON.stringify(r.body) + r.path).toContain(model))
      const stream = await fetch(`${server.url}/v1/complete/stream`, {
        method: "POST",
        headers: { "content-type": "application/json", "x-api-key": user.apiKey },
        body: JSON.stringify({ provider: p.id, model, messages: [{ role: "user", content: "hi" }] })
      })
      const text = await stream.text()
      expect([p.id, stream.status]).toEqual([p.id, 200])
      expect(text).toContain('"done":true')
      expect(text).not.toContain('"error"')
      count("chat", p.id)
    }
  }, 120_000)

  it("serves embeddings for every provider that lists them", async () => {
    for (const p of swept.filter((x) => x.capabilities.includes("embeddings"))) {
      const res = await post("/v1/embeddings", { provider: p.id, model: modelOf(p.id), texts: ["a", "b"] })
      expect([p.id, res.status, outcome(res)]).toEqual([p.id, 200, "ok"])
      expect(res.body.result.embeddings).toHaveLength(2)
      reached(p.id, (r) => expect(JSON.stringify(r.body) + r.path).toContain(modelOf(p.id)))
      count("embeddings", p.id)
    }
  }, 60_000)

  it("serves images, moderation, speech and transcription for every provider that lists them", async () => {
    for (const p of swept) {
      if (p.capabilities.includes("images")) {
        const res = await post("/v1/images/generate", { provider: p.id, prompt: "a lighthouse" })
        expect([p.id, "images", res.status, outcome(res)]).toEqual([p.id, "images", 200, "ok"])
        reached(p.id, (r) => expect(r.path).toMatch(/images\/generations$/))
        count("images", p.id)
      }
      if (p.capabilities.includes("moderation")) {
        const res = await post("/v1/moderation", { provider: p.id, text: "hello" })
        expect([p.id, "moderation", res.status, outcome(res)]).toEqual([p.id, "moderation", 200, "ok"])
        reached(p.id, (r) => expect(r.path).toMatch(/moderations$/))
        count("moderation", p.id)
      }
      if (p.capabilities.includes("speech")) {
        const res = await fetch(`${server.url}/v1/audio/speech`, {
          method: "POST",
          headers: { "content-type": "application/json", "x-api-key": user.apiKey },
          body: JSON.stringify({ provider: p.id, text: "hello", voice: "alloy" })
        })
        expect([p.id, "speech", res.status]).toEqual([p.id, "speech", 200])
        reached(p.id, (r) => expect(r.path).toMatch(/audio\/speech$/))
        count("speech", p.id)
      }
      if (p.capabilities.includes("transcription")) {
        const form = new FormData()
        form.append("file", new File([new Uint8Array([73, 68, 51, 1, 2, 3])], "a.mp3", { type: "audio/mpeg" }))
        form.append("provider", p.id)
        const res = await fetch(`${server.url}/v1/audio/transcriptions`, { method: "POST", headers: { "x-api-key": user.apiKey }, body: form })
        expect([p.id, "transcription", res.status]).toEqual([p.id, "transcription", 200])
        reached(p.id, (r) => expect(r.path).toMatch(/audio\/transcriptions$/))
        count("transcription", p.id)
      }
    }
  }, 60_000)

  it("lists, for every provider, what it serves and why an offered type is not served", async () => {
    const res = await call(server.url, "GET", "/v1/providers", { apiKey: user.apiKey })
    expect(res.status).toBe(200)
    for (const p of res.body.result.providers as Array<{ id: string; offers: Array<string>; endpointTypes: Array<string>; notServed: Array<{ type: string; reason: string }> }>) {
      expect([p.id, [...p.endpointTypes, ...p.notServed.map((n) => n.type)].sort()]).toEqual([p.id, [...p.offers].sort()])
      for (const n of p.notServed) expect(n.reason.length).toBeGreaterThan(10)
    }
  })
})
