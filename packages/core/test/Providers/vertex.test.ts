/**
 * Google Vertex AI against a local mock that checks what Google checks (support/mockVertex.ts:
 * the token endpoint verifies the service account's signed JWT; the model endpoints answer only a
 * live bearer token, at Vertex's paths): chat, streams, tools, :predict embeddings, token reuse and
 * expiry, refused keys, express mode and the credential checks.
 */
import { Option, Redacted } from "effect"
import * as jose from "jose"
import { mkdtempSync, rmSync, writeFileSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { afterAll, afterEach, beforeAll, describe, expect, it, vi } from "vitest"
import { data, uncataloguedModel } from "../../src/Catalog/Catalog.ts"
import type { Target } from "../../src/Providers/Chat.ts"
import { clearTokens } from "../../src/Providers/internal/accessTokens.ts"
import { postJsonNow } from "../../src/Providers/internal/http.ts"
import { servedBy } from "../../src/Providers/Registry.ts"
import { EMAIL, PROJECT, serviceAccountKey, startVertexMock, textAnswer, vertexKeyPair } from "../support/mockVertex.ts"
import { collect, complete, embed } from "../support/wires.ts"
import { Cancel } from "../../src/Providers/internal/cancel.ts"

const HOUR = 3_600_000

describe("Vertex AI (service account)", () => {
  let mock: Awaited<ReturnType<typeof startVertexMock>>
  let target: Target
  let keyJson: string
  let dir: string
  const vertex = data.providers.find((p) => p.id === "vertex")!
  const targetWith = (settings: Record<string, string>, endpoint = `${mock.url}/v1`, apiKey?: string): Target => ({
    provider: {
      ...vertex,
      endpoint,
      apiKey: apiKey === undefined ? Option.none() : Option.some(Redacted.make(apiKey)),
      configured: true,
      settings,
      missing: undefined
    },
    model: uncataloguedModel("vertex", "gemini-2.5-flash", "chat")
  })

  beforeAll(async () => {
    const { privateKey, publicKey } = await vertexKeyPair()
    mock = await startVertexMock(publicKey)
    keyJson = await serviceAccountKey(privateKey, mock.url)
    target = targetWith({ VERTEX_SERVICE_ACCOUNT: keyJson, VERTEX_LOCATION: "us-central1" })
    dir = mkdtempSync(join(tmpdir(), "aigw-vertex-"))
  })
  afterAll(async () => {
    await mock.close()
    rmSync(dir, { recursive: true, force: true })
  })
  afterEach(() => {
    vi.restoreAllMocks()
    clearTokens()
    mock.failTokens(undefined)
  })

  it("plain chat: Vertex's path, a bearer token from the signed JWT, Gemini's body and answer", async () => {
    mock.answer(() => textAnswer("Hi there"))
    const result = await complete(target, {
      model: "gemini-2.5-flash",
      messages: [{ role: "system", content: "Be brief." }, { role: "user", content: "Hello" }],
      maxTokens: 50
    })
    expect(result).toMatchObject({ _tag: "Right", right: { content: "Hi there", finishReason: "stop", usage: { promptTokens: 7, completionTokens: 2 } } })
    const sent = mock.requests.at(-1)!
    expect(sent.path).toBe(`/v1/projects/${PROJECT}/locations/us-central1/publishers/google/models/gemini-2.5-flash:generateContent`)
    expect(sent.headers.authorization).toBe("Bearer ya29.token-1")
    expect(sent.headers["x-goog-api-key"]).toBeUndefined()
    expect(sent.body).toEqual({
      contents: [{ role: "user", parts: [{ text: "Hello" }] }],
      systemInstruction: { parts: [{ text: "Be brief." }] },
      generationConfig: { maxOutputTokens: 50 }
    })
  })

  it("the mock refuses a call without a valid bearer token (Google's error shape)", async () => {
    const refused = await postJsonNow("vertex", `${mock.url}/v1/projects/${PROJECT}/locations/us-central1/publishers/google/models/m:generateContent`, { authorization: "Bearer forged" }, {}, new Cancel()).catch((e) => e)
    expect(refused).toMatchObject({ provider: "vertex", status: 401 })
    expect(refused.message).toContain("invalid authentication credentials")
  })

  it("reuses the token across calls and fetches a new one after it expired", async () => {
    mock.answer(() => textAnswer("ok"))
    const before = mock.tokenCount()
    for (let i = 0; i < 3; i++) expect((await complete(target, { model: "m", messages: [{ role: "user", content: "hi" }] }))._tag).toBe("Right")
    expect(mock.tokenCount()).toBe(before + 1)
    const now = Date.now()
    vi.spyOn(Date, "now").mockReturnValue(now + 2 * HOUR)
    expect((await complete(target, { model: "m", messages: [{ role: "user", content: "hi" }] }))._tag).toBe("Right")
    expect(mock.tokenCount()).toBe(before + 2)
    expect(mock.requests.at(-1)!.headers.authorization).toBe(`Bearer ya29.token-${before + 2}`)
  })

  it("concurrent calls share one token request", async () => {
    mock.answer(() => textAnswer("ok"))
    const before = mock.tokenCount()
    const results = await Promise.all(Array.from({ length: 4 }, () => complete(target, { model: "m", messages: [{ role: "user", content: "hi" }] })))
    expect(results.every((r) => r._tag === "Right")).toBe(true)
    expect(mock.tokenCount()).toBe(before + 1)
  })

  it("streams over alt=sse with the Gemini decoder", async () => {
    mock.answer(() => [
      { candidates: [{ content: { role: "model", parts: [{ text: "Stream" }] } }] },
      { candidates: [{ content: { role: "model", parts: [{ text: "ing works" }] }, finishReason: "STOP" }], usageMetadata: { promptTokenCount: 4, candidatesTokenCount: 3 } }
    ])
    const result = await collect(target, { model: "gemini-2.5-flash", messages: [{ role: "user", content: "Hi" }] })
    expect(result._tag).toBe("Right")
    if (result._tag !== "Right") return
    expect(result.right.filter((e) => e._tag === "Text").map((e) => (e as any).text).join("")).toBe("Streaming works")
    expect(result.right).toContainEqual({ _tag: "Finish", reason: "stop" })
    expect(result.right).toContainEqual({ _tag: "Usage", usage: { promptTokens: 4, completionTokens: 3 } })
    expect(mock.requests.at(-1)!.path).toBe(`/v1/projects/${PROJECT}/locations/us-central1/publishers/google/models/gemini-2.5-flash:streamGenerateContent?alt=sse`)
  })

  it("tools: declarations out, a function call back", async () => {
    mock.answer(() => ({
      candidates: [{ content: { role: "model", parts: [{ functionCall: { name: "get_weather", args: { city: "Paris" } } }] }, finishReason: "STOP" }]
    }))
    const result = await complete(target, {
      model: "gemini-2.5-flash",
      messages: [{ role: "user", content: "Weather in Paris?" }],
      tools: [{ name: "get_weather", description: "Weather for a city", parameters: { type: "object", properties: { city: { type: "string" } } } }]
    })
    expect(result._tag).toBe("Right")
    if (result._tag !== "Right") return
    expect(result.right.finishReason).toBe("tool_calls")
    expect(result.right.toolCalls[0]).toMatchObject({ name: "get_weather", arguments: JSON.stringify({ city: "Paris" }) })
    expect(mock.requests.at(-1)!.body.tools[0].functionDeclarations[0].name).toBe("get_weather")
  })

  it("embeddings through :predict", async () => {
    mock.answer((_path, body) => ({
      predictions: body.instances.map((i: { content: string }) => ({ embeddings: { values: [i.content.length, 0.5], statistics: { token_count: 2, truncated: false } } }))
    }))
    const result = await embed({ ...target, model: uncataloguedModel("vertex", "text-embedding-005", "embeddings") }, ["abc", "hello"])
    expect(result).toMatchObject({ _tag: "Right", right: { vectors: [[3, 0.5], [5, 0.5]], promptTokens: 4 } })
    const sent = mock.requests.at(-1)!
    expect(sent.path).toBe(`/v1/projects/${PROJECT}/locations/us-central1/publishers/google/models/text-embedding-005:predict`)
    expect(sent.body).toEqual({ instances: [{ content: "abc" }, { content: "hello" }] })
  })

  it("a refused token request is a clear error naming the provider, and is not kept", async () => {
    mock.failTokens({ status: 400, body: { error: "invalid_grant", error_description: "Invalid JWT Signature." } })
    const failed = await complete(target, { model: "m", messages: [{ role: "user", content: "hi" }] })
    expect(failed._tag).toBe("Left")
    if (failed._tag !== "Left") return
    expect(failed.left).toMatchObject({ provider: "vertex", status: 400, retryable: false })
    expect(failed.left.message).toContain("Invalid JWT Signature.")
    mock.failTokens(undefined)
    mock.answer(() => textAnswer("ok"))
    expect((await complete(target, { model: "m", messages: [{ role: "user", content: "hi" }] }))._tag).toBe("Right")
  })

  it("a key signed by another key pair is refused by the token endpoint", async () => {
    const other = await jose.generateKeyPair("RS256", { extractable: true })
    const forged = JSON.stringify({ ...JSON.parse(keyJson), private_key: await jose.exportPKCS8(other.privateKey) })
    const failed = await complete(targetWith({ VERTEX_SERVICE_ACCOUNT: forged, VERTEX_LOCATION: "us-central1" }), { model: "m", messages: [{ role: "user", content: "hi" }] })
    expect(failed._tag === "Left" && failed.left.message).toContain("Invalid JWT Signature")
  })

  it("reads the key from a file path; VERTEX_PROJECT overrides the key's project", async () => {
    const file = join(dir, "key.json")
    writeFileSync(file, keyJson)
    mock.answer(() => textAnswer("from file"))
    const result = await complete(targetWith({ VERTEX_SERVICE_ACCOUNT: file, VERTEX_LOCATION: "us-central1" }), { model: "m", messages: [{ role: "user", content: "hi" }] })
    expect(result._tag === "Right" && result.right.content).toBe("from file")
    const other = servedBy(vertex).chat!.request(targetWith({ VERTEX_SERVICE_ACCOUNT: file, VERTEX_PROJECT: "other", VERTEX_LOCATION: "europe-west4" }, vertex.baseUrl), { model: "m", messages: [] }, false)
    expect(other.url).toBe("https://europe-west4-aiplatform.googleapis.com/v1/projects/other/locations/europe-west4/publishers/google/models/gemini-2.5-flash:generateContent")
    const global = servedBy(vertex).chat!.request(targetWith({ VERTEX_SERVICE_ACCOUNT: file }, vertex.baseUrl), { model: "m", messages: [] }, false)
    expect(global.url).toBe(`https://aiplatform.googleapis.com/v1/projects/${PROJECT}/locations/global/publishers/google/models/gemini-2.5-flash:generateContent`)
  })

  it("express mode: the API key as x-goog-api-key, paths without project and location", async () => {
    mock.answer(() => textAnswer("express"))
    const result = await complete(targetWith({}, `${mock.url}/v1`, "express-key"), { model: "m", messages: [{ role: "user", content: "hi" }] })
    expect(result._tag === "Right" && result.right.content).toBe("express")
    const sent = mock.requests.at(-1)!
    expect(sent.path).toBe("/v1/publishers/google/models/gemini-2.5-flash:generateContent")
    expect(sent.headers["x-goog-api-key"]).toBe("express-key")
    expect(sent.headers.authorization).toBeUndefined()
  })

  it("refuses what the Gemini wire refuses, naming the field", () => {
    const refusal = servedBy(vertex).chat!.unsupported!({ model: "m", messages: [{ role: "user", content: "hi" }], extra: { logit_bias: { "1": 2 } } })
    expect(refusal).toContain("logit_bias")
  })

  it("says what to set when the credentials are missing or unusable", () => {
    const check = servedBy(vertex).credentials!
    expect(check({ hasApiKey: false, settings: {} }, "VERTEX")).toContain("set VERTEX_SERVICE_ACCOUNT")
    expect(check({ hasApiKey: true, settings: {} }, "VERTEX")).toBeUndefined()
    expect(check({ hasApiKey: false, settings: { VERTEX_SERVICE_ACCOUNT: keyJson } }, "VERTEX")).toBeUndefined()
    expect(check({ hasApiKey: false, settings: { VERTEX_SERVICE_ACCOUNT: join(dir, "missing.json") } }, "VERTEX")).toContain("neither JSON nor a readable file")
    expect(check({ hasApiKey: false, settings: { VERTEX_SERVICE_ACCOUNT: "{not json" } }, "VERTEX")).toContain("not valid JSON")
    expect(check({ hasApiKey: false, settings: { VERTEX_SERVICE_ACCOUNT: JSON.stringify({ client_email: EMAIL }) } }, "VERTEX")).toContain("not a service account key")
    const noProject = JSON.stringify({ ...JSON.parse(keyJson), project_id: undefined })
    expect(check({ hasApiKey: false, settings: { VERTEX_SERVICE_ACCOUNT: noProject } }, "VERTEX")).toContain("set VERTEX_PROJECT")
    expect(check({ hasApiKey: true, settings: { VERTEX_LOCATION: "evil.example.com/" } }, "VERTEX")).toContain("VERTEX_LOCATION")
  })
})
