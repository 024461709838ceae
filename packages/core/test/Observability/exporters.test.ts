/**
 * The usage exporters (Observability/*.ts) over the real transport against local mocks of Langfuse,
 * PromptLayer and Braintrust: the exact requests (auth, paths, body shapes, the avatar id hashed,
 * no text), batching, the bounded queue dropping the oldest (counted) while a vendor is down,
 * retries with backoff and giving up, the flush when the layer's scope closes, and that a
 * completion's latency and outcome do not depend on an exporter that never answers.
 */
import { ConfigProvider, Effect, Exit, Layer, Option, Redacted, Scope } from "effect"
import { createHash } from "node:crypto"
import { readFileSync, writeFileSync } from "node:fs"
import { join } from "node:path"
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest"
import { Catalog, type ConfiguredProvider, data } from "../../src/Catalog/Catalog.ts"
import * as GatewayConfig from "../../src/Config.ts"
import { ProviderCalls } from "../../src/Engine/ProviderCalls.ts"
import * as Layers from "../../src/Layers.ts"
import * as Mailer from "../../src/Mail/Mailer.ts"
import * as Braintrust from "../../src/Observability/Braintrust.ts"
import {
  type ExportOptions,
  Exporters,
  exportedEvents,
  hashAvatar,
  makeExporters,
  type ObservedUsage,
  SALT_FILE,
  saltOf
} from "../../src/Observability/Exporters.ts"
import * as Langfuse from "../../src/Observability/Langfuse.ts"
import * as PromptLayer from "../../src/Observability/PromptLayer.ts"
import { endpointTypes, notServed, servedBy } from "../../src/Providers/Registry.ts"
import type { AvatarRecord } from "../../src/Storage/AvatarStore.ts"
import {
  BRAINTRUST_KEY,
  BRAINTRUST_PROJECT,
  LANGFUSE_KEY,
  type ObservabilityMock,
  type ObservabilityVendor,
  PROMPTLAYER_KEY,
  startObservabilityMock
} from "../support/mockObservability.ts"
import { type MockUpstream, startOpenAiMock } from "../support/mockUpstreams.ts"
import { scratchDir } from "../support/scratch.ts"
import { Cancel } from "../../src/Providers/internal/cancel.ts"

const AVATAR = "7f3e9a1c-avatar-raw-id"
const SALT = createHash("sha256").update("test salt").digest()
const FAST: ExportOptions = { capacity: 100, batchSize: 100, intervalMs: 60_000, maxAttempts: 3, backoffMs: 10, timeoutMs: 2_000 }

const keys: Record<ObservabilityVendor, string> = { langfuse: LANGFUSE_KEY, promptlayer: PROMPTLAYER_KEY, braintrust: BRAINTRUST_KEY }

const providerAt = (id: ObservabilityVendor, endpoint: string, key = keys[id]): ConfiguredProvider => ({
  ...data.providers.find((p) => p.id === id)!,
  capabilities: [],
  endpoint,
  apiKey: Option.some(Redacted.make(key)),
  configured: true,
  settings: id === "braintrust" ? { BRAINTRUST_PROJECT_ID: BRAINTRUST_PROJECT } : {},
  missing: undefined
})

const exporterOf = (id: ObservabilityVendor, endpoint: string) => {
  const made = id === "langfuse" ? Langfuse.exporter(providerAt(id, endpoint)) : id === "promptlayer" ? PromptLayer.exporter(providerAt(id, endpoint)) : Braintrust.exporter(providerAt(id, endpoint))
  if (typeof made === "string") throw new Error(made)
  return made
}

const usage = (n = 0, ok = true): ObservedUsage => ({
  avatarId: AVATAR,
  provider: "openai",
  model: "gpt-4o-mini",
  capability: "chat",
  promptTokens: 12 + n,
  completionTokens: 4,
  costUSD: 0.0000042,
  latencyMs: 250,
  estimated: false,
  ok
})

