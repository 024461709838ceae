/**
 * What an upstream's answer may claim: token counts that are no counts (negative, fractional,
 * huge, not numbers) never reach usage, cost or quota (the tokenizer counts instead), counts it
 * leaves out are estimated, and a stream that stops without its end marker or a finish reason is
 * an error, not a short success; a call no upstream answered is recorded as failed. Through the engine against a local OpenAI-format upstream, with
 * a metering that keeps what it is asked to record.
 */
import { Effect, Layer, Option, Redacted } from "effect"
import * as http from "node:http"
import type { AddressInfo } from "node:net"
import { afterAll, beforeAll, describe, expect, it, vi } from "vitest"
import { data } from "../../src/Catalog/Catalog.ts"
import * as ProviderCalls from "../../src/Engine/ProviderCalls.ts"
import type { Target } from "../../src/Providers/Chat.ts"
import * as OpenAiCompatible from "../../src/Providers/OpenAiCompatible.ts"
import { Cancel } from "../../src/Providers/internal/cancel.ts"
import * as ProviderHealth from "../../src/Providers/ProviderHealth.ts"
import type { AvatarRecord } from "../../src/Storage/AvatarStore.ts"
import { Metering } from "../../src/Storage/Metering.ts"
import type { UsageEvent } from "../../src/Storage/UsageStore.ts"

