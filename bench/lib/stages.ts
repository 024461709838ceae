/**
 * Per-stage cost of aigw's metered chat path, in-process (no HTTP server in front): each stage runs
 * N times through the real services and layers the node host uses (Layers.layerFromEnv: the same
 * database, tracing and configuration), with C calls in flight, and reports CPU microseconds and
 * wall microseconds per call. Bundled and run by bench/run.mjs (STAGES=1) or by hand:
 *
 *   node bench/.build/stages.mjs   (env: DATABASE_URL, OPENAI_BASE_URL, AIGW_DATA_DIR, STAGE_N, STAGE_C)
 *
 * Prints one line `STAGESJSON {...}`.
 */
import { ApiKeys, Auth, Avatars, Layers, Metering, Quota } from "@aigw/core"
import { sha256 } from "@aigw/core/Accounts/Secrets"
import { utcDay } from "@aigw/core/Quota"
import * as Completions from "@aigw/core/Capabilities/Completions"
import * as UsageService from "@aigw/core/Usage"
import * as Http from "@aigw/core/Providers/internal/http"
import { Cancel } from "@aigw/core/Providers/internal/cancel"
import { makeSseParser } from "@aigw/core/Providers/internal/sse"
import { wire as openAiWire } from "@aigw/core/Providers/OpenAiCompatible"
import { makeStreamAccount } from "@aigw/core/Engine/ProviderCalls"
import { ChatCompletionBody, openAiStream } from "@aigw/core/Http/OpenAiRoutes"
import { streamText } from "@aigw/core/Http/ChatSurface"
import { Effect, FiberRef, Layer, ManagedRuntime, Schema } from "effect"

const N = Number(process.env.STAGE_N ?? 3000)
const C = Number(process.env.STAGE_C ?? 16)

const runtime = ManagedRuntime.make(Layers.layerFromEnv() as Layer.Layer<any>)

/** Runs `make()` N times with C in flight after a warm-up; CPU and wall time per call. */
const measure = async (name: string, make: () => Effect.Effect<unknown, unknown, any>) => {
  const run = (n: number) => {
    let next = 0
    const worker = Effect.gen(function*() {
      while (next++ < n) yield* make()
    })
    return runtime.runPromise(Effect.all(Array.from({ length: C }, () => worker), { concurrency: "unbounded", discard: true }))
  }
  await run(Math.max(200, N / 5))
  const cpu0 = process.cpuUsage()
  const t0 = performance.now()
  await run(N)
  const cpu = process.cpuUsage(cpu0)
  const wall = performance.now() - t0
  return { stage: name, calls: N, cpu_us: Math.round(((cpu.user + cpu.system) / N) * 10) / 10, wall_us: Math.round(((wall * 1000) / N) * 10) / 10 }
}

/**
 * A stream's own work on the lane, without I/O: an upstream SSE answer (bytes) through the SSE
 * parser, the OpenAI wire's event decoder, the stream account and the OpenAI surface's framed
 * chunks, as the lane makes them for `body`; returns the characters of SSE written.
 */
const streamTransform = (answer: Uint8Array, body: typeof ChatCompletionBody.Type): number => {
  const parser = makeSseParser()
  const decode = openAiWire.events("openai")
  const account = makeStreamAccount()
  const { frames } = streamText(openAiStream("chatcmpl-stages", body))
  let written = 0
  for (const events of [parser.push(answer), parser.end()]) {
    for (const chunk of account.onRead(events, decode).chunks) written += frames(chunk).length
  }
  return written
}