const AT = Date.parse("2026-11-24T01:00:00.000Z")
const counted = (id: string, outcome: string) => exportedEvents.get([id, outcome])

describe("registry", () => {
  it("serves no endpoint type through the three vendors, and says why prompts is not served", () => {
    for (const id of ["langfuse", "promptlayer", "braintrust"]) {
      const entry = data.providers.find((p) => p.id === id)!
      expect(endpointTypes(entry)).toEqual([])
      const reasons = notServed(entry)
      expect(reasons.map((r) => r.type)).toEqual(["prompts"])
      expect(reasons[0]!.reason).toMatch(/exports every call's usage/)
    }
  })

  it("Braintrust needs its project id as well as its key", () => {
    const credentials = servedBy({ id: "braintrust", adapter: "bespoke" }).credentials!
    expect(credentials({ hasApiKey: false, settings: {} }, "BRAINTRUST")).toBe("set BRAINTRUST_API_KEY and BRAINTRUST_PROJECT_ID")
    expect(credentials({ hasApiKey: true, settings: {} }, "BRAINTRUST")).toMatch(/^set BRAINTRUST_PROJECT_ID/)
    expect(credentials({ hasApiKey: true, settings: { BRAINTRUST_PROJECT_ID: "p" } }, "BRAINTRUST")).toBeUndefined()
  })

  it("refuses a Langfuse key that is not publicKey:secretKey", () => {
    expect(Langfuse.exporter(providerAt("langfuse", "http://127.0.0.1:1", "sk-only"))).toMatch(/publicKey:secretKey/)
  })
})

describe("salt and hash", () => {
  it("derives the salt from JWT_SECRET, else keeps a random one in the data dir", () => {
    const fromSecret = saltOf(Option.some(Redacted.make("jwt secret")), "/nonexistent")
    expect(fromSecret.equals(saltOf(Option.some(Redacted.make("jwt secret")), "/elsewhere"))).toBe(true)
    expect(fromSecret.equals(saltOf(Option.some(Redacted.make("another")), "/nonexistent"))).toBe(false)
    const dir = join(scratchDir("aigw-salt-"), "data")
    const first = saltOf(Option.none(), dir)
    expect(first.length).toBe(32)
    expect(readFileSync(join(dir, SALT_FILE), "utf8")).toBe(first.toString("hex"))
    expect(saltOf(Option.none(), dir).equals(first)).toBe(true)
    expect(hashAvatar(first, AVATAR)).toMatch(/^[0-9a-f]{64}$/)
    expect(hashAvatar(first, AVATAR)).not.toBe(hashAvatar(fromSecret, AVATAR))
    writeFileSync(join(dir, SALT_FILE), "not hex")
    expect(() => saltOf(Option.none(), dir)).toThrow(/does not hold the 64 hex digits/)
  })
})

describe.each(["langfuse", "promptlayer", "braintrust"] as const)("%s", (vendor) => {
  let mock: ObservabilityMock
  beforeAll(async () => {
    mock = await startObservabilityMock(vendor)
  })
  afterEach(() => {
    mock.up()
    mock.requests.length = 0
  })
  afterAll(() => mock.close())

  it("sends the call's usage with the vendor's auth, the avatar hashed and no text", async () => {
    const exporters = makeExporters([exporterOf(vendor, mock.url)], SALT, FAST)
    exporters.observe(usage(), AT, "req-0001")
    expect(mock.requests).toEqual([])
    await exporters.close(Date.now() + 5_000)
    expect(mock.requests.map((r) => r.status)).toEqual([vendor === "langfuse" ? 207 : 200])
    const { body, headers, path } = mock.requests[0]!
    const hashed = hashAvatar(SALT, AVATAR)
    const text = JSON.stringify(body)
    expect(text).not.toContain(AVATAR)
    expect(text).toContain(hashed)
    if (vendor === "langfuse") {
      expect(path).toBe("/api/public/ingestion")
      expect(headers.authorization).toBe(`Basic ${Buffer.from(LANGFUSE_KEY).toString("base64")}`)
      const [trace, generation] = body.batch
      expect(trace).toEqual({
        id: expect.stringMatching(/-trace$/),
        type: "trace-create",
        timestamp: "2026-11-24T01:00:00.000Z",
        body: {
          id: expect.any(String),
          timestamp: "2026-11-24T00:59:59.750Z",
          name: "aigw chat",
          userId: hashed,
          metadata: { provider: "openai", capability: "chat", estimated: false, requestId: "req-0001" },
          tags: ["aigw"]
        }
      })
      expect(generation).toEqual({
        id: expect.stringMatching(/-generation$/),
        type: "generation-create",
        timestamp: "2026-11-24T01:00:00.000Z",
        body: {
          id: generation.id,
          traceId: trace.body.id,
          name: "chat",
          startTime: "2026-11-24T00:59:59.750Z",
          endTime: "2026-11-24T01:00:00.000Z",
          model: "gpt-4o-mini",
          usageDetails: { input: 12, output: 4, total: 16 },
          costDetails: { total: 0.0000042 },
          level: "DEFAULT",
          metadata: trace.body.metadata
        }
      })
    } else if (vendor === "promptlayer") {
      expect(path).toBe("/log-request")
      expect(headers["x-api-key"]).toBe(PROMPTLAYER_KEY)
      expect(body).toEqual({
        provider: "openai",
        model: "gpt-4o-mini",
        input: { type: "completion", content: [], input_variables: [] },
        output: { type: "completion", content: [], input_variables: [] },
        request_start_time: "2026-11-24T00:59:59.750Z",
        request_end_time: "2026-11-24T01:00:00.000Z",
        input_tokens: 12,
        output_tokens: 4,
        price: 0.0000042,
        tags: ["aigw", "chat"],
        metadata: { avatar: hashed, capability: "chat", estimated: "false", latency_ms: "250", request_id: "req-0001" },
        status: "SUCCESS"
      })
    } else {
      expect(path).toBe(`/v1/project_logs/${BRAINTRUST_PROJECT}/insert`)
      expect(headers.authorization).toBe(`Bearer ${BRAINTRUST_KEY}`)
      expect(body.events).toEqual([{
        id: expect.any(String),
        created: "2026-11-24T01:00:00.000Z",
        metadata: { model: "gpt-4o-mini", provider: "openai", capability: "chat", avatar: hashed, cost_usd: 0.0000042, estimated: false, request_id: "req-0001" },
        metrics: { start: (AT - 250) / 1000, end: AT / 1000, prompt_tokens: 12, completion_tokens: 4, tokens: 16 },
        span_attributes: { name: "chat", type: "llm" },
        tags: ["aigw"]
      }])
    }
  })

  it("reports a failed call as an error", async () => {
    const exporters = makeExporters([exporterOf(vendor, mock.url)], SALT, FAST)
    exporters.observe(usage(0, false), AT, undefined)
    await exporters.close(Date.now() + 5_000)
    const body = mock.requests[0]!.body
    if (vendor === "langfuse") expect(body.batch[1].body).toMatchObject({ level: "ERROR", statusMessage: "the call failed" })
    else if (vendor === "promptlayer") expect(body.status).toBe("FAILED")
    else expect(body.events[0].error).toBe("the call failed")
  })

  it("batches, retries 5xx with backoff, and gives up after maxAttempts", async () => {
    const exporters = makeExporters([exporterOf(vendor, mock.url)], SALT, { ...FAST, batchSize: 2 })
    const sent = counted(vendor, "sent")
    const failed = counted(vendor, "failed")
    mock.failNext(503, 2)
    for (let i = 0; i < 3; i++) exporters.observe(usage(i), AT, undefined)
    await exporters.flush()
    const ok = mock.requests.filter((r) => r.status < 300)
    expect(mock.requests.slice(0, 2).map((r) => r.status)).toEqual([503, 503])
    if (vendor === "langfuse") expect(ok.map((r) => r.body.batch.length)).toEqual([4, 2])
    else if (vendor === "braintrust") expect(ok.map((r) => r.body.events.length)).toEqual([2, 1])
    else expect(ok.length).toBe(3)
    expect(counted(vendor, "sent") - sent).toBe(3)

    mock.requests.length = 0
    mock.down()
    exporters.observe(usage(), AT, undefined)
    await exporters.flush()
    expect(mock.requests.map((r) => r.status)).toEqual([503, 503, 503])
    expect(counted(vendor, "failed") - failed).toBe(1)
    await exporters.close(Date.now())
  })

  it("a hostile reply (not JSON) is a failed batch, not a crash", async () => {
    const exporters = makeExporters([exporterOf(vendor, mock.url)], SALT, FAST)
    const failed = counted(vendor, "failed")
    mock.rawNext("<html>gateway error")
    exporters.observe(usage(), AT, undefined)
    await exporters.close(Date.now() + 5_000)
    expect(mock.requests.length).toBe(1)
    expect(counted(vendor, "failed") - failed).toBe(1)
  })

  it("does not retry a refusal (401)", async () => {
    const exporters = makeExporters([exporterOf(vendor, mock.url)], SALT, FAST)
    const failed = counted(vendor, "failed")
    mock.failNext(401)
    exporters.observe(usage(), AT, undefined)
    await exporters.close(Date.now() + 5_000)
    expect(mock.requests.map((r) => r.status)).toEqual([401])
    expect(counted(vendor, "failed") - failed).toBe(1)
  })
})

describe("langfuse partial failures", () => {
  it("counts a call whose events Langfuse reports in `errors` (207) as failed, once", async () => {
    const mock = await startObservabilityMock("langfuse")
    try {
      const exporters = makeExporters([exporterOf("langfuse", mock.url)], SALT, FAST)
      const [sent, failed] = [counted("langfuse", "sent"), counted("langfuse", "failed")]
      mock.rawNext(JSON.stringify({ successes: [], errors: [{ id: "c1-trace", status: 400 }, { id: "c1-generation", status: 400 }] }))
      exporters.observe(usage(1), AT, undefined)
      exporters.observe(usage(2), AT, undefined)
      await exporters.close(Date.now() + 5_000)
      expect([counted("langfuse", "sent") - sent, counted("langfuse", "failed") - failed]).toEqual([1, 1])
    } finally {
      await mock.close()
    }
  })
})

describe("bounded queue", () => {
  let mock: ObservabilityMock
  beforeAll(async () => {
    mock = await startObservabilityMock("braintrust")
  })
  afterAll(() => mock.close())

  it("drops the oldest when full while the vendor is down, and counts the drops", async () => {
    const exporters = makeExporters([exporterOf("braintrust", mock.url)], SALT, { ...FAST, capacity: 3, maxAttempts: 1 })
    const dropped = counted("braintrust", "dropped")
    mock.down()
    for (let i = 0; i < 3; i++) exporters.observe(usage(i), AT, undefined)
    // The vendor is down: the batch is given up, the queue fills again behind it.
    await exporters.flush()
    for (let i = 3; i < 8; i++) exporters.observe(usage(i), AT, undefined)
    expect(exporters.pending()).toBe(3)
    expect(counted("braintrust", "dropped") - dropped).toBe(2)
    mock.up()
    mock.requests.length = 0
    await exporters.close(Date.now() + 5_000)
    expect(mock.requests[0]!.body.events.map((e: any) => e.metrics.prompt_tokens)).toEqual([17, 18, 19])
  })

  it("the interval flushes without being asked", async () => {
    mock.up()
    mock.requests.length = 0
    const exporters = makeExporters([exporterOf("braintrust", mock.url)], SALT, { ...FAST, intervalMs: 20 })
    exporters.observe(usage(), AT, undefined)
    for (let i = 0; i < 100 && mock.requests.length === 0; i++) await new Promise((r) => setTimeout(r, 10))
    expect(mock.requests.map((r) => r.status)).toEqual([200])
    await exporters.close(Date.now())
  })
})

describe("the layer, in the engine", () => {
  let openai: MockUpstream
  let langfuse: ObservabilityMock
  beforeAll(async () => {
    ;[openai, langfuse] = await Promise.all([startOpenAiMock({ apiKey: "sk-openai" }), startObservabilityMock("langfuse")])
  })
  afterAll(async () => {
    await Promise.all([openai.close(), langfuse.close()])
  })

  const services = () => {
    const env = new Map([
      ["AIGW_DATA_DIR", join(scratchDir("aigw-export-"), "data")],
      ["JWT_SECRET", "export-test-jwt-secret-0123456789"],
      ["OPENAI_API_KEY", "sk-openai"],
      ["OPENAI_BASE_URL", openai.url],
      ["LANGFUSE_API_KEY", LANGFUSE_KEY],
      ["LANGFUSE_BASE_URL", langfuse.url]
    ])
    return Layers.layerMemory.pipe(
      Layer.provide(Mailer.layerMemory),
      Layer.provideMerge(GatewayConfig.layerConfig),
      Layer.provide(Layer.setConfigProvider(ConfigProvider.fromMap(env)))
    )
  }

  const complete = Effect.gen(function*() {
    const calls = yield* ProviderCalls
    const catalog = yield* Catalog
    const target = { provider: Option.getOrThrow(catalog.provider("openai")), model: Option.getOrThrow(catalog.model("gpt-4o-mini")) }
    const messages = [{ role: "user" as const, content: "a secret prompt text" }]
    const started = performance.now()
    const result = yield* Effect.promise(() =>
      calls.complete({
        avatar: { id: AVATAR } as AvatarRecord,
        targets: [target],
        cancel: new Cancel(),
        requestId: "req-engine-1",
        messages,
        request: (t) => ({ model: t.model.id, messages })
      })
    )
    return { result, ms: performance.now() - started }
  })

  it("a completion is exported at scope close, and a hanging exporter neither delays nor fails it", async () => {
    const scope = Effect.runSync(Scope.make())
    const runtime = await Effect.runPromise(Layer.toRuntime(services()).pipe(Scope.extend(scope)))
    const run = <A, E>(e: Effect.Effect<A, E, any>) => Effect.runPromise(Effect.provide(e, runtime) as Effect.Effect<A, E>)
    const exporters = await run(Exporters)
    expect(exporters.ids).toEqual(["langfuse"])

    langfuse.hang()
    const baseline = await run(complete)
    expect(baseline.result.content.length).toBeGreaterThan(0)
    // The queue is flushed in the background: start a flush that hangs on the vendor.
    const hanging = exporters.flush(Date.now() + 1_500)
    const during = await run(complete)
    expect(during.result.provider).toBe("openai")
    expect(during.ms).toBeLessThan(1_000)
    await hanging
    expect(langfuse.requests).toEqual([])

    langfuse.up()
    await run(complete)
    await Effect.runPromise(Scope.close(scope, Exit.void))
    const sent = langfuse.requests.filter((r) => r.status === 207).flatMap((r) => r.body.batch)
    const generations = sent.filter((e: any) => e.type === "generation-create").map((e: any) => e.body)
    expect(generations.length).toBeGreaterThanOrEqual(1)
    expect(generations.at(-1)).toMatchObject({ model: "gpt-4o-mini", usageDetails: { input: expect.any(Number), output: expect.any(Number) } })
    const text = JSON.stringify(sent)
    expect(text).not.toContain("a secret prompt text")
    expect(text).not.toContain(AVATAR)
    const salt = saltOf(Option.some(Redacted.make("export-test-jwt-secret-0123456789")), "")
    expect(sent.find((e: any) => e.type === "trace-create").body).toMatchObject({ userId: hashAvatar(salt, AVATAR), metadata: { requestId: "req-engine-1" } })
  })
})
