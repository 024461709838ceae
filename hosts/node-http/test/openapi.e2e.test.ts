/**
 * /openapi.json of the running node host is valid OpenAPI 3.1: swagger-parser validates it,
 * Redocly's recommended rules find no error, openapi-typescript turns it into types that
 * compile, and real answers (successes and failures) match the schemas it declares for them.
 */
import SwaggerParser from "@apidevtools/swagger-parser"
import { createConfig, lintFromString } from "@redocly/openapi-core"
import AjvModule from "ajv/dist/2020.js"
import { execFile } from "node:child_process"
import * as fs from "node:fs"
import * as path from "node:path"
import { fileURLToPath } from "node:url"
import openapiTS, { astToString } from "openapi-typescript"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { type MockUpstream, startOpenAiMock } from "../../../packages/core/test/support/mockUpstreams.ts"
import { scratchDir } from "../../../packages/core/test/support/scratch.ts"
import { adminEnv, adminToken, signUp, type TestAvatar } from "./support/accounts.ts"
import { call, type RunningServer, startServer } from "./support/server.ts"

const tsc = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "../../../node_modules/.bin/tsc")

type Document = {
  openapi: string
  paths: Record<string, Record<string, { responses: Record<string, { content?: Record<string, { schema: unknown }> }> }>>
  components: { schemas: Record<string, unknown> }
}

