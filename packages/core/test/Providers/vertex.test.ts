/**
 * Google Vertex AI against a local mock that checks what Google checks: the token endpoint verifies
 * the service account's JWT (RS256 signature with the key pair's public key, iss, aud, scope, one
 * hour of life) before issuing an access token; the model endpoints answer only a live bearer
 * token (else 401 `{error:{code,message,status:"UNAUTHENTICATED"}}`), at Vertex's paths.
 * References: https://developers.google.com/identity/protocols/oauth2/service-account (JWT claims,
 * jwt-bearer grant), https://cloud.google.com/vertex-ai/generative-ai/docs/model-reference/inference
 * (generateContent paths), https://cloud.google.com/vertex-ai/generative-ai/docs/embeddings/get-text-embeddings
 * (`:predict` with instances[].content -> predictions[].embeddings.values, statistics.token_count).
 */
import { Option, Redacted } from "effect"
import * as jose from "jose"
import { mkdtempSync, rmSync, writeFileSync } from "node:fs"
import { createServer, type IncomingMessage, type Server, type ServerResponse } from "node:http"
import type { AddressInfo } from "node:net"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { afterAll, afterEach, beforeAll, describe, expect, it, vi } from "vitest"
import { data, uncataloguedModel } from "../../src/Catalog/Catalog.ts"
import type { Target } from "../../src/Providers/Chat.ts"
import { clearTokens } from "../../src/Providers/internal/accessTokens.ts"
import { postJsonNow } from "../../src/Providers/internal/http.ts"
import { servedBy } from "../../src/Providers/Registry.ts"
import { collect, complete, embed } from "../support/wires.ts"

const PROJECT = "proj-1"
const EMAIL = "gateway@proj-1.iam.gserviceaccount.com"
const HOUR = 3_600_000

interface Recorded {
  path: string
  headers: IncomingMessage["headers"]
  body: any
}

/** The mock: a token endpoint and Vertex's model endpoints. */
const startVertexMock = async (publicKey: CryptoKey) => {
  const requests: Array<Recorded> = []
  const issued = new Map<string, number>()
  let tokenCount = 0
  let tokenFailure: { status: number; body: unknown } | undefined
  let answer: (path: string, body: any) => unknown = () => ({})
  let url = ""
  const json = (res: ServerResponse, status: number, body: unknown) => res.writeHead(status, { "content-type": "application/json" }).end(JSON.stringify(body))
  const googleError = (res: ServerResponse, code: number, status: string, message: string) => json(res, code, { error: { code, message, status } })

  const issueToken = async (res: ServerResponse, form: URLSearchParams) => {
    if (tokenFailure) return json(res, tokenFailure.status, tokenFailure.body)
    if (form.get("grant_type") !== "urn:ietf:params:oauth:grant-type:jwt-bearer") return json(res, 400, { error: "unsupported_grant_type", error_description: "Invalid grant_type" })
    try {
      const { payload, protectedHeader } = await jose.jwtVerify(form.get("assertion") ?? "", publicKey, {
        algorithms: ["RS256"],
        issuer: EMAIL,
        audience: `${url}/token`
      })
      if (payload.scope !== "https://www.googleapis.com/auth/cloud-platform") throw new Error("bad scope")
      if (payload.exp! - payload.iat! > 3600) throw new Error("assertion lives longer than an hour")
      if (protectedHeader.kid !== "key-1") throw new Error("unknown key id")
    } catch (e) {
      return json(res, 400, { error: "invalid_grant", error_description: `Invalid JWT Signature. (${(e as Error).message})` })
    }
    const token = `ya29.token-${++tokenCount}`
    issued.set(token, Date.now() + HOUR)
    json(res, 200, { access_token: token, expires_in: 3600, token_type: "Bearer" })
  }

  const server: Server = createServer((req, res) => {
    let text = ""
    req.on("data", (c) => (text += c))
    req.on("end", () => {
      const path = req.url ?? ""
      if (path === "/token") return void issueToken(res, new URLSearchParams(text))
      const body = text ? JSON.parse(text) : undefined
      requests.push({ path, headers: req.headers, body })
      const express = path.startsWith("/v1/publishers/")
      if (express) {
        if (req.headers["x-goog-api-key"] !== "express-key") return googleError(res, 400, "INVALID_ARGUMENT", "API key not valid. Please pass a valid API key.")
      } else {
        const bearer = /^Bearer (.+)$/.exec(req.headers.authorization ?? "")?.[1]
        const expires = bearer === undefined ? undefined : issued.get(bearer)
        if (expires === undefined || expires <= Date.now()) {
          return googleError(res, 401, "UNAUTHENTICATED", "Request had invalid authentication credentials. Expected OAuth 2 access token, login cookie or other valid authentication credential.")
        }
        if (!path.startsWith(`/v1/projects/${PROJECT}/locations/us-central1/publishers/google/models/`)) return googleError(res, 404, "NOT_FOUND", `not found: ${path}`)
      }
      const reply = answer(path, body)
      if (!path.includes(":streamGenerateContent")) return json(res, 200, reply)
      res.writeHead(200, { "content-type": "text/event-stream" })
      for (const chunk of reply as Array<unknown>) res.write(`data: ${JSON.stringify(chunk)}\r\n\r\n`)
      res.end()
    })
  })
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", r))
  url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`
  return {
    url,
    requests,
    tokenCount: () => tokenCount,
    failTokens: (f: typeof tokenFailure) => (tokenFailure = f),
    answer: (a: typeof answer) => (answer = a),
    close: () => new Promise<void>((r) => server.close(() => r()))
  }
}

const textAnswer = (text: string) => ({
  candidates: [{ content: { role: "model", parts: [{ text }] }, finishReason: "STOP" }],
  usageMetadata: { promptTokenCount: 7, candidatesTokenCount: 2, totalTokenCount: 9 }
})

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
    const { privateKey, publicKey } = await jose.generateKeyPair("RS256", { extractable: true })
    mock = await startVertexMock(publicKey)
    keyJson = JSON.stringify({
      type: "service_account",
      project_id: PROJECT,
      private_key_id: "key-1",
      private_key: await jose.exportPKCS8(privateKey),
      client_email: EMAIL,
      token_uri: `${mock.url}/token`
    })
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
    const refused = await postJsonNow("vertex", `${mock.url}/v1/projects/${PROJECT}/locations/us-central1/publishers/google/models/m:generateContent`, { authorization: "Bearer forged" }, {}, new AbortController()).catch((e) => e)
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
