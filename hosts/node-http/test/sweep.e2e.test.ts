/**
 * The provider sweep (issue 15): every catalogued provider that serves something and has a mock
 * of its wire format is configured against it (one table below: provider → mock and environment),
 * and every endpoint type the catalogue says it serves is called through the gateway's own routes
 * with a model named for the provider (forwarded as named). Each call must answer 200 and reach
 * the mock as that provider: its credential in its auth header, its model in the path or body. The
 * counts per endpoint type, and the providers left out, are printed for the closing note.
 *
 * Jobs endpoint types stay out: they run in the job worker and are polled to completion. Batch is
 * tested in jobs.e2e.test.ts and longjobs.e2e.test.ts (OpenAI Batch API) and
 * packages/core/test/Providers/jobs/openaiJobs.test.ts; fine-tuning in longjobs.e2e.test.ts and
 * openaiJobs.test.ts; video (Luma, Replicate) in longjobs.e2e.test.ts and
 * packages/core/test/Providers/jobs/luma.test.ts and replicate.test.ts.
 */
import { createServer } from "node:http"
import { buffer } from "node:stream/consumers"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { data } from "../../../packages/core/src/Catalog/Catalog.ts"
import { envPrefix } from "../../../packages/core/src/Config.ts"
import { servedBy } from "../../../packages/core/src/Providers/Registry.ts"
import * as Bedrock from "../../../packages/core/test/support/mockBedrock.ts"
import { type DocumentVendor, startDocumentVendorMock } from "../../../packages/core/test/support/mockDocumentVendors.ts"
import { type MemoryVendor, startMemoryVendorMock } from "../../../packages/core/test/support/mockMemoryVendors.ts"
import { type MoreVendor, startMoreVendorMock } from "../../../packages/core/test/support/mockMoreVendors.ts"
import { startTaskVendorMock, type TaskVendor } from "../../../packages/core/test/support/mockTaskVendors.ts"
import { type SpeechVendor, startSpeechVendorMock } from "../../../packages/core/test/support/mockSpeechVendors.ts"
import { type SandboxVendor, startSandboxVendorMock } from "../../../packages/core/test/support/mockSandboxVendors.ts"
import { startTranscriptionVendorMock, type TranscriptionVendor } from "../../../packages/core/test/support/mockTranscriptionVendors.ts"
import { listenLocal } from "../../../packages/core/test/support/localServer.ts"
import { type MockUpstream, startAnthropicMock, startGeminiMock, startOpenAiMock } from "../../../packages/core/test/support/mockUpstreams.ts"
import { startVendorMock, type Vendor } from "../../../packages/core/test/support/mockVendors.ts"
import * as Vertex from "../../../packages/core/test/support/mockVertex.ts"
import * as Watsonx from "../../../packages/core/test/support/mockWatsonx.ts"
import { adminEnv, adminToken, signUp, type TestAvatar } from "./support/accounts.ts"
import { call, type RunningServer, startServer } from "./support/server.ts"

type Provider = (typeof data.providers)[number]

/** The endpoint types run as jobs (see the header for where they are tested). */
const JOBS = new Set(["batch", "finetune", "video"])

/** One request as a mock recorded it. */
interface Seen {
  readonly path: string
  readonly headers: Record<string, string | Array<string> | undefined>
  readonly body: unknown
}

/** How a provider is swept: the environment that points it at its mock, and what it sent there. */
interface Upstream {
  readonly env: Record<string, string>
  readonly requests: () => ReadonlyArray<Seen>
  /** What its auth header carries ("" when it sends none). */
  readonly credential: string
  /** Tells the mock what to answer next, for a mock that answers what it is told (Bedrock). */
  readonly prepare?: (call: "chat" | "stream") => void
}

interface Closable {
  close(): Promise<unknown>
}

const keyOf = (id: string) => `sk-sweep-${id}`
const modelOf = (id: string) => `sweep-${id}`

/** "ok", or the envelope's error message (shown when a provider fails). */
const outcome = (res: { body: { isError?: boolean; message?: string } }) => (res.body.isError ? res.body.message : "ok")

/** The credential a recorded request carried, whatever header the provider's auth style uses. */
const credentialOf = (r: Seen) =>
  String(r.headers["authorization"] ?? r.headers["api-key"] ?? r.headers["x-api-key"] ?? r.headers["x-goog-api-key"] ?? r.headers["xi-api-key"] ?? r.headers["unstructured-api-key"] ?? "")

