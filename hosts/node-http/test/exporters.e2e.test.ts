/**
 * Usage export end to end on the real node host: with LANGFUSE_API_KEY and LANGFUSE_BASE_URL set,
 * a completion through the gateway reaches a local Langfuse mock (trace + generation, the avatar
 * id hashed, no prompt or completion text), on the exporters' interval and, for what is still
 * queued, when the host shuts down.
 */
import { Option, Redacted } from "effect"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { hashAvatar, saltOf } from "../../../packages/core/src/Observability/Exporters.ts"
import { LANGFUSE_KEY, type ObservabilityMock, startObservabilityMock } from "../../../packages/core/test/support/mockObservability.ts"
import { type MockUpstream, startOpenAiMock } from "../../../packages/core/test/support/mockUpstreams.ts"
import { adminEnv, signUp, type TestAvatar } from "./support/accounts.ts"
import { call, type RunningServer, startServer } from "./support/server.ts"

const JWT_SECRET = "exporters-e2e-jwt-secret-0123456789abcdef"

describe("usage export (Langfuse)", () => {
  let server: RunningServer
  let openai: MockUpstream
  let langfuse: ObservabilityMock
  let user: TestAvatar

  const events = (): Array<any> => langfuse.requests.filter((r: { status: number }) => r.status === 207).flatMap((r: { body: any }) => r.body.batch)

  beforeAll(async () => {
    ;[openai, langfuse] = await Promise.all([startOpenAiMock({ apiKey: "sk-openai" }), startObservabilityMock("langfuse")])
    server = await startServer({
      ...adminEnv,
      JWT_SECRET,
      OPENAI_API_KEY: "sk-openai",
      OPENAI_BASE_URL: openai.url,
      LANGFUSE_API_KEY: LANGFUSE_KEY,
      LANGFUSE_BASE_URL: langfuse.url
    })
    user = await signUp(server, "export")
  })
  afterAll(async () => {
    await server?.stop()
    await Promise.all([openai?.close(), langfuse?.close()])
  })

  it("a completion reaches Langfuse with usage, the avatar hashed and no text; the rest is sent at shutdown", async () => {
    openai.setScenario({ kind: "text", text: "a private completion text", usage: { prompt: 21, completion: 5 } })
    const res = await call(server.url, "POST", "/v1/complete", {
      apiKey: user.apiKey,
      headers: { "x-request-id": "export-e2e-1" },
      body: { messages: [{ role: "user", content: "a private prompt text" }], provider: "openai", model: "gpt-4o-mini" }
    })
    expect(res.status).toBe(200)
    expect(res.body.result.content).toBe("a private completion text")
    // A call the engine does not make itself (media, vendor calls) carries its request id too: it used to reach the exporters without one.
    const moderated = await call(server.url, "POST", "/v1/moderation", {
      apiKey: user.apiKey,
      headers: { "x-request-id": "export-e2e-media" },
      body: { text: "a private moderated text", provider: "openai" }
    })
    expect(moderated.status).toBe(200)

    // The exporters' interval (5 s) sends it without anything else happening.
    const traceOf = (capability: string) => events().find((e) => e.type === "trace-create" && e.body.metadata.capability === capability)
    for (let i = 0; i < 150 && (traceOf("chat") === undefined || traceOf("moderation") === undefined); i++) await new Promise((r) => setTimeout(r, 100))
    expect(traceOf("moderation")).toMatchObject({ body: { metadata: { provider: "openai", capability: "moderation", requestId: "export-e2e-media" } } })
    const trace = traceOf("chat")
    const generation = events().find((e) => e.type === "generation-create" && e.body.traceId === trace.body.id)
    const hashed = hashAvatar(saltOf(Option.some(Redacted.make(JWT_SECRET)), ""), user.id)
    expect(langfuse.requests[0]!.headers.authorization).toBe(`Basic ${Buffer.from(LANGFUSE_KEY).toString("base64")}`)
    expect(trace).toMatchObject({ type: "trace-create", body: { userId: hashed, metadata: { provider: "openai", capability: "chat", requestId: "export-e2e-1" } } })
    expect(generation).toMatchObject({
      type: "generation-create",
      body: { traceId: trace.body.id, model: "gpt-4o-mini", usageDetails: { input: 21, output: 5, total: 26 }, costDetails: { total: res.body.result.costUSD }, level: "DEFAULT" }
    })
    const text = JSON.stringify(events())
    expect(text).not.toContain("private")
    expect(text).not.toContain(user.id)

    // Queued when the host stops: the shutdown flush sends it.
    const second = await call(server.url, "POST", "/v1/complete", {
      apiKey: user.apiKey,
      body: { messages: [{ role: "user", content: "again" }], provider: "openai", model: "gpt-4o-mini" }
    })
    expect(second.status).toBe(200)
    expect(await server.stop()).toBe(0)
    expect(events().filter((e: any) => e.type === "generation-create")).toHaveLength(3)
  }, 60_000)
})
