/**
 * What an upstream's answer may claim: token counts that are no counts (negative, fractional,
 * huge, not numbers) never reach usage, cost or quota (the tokenizer counts instead), counts it
 * leaves out are estimated, and a stream that stops without its end marker or a finish reason is
 * an error, not a short success; a call no upstream answered is recorded as failed. Through the engine against a local OpenAI-format upstream, with
 * a metering that keeps what it is asked to record.
 */
import { Effect, Layer, Option } from "effect"
import * as http from "node:http"
import type { AddressInfo } from "node:net"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { data } from "../../src/Catalog/Catalog.ts"
import * as ProviderCalls from "../../src/Engine/ProviderCalls.ts"
import type { Target } from "../../src/Providers/Chat.ts"
import { Cancel } from "../../src/Providers/internal/cancel.ts"
import * as ProviderHealth from "../../src/Providers/ProviderHealth.ts"
import type { AvatarRecord } from "../../src/Storage/AvatarStore.ts"
import { Metering } from "../../src/Storage/Metering.ts"
import type { UsageEvent } from "../../src/Storage/UsageStore.ts"

/** The upstream's answer for the test that sets it: a JSON body (with its status), SSE text sent as it is, or none at all. */
let answer: { readonly json?: unknown; readonly status?: number; readonly sse?: string; readonly hang?: true } = {}

const chunk = (delta: unknown, extra: Record<string, unknown> = {}) =>
  `data: ${JSON.stringify({ id: "c", object: "chat.completion.chunk", created: 1, model: "m", choices: [{ index: 0, delta, finish_reason: null }], ...extra })}\n\n`
const finish = (reason = "stop") =>
  `data: ${JSON.stringify({ id: "c", object: "chat.completion.chunk", created: 1, model: "m", choices: [{ index: 0, delta: {}, finish_reason: reason }] })}\n\n`
const usageEvent = (usage: unknown) => `data: ${JSON.stringify({ id: "c", object: "chat.completion.chunk", created: 1, model: "m", choices: [], usage })}\n\n`
const DONE = "data: [DONE]\n\n"

const completion = (usage: unknown) => ({
  id: "c",
  object: "chat.completion",
  created: 1,
  model: "m",
  choices: [{ index: 0, message: { role: "assistant", content: "a reply of several words" }, finish_reason: "stop" }],
  usage
})