const mocks: Array<Closable> = []
const started = <M extends Closable>(mock: M): M => {
  mocks.push(mock)
  return mock
}

/** A provider pointed at its mock with `<ID>_BASE_URL` and `<ID>_API_KEY`. */
const keyed = (id: string, url: string, requests: () => ReadonlyArray<Seen>, env: Record<string, string> = {}): Upstream => ({
  env: { [`${envPrefix(id)}_BASE_URL`]: url, [`${envPrefix(id)}_API_KEY`]: keyOf(id), ...env },
  requests,
  credential: keyOf(id)
})

/** The OpenAI-compatible, Anthropic and Gemini families share one mock each; local servers send no key. */
const familyMocks: Record<string, () => Promise<MockUpstream>> = { openai: startOpenAiMock, anthropic: startAnthropicMock, gemini: startGeminiMock }
const shared: Record<string, MockUpstream> = {}
const family = async (p: Provider): Promise<Upstream> => {
  const mock = (shared[p.adapter] ??= started(await familyMocks[p.adapter]!()))
  const upstream = keyed(p.id, mock.url, () => mock.requests)
  const keyless = servedBy(p).credentials !== undefined
  return keyless ? { ...upstream, env: { [`${envPrefix(p.id)}_BASE_URL`]: mock.url }, credential: "" } : upstream
}

const vendor = async (p: Provider) => {
  const mock = started(await startVendorMock(p.id as Vendor, keyOf(p.id)))
  return keyed(p.id, mock.url, () => mock.requests)
}

const memoryVendor = async (p: Provider) => {
  const mock = started(await startMemoryVendorMock(p.id as MemoryVendor, { apiKey: keyOf(p.id), agentId: "agent-sweep" }))
  return keyed(p.id, mock.url, () => mock.requests, p.id === "letta" ? { LETTA_AGENT_ID: "agent-sweep" } : {})
}

const documentVendor = async (p: Provider) => {
  const mock = started(await startDocumentVendorMock(p.id as DocumentVendor, keyOf(p.id)))
  return keyed(p.id, mock.url, () => mock.requests.map((r) => ({ ...r, body: r.json ?? r.files })))
}

const taskVendor = async (p: Provider) => {
  const mock = started(await startTaskVendorMock(p.id as TaskVendor, keyOf(p.id)))
  return keyed(p.id, mock.url, () => mock.requests)
}

const moreVendor = async (p: Provider) => {
  const mock = started(await startMoreVendorMock(p.id as MoreVendor, keyOf(p.id)))
  return keyed(p.id, mock.url, () => mock.requests)
}

/** A remote sandbox vendor (Sandboxes/*.ts). */
const sandboxVendor = async (p: Provider) => {
  const mock = started(await startSandboxVendorMock(p.id as SandboxVendor, keyOf(p.id)))
  return keyed(p.id, mock.url, () => mock.requests)
}

/** A speech-to-text vendor (Transcription/*.ts) without a speech API. */
const transcriptionVendor = async (p: Provider) => {
  const mock = started(await startTranscriptionVendorMock(p.id as TranscriptionVendor, keyOf(p.id)))
  return keyed(p.id, mock.url, () => mock.requests.map((r) => ({ path: r.url, headers: r.headers, body: r.json ?? r.fields })))
}

/** The speech paths of the text-to-speech vendors (Speech/*.ts); their other paths are speech to text. */
const SPEECH_PATH = /\/(text-to-speech\/|tts\/bytes|ai\/speech\/bytes|speak\?)/

/**
 * A text-to-speech vendor (ElevenLabs, Cartesia, LMNT, Deepgram): its speech mock and, when it
 * also transcribes, its speech-to-text mock behind one base URL (a provider has one), split by path.
 */