/** The upstream's answer for the test that sets it: a JSON body (with its status), SSE text sent as it is, a script writing it, or none at all. */
let answer: {
  readonly json?: unknown
  readonly status?: number
  readonly sse?: string
  readonly script?: (res: http.ServerResponse) => Promise<void>
  readonly hang?: true
} = {}
/** The body of the upstream's last request, and how many it has had. */
let received: any
let requests = 0

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
  let health: ProviderHealth.ProviderHealth["Type"]
  let metering: Layer.Layer<Metering>

  beforeAll(async () => {
    server = http.createServer((req, res) => {
      const body: Array<Buffer> = []
      req.on("data", (b: Buffer) => body.push(b))
      req.on("end", () => {
        received = JSON.parse(Buffer.concat(body).toString() || "null")
        requests++
        if (answer.hang) return
        if (answer.script) return void answer.script(res)
        if (answer.sse !== undefined) return res.writeHead(200, { "content-type": "text/event-stream" }).end(answer.sse)
        res.writeHead(answer.status ?? 200, { "content-type": "application/json" }).end(JSON.stringify(answer.json))
      })
    })
    await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve))
    url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`
    metering = Layer.succeed(Metering, {
      avatarOfKey: async () => undefined,
      activeAvatar: async () => undefined,
      admit: async () => 1,
      callsOn: async () => 0,
      record: async (event) => void recorded.push(event)
    })
    ;[engine, health] = await Effect.runPromise(
      Effect.provide(
        Effect.all([ProviderCalls.ProviderCalls, ProviderHealth.ProviderHealth]),
        ProviderCalls.layer.pipe(Layer.provideMerge(Layer.merge(ProviderHealth.layer, metering)))
      )
    )
  })
  afterAll(() => {
    server.closeAllConnections()
    server.close()
  })

  /** A catalogued provider's wire at the local upstream: OpenAI's as provider "p" unless another is named. */
  const target = (family = "openai", model = "gpt-4o-mini") => {
    const provider = data.providers.find((p) => p.id === family)!
    return {
      provider: { ...provider, id: family === "openai" ? "p" : family, endpoint: url, apiKey: Option.some(Redacted.make("k")), configured: true, settings: {}, missing: undefined },
      model: data.models.find((m) => m.id === model) ?? { ...data.models.find((m) => m.id === "gpt-4o-mini")!, id: model, provider: family }
    }
  }
  const messages = [{ role: "user" as const, content: "a question of a few words" }]
  const call = (family?: string, model?: string) => ({
    avatar: { id: "a" } as AvatarRecord,
    targets: [target(family, model)],
    cancel: new Cancel(),
    messages,
    request: (t: Target) => ({ model: t.model.id, messages })
  })
  const complete = (usage: unknown) => {
    answer = { json: completion(usage) }
    return engine.complete(call())
  }
  const streamed = async (family?: string, model?: string) => {
    const chunks: Array<ProviderCalls.StreamChunk> = []
    await (await engine.openStream(call(family, model))).run((c) => void chunks.push(...c))
    return { chunks, last: chunks.at(-1)!, record: recorded.at(-1)! }
  }
  const stream = (sse: string, family?: string, model?: string) => {
    answer = { sse }
    return streamed(family, model)
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

  it("a JSON answer whose finish reason says it failed is a 502, recorded as failed with the counts it reported", async () => {
    answer = { json: { ...completion({ prompt_tokens: 30, completion_tokens: 40 }), choices: [{ index: 0, message: { role: "assistant", content: "half an" }, finish_reason: "error" }] } }
    const failed = await engine.complete(call()).then(() => undefined, (e) => e)
    expect(failed).toMatchObject({ _tag: "UpstreamFailed", message: expect.stringMatching(/its finish reason says so/) })
    expect(recorded.at(-1)).toMatchObject({ ok: false, promptTokens: 30, completionTokens: 40 })
    expect(recorded.at(-1)!.costUSD).toBeGreaterThan(0)
  })

  // A twins review: the same failed answer kept its provider "up" as JSON and counted against it as a stream,
  // where each opening's success also reset the count, so five streams breaking in a row never opened the circuit.
  // Its review: an answer a request can cause (a failed finish reason, a reply too large) must not take the
  // provider away from every tenant, and a stop says nothing of the provider.
  it("a provider's health has one rule on every path: five streams breaking in a row open its circuit; failed answers and a 400 do not", async () => {
    const broken = { script: async (res: http.ServerResponse) => {
      res.writeHead(200, { "content-type": "text/event-stream" })
      res.write(chunk({ content: "half" }))
      await new Promise((r) => setTimeout(r, 20))
      res.socket?.destroy()
    } }
    for (let i = 0; i < 5; i++) {
      answer = broken
      await streamed("groq").catch(() => undefined)
    }
    expect(["groq", health.status("groq")]).toEqual(["groq", "down"])
    const failedAnswer = { ...completion({ prompt_tokens: 3, completion_tokens: 2 }), choices: [{ index: 0, message: { role: "assistant", content: "half" }, finish_reason: "error" }] }
    for (let i = 0; i < 5; i++) {
      answer = { json: failedAnswer }
      await engine.complete(call("deepseek")).catch(() => undefined)
      await stream(chunk({ content: "half" }) + finish("error") + DONE, "deepseek")
    }
    expect(["deepseek", health.status("deepseek")]).toEqual(["deepseek", "up"])
    for (let i = 0; i < 5; i++) {
      answer = { status: 400, json: { error: { message: "max_tokens is too large", type: "invalid_request_error" } } }
      await engine.complete(call("together-ai")).catch(() => undefined)
    }
    expect(["together-ai", health.status("together-ai")]).toEqual(["together-ai", "up"])
  })

  it("a reader that cannot take more holds the upstream: its answer waits there, not in the gateway's memory", async () => {
    // A client that did not read made the gateway read a whole 32 MiB answer into memory, per stream.
    const piece = chunk({ content: "x".repeat(8_000) })
    const pieces = 3_500
    let written = 0
    answer = {
      script: async (res) => {
        res.writeHead(200, { "content-type": "text/event-stream" })
        for (let i = 0; i < pieces; i++) {
          written += piece.length
          if (!res.write(piece)) await new Promise((r) => res.once("drain", r))
        }
        res.end(finish() + DONE)
      }
    }
    let release: (() => void) | undefined
    let content = 0
    const opened = await engine.openStream(call())
    const ran = opened.run((chunks) => {
      for (const c of chunks) content += c.content?.length ?? 0
      // Full after the first read, until the test says otherwise.
      return release === undefined ? (resume) => void (release = resume) : undefined
    })
    await new Promise((r) => setTimeout(r, 1_000))
    expect(release).toBeDefined()
    expect(written).toBeLessThan((pieces * piece.length) / 2)
    const heldAt = written
    await new Promise((r) => setTimeout(r, 300))
    expect(written).toBe(heldAt)
    release!()
    await ran
    expect(content).toBe(pieces * 8_000)
    expect(recorded.at(-1)!.ok).toBe(true)
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
    expect(cut.last).toMatchObject({ done: true, finishReason: "error", errorCode: "UpstreamFailed", error: "p sent an unexpected answer: the stream ended before the answer did (no finish reason, no end marker)" })
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

  it("a stream the gateway stops (a host's deadline) ends with the stop's error, recorded as failed with what was sent; the upstream connection closed, the provider's health untouched", async () => {
    let closed!: Promise<void>
    answer = {
      script: async (res) => {
        closed = new Promise((resolve) => res.on("close", () => resolve()))
        res.writeHead(200, { "content-type": "text/event-stream" })
        // The first words, then the upstream goes on thinking: only the stop ends this stream.
        res.write(chunk({ role: "assistant", content: "the first words " }))
      }
    }
    const stopped = { ...call(), targets: [{ ...target(), provider: { ...target().provider, id: "stopped" } }] }
    const opened = await engine.openStream(stopped)
    const chunks: Array<ProviderCalls.StreamChunk> = []
    await opened.run((c) => {
      chunks.push(...c)
      if (c.some((x) => x.content === "the first words ")) opened.stop({ message: "out of time", code: "UpstreamTimeout" })
    })
    expect(chunks.map((c) => c.content).join("")).toBe("the first words ")
    expect(chunks.at(-1)).toMatchObject({ done: true, finishReason: "error", error: "out of time", errorCode: "UpstreamTimeout", provider: "stopped" })
    expect(recorded.at(-1)).toMatchObject({ provider: "stopped", ok: false, estimated: true })
    expect(recorded.at(-1)!.completionTokens).toBeGreaterThan(0)
    await closed
    expect(health.status("stopped")).toBe("unknown")
    // A stop asked before the run ends the stream as soon as it runs.
    answer = { script: async (res) => void res.writeHead(200, { "content-type": "text/event-stream" }).write(chunk({ role: "assistant", content: "x" })) }
    const early = await engine.openStream(stopped)
    early.stop({ message: "out of time, early", code: "Busy" })
    const last: Array<ProviderCalls.StreamChunk> = []
    await early.run((c) => void last.push(...c))
    expect(last.at(-1)).toMatchObject({ done: true, error: "out of time, early", errorCode: "Busy" })
    expect(health.status("stopped")).toBe("unknown")
  })

  it("stopCalls ends every stream running now (a silent one too) and every call waiting for its answer, and those begun later at once", async () => {
    // An engine of its own: a stopped engine stays stopped.
    const stopping = await Effect.runPromise(Effect.provide(ProviderCalls.ProviderCalls, ProviderCalls.layer.pipe(Layer.provide(Layer.merge(ProviderHealth.layer, metering)))))
    // Streams get their first chunk and then nothing; JSON calls get no answer at all.
    answer = { script: async (res) => void (received.stream ? res.writeHead(200, { "content-type": "text/event-stream" }).write(chunk({ role: "assistant", content: "thinking" })) : undefined) }
    const [notRun, ...silent] = await Promise.all([stopping.openStream(call()), stopping.openStream(call()), stopping.openStream(call())])
    const chunks: Array<Array<ProviderCalls.StreamChunk>> = [[], []]
    const runs = silent.map((s, i) => s.run((c) => void chunks[i]!.push(...c)))
    for (let i = 0; i < 100 && chunks.some((c) => c.length === 0); i++) await new Promise((r) => setTimeout(r, 10))
    // Two targets: a stop is no reason to try the next one.
    const before = requests
    // A call made for a request (it has the request's id) is stopped; background work's is not (below).
    const waiting = stopping.complete({ ...call(), targets: [target(), target()], requestId: "r1" }).then(() => "answered", (e: unknown) => e)
    for (let i = 0; i < 100 && requests === before; i++) await new Promise((r) => setTimeout(r, 10))
    const stopped = { _tag: "Busy", message: "the gateway is stopping this call", retryAfterSeconds: 1 }
    const recordedBefore = recorded.length
    stopping.stopCalls({ message: "the gateway is stopping", code: "Busy" }, stopped.message)
    await Promise.all(runs)
    for (const c of chunks) expect(c.at(-1)).toMatchObject({ done: true, finishReason: "error", error: "the gateway is stopping", errorCode: "Busy" })
    expect(await waiting).toMatchObject(stopped)
    expect(requests - before).toBe(1)
    // Three failed calls recorded: the two streams with what they sent, the waiting call with nothing.
    const since = recorded.slice(recordedBefore).map((r) => [r.ok, r.completionTokens > 0])
    expect(since.sort()).toEqual([[false, false], [false, true], [false, true]])
    // Calls begun afterwards fail at once, sending nothing; a stream opened before the stop ends at once when it runs;
    // the other engine's calls are not touched.
    await expect(stopping.complete({ ...call(), requestId: "r2" })).rejects.toMatchObject(stopped)
    await expect(stopping.openStream({ ...call(), requestId: "r3" })).rejects.toMatchObject(stopped)
    expect(requests - before).toBe(1)
    // A call without a request (a batch job's step) is left to run: a stopped process's job step is run again by the next one.
    const backgroundCall = call()
    const background = stopping.complete(backgroundCall).then(() => "answered", (e: unknown) => e)
    for (let i = 0; i < 100 && requests - before === 1; i++) await new Promise((r) => setTimeout(r, 10))
    expect(requests - before).toBe(2)
    // Its client (a job's runner) ends it: the test leaves no call behind.
    backgroundCall.cancel.abort()
    expect(await background).not.toBe("answered")
    const laterChunks: Array<ProviderCalls.StreamChunk> = []
    await notRun!.run((c) => void laterChunks.push(...c))
    expect(laterChunks.at(-1)).toMatchObject({ done: true, error: "the gateway is stopping" })
    const other = await stream(chunk({ role: "assistant", content: "a" }) + finish() + DONE)
    expect(other.last.error).toBeUndefined()
  })

  it("an answer the adapter throws on reading is the upstream's protocol error, recorded as failed; a stream's does not end the process", async () => {
    // `tool_calls: [null]` in a stream chunk once threw in the body's data handler and ended the server.
    const nulls = await stream(chunk({ role: "assistant", content: "a" }) + chunk({ tool_calls: [null] }) + finish() + DONE)
    expect(nulls.last).toMatchObject({ finishReason: "error", error: "p sent an unexpected answer: a stream delta's tool call is not an object" })
    // Whatever an adapter may yet throw on: the reading ends the stream or the call, never the process.
    const broken = (() => () => {
      throw new TypeError("not foreseen")
    }) as never
    const events = vi.spyOn(OpenAiCompatible.wire, "events").mockImplementation(broken)
    try {
      const thrown = await stream(chunk({ role: "assistant", content: "a" }) + finish() + DONE)
      expect(thrown.last).toMatchObject({ done: true, finishReason: "error", errorCode: "UpstreamFailed", error: "p sent an unexpected answer: an answer aigw cannot read (not foreseen)" })
      expect(thrown.record.ok).toBe(false)
    } finally {
      events.mockRestore()
    }
    const result = vi.spyOn(OpenAiCompatible.wire, "result").mockImplementation(() => {
      throw new TypeError("not foreseen either")
    })
    try {
      const failed = await complete({ prompt_tokens: 1, completion_tokens: 1 }).then(() => undefined, (e) => e)
      expect(failed).toMatchObject({ _tag: "UpstreamFailed", message: "p sent an unexpected answer: an answer aigw cannot read (not foreseen either)" })
      expect(recorded.at(-1)!.ok).toBe(false)
    } finally {
      result.mockRestore()
    }
  })

  it("an answer of a million objects under the reply limit is a protocol error before it is parsed (it held the event loop 13 s)", async () => {
    answer = { json: { ...completion({ prompt_tokens: 1, completion_tokens: 1 }), x: Array.from({ length: 1_000_001 }, () => ({})) } }
    const failed = await engine.complete(call()).then(() => undefined, (e) => e)
    expect(failed).toMatchObject({ _tag: "UpstreamFailed", message: "p sent an unexpected answer: the body is not usable JSON: JSON holds more than 1000000 objects and arrays." })
    expect(recorded.at(-1)!.ok).toBe(false)
    // The same in one stream event.
    const { last } = await stream(`data: ${JSON.stringify({ choices: [{ index: 0, delta: { content: "a" } }], x: Array.from({ length: 1_000_001 }, () => []) })}\n\n`)
    expect(last).toMatchObject({ finishReason: "error", error: "p sent an unexpected answer: a stream event is not usable JSON: JSON holds more than 1000000 objects and arrays." })
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

  it("a finish reason that says the upstream failed is a failed call, not a short success (JSON and streams)", async () => {
    for (const reason of ["error", "insufficient_system_resource"]) {
      answer = { json: { ...completion({ prompt_tokens: 5, completion_tokens: 2 }), choices: [{ index: 0, message: { role: "assistant", content: "par" }, finish_reason: reason }] } }
      await expect(engine.complete(call())).rejects.toMatchObject({ _tag: "UpstreamFailed", message: "p sent an unexpected answer: the answer ended in an error (its finish reason says so)" })
      expect(recorded.at(-1)).toMatchObject({ ok: false })
    }
    const { last, record } = await stream(chunk({ role: "assistant", content: "par" }) + finish("error") + usageEvent({ prompt_tokens: 5, completion_tokens: 1 }) + DONE)
    expect(last).toMatchObject({ done: true, finishReason: "error", error: "p sent an unexpected answer: the answer ended in an error (its finish reason says so)" })
    expect(record).toMatchObject({ ok: false, completionTokens: 1 })
    // Truncations compatible providers name their own way are `length`.
    for (const reason of ["model_length", "time_limit"]) {
      answer = { json: { ...completion({ prompt_tokens: 5, completion_tokens: 2 }), choices: [{ index: 0, message: { role: "assistant", content: "par" }, finish_reason: reason }] } }
      expect((await engine.complete(call())).finishReason).toBe("length")
    }
  })

  it("a Mistral reasoning answer's content chunks: the text is the answer, the thinking reasoning_content (JSON and streams)", async () => {
    const content = [{ type: "thinking", thinking: [{ type: "text", text: "six times seven" }] }, { type: "text", text: "42" }, { type: "reference", reference_ids: [1] }]
    answer = { json: { ...completion({ prompt_tokens: 5, completion_tokens: 9 }), choices: [{ index: 0, message: { role: "assistant", content }, finish_reason: "stop" }] } }
    const result = await engine.complete(call("mistral", "magistral-medium-latest"))
    expect(result.content).toBe("42")
    expect(result.extra?.message).toEqual({ reasoning_content: "six times seven", content_parts: [{ type: "reference", reference_ids: [1] }] })
    const { chunks, last } = await stream(
      chunk({ role: "assistant", content: [{ type: "thinking", thinking: [{ type: "text", text: "six " }] }] }) +
        chunk({ content: [{ type: "thinking", thinking: [{ type: "text", text: "times seven" }] }] }) +
        chunk({ content: [{ type: "text", text: "4" }] }) + chunk({ content: "2" }) + finish() + DONE,
      "mistral",
      "magistral-medium-latest"
    )
    expect(chunks.map((c) => c.content).join("")).toBe("42")
    expect(chunks.map((c) => c.extra?.delta?.reasoning_content ?? "").join("")).toBe("six times seven")
    expect(last.error).toBeUndefined()
  })

  it("an OpenAI-format upstream's other counts (audio, predicted output) come back as reported, in JSON answers and streams, and are not counted again", async () => {
    const usage = {
      prompt_tokens: 100,
      completion_tokens: 20,
      total_tokens: 120,
      prompt_tokens_details: { cached_tokens: 0, audio_tokens: 7, junk: "x", negative: -1 },
      completion_tokens_details: { reasoning_tokens: 0, audio_tokens: 3, accepted_prediction_tokens: 5, rejected_prediction_tokens: 2 }
    }
    const json = await complete(usage)
    expect(json.usage).toMatchObject({ promptTokens: 100, completionTokens: 20, totalTokens: 120 })
    expect(json.usage.tokenDetails).toEqual({
      prompt: { audio_tokens: 7 },
      completion: { audio_tokens: 3, accepted_prediction_tokens: 5, rejected_prediction_tokens: 2 }
    })
    expect(recorded.at(-1)).toMatchObject({ promptTokens: 100, completionTokens: 20 })
    const { last } = await stream(
      `data: ${JSON.stringify({ id: "c", object: "chat.completion.chunk", choices: [{ index: 0, delta: { content: "hi" } }] })}\n\n` +
        `data: ${JSON.stringify({ id: "c", object: "chat.completion.chunk", choices: [{ index: 0, delta: {}, finish_reason: "stop" }] })}\n\n` +
        `data: ${JSON.stringify({ id: "c", object: "chat.completion.chunk", choices: [], usage })}\n\ndata: [DONE]\n\n`
    )
    expect(last).toMatchObject({ done: true, promptTokens: 100, completionTokens: 20 })
    expect(last.tokenDetails).toEqual(json.usage.tokenDetails)
    // Details that are no object of counts (an array) are not passed on as one.
    const listed = await complete({ prompt_tokens: 5, completion_tokens: 1, prompt_tokens_details: [1, 2, 3] })
    expect(listed.usage.tokenDetails).toBeUndefined()
  })

  it("prompt-cache counts: out of OpenAI's and Gemini's prompt count, Anthropic's writes and reads priced (not free)", async () => {
    const openai = await complete({ prompt_tokens: 1000, completion_tokens: 10, prompt_tokens_details: { cached_tokens: 800 }, completion_tokens_details: { reasoning_tokens: 4 } })
    expect(openai.usage).toEqual({ promptTokens: 200, completionTokens: 10, totalTokens: 1010, estimated: false, cacheReadTokens: 800, reasoningTokens: 4 })
    // No cache price in the catalogue for this model: cache reads cost the input price, as before the split.
    const mini = data.models.find((m) => m.id === "gpt-4o-mini")!
    expect(openai.costUSD).toBeCloseTo((1000 / 1000) * mini.inputPer1kUSD + (10 / 1000) * mini.outputPer1kUSD, 12)
    expect(recorded.at(-1)).toMatchObject({ promptTokens: 1000, completionTokens: 10 })

    answer = {
      json: {
        id: "msg_1", type: "message", role: "assistant", model: "claude-haiku-4-5", content: [{ type: "text", text: "x" }], stop_reason: "end_turn",
        usage: { input_tokens: 20, output_tokens: 5, cache_creation_input_tokens: 100_000, cache_read_input_tokens: 50_000 }
      }
    }
    const anthropic = await engine.complete(call("anthropic", "claude-haiku-4-5"))
    expect(anthropic.usage).toMatchObject({ promptTokens: 20, cacheCreationTokens: 100_000, cacheReadTokens: 50_000, totalTokens: 150_025 })
    // Haiku 4.5: $1 input, $1.25 cache writes, $0.10 cache reads, $5 output per million tokens.
    expect(anthropic.costUSD).toBeCloseTo((20 * 1 + 100_000 * 1.25 + 50_000 * 0.1 + 5 * 5) / 1e6, 10)
    expect(recorded.at(-1)).toMatchObject({ promptTokens: 150_020, completionTokens: 5, costUSD: anthropic.costUSD })
    // One-hour cache writes (`ttl: "1h"`) cost twice the input price (a never-drop-silently audit: the split was
    // dropped and every write priced as a 5-minute one); a split larger than the writes is no count.
    const split = (hour: number) => ({
      json: {
        id: "msg_2", type: "message", role: "assistant", model: "claude-haiku-4-5", content: [{ type: "text", text: "x" }], stop_reason: "end_turn",
        usage: {
          input_tokens: 20, output_tokens: 5, cache_creation_input_tokens: 100_000, cache_read_input_tokens: 50_000,
          cache_creation: { ephemeral_5m_input_tokens: 100_000 - hour, ephemeral_1h_input_tokens: hour }
        }
      }
    })
    answer = split(60_000)
    const hourly = await engine.complete(call("anthropic", "claude-haiku-4-5"))
    expect(hourly.usage).toMatchObject({ cacheCreationTokens: 100_000, cacheCreation1hTokens: 60_000 })
    expect(hourly.costUSD).toBeCloseTo((20 * 1 + 40_000 * 1.25 + 60_000 * 2 + 50_000 * 0.1 + 5 * 5) / 1e6, 10)
    expect(recorded.at(-1)).toMatchObject({ costUSD: hourly.costUSD })
    answer = split(500_000)
    const hostile = await engine.complete(call("anthropic", "claude-haiku-4-5"))
    expect(hostile.usage.cacheCreation1hTokens).toBeUndefined()
    expect(hostile.costUSD).toBeCloseTo(anthropic.costUSD, 10)

    answer = {
      json: {
        candidates: [{ content: { role: "model", parts: [{ text: "y" }] }, finishReason: "STOP" }],
        usageMetadata: { promptTokenCount: 900, cachedContentTokenCount: 600, candidatesTokenCount: 3, thoughtsTokenCount: 7 }
      }
    }
    const gemini = await engine.complete(call("google", "gemini-2.5-flash"))
    expect(gemini.usage).toMatchObject({ promptTokens: 300, cacheReadTokens: 600, completionTokens: 10, reasoningTokens: 7, totalTokens: 910 })
  })

  it("Gemini: a blocked prompt is a content filter, blocking finish reasons too, a malformed function call a failure", async () => {
    answer = { json: { promptFeedback: { blockReason: "PROHIBITED_CONTENT" }, usageMetadata: { promptTokenCount: 5, totalTokenCount: 5 } } }
    expect(await engine.complete(call("google", "gemini-2.5-flash"))).toMatchObject({ content: "", finishReason: "content_filter" })
    const { last } = await stream(`data: ${JSON.stringify({ promptFeedback: { blockReason: "SAFETY" }, usageMetadata: { promptTokenCount: 5 } })}\r\n\r\n`, "google", "gemini-2.5-flash")
    expect(last).toMatchObject({ done: true, finishReason: "content_filter" })
    expect(last.error).toBeUndefined()
    for (const reason of ["BLOCKLIST", "SPII", "IMAGE_SAFETY", "MODEL_ARMOR"]) {
      answer = { json: { candidates: [{ content: { role: "model", parts: [] }, finishReason: reason }], usageMetadata: { promptTokenCount: 5, candidatesTokenCount: 0 } } }
      expect((await engine.complete(call("google", "gemini-2.5-flash"))).finishReason, reason).toBe("content_filter")
    }
    answer = { json: { candidates: [{ content: { role: "model", parts: [] }, finishReason: "MALFORMED_FUNCTION_CALL" }], usageMetadata: { promptTokenCount: 5, candidatesTokenCount: 0 } } }
    await expect(engine.complete(call("google", "gemini-2.5-flash"))).rejects.toMatchObject({ _tag: "UpstreamFailed" })
  })

  it("a streamed tool call without arguments gets `{}`, as in a JSON answer, before the next call starts", async () => {
    const event = (type: string, body: Record<string, unknown>) => `event: ${type}\ndata: ${JSON.stringify({ type, ...body })}\n\n`
    const { chunks, last } = await stream(
      event("message_start", { message: { id: "m", type: "message", role: "assistant", content: [], usage: { input_tokens: 9, output_tokens: 1 } } }) +
        event("content_block_start", { index: 0, content_block: { type: "tool_use", id: "t0", name: "now", input: {} } }) +
        event("content_block_stop", { index: 0 }) +
        event("content_block_start", { index: 1, content_block: { type: "tool_use", id: "t1", name: "add", input: {} } }) +
        event("content_block_delta", { index: 1, delta: { type: "input_json_delta", partial_json: "{\"a\":1}" } }) +
        event("content_block_stop", { index: 1 }) +
        event("content_block_start", { index: 2, content_block: { type: "tool_use", id: "t2", name: "later", input: {} } }) +
        event("content_block_stop", { index: 2 }) +
        event("message_delta", { delta: { stop_reason: "tool_use" }, usage: { output_tokens: 12 } }) +
        event("message_stop", {}),
      "anthropic",
      "claude-haiku-4-5"
    )
    const calls = chunks.flatMap((c) => c.toolCalls ?? [])
    const argumentsOf = (index: number) => calls.filter((c) => c.index === index).map((c) => c.arguments).join("")
    expect([argumentsOf(0), argumentsOf(1), argumentsOf(2)]).toEqual(["{}", "{\"a\":1}", "{}"])
    // Call 0's `{}` comes before call 1 starts.
    expect(calls.findIndex((c) => c.index === 0 && c.arguments === "{}")).toBeLessThan(calls.findIndex((c) => c.index === 1))
    expect(last).toMatchObject({ finishReason: "tool_calls" })
  })

  it("keep-alive comments keep a stream alive past the idle timeout; silence does not", async () => {
    const real = globalThis.setTimeout
    // The stream's 120 s deadlines, scaled to 300 ms for this test.
    ;(globalThis as any).setTimeout = (f: () => void, ms?: number, ...rest: Array<unknown>) => real(f, ms === 120_000 ? 300 : ms, ...rest)
    const sleep = (ms: number) => new Promise((resolve) => real(resolve, ms))
    try {
      const waitThenAnswer = (pause: (res: http.ServerResponse) => Promise<void>) => async (res: http.ServerResponse) => {
        res.writeHead(200, { "content-type": "text/event-stream" })
        res.write(chunk({ role: "assistant", content: "" }))
        await pause(res)
        res.end(chunk({ content: "answer" }) + finish() + DONE)
      }
      answer = { script: waitThenAnswer(async (res) => { for (let i = 0; i < 12; i++) { res.write(": keep-alive\n\n"); await sleep(60) } }) }
      const alive = await streamed()
      expect(alive.chunks.map((c) => c.content).join("")).toBe("answer")
      expect(alive.last.error).toBeUndefined()
      answer = { script: waitThenAnswer(async () => void (await sleep(720))) }
      const silent = await streamed()
      expect(silent.last.error).toBe("p did not send the next chunk in time")
      expect(silent.last.errorCode).toBe("UpstreamTimeout")
    } finally {
      globalThis.setTimeout = real
    }
  })

  it("Gemini's thought signature of a tool call comes back with the call and goes back with it in the history", async () => {
    const gemini = target("google", "gemini-2.5-flash")
    answer = {
      json: {
        candidates: [{ content: { role: "model", parts: [{ functionCall: { name: "now", args: {} }, thoughtSignature: "sig-A" }, { functionCall: { name: "later", args: { x: 1 } } }] }, finishReason: "STOP" }],
        usageMetadata: { promptTokenCount: 5, candidatesTokenCount: 3 }
      }
    }
    const first = await engine.complete(call("google", "gemini-2.5-flash"))
    expect(first.toolCalls.map((c) => c.signature)).toEqual(["sig-A", undefined])
    const history = [
      ...messages,
      { role: "assistant" as const, content: "", toolCalls: first.toolCalls },
      { role: "tool" as const, content: "12:00", toolCallId: first.toolCalls[0]!.id },
      { role: "tool" as const, content: "soon", toolCallId: first.toolCalls[1]!.id }
    ]
    answer = { json: { candidates: [{ content: { role: "model", parts: [{ text: "done" }] }, finishReason: "STOP" }], usageMetadata: { promptTokenCount: 9, candidatesTokenCount: 1 } } }
    await engine.complete({ ...call("google", "gemini-2.5-flash"), targets: [gemini], messages: history, request: (t: Target) => ({ model: t.model.id, messages: history }) })
    expect(received.contents[1]).toEqual({
      role: "model",
      parts: [{ functionCall: { name: "now", args: {} }, thoughtSignature: "sig-A" }, { functionCall: { name: "later", args: { x: 1 } } }]
    })
    // Streamed, on the call's first delta.
    const { chunks } = await stream(`data: ${JSON.stringify({ candidates: [{ content: { role: "model", parts: [{ functionCall: { name: "now", args: {} }, thoughtSignature: "sig-B" }] }, finishReason: "STOP" }] })}\r\n\r\n`, "google", "gemini-2.5-flash")
    expect(chunks.flatMap((c) => c.toolCalls ?? []).find((t) => t.signature !== undefined)).toMatchObject({ index: 0, name: "now", signature: "sig-B" })
  })

  it("an OpenAI-format tool call with object arguments or no id is read as one; one without a name is refused", async () => {
    const withCalls = (tool_calls: unknown) => ({ ...completion({ prompt_tokens: 5, completion_tokens: 2 }), choices: [{ index: 0, message: { role: "assistant", content: null, tool_calls }, finish_reason: "tool_calls" }] })
    answer = { json: withCalls([{ type: "function", function: { name: "add", arguments: { a: 1 } } }, { id: "c2", type: "function", function: { name: "now" }, extra_content: { google: { thought_signature: "s" } } }]) }
    expect((await engine.complete(call())).toolCalls).toEqual([{ id: "call_0", name: "add", arguments: "{\"a\":1}" }, { id: "c2", name: "now", arguments: "{}", signature: "s" }])
    answer = { json: withCalls([{ id: "c1", type: "function", function: { arguments: "{}" } }]) }
    await expect(engine.complete(call())).rejects.toMatchObject({ _tag: "UpstreamFailed", message: "p sent an unexpected answer: tool call 0: a tool call without a name" })
  })

  it("an Anthropic answer's stop sequence comes back with it (JSON and streams)", async () => {
    answer = {
      json: {
        id: "msg_1", type: "message", role: "assistant", model: "claude-haiku-4-5", content: [{ type: "text", text: "1, 2, 3" }],
        stop_reason: "stop_sequence", stop_sequence: "END", usage: { input_tokens: 5, output_tokens: 4 }
      }
    }
    expect(await engine.complete(call("anthropic", "claude-haiku-4-5"))).toMatchObject({ finishReason: "stop", stopSequence: "END" })
    const event = (type: string, body: Record<string, unknown>) => `event: ${type}\ndata: ${JSON.stringify({ type, ...body })}\n\n`
    const { last } = await stream(
      event("message_start", { message: { id: "m", type: "message", role: "assistant", content: [], usage: { input_tokens: 5, output_tokens: 1 } } }) +
        event("content_block_start", { index: 0, content_block: { type: "text", text: "" } }) +
        event("content_block_delta", { index: 0, delta: { type: "text_delta", text: "1, 2" } }) +
        event("content_block_stop", { index: 0 }) +
        event("message_delta", { delta: { stop_reason: "stop_sequence", stop_sequence: "END" }, usage: { output_tokens: 3 } }) +
        event("message_stop", {}),
      "anthropic",
      "claude-haiku-4-5"
    )
    expect(last).toMatchObject({ done: true, finishReason: "stop", stopSequence: "END" })
  })
})
