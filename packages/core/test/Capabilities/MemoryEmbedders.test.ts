/**
 * Memories and the in-process embedder: each memory keeps its embedder and is compared only in
 * that space; memories stored with hashed words keep answering next to the sentence model; when the
 * model is unavailable, memories it embedded are compared by their content's hashed words and say so.
 */
import { Effect, Layer, ManagedRuntime } from "effect"
import { afterAll, describe, expect, it } from "vitest"
import { Memory } from "../../src/Capabilities/Memory.ts"
import * as GatewayConfig from "../../src/Config.ts"
import * as Layers from "../../src/Layers.ts"
import * as Mailer from "../../src/Mail/Mailer.ts"
import { hashEmbedding } from "../../src/Ml/TextEmbedder.ts"
import { MemoryStore } from "../../src/Storage/MemoryStore.ts"
import { testAvatar } from "../support/inProcess.ts"

const avatar = testAvatar("mem-embedders")
const runtimeWith = (localEmbedder: "use-lite" | "hash") =>
  ManagedRuntime.make(Layers.layerMemory.pipe(Layer.provideMerge(Mailer.layerMemory), Layer.provideMerge(GatewayConfig.layer({ localEmbedder }))))
const dot = (a: ReadonlyArray<number>, b: ReadonlyArray<number>) => a.reduce((s, x, i) => s + x * b[i]!, 0)
const record = (embedder: string, content: string, vector: ReadonlyArray<number>, createdAt: number) =>
  Effect.flatMap(MemoryStore, (s) => s.insert({ id: `${embedder}-${createdAt}`, avatarId: avatar.id, userId: "u1", content, embedder, vector, createdAt }))
const query = (q: string) => Effect.flatMap(Memory, (m) => m.query(avatar, { query: q, userId: "u1", provider: "local", topK: 10 }))

describe("memories across local embedders", () => {
  const runtimes: Array<ManagedRuntime.ManagedRuntime<any, any>> = []
  afterAll(() => Promise.all(runtimes.map((r) => r.dispose())))

  it("with AIGW_LOCAL_EMBEDDER=hash, a memory stored by the model is compared by its content's hashed words", async () => {
    const runtime = runtimeWith("hash")
    runtimes.push(runtime)
    const result = await runtime.runPromise(Effect.gen(function*() {
      const stored = yield* Effect.flatMap(Memory, (m) => m.store(avatar, { content: "The tram 28 is crowded in summer", userId: "u1", provider: "local" }))
      // Stored while the model worked: its 512 numbers are of no use to hashed words.
      yield* record("local:use-lite-512", "I have a dentist appointment on Friday", new Array(512).fill(1 / Math.sqrt(512)), 1)
      return { stored, found: yield* query("dentist appointment") }
    }))
    expect(result.stored).toMatchObject({ embedder: "local:hash-256", dimensions: 256 })
    expect(result.found.searched).toBe(2)
    expect(result.found.results[0]).toMatchObject({
      content: "I have a dentist appointment on Friday",
      embedder: "local:hash-256",
      score: Math.round(dot(hashEmbedding("dentist appointment"), hashEmbedding("I have a dentist appointment on Friday")) * 1e6) / 1e6
    })
  })

  it("with the model, memories stored with hashed words keep answering in their own space", async () => {
    const runtime = runtimeWith("use-lite")
    runtimes.push(runtime)
    const found = await runtime.runPromise(Effect.gen(function*() {
      yield* record("local:hash-256", "I live in Lisbon near the river", hashEmbedding("I live in Lisbon near the river"), 1)
      const stored = yield* Effect.flatMap(Memory, (m) => m.store(avatar, { content: "I am allergic to peanuts", userId: "u1", provider: "local" }))
      expect(stored).toMatchObject({ embedder: "local:use-lite-512", dimensions: 512 })
      return yield* query("which nuts make me ill")
    }))
    expect(found.results.map((r) => [r.content, r.embedder])).toEqual([
      ["I am allergic to peanuts", "local:use-lite-512"],
      ["I live in Lisbon near the river", "local:hash-256"]
    ])
    expect(found.results[1]!.score).toBe(Math.round(dot(hashEmbedding("which nuts make me ill"), hashEmbedding("I live in Lisbon near the river")) * 1e6) / 1e6)
  }, 60_000)
})