const audioVendor = async (p: Provider): Promise<Upstream> => {
  const speech = started(await startSpeechVendorMock(p.id as SpeechVendor, keyOf(p.id)))
  if (!p.capabilities.includes("transcription")) return keyed(p.id, speech.url, () => speech.requests.map((r) => ({ ...r, body: r.json })))
  const stt = started(await startTranscriptionVendorMock(p.id as TranscriptionVendor, keyOf(p.id)))
  const seen: Array<Seen> = []
  const router = await listenLocal(createServer((req, res) => {
    void buffer(req).then(async (body) => {
      const path = req.url ?? "/"
      const to = new URL(SPEECH_PATH.test(path) ? speech.url : stt.url)
      seen.push({ path, headers: req.headers, body: body.length > 0 && String(req.headers["content-type"]).includes("json") ? JSON.parse(body.toString("utf8")) : undefined })
      const headers = Object.fromEntries(Object.entries(req.headers).filter(([k]) => k !== "host" && k !== "content-length")) as Record<string, string>
      const answer = await fetch(`${to.origin}${path}`, { method: req.method!, headers, ...(body.length > 0 ? { body } : {}) })
      res.writeHead(answer.status, { "content-type": answer.headers.get("content-type") ?? "application/octet-stream" })
      res.end(Buffer.from(await answer.arrayBuffer()))
    })
  }))
  mocks.push(router)
  return keyed(p.id, `http://127.0.0.1:${router.port}${new URL(speech.url).pathname}`, () => seen)
}

const bedrock = async (): Promise<Upstream> => {
  const mock = started(await Bedrock.startBedrockMock())
  return {
    env: { BEDROCK_BASE_URL: mock.url, AWS_ACCESS_KEY_ID: Bedrock.ACCESS_KEY, AWS_SECRET_ACCESS_KEY: Bedrock.SECRET },
    requests: () => mock.received,
    credential: `Credential=${Bedrock.ACCESS_KEY}/`,
    prepare: (call) =>
      mock.answer(
        call === "chat"
          ? { kind: "json", body: { output: { message: { role: "assistant", content: [{ text: "Hello from Bedrock" }] } }, stopReason: "end_turn", usage: { inputTokens: 3, outputTokens: 3, totalTokens: 6 } } }
          : {
            kind: "frames",
            frames: [
              Bedrock.event("messageStart", { role: "assistant" }),
              Bedrock.event("contentBlockDelta", { contentBlockIndex: 0, delta: { text: "Hello" } }),
              Bedrock.event("contentBlockStop", { contentBlockIndex: 0 }),
              Bedrock.event("messageStop", { stopReason: "end_turn" }),
              Bedrock.event("metadata", { usage: { inputTokens: 3, outputTokens: 1, totalTokens: 4 } })
            ]
          }
      )
  }
}

const vertex = async (): Promise<Upstream> => {
  const { privateKey, publicKey } = await Vertex.vertexKeyPair()
  const mock = started(await Vertex.startVertexMock(publicKey))
  mock.answer((path, body) => {
    if (path.endsWith(":predict")) return { predictions: body.instances.map(() => ({ embeddings: { values: [0.1, 0.2], statistics: { token_count: 1, truncated: false } } })) }
    return path.includes(":streamGenerateContent") ? [Vertex.textAnswer("Hello from Vertex")] : Vertex.textAnswer("Hello from Vertex")
  })
  return {
    env: { VERTEX_BASE_URL: `${mock.url}/v1`, VERTEX_SERVICE_ACCOUNT: await Vertex.serviceAccountKey(privateKey, mock.url), VERTEX_LOCATION: Vertex.LOCATION },
    requests: () => mock.requests,
    // Only a token the mock issued for the signed key passes; the path names the key's project.
    credential: "Bearer ya29.token-"
  }
}

const watsonx = async (): Promise<Upstream> => {
  const mock = started(await Watsonx.startWatsonxMock())
  mock.answer((path, body) => {
    if (path.endsWith("/text/embeddings")) return { model_id: body.model_id, results: body.inputs.map(() => ({ embedding: [0.1, 0.2] })), input_token_count: 2 }
    if (path.endsWith("/text/chat_stream")) return [Watsonx.chunk({ role: "assistant", content: "Hello" }, null), Watsonx.chunk({}, "stop", { prompt_tokens: 3, completion_tokens: 1, total_tokens: 4 })]
    return Watsonx.chatAnswer({ content: "Hello from watsonx" }, "stop")
  })
  return {
    env: { WATSONX_BASE_URL: `${mock.url}/ml/v1`, WATSONX_API_KEY: Watsonx.API_KEY, WATSONX_PROJECT_ID: Watsonx.PROJECT, WATSONX_IAM_URL: mock.url },
    requests: () => mock.requests,
    credential: "Bearer iam-"
  }
}

