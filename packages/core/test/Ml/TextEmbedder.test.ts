/**
 * The in-process text embedder: the sentence model (Universal Sentence Encoder lite in a worker
 * thread) embeds meaning, loads on first use, ends with its scope; without the model the embedder
 * is lexical, says so in its name and in one log line; AIGW_LOCAL_EMBEDDER chooses.
 */
import { ConfigProvider, Effect, Exit, Layer, Logger } from "effect"
import * as fs from "node:fs"
import * as path from "node:path"
import { describe, expect, it } from "vitest"
import * as GatewayConfig from "../../src/Config.ts"
import * as SentenceModel from "../../src/Ml/SentenceModel.ts"
import * as TextEmbedder from "../../src/Ml/TextEmbedder.ts"
import { describeStartupFailure } from "../../src/StartupError.ts"
import { scratchDir } from "../support/scratch.ts"

const dot = (a: ReadonlyArray<number>, b: ReadonlyArray<number>) => a.reduce((s, x, i) => s + x * b[i]!, 0)

/** Runs `f` with the TextEmbedder of `layer`, collecting the warnings logged meanwhile. */
const withEmbedder = <A>(layer: Layer.Layer<TextEmbedder.TextEmbedder>, f: (e: TextEmbedder.TextEmbedderService) => Effect.Effect<A>) => {
  const warnings: Array<string> = []
  const logger = Logger.make(({ logLevel, message }) => {
    if (logLevel._tag === "Warning") warnings.push(String(message))
  })
  return Effect.runPromise(
    Effect.flatMap(TextEmbedder.TextEmbedder, f).pipe(
      Effect.provide(layer),
      Effect.provide(Logger.replace(Logger.defaultLogger, logger)),
      Effect.map((result) => ({ result, warnings }))
    )
  )
}

describe("the sentence model", () => {
  it("loads on the first embed, in a worker, ranks a paraphrase without shared words above an unrelated text, and ends with its scope", async () => {
    const texts = ["compose a database query", "write SQL", "bake a cake"]
    let model: SentenceModel.SentenceModel | undefined
    const result = await Effect.runPromise(Effect.scoped(Effect.gen(function*() {
      model = yield* SentenceModel.make()
      const embedder = TextEmbedder.fromModel(model)
      const before = model.state()
      const embedded = yield* embedder.embedNamed(texts)
      // Only the first MAX_CHARS characters count.
      const long = "a very long note about gardening. ".repeat(200)
      const [cut, whole] = yield* embedder.embed([long.slice(0, SentenceModel.MAX_CHARS), long])
      return { before, after: model.state(), embedded, name: embedder.name, semantic: embedder.semantic, cut, whole }
    })))
    expect(result.before).toBe("idle")
    expect(result.after).toBe("ready")
    expect(model!.state()).toBe("closed")
    expect(result).toMatchObject({ name: "local:use-lite-512", semantic: true, embedded: { name: "local:use-lite-512", semantic: true } })
    const [query, sql, cake] = result.embedded.vectors
    expect(query).toHaveLength(512)
    expect(dot(query!, query!)).toBeCloseTo(1, 4)
    expect(dot(query!, sql!)).toBeGreaterThan(dot(sql!, cake!) + 0.3)
    expect(dot(query!, sql!)).toBeGreaterThan(dot(query!, cake!) + 0.3)
    // Hashed words see nothing in common between the paraphrases.
    expect(dot(TextEmbedder.hashEmbedding(texts[0]!), TextEmbedder.hashEmbedding(texts[1]!))).toBe(0)
    expect(result.whole).toEqual(result.cut)
  }, 60_000)

  it("falls back to the lexical embedder, for good and with one warning, when the model packages cannot be loaded", async () => {
    const { result, warnings } = await withEmbedder(TextEmbedder.layerModel({ moduleDir: scratchDir("aigw-no-model-") }), (e) =>
      Effect.gen(function*() {
        const first = yield* e.embedNamed(["write SQL"])
        const second = yield* e.embed(["bake a cake"])
        return { first, second, name: e.name, semantic: e.semantic }
      }))
    expect(result).toMatchObject({ name: "local:hash-256", semantic: false, first: { name: "local:hash-256", semantic: false } })
    expect(result.first.vectors).toEqual([TextEmbedder.hashEmbedding("write SQL")])
    expect(result.second).toEqual([TextEmbedder.hashEmbedding("bake a cake")])
    expect(warnings).toHaveLength(1)
    expect(warnings[0]).toMatch(/AIGW_LOCAL_EMBEDDER=use-lite: the model did not load: Cannot find module '@energetic-ai\/embeddings'.*lexical \(local:hash-256\)/)
  }, 30_000)

  it("falls back when the worker program is absent (a bundle without the model)", async () => {
    const missing = path.join(scratchDir("aigw-no-worker-"), "SentenceModel.worker.cjs")
    const { result, warnings } = await withEmbedder(TextEmbedder.layerModel({ workerFile: missing }), (e) => e.embedNamed(["x"]))
    expect(result.name).toBe("local:hash-256")
    expect(warnings).toEqual([expect.stringContaining(`the model worker ${missing} is not installed`)])
  })

  it("falls back when the worker dies while embedding", async () => {
    const crashing = path.join(scratchDir("aigw-crash-"), "worker.cjs")
    fs.writeFileSync(crashing, `const { parentPort } = require("node:worker_threads"); parentPort.postMessage({ type: "ready" }); parentPort.on("message", () => process.exit(3))`)
    const { result, warnings } = await withEmbedder(TextEmbedder.layerModel({ workerFile: crashing }), (e) =>
      Effect.map(e.embedNamed(["x"]), (embedded) => ({ embedded, name: e.name })))
    expect(result).toMatchObject({ name: "local:hash-256", embedded: { name: "local:hash-256", vectors: [TextEmbedder.hashEmbedding("x")] } })
    expect(warnings).toEqual([expect.stringContaining("the model worker exited (code 3)")])
  })
})

describe("AIGW_LOCAL_EMBEDDER", () => {
  const config = (env: Record<string, string>) =>
    Effect.provide(GatewayConfig.fromEnv, Layer.setConfigProvider(ConfigProvider.fromMap(new Map(Object.entries(env)))))

  it("defaults to use-lite, `hash` is the lexical embedder without a model, anything else is refused at start naming the variable", async () => {
    expect((await Effect.runPromise(config({}))).localEmbedder).toBe("use-lite")
    const { result } = await withEmbedder(TextEmbedder.layer.pipe(Layer.provide(GatewayConfig.layer({ localEmbedder: "hash" }))), (e) => Effect.succeed(e))
    expect(result).toBe(TextEmbedder.lexical)
    const refused = await Effect.runPromiseExit(config({ AIGW_LOCAL_EMBEDDER: "minilm" }))
    expect(Exit.isFailure(refused) && describeStartupFailure(refused.cause)).toMatch(/AIGW_LOCAL_EMBEDDER/)
  })
})