describe("what an upstream's answer may claim", () => {
  let server: http.Server
  let url: string
  const recorded: Array<UsageEvent> = []
  let engine: ProviderCalls.ProviderCalls["Type"]

  beforeAll(async () => {
    server = http.createServer((req, res) => {
      req.resume()
      req.on("end", () => {
        if (answer.hang) return
        if (answer.sse !== undefined) return res.writeHead(200, { "content-type": "text/event-stream" }).end(answer.sse)
        res.writeHead(answer.status ?? 200, { "content-type": "application/json" }).end(JSON.stringify(answer.json))
      })
    })
    await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve))
    url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`
    const metering = Layer.succeed(Metering, {
      avatarOfKey: async () => undefined,
      activeAvatar: async () => undefined,
      admit: async () => 1,
      callsOn: async () => 0,
      record: async (event) => void recorded.push(event)
    })
    engine = await Effect.runPromise(
      Effect.provide(ProviderCalls.ProviderCalls, ProviderCalls.layer.pipe(Layer.provide(Layer.merge(ProviderHealth.layer, metering))))
    )
  })
  afterAll(() => {
    server.closeAllConnections()
    server.close()
  })

  const target = () => {
    const openai = data.providers.find((p) => p.id === "openai")!
    return {
      provider: { ...openai, id: "p", endpoint: url, apiKey: Option.none(), configured: true, settings: {}, missing: undefined },
      model: data.models.find((m) => m.id === "gpt-4o-mini")!
    }
  }
  const messages = [{ role: "user" as const, content: "a question of a few words" }]
  const call = () => ({
    avatar: { id: "a" } as AvatarRecord,
    targets: [target()],
    cancel: new Cancel(),
    messages,
    request: (t: Target) => ({ model: t.model.id, messages })
  })
  const complete = (usage: unknown) => {
    answer = { json: completion(usage) }
    return engine.complete(call())
  }
  const stream = async (sse: string) => {
    answer = { sse }
    const chunks: Array<ProviderCalls.StreamChunk> = []
    await (await engine.openStream(call())).run((c) => chunks.push(...c))
    return { chunks, last: chunks.at(-1)!, record: recorded.at(-1)! }
  }
  const believable = (r: { readonly promptTokens: number; readonly completionTokens: number; readonly costUSD: number }) =>
    Number.isInteger(r.promptTokens) && r.promptTokens > 0 && Number.isInteger(r.completionTokens) && r.completionTokens > 0 &&
    Number.isFinite(r.costUSD) && r.costUSD > 0

  it("a JSON answer's counts that are no counts are not believed: the tokenizer counts, and the call says so", async () => {
    for (const bad of [-1_000_000, 10.5, 1e308, 2 ** 53 + 2, 5_000_000_000, "10"]) {
      const result = await complete({ prompt_tokens: bad, completion_tokens: bad, total_tokens: bad })
      const record = recorded.at(-1)!
      expect([bad, result.usage.estimated, record.estimated]).toEqual([bad, true, true])
      expect(believable({ ...result.usage, costUSD: result.costUSD }), `${bad}: ${JSON.stringify(result.usage)}`).toBe(true)
      expect(believable(record), `${bad}: ${JSON.stringify(record)}`).toBe(true)
    }
  })

  it("a count the upstream leaves out is estimated; the completion's comes from the total when only that is given", async () => {
    const promptOnly = await complete({ prompt_tokens: 7 })
    expect(promptOnly.usage).toMatchObject({ promptTokens: 7, estimated: true })
    expect(promptOnly.usage.completionTokens).toBeGreaterThan(0)
    const withTotal = await complete({ prompt_tokens: 7, total_tokens: 12 })
    expect(withTotal.usage).toEqual({ promptTokens: 7, completionTokens: 5, totalTokens: 12, estimated: false })
    const reported = await complete({ prompt_tokens: 7, completion_tokens: 3, total_tokens: 10 })
    expect(reported.usage).toEqual({ promptTokens: 7, completionTokens: 3, totalTokens: 10, estimated: false })
  })

  it("a stream's usage that is no count is not believed either", async () => {
    for (const bad of [-1_000_000, 0.25, 1e308]) {
      const { last, record } = await stream(chunk({ role: "assistant", content: "some words" }) + finish() + usageEvent({ prompt_tokens: bad, completion_tokens: bad }) + DONE)
      expect(last).toMatchObject({ done: true, finishReason: "stop", estimated: true })
      expect(last.error).toBeUndefined()
      expect(believable({ promptTokens: last.promptTokens!, completionTokens: last.completionTokens!, costUSD: last.costUSD! })).toBe(true)
      expect(believable(record)).toBe(true)
    }
    // Only the prompt count given: the completion's is estimated.
    const { last } = await stream(chunk({ content: "x" }) + finish() + usageEvent({ prompt_tokens: 9 }) + DONE)
    expect(last).toMatchObject({ promptTokens: 9, estimated: true })
  })

  it("a stream that ends without its end marker or a finish reason is an error, recorded as failed", async () => {
    const cut = await stream(chunk({ role: "assistant", content: "the first " }) + chunk({ content: "half" }))
    expect(cut.chunks.map((c) => c.content).join("")).toBe("the first half")
    expect(cut.last).toMatchObject({ done: true, finishReason: "error", error: "p sent an unexpected answer: the stream ended before the answer did (no finish reason, no end marker)" })
    expect(cut.record.ok).toBe(false)
    // An unterminated last event without a finish reason too.
    const partial = await stream(chunk({ content: "a" }) + chunk({ content: "b" }).trimEnd())
    expect(partial.last).toMatchObject({ finishReason: "error" })
    // A finish reason without [DONE], or [DONE] without a finish reason, is a complete answer.
    for (const sse of [chunk({ content: "a" }) + finish("length"), chunk({ content: "a" }) + DONE]) {
      const { last, record } = await stream(sse)
      expect(last.error).toBeUndefined()
      expect(record.ok).toBe(true)
    }
  })

  it("an embedding answer's count that is no count is estimated", async () => {
    answer = { json: { object: "list", data: [{ object: "embedding", index: 0, embedding: [0.1, 0.2] }], model: "m", usage: { prompt_tokens: -5, total_tokens: -5 } } }
    const embedded = await engine.embed({ avatar: { id: "a" } as AvatarRecord, targets: [{ ...target(), model: data.models.find((m) => m.id === "text-embedding-3-small")! }], cancel: new Cancel(), texts: ["some text to embed"] })
    expect(embedded.usage.estimated).toBe(true)
    expect(embedded.usage.promptTokens).toBeGreaterThan(0)
    expect(recorded.at(-1)).toMatchObject({ estimated: true, promptTokens: embedded.usage.promptTokens })
  })

  it("a call that no upstream answered is recorded as failed, with no tokens (the quota counted it)", async () => {
    const failedRecord = () => recorded.at(-1)!
    answer = { json: { error: { message: "overloaded" } }, status: 503 }
    await expect(engine.complete(call())).rejects.toMatchObject({ _tag: "UpstreamFailed" })
    expect(failedRecord()).toMatchObject({ capability: "chat", provider: "p", model: "gpt-4o-mini", ok: false, promptTokens: 0, completionTokens: 0, costUSD: 0 })
    const before = recorded.length
    await expect(engine.openStream(call())).rejects.toMatchObject({ _tag: "UpstreamFailed" })
    expect([recorded.length - before, failedRecord().capability, failedRecord().ok]).toEqual([1, "chat", false])
    // A 200 that is no answer (no choices) is a failure too.
    answer = { json: { id: "c", object: "chat.completion", usage: { prompt_tokens: 10, completion_tokens: 5 } } }
    await expect(engine.complete(call())).rejects.toMatchObject({ _tag: "UpstreamFailed" })
    expect(failedRecord()).toMatchObject({ ok: false, promptTokens: 0 })
    // A caller that leaves before the answer: the abort, untouched, and the record.
    answer = { hang: true }
    const leaving = call()
    const pending = engine.complete(leaving)
    setTimeout(() => leaving.cancel.abort(), 50)
    await expect(pending).rejects.toBeDefined()
    expect(failedRecord()).toMatchObject({ capability: "chat", ok: false })
  })
})