/** The table: each swept provider's mock and environment (family members are found by their adapter). */
const upstreams: Record<string, (p: Provider) => Promise<Upstream>> = {
  cohere: vendor,
  voyage: vendor,
  jina: vendor,
  mixedbread: vendor,
  nomic: vendor,
  pinecone: moreVendor,
  "nlp-cloud": moreVendor,
  bedrock,
  vertex,
  watsonx,
  mem0: memoryVendor,
  zep: memoryVendor,
  letta: memoryVendor,
  supermemory: memoryVendor,
  unstructured: documentVendor,
  llamaparse: documentVendor,
  reducto: documentVendor,
  landingai: documentVendor,
  lakera: taskVendor,
  patronus: taskVendor,
  hive: taskVendor,
  deepl: taskVendor,
  elevenlabs: audioVendor,
  cartesia: audioVendor,
  lmnt: audioVendor,
  deepgram: audioVendor,
  assemblyai: transcriptionVendor,
  speechmatics: transcriptionVendor,
  "rev-ai": transcriptionVendor,
  riza: sandboxVendor,
  daytona: sandboxVendor
}
const upstreamOf = (p: Provider) =>
  upstreams[p.id] ?? (p.adapter in familyMocks && servedBy(p).authorize === undefined ? family : undefined)

/** The endpoint types the sweep calls for a provider. */
const sweptTypes = (p: Provider) => p.capabilities.filter((t) => !JOBS.has(t))