describe("/openapi.json", () => {
  let server: RunningServer
  let openai: MockUpstream
  let user: TestAvatar
  let text: string
  let doc: Document

  beforeAll(async () => {
    openai = await startOpenAiMock({ apiKey: "sk-oa", chunkDelayMs: 1 })
    // A short worker interval: the batch below is polled until it completes.
    server = await startServer({ ...adminEnv, OPENAI_API_KEY: "sk-oa", OPENAI_BASE_URL: openai.url, AIGW_WORKER_INTERVAL_MS: "100" })
    user = await signUp(server, "oas")
    const res = await fetch(`${server.url}/openapi.json`)
    expect(res.status).toBe(200)
    text = await res.text()
    doc = JSON.parse(text) as Document
  })
  afterAll(async () => {
    if (process.env.AIGW_TEST_DEBUG) console.info(server?.output())
    await server?.stop()
    await openai?.close()
  })

  it("/docs may not be framed by another site nor sniffed as another type; /openapi.json not sniffed", async () => {
    const page = await fetch(`${server.url}/docs`)
    expect([page.status, page.headers.get("x-frame-options"), page.headers.get("content-security-policy"), page.headers.get("x-content-type-options")]).toEqual([200, "DENY", "frame-ancestors 'none'", "nosniff"])
    await page.text()
    const spec = await fetch(`${server.url}/openapi.json`)
    expect([spec.headers.get("content-type"), spec.headers.get("x-content-type-options")]).toEqual(["application/json", "nosniff"])
    await spec.text()
  })

  it("validates with swagger-parser (every $ref resolves)", async () => {
    // validate() dereferences in place: it gets a copy.
    const api = await SwaggerParser.validate(structuredClone(doc) as never)
    expect((api as { openapi?: string }).openapi).toBe("3.1.0")
    expect(text).not.toContain("#/$defs/")
  })

  it("has no error under Redocly's recommended rules", async () => {
    const config = await createConfig({ extends: ["recommended"] })
    const problems = await lintFromString({ source: text, absoluteRef: `${server.url}/openapi.json`, config })
    const show = (p: (typeof problems)[number]) => `${p.severity} ${p.ruleId}: ${p.message} at ${p.location[0]?.pointer ?? ""}`
    const warnings = problems.filter((p) => p.severity !== "error")
    if (warnings.length > 0) console.info(`redocly warnings:\n${warnings.map(show).join("\n")}`)
    expect(problems.filter((p) => p.severity === "error").map(show)).toEqual([])
  })

  it("declares the security schemes, hoisted components and the result schemas", () => {
    const json = doc as unknown as {
      components: { securitySchemes: Record<string, { type: string }> }
      paths: Record<string, Record<string, { security: Array<Record<string, unknown>>; responses: Record<string, any> }>>
    }
    expect(json.components.securitySchemes.bearer!.type).toBe("http")
    expect(json.components.securitySchemes.apiKey!.type).toBe("apiKey")
    const usage = json.paths["/v1/usage"]!.get!
    expect(usage.security).toEqual([{ bearer: [] }, { apiKey: [] }])
    // Open operations inherit the document's default: anonymous, or credentials.
    expect((doc as unknown as { security: unknown }).security).toEqual([{}, { bearer: [] }, { apiKey: [] }])
    expect(json.paths["/api/avatar/register"]!.post!.security).toBeUndefined()
    expect(usage.responses["200"].content["application/json"].schema.properties.result).toEqual({ $ref: "#/components/schemas/UsageSummary" })
    expect(Object.keys(usage.responses)).toEqual(expect.arrayContaining(["401", "403", "429"]))
    expect(json.paths["/v1/complete"]!.post!.responses["502"].content["application/json"].schema).toEqual({ $ref: "#/components/schemas/ErrorEnvelope" })
    // The main routes document their result (not `{}`).
    const resultOf = (p: string, m: string) => {
      const schema = json.paths[p]![m]!.responses["200"].content["application/json"].schema
      return schema.oneOf ? schema.oneOf[0].properties.result : schema.properties?.result ?? schema
    }
    const documented: Array<[string, string]> = [
      ["/v1/complete", "post"], ["/v1/embeddings", "post"], ["/v1/usage", "get"], ["/v1/models", "get"], ["/v1/keys", "get"], ["/v1/keys", "post"],
      ["/openai/v1/chat/completions", "post"], ["/anthropic/v1/messages", "post"], ["/api/avatar/authenticate", "post"], ["/api/avatar/{id}", "get"], ["/api/avatar/register", "post"],
      ["/v1/translate", "post"], ["/v1/memory/query", "post"], ["/v1/images/generate", "post"], ["/v1/audio/transcriptions", "post"],
      ["/v1/orchestrate/crew", "post"], ["/v1/orchestrate/conversation", "post"], ["/v1/orchestrate/graph-node", "post"],
      ["/v1/reasoning-network/dispatch", "post"], ["/v1/documents/parse", "post"], ["/v1/graphrag/query", "post"],
      ["/v1/batch/submit", "post"], ["/v1/batch/{batchId}/status", "get"], ["/v1/video/generate", "post"], ["/v1/video/{jobId}", "get"],
      ["/v1/fine-tuning/jobs", "post"], ["/v1/fine-tuning/jobs/{jobId}", "get"]
    ]
    for (const [p, m] of documented) expect(Object.keys(resultOf(p, m)), `${m} ${p}`).not.toHaveLength(0)
    // The schemas the old document referenced under #/$defs are components now.
    expect(Object.keys(doc.components.schemas)).toEqual(expect.arrayContaining(["Int", "Avatar", "CompletionResult", "ChatCompletion"]))
  })

  it("generates TypeScript types with openapi-typescript that compile", async () => {
    const ast = await openapiTS(structuredClone(doc) as never)
    const source = `${astToString(ast)}
type Usage = paths["/v1/usage"]["get"]["responses"][200]["content"]["application/json"]["result"]
export const remaining = (u: Usage): number => u.remainingCallsToday
type Completion = components["schemas"]["CompletionResult"]
export const text = (c: Completion): string => c.content
`
    const dir = scratchDir("aigw-openapi-ts-")
    fs.writeFileSync(path.join(dir, "api.ts"), source)
    fs.writeFileSync(
      path.join(dir, "tsconfig.json"),
      JSON.stringify({
        compilerOptions: { strict: true, noEmit: true, target: "ES2022", module: "ESNext", moduleResolution: "Bundler", skipLibCheck: true, types: [] },
        files: ["api.ts"]
      })
    )
    // tsc in a child process: the server's connections stay served meanwhile.
    const result = await new Promise<{ code: number | null; output: string }>((resolve) => {
      execFile(tsc, ["-p", dir], { timeout: 120_000 }, (error, stdout, stderr) =>
        resolve({ code: error ? (typeof error.code === "number" ? error.code : 1) : 0, output: stdout + stderr }))
    })
    expect(result.output).toBe("")
    expect(result.code).toBe(0)
  })

  it("real answers match the schemas the document declares for them", async () => {
    const Ajv = AjvModule.default
    const ajv = new Ajv({ strict: false, allErrors: true, validateFormats: false })
    // The document is the root the schemas' #/components/schemas/… references resolve in.
    ajv.addSchema({ $id: "https://aigw.test/openapi.json", components: doc.components } as never)
    let checked = 0
    const check = async (method: string, docPath: string, res: { status: number; body: unknown }) => {
      const response = doc.paths[docPath]?.[method.toLowerCase()]?.responses[String(res.status)]
      expect(response, `${method} ${docPath} documents status ${res.status}`).toBeDefined()
      const schema = response!.content?.["application/json"]?.schema
      expect(schema, `${method} ${docPath} ${res.status} has a JSON schema`).toBeDefined()
      const validate = ajv.compile({ $id: `https://aigw.test/answer/${++checked}`, $ref: "#/$defs/s", $defs: { s: rebase(schema) } } as never)
      const ok = validate(res.body)
      expect(ok, `${method} ${docPath} ${res.status}: ${ajv.errorsText(validate.errors)}\n${JSON.stringify(res.body).slice(0, 500)}`).toBe(true)
    }
    // References are made absolute against the document's $id.
    const rebase = (value: unknown): unknown =>
      Array.isArray(value)
        ? value.map(rebase)
        : value !== null && typeof value === "object"
        ? Object.fromEntries(Object.entries(value).map(([k, v]) => [k, k === "$ref" && typeof v === "string" ? `https://aigw.test/openapi.json${v}` : rebase(v)]))
        : value

    const ok = async (method: string, docPath: string, res: { status: number; body: unknown }) => {
      expect(res.status, `${method} ${docPath}: ${JSON.stringify(res.body).slice(0, 300)}`).toBe(200)
      await check(method, docPath, res)
    }
    const get = (p: string, who: { apiKey?: string; token?: string } = { apiKey: user.apiKey }) => call(server.url, "GET", p, who)
    const post = (p: string, body: unknown, who: { apiKey?: string; token?: string } = { apiKey: user.apiKey }) => call(server.url, "POST", p, { ...who, body })

    await ok("GET", "/v1/usage", await get("/v1/usage"))
    await ok("GET", "/v1/models", await get("/v1/models"))
    await ok("GET", "/v1/models/{path}", await get("/v1/models/gpt-4o-mini"))
    await ok("GET", "/v1/providers", await get("/v1/providers"))
    await ok("GET", "/v1/openserv/models", await get("/v1/openserv/models"))
    await ok("GET", "/v1/keys", await get("/v1/keys"))
    // Keys are made with a signed-in session (an API key gets 403).
    const created = await post("/v1/keys", { name: "second" }, { token: user.token })
    await ok("POST", "/v1/keys", created)
    await ok("DELETE", "/v1/keys/{id}", await call(server.url, "DELETE", `/v1/keys/${created.body.result.id}`, { apiKey: user.apiKey }))
    await ok("POST", "/v1/estimate", await post("/v1/estimate", { provider: "openai", model: "gpt-4o-mini", promptTokens: 1000 }))

    const completion = await post("/v1/complete", { provider: "openai", model: "gpt-4o-mini", messages: [{ role: "user", content: "Hi" }] })
    expect(completion.status).toBe(200)
    await ok("POST", "/v1/complete", completion)
    openai.queue({ kind: "tool", name: "lookup", arguments: { q: "x" }, id: "call_1" })
    const tools = [{ type: "function", function: { name: "lookup", parameters: { type: "object", properties: { q: { type: "string" } } } } }]
    const toolCall = await post("/v1/complete", { provider: "openai", model: "gpt-4o-mini", messages: [{ role: "user", content: "Look up x" }], tools })
    expect(toolCall.body.result.toolCalls).toHaveLength(1)
    await ok("POST", "/v1/complete", toolCall)
    await ok("POST", "/v1/embeddings", await post("/v1/embeddings", { texts: ["one", "two"], provider: "openai", model: "text-embedding-3-small" }))
    await ok("POST", "/openai/v1/chat/completions", await post("/openai/v1/chat/completions", { model: "gpt-4o-mini", messages: [{ role: "user", content: "Hi" }] }))
    openai.queue({ kind: "tool", name: "lookup", arguments: { q: "y" }, id: "call_2" })
    await ok("POST", "/openai/v1/chat/completions", await post("/openai/v1/chat/completions", { model: "gpt-4o-mini", messages: [{ role: "user", content: "Look up y" }], tools }))
    await ok("POST", "/anthropic/v1/messages", await post("/anthropic/v1/messages", { model: "gpt-4o-mini", max_tokens: 16, messages: [{ role: "user", content: "Hi" }] }))
    openai.queue({ kind: "tool", name: "lookup", arguments: { q: "z" }, id: "call_3" })
    await ok("POST", "/anthropic/v1/messages", await post("/anthropic/v1/messages", { model: "gpt-4o-mini", max_tokens: 16, messages: [{ role: "user", content: "Look up z" }], tools: [{ name: "lookup", input_schema: { type: "object" } }] }))
    await ok("GET", "/openai/v1/models", await get("/openai/v1/models"))

    // Text tasks (the mock answers the JSON each task asks for), guardrails, rerank.
    const on = { provider: "openai", model: "gpt-4o-mini" }
    openai.queue({ kind: "text", text: JSON.stringify({ sourceLanguage: "en", translation: "Hallo" }) })
    await ok("POST", "/v1/translate", await post("/v1/translate", { text: "Hello", targetLanguage: "de", ...on }))
    openai.queue({ kind: "text", text: JSON.stringify({ label: "positive", scores: { positive: 0.9, negative: 0.1 } }) })
    await ok("POST", "/v1/classify", await post("/v1/classify", { text: "Great!", labels: ["positive", "negative"], ...on }))
    openai.queue({ kind: "text", text: JSON.stringify({ name: "Ada" }) })
    const schema = { type: "object", properties: { name: { type: "string" } }, required: ["name"] }
    await ok("POST", "/v1/extract", await post("/v1/extract", { text: "Ada wrote it.", schema, ...on }))
    openai.queue({ kind: "text", text: JSON.stringify({ optimisedPrompt: "Summarise X in 3 bullets.", changes: ["format"] }) })
    await ok("POST", "/v1/prompts/optimise", await post("/v1/prompts/optimise", { prompt: "summarise x", ...on }))
    await ok("POST", "/v1/guardrails/check", await post("/v1/guardrails/check", { text: "mail me at a@example.com" }))
    await ok("POST", "/v1/rerank", await post("/v1/rerank", { query: "cats", documents: ["dogs bark", "cats purr"] }))
    await ok("POST", "/v1/memory/store", await post("/v1/memory/store", { content: "Ada likes tea", provider: "local" }))
    await ok("POST", "/v1/memory/query", await post("/v1/memory/query", { query: "tea", provider: "local" }))
    // Graph retrieval: an answer from the memory above, and the answer without any related memory.
    const answered = await post("/v1/graphrag/query", { query: "What does Ada like?", provider: "openai" })
    expect(answered.body.result?.sources).toHaveLength(1)
    await ok("POST", "/v1/graphrag/query", answered)
    const unrelated = await post("/v1/graphrag/query", { query: "What does Ada like?", userId: "nobody", provider: "openai" })
    expect(unrelated.body.result?.answer).toBeNull()
    await ok("POST", "/v1/graphrag/query", unrelated)
    await ok("POST", "/v1/code/execute", await post("/v1/code/execute", { code: "console.log(1); 1 + 1", language: "javascript" }))
    await ok("POST", "/v1/images/generate", await post("/v1/images/generate", { prompt: "a cat", provider: "openai" }))
    await ok("POST", "/v1/moderation", await post("/v1/moderation", { text: "hello", provider: "openai" }))
    const form = new FormData()
    form.append("file", new File([new Uint8Array([73, 68, 51, 1, 2, 3, 4, 5])], "hello.mp3", { type: "audio/mpeg" }))
    form.append("language", "en")
    const transcription = await fetch(`${server.url}/v1/audio/transcriptions`, { method: "POST", headers: { "x-api-key": user.apiKey }, body: form })
    await ok("POST", "/v1/audio/transcriptions", { status: transcription.status, body: await transcription.json() })
    // Documents: the per-format fields of CSV and JSON.
    const documents = [["table.csv", "name,drink\nAda,tea\n", "text/csv"], ["data.json", JSON.stringify({ drinks: ["tea"] }), "application/json"]] as const
    for (const [name, content, type] of documents) {
      const document = new FormData()
      document.append("file", new File([content], name, { type }))
      const parsed = await fetch(`${server.url}/v1/documents/parse`, { method: "POST", headers: { "x-api-key": user.apiKey }, body: document })
      await ok("POST", "/v1/documents/parse", { status: parsed.status, body: await parsed.json() })
    }

    // Orchestration and the reasoning network: every step is a completion the mock answers.
    const tasks = [{ id: "t1", agent: "Researcher", description: "Find a fact about Mars", expected_output: "one fact" }]
    await ok("POST", "/v1/orchestrate/crew", await post("/v1/orchestrate/crew", { tasks, provider: "openai" }))
    await ok("POST", "/v1/orchestrate/crew", await post("/v1/orchestrate/crew", { tasks, process: "hierarchical", provider: "openai" }))
    await ok("POST", "/v1/orchestrate/conversation", await post("/v1/orchestrate/conversation", { initial_message: "Hi", provider: "openai" }))
    const node = { node_name: "writer", state: { topic: "tides" }, messages: [{ role: "user", content: "Explain tides" }], provider: "openai" }
    await ok("POST", "/v1/orchestrate/graph-node", await post("/v1/orchestrate/graph-node", node))
    await ok("POST", "/v1/reasoning-network/dispatch", await post("/v1/reasoning-network/dispatch", { problem: "Write a function that checks whether a number is prime", mode: "Hybrid", provider: "openai" }))
    await ok("POST", "/v1/reasoning-network/dispatch", await post("/v1/reasoning-network/dispatch", { problem: "A poem about tea", taskType: "creative", provider: "openai" }))

    // Jobs: the answer at submit and the job view, the batch's again once it has completed.
    const submitted = await post("/v1/batch/submit", { requests: [{ messages: [{ role: "user", content: "Hi" }], provider: "openai", model: "gpt-4o-mini" }] })
    await ok("POST", "/v1/batch/submit", submitted)
    const batchStatus = () => get(`/v1/batch/${submitted.body.result.batchId}/status`)
    let batch = await batchStatus()
    await ok("GET", "/v1/batch/{batchId}/status", batch)
    for (const deadline = Date.now() + 15_000; batch.body.result?.status !== "completed" && Date.now() < deadline; batch = await batchStatus()) {
      await new Promise((r) => setTimeout(r, 100))
    }
    expect(batch.body.result.status).toBe("completed")
    await ok("GET", "/v1/batch/{batchId}/status", batch)
    // The mock has no files API: the fine-tuning job fails upstream, its view is documented all the same.
    const training = [{ messages: [{ role: "user", content: "Hi" }, { role: "assistant", content: "Hello" }] }]
    const tuning = await post("/v1/fine-tuning/jobs", { baseModel: "gpt-4o-mini-2024-07-18", trainingData: training, provider: "openai" })
    await ok("POST", "/v1/fine-tuning/jobs", tuning)
    await ok("GET", "/v1/fine-tuning/jobs/{jobId}", await get(`/v1/fine-tuning/jobs/${tuning.body.result.jobId}`))

    // The avatar API: own profile (full), someone else's (public fields), the admin list, sign-in.
    const other = await signUp(server, "oas2")
    await ok("GET", "/api/avatar/{id}", await get(`/api/avatar/${user.id}`, { token: user.token }))
    await ok("GET", "/api/avatar/{id}", await get(`/api/avatar/${other.id}`, { token: user.token }))
    await ok("POST", "/api/avatar/authenticate", await post("/api/avatar/authenticate", { username: user.username, password: user.password }, {}))
    await ok("PUT", "/api/avatar/{id}", await call(server.url, "PUT", `/api/avatar/${user.id}`, { token: user.token, body: { title: "Dr" } }))
    await ok("GET", "/api/avatar", await get("/api/avatar", { token: await adminToken(server) }))
    await ok("POST", "/api/avatar/forgot-password", await post("/api/avatar/forgot-password", { email: user.email }, {}))
    // A business rejection of the avatar API: 200 with isError true, in the 200 schema.
    const taken = await post("/api/avatar/register", { username: user.username, email: "someone.else@example.com", password: "password 123" }, {})
    expect(taken.status).toBe(200)
    expect(taken.body.isError).toBe(true)
    await check("POST", "/api/avatar/register", taken)
    await check("POST", "/api/avatar/authenticate", await post("/api/avatar/authenticate", { username: user.username, password: "wrong password" }, {}))

    // Failures: each in the envelope of its API, under the status it is documented with.
    await check("GET", "/v1/usage", await get("/v1/usage", {}))
    await check("POST", "/v1/complete", await post("/v1/complete", { messages: [] }))
    await check("POST", "/v1/embeddings", await post("/v1/embeddings", { texts: ["x"], model: "nope" }))
    await check("POST", "/v1/embeddings", await post("/v1/embeddings", { texts: ["x"], provider: "jina" }))
    await check("GET", "/api/avatar", await get("/api/avatar", { token: user.token }))
    await check("POST", "/openai/v1/chat/completions", await post("/openai/v1/chat/completions", { model: "gpt-4o-mini", messages: [] }))
    await check("POST", "/anthropic/v1/messages", await post("/anthropic/v1/messages", { model: "gpt-4o-mini", messages: [] }))
    openai.queue({ kind: "error", status: 500 }, { kind: "error", status: 500 }, { kind: "error", status: 500 })
    const upstream = await post("/v1/complete", { provider: "openai", model: "gpt-4o-mini", messages: [{ role: "user", content: "Hi" }], routing: { fallback: false } })
    expect(upstream.status).toBeGreaterThanOrEqual(500)
    await check("POST", "/v1/complete", upstream)
  })
})