const main = async () => {
  const { avatar, key } = await runtime.runPromise(Effect.gen(function*() {
    const avatars = yield* Avatars.Avatars
    const view = yield* avatars.register({ username: `stages_${Date.now().toString(36)}`, email: `stages_${Date.now()}@example.com`, password: "stages password 1" })
    const created = yield* (yield* ApiKeys.ApiKeys).create(view.id, "stages")
    const auth = yield* Auth.Auth
    const avatar = yield* auth.require({ apiKey: created.key })
    return { avatar, key: created.key }
  }))
  const input: Completions.CompletionInput = {
    messages: [{ role: "system", content: "You are a concise assistant." }, { role: "user", content: "Say something about gateways. ".repeat(20) }],
    provider: "openai",
    model: "gpt-4o-mini",
    temperature: 0.7,
    maxTokens: 256
  }
  const upstream = `${process.env.OPENAI_BASE_URL}/chat/completions`
  const wire = { model: "gpt-4o-mini", messages: input.messages, temperature: 0.7, max_completion_tokens: 256 }
  const stages = []
  stages.push(await measure("auth: API key -> avatar", () => Effect.flatMap(Auth.Auth, (a) => a.require({ apiKey: key }))))
  stages.push(await measure("quota: atomic admit", () => Effect.flatMap(Quota.Quota, (q) => Effect.promise(() => q.admit(avatar)))))
  stages.push(await measure("usage: record (event + daily totals)", () =>
    Effect.flatMap(UsageService.Usage, (u) =>
      u.record({ avatarId: avatar.id, provider: "openai", model: "gpt-4o-mini", capability: "chat", promptTokens: 205, completionTokens: 64, costUSD: 0.0001, latencyMs: 1, estimated: false, ok: true }))))
  stages.push(await measure("upstream: POST JSON to the mock", () => Http.postJson("openai", upstream, { authorization: "Bearer sk-bench" }, wire)))
  stages.push(await measure("completion: route + upstream + record", () => Effect.flatMap(Completions.Completions, (c) => c.complete(avatar, input))))
  // The fast lane's storage steps (Metering: promises, direct statements) and its upstream call.
  const event = { avatarId: avatar.id, provider: "openai", model: "gpt-4o-mini", capability: "chat", promptTokens: 205, completionTokens: 64, costUSD: 0.0001, latencyMs: 1, estimated: false, ok: true }
  stages.push(await measure("fast lane: API key -> avatar", () => Effect.flatMap(Metering.Metering, (m) => Effect.promise(() => m.avatarOfKey(sha256(key))))))
  stages.push(await measure("fast lane: atomic admit", () => Effect.flatMap(Metering.Metering, (m) => Effect.promise(() => m.admit(avatar.id, utcDay(Date.now()), 100_000_000, 1)))))
  stages.push(await measure("fast lane: usage record", () => Effect.flatMap(Metering.Metering, (m) => Effect.promise(() => m.record({ ...event, day: utcDay(Date.now()), at: Date.now() })))))
  stages.push(await measure("fast lane: upstream POST JSON", () => Effect.promise(() => Http.postJsonNow("openai", upstream, { authorization: "Bearer sk-bench" }, wire, new Cancel()))))
  // The mock's streamed answer, read once; the stage is the transform alone (the stream's I/O is the upstream stage's kind of work).
  const streamBody = Schema.decodeUnknownSync(ChatCompletionBody)({ ...wire, stream: true, stream_options: { include_usage: true } })
  const streamed = await fetch(upstream, {
    method: "POST",
    headers: { "content-type": "application/json", authorization: "Bearer sk-bench" },
    body: JSON.stringify(streamBody)
  })
  const answer = new Uint8Array(await streamed.arrayBuffer())
  if (streamTransform(answer, streamBody) === 0) throw new Error("the mock's stream made no chunks")
  stages.push(await measure("fast lane: stream transform (SSE parse, decode, OpenAI chunks)", () => Effect.sync(() => streamTransform(answer, streamBody))))
  const tracing = await runtime.runPromise(FiberRef.get(FiberRef.currentTracerEnabled))
  console.log("STAGESJSON " + JSON.stringify({ n: N, c: C, database: (process.env.DATABASE_URL ?? "").split(":")[0], tracing, stages }))
  await runtime.dispose()
}

main().catch((e) => {
  console.error(e)
  process.exit(1)
})