describe("provider sweep", () => {
  let server: RunningServer
  let user: TestAvatar
  const swept = data.providers.filter((p) => sweptTypes(p).length > 0 && upstreamOf(p) !== undefined)
  const of: Record<string, Upstream> = {}
  const served: Record<string, Array<string>> = {}

  beforeAll(async () => {
    // Document vendors' jobs (LlamaParse) are polled quickly.
    const env: Record<string, string> = { ...adminEnv, AIGW_JOB_POLL_MS: "20" }
    for (const p of swept) Object.assign(env, (of[p.id] = await upstreamOf(p)!(p)).env)
    server = await startServer(env)
    user = await signUp(server, "sweep")
    const plan = await call(server.url, "PUT", `/v1/admin/avatars/${user.id}/plan`, { token: await adminToken(server), body: { plan: "Enterprise" } })
    expect(plan.status).toBe(200)
  }, 120_000)

  afterAll(async () => {
    await server?.stop()
    await Promise.all(mocks.map((m) => m.close()))
    const counts = Object.entries(served).map(([type, ids]) => `${type}: ${ids.length}`).join(", ")
    console.log(`provider sweep: ${swept.length} providers swept through the gateway; served per endpoint type: ${counts}`)
    const left = data.providers
      .filter((p) => p.capabilities.length > 0 && !swept.includes(p))
      .map((p) => `${p.id} (${p.capabilities.join(", ")}: ${sweptTypes(p).length === 0 ? "jobs only" : "no mock in the table"})`)
    console.log(`provider sweep: not swept: ${left.join(", ") || "none"}; serving nothing (marked not served): ${data.providers.filter((p) => p.capabilities.length === 0).length}`)
  })

  /** Asserts the last request of the provider's mock came from this provider. */
  const reached = (id: string, check: (r: Seen) => void) => {
    const last = of[id]!.requests().at(-1)!
    if (of[id]!.credential === "") expect(credentialOf(last)).toBe("")
    else expect(credentialOf(last)).toContain(of[id]!.credential)
    check(last)
  }
  const named = (id: string, model: string) => (r: Seen) => expect(JSON.stringify(r.body) + r.path).toContain(model)
  const count = (type: string, id: string) => (served[type] ??= []).push(id)
  const post = (path: string, body: unknown) => call(server.url, "POST", path, { apiKey: user.apiKey, body })
  const serving = (type: string) => swept.filter((p) => p.capabilities.includes(type as never))

  it("sweeps at least every provider with a wire-format mock", () => {
    expect(swept.map((p) => p.id)).toEqual(expect.arrayContaining(Object.keys(upstreams)))
  })

  it("serves chat (plain and streamed) for every provider that lists it", async () => {
    for (const p of serving("chat")) {
      const model = modelOf(p.id)
      of[p.id]!.prepare?.("chat")
      const res = await post("/v1/complete", { provider: p.id, model, messages: [{ role: "user", content: "hi" }] })
      expect([p.id, res.status, outcome(res)]).toEqual([p.id, 200, "ok"])
      expect(res.body.result).toMatchObject({ provider: p.id, model, costKnown: false })
      expect(res.body.result.content.length).toBeGreaterThan(0)
      reached(p.id, named(p.id, model))
      of[p.id]!.prepare?.("stream")
      const stream = await fetch(`${server.url}/v1/complete/stream`, {
        method: "POST",
        headers: { "content-type": "application/json", "x-api-key": user.apiKey },
        body: JSON.stringify({ provider: p.id, model, messages: [{ role: "user", content: "hi" }] })
      })
      const text = await stream.text()
      expect([p.id, stream.status]).toEqual([p.id, 200])
      expect(text).toContain('"done":true')
      expect(text, p.id).not.toContain('"error"')
      reached(p.id, named(p.id, model))
      count("chat", p.id)
    }
  }, 60_000)

  it("serves embeddings for every provider that lists them", async () => {
    for (const p of serving("embeddings")) {
      const res = await post("/v1/embeddings", { provider: p.id, model: modelOf(p.id), texts: ["a", "b"] })
      expect([p.id, res.status, outcome(res)]).toEqual([p.id, 200, "ok"])
      expect(res.body.result.embeddings).toHaveLength(2)
      reached(p.id, named(p.id, modelOf(p.id)))
      count("embeddings", p.id)
    }
  }, 30_000)

  it("serves rerank for every provider that lists it", async () => {
    for (const p of serving("rerank")) {
      const res = await post("/v1/rerank", { provider: p.id, model: modelOf(p.id), query: "red apples", documents: ["green pears", "red apples and plums"], topN: 2 })
      expect([p.id, res.status, outcome(res)]).toEqual([p.id, 200, "ok"])
      expect(res.body.result).toMatchObject({ provider: p.id, model: modelOf(p.id) })
      expect(res.body.result.results[0]).toMatchObject({ index: 1, document: "red apples and plums" })
      reached(p.id, named(p.id, modelOf(p.id)))
      count("rerank", p.id)
    }
  }, 30_000)

  it("serves images, moderation, speech and transcription for every provider that lists them", async () => {
    for (const p of serving("images")) {
      const res = await post("/v1/images/generate", { provider: p.id, prompt: "a lighthouse" })
      expect([p.id, "images", res.status, outcome(res)]).toEqual([p.id, "images", 200, "ok"])
      reached(p.id, (r) => expect(r.path).toMatch(/images\/generations$/))
      count("images", p.id)
    }
    for (const p of serving("moderation")) {
      const res = await post("/v1/moderation", { provider: p.id, text: "hello" })
      expect([p.id, "moderation", res.status, outcome(res)]).toEqual([p.id, "moderation", 200, "ok"])
      reached(p.id, (r) => expect(r.path).toMatch(p.id === "hive" ? /task\/sync$/ : /moderations$/))
      count("moderation", p.id)
    }
    for (const p of serving("speech")) {
      const res = await fetch(`${server.url}/v1/audio/speech`, {
        method: "POST",
        headers: { "content-type": "application/json", "x-api-key": user.apiKey },
        body: JSON.stringify({ provider: p.id, text: "hello" })
      })
      expect([p.id, "speech", res.status]).toEqual([p.id, "speech", 200])
      expect((await res.arrayBuffer()).byteLength, p.id).toBeGreaterThan(0)
      reached(p.id, (r) => expect(r.path).toMatch(servedBy(p).speech?.synthesize ? SPEECH_PATH : /audio\/speech$/))
      count("speech", p.id)
    }
    for (const p of serving("transcription")) {
      const form = new FormData()
      form.append("file", new File([new Uint8Array([73, 68, 51, 1, 2, 3])], "a.mp3", { type: "audio/mpeg" }))
      form.append("provider", p.id)
      const res = await fetch(`${server.url}/v1/audio/transcriptions`, { method: "POST", headers: { "x-api-key": user.apiKey }, body: form })
      expect([p.id, "transcription", res.status]).toEqual([p.id, "transcription", 200])
      // A vendor's own speech-to-text API (Transcription/*.ts) has paths of its own; a speech vendor's router sends them to its speech-to-text mock.
      reached(p.id, (r) => (servedBy(p).transcription?.transcribe ? expect(r.path).not.toMatch(SPEECH_PATH) : expect(r.path).toMatch(/audio\/transcriptions$/)))
      count("transcription", p.id)
    }
  }, 60_000)

  it("stores and queries memories through every memory provider", async () => {
    for (const p of serving("memory")) {
      const content = `The sweep reached ${p.id} with a memory`
      const stored = await post("/v1/memory/store", { content, provider: p.id })
      expect([p.id, "store", stored.status, outcome(stored)]).toEqual([p.id, "store", 200, "ok"])
      reached(p.id, (r) => expect(JSON.stringify(r.body)).toContain(content))
      const found = await post("/v1/memory/query", { query: `sweep reached ${p.id}`, provider: p.id })
      expect([p.id, "query", found.status, outcome(found)]).toEqual([p.id, "query", 200, "ok"])
      expect(found.body.result).toMatchObject({ provider: p.id })
      expect(found.body.result.results.length, p.id).toBeGreaterThan(0)
      reached(p.id, (r) => expect(JSON.stringify(r.body) + r.path).toContain(p.id))
      count("memory", p.id)
    }
  }, 30_000)

  it("parses a document through every document provider", async () => {
    for (const p of serving("documents")) {
      const form = new FormData()
      form.append("file", new File([`Sweep of ${p.id}\n\nOne paragraph.`], `sweep-${p.id}.txt`, { type: "text/plain" }))
      form.append("provider", p.id)
      const res = await fetch(`${server.url}/v1/documents/parse`, { method: "POST", headers: { "x-api-key": user.apiKey }, body: form })
      const body = (await res.json()) as any
      expect([p.id, res.status, outcome({ body })]).toEqual([p.id, 200, "ok"])
      expect(body.result).toMatchObject({ provider: p.id, text: expect.stringContaining(`Sweep of ${p.id}`) })
      expect(JSON.stringify(of[p.id]!.requests().map((r) => r.body))).toContain(`sweep-${p.id}.txt`)
      reached(p.id, () => undefined)
      count("documents", p.id)
    }
  }, 30_000)

  it("checks guardrails and translates through every vendor that lists them", async () => {
    for (const p of serving("guardrails")) {
      const res = await post("/v1/guardrails/check", { provider: p.id, text: "Mail ann@example.com" })
      expect([p.id, "guardrails", res.status, outcome(res)]).toEqual([p.id, "guardrails", 200, "ok"])
      expect(res.body.result).toMatchObject({ provider: p.id, flagged: true })
      reached(p.id, (r) => expect(JSON.stringify(r.body)).toContain("ann@example.com"))
      count("guardrails", p.id)
    }
    for (const p of serving("translate")) {
      const res = await post("/v1/translate", { provider: p.id, text: "Hello world", targetLanguage: "de" })
      expect([p.id, "translate", res.status, outcome(res)]).toEqual([p.id, "translate", 200, "ok"])
      expect(res.body.result).toMatchObject({ provider: p.id, translation: expect.any(String) })
      reached(p.id, (r) => expect(JSON.stringify(r.body)).toContain("Hello world"))
      count("translate", p.id)
    }
  }, 30_000)

  it("runs code through every remote sandbox vendor", async () => {
    for (const p of serving("code")) {
      const code = `print("sweep of ${p.id}")`
      const res = await post("/v1/code/execute", { provider: p.id, language: "python", code })
      expect([p.id, "code", res.status, outcome(res)]).toEqual([p.id, "code", 200, "ok"])
      expect(res.body.result).toMatchObject({ provider: p.id, exitCode: 0, stdout: expect.stringContaining(code) })
      reached(p.id, () => undefined)
      count("code", p.id)
    }
  }, 30_000)

  it("lists, for every provider, what it serves and why an offered type is not served", async () => {
    const res = await call(server.url, "GET", "/v1/providers", { apiKey: user.apiKey })
    expect(res.status).toBe(200)
    for (const p of res.body.result.providers as Array<{ id: string; offers: Array<string>; endpointTypes: Array<string>; notServed: Array<{ type: string; reason: string }> }>) {
      expect([p.id, [...p.endpointTypes, ...p.notServed.map((n) => n.type)].sort()]).toEqual([p.id, [...p.offers].sort()])
      for (const n of p.notServed) expect(n.reason.length).toBeGreaterThan(10)
    }
  })
})
