/**
 * Text embeddings computed in the gateway's own process, for the things the gateway itself
 * compares: agent skills against tasks, holon items, memories stored with the `local` embedder.
 *
 * `AIGW_LOCAL_EMBEDDER` chooses the implementation: `use-lite` (default) is a sentence-embedding
 * model (Universal Sentence Encoder lite, Ml/SentenceModel.ts: loaded in a worker thread on first
 * use); `hash` hashes words (no model: similarity of shared words only, `semantic: false`). When
 * the model cannot be used (not installed, not in the bundle, crashed) the embedder says so in
 * one log line and is lexical from then on in this process; `name` and `semantic` always tell
 * which one answered.
 */
import { Context, Effect, Either, Layer } from "effect"
import { GatewayConfig } from "../Config.ts"
import { inTurns } from "../Turns.ts"
import * as SentenceModel from "./SentenceModel.ts"

/** The vectors of one call and the embedder that produced them. */
export interface Embedded {
  readonly name: string
  readonly semantic: boolean
  readonly vectors: ReadonlyArray<ReadonlyArray<number>>
}

export interface TextEmbedderService {
  /**
   * Names the embedder, e.g. `local:hash-256` or `local:use-lite-512`; vectors of different names
   * never compare. Read it after `embed` returns: a model that fails to load turns lexical.
   */
  readonly name: string
  /** True for a model that embeds meaning; false for the lexical fallback (same reading rule as `name`). */
  readonly semantic: boolean
  /** One L2-normalised vector per text, in order. */
  readonly embed: (texts: ReadonlyArray<string>) => Effect.Effect<ReadonlyArray<ReadonlyArray<number>>>
  /** The same, with the name of the embedder that produced these very vectors (for vectors that are stored). */
  readonly embedNamed: (texts: ReadonlyArray<string>) => Effect.Effect<Embedded>
}

export class TextEmbedder extends Context.Tag("aigw/TextEmbedder")<TextEmbedder, TextEmbedderService>() {}

const DIMENSIONS = 256

const fnv1a = (s: string) => {
  let h = 0x811c9dc5
  for (let i = 0; i < s.length; i++) {
    h ^= s.charCodeAt(i)
    h = Math.imul(h, 0x01000193)
  }
  return h >>> 0
}

/** Feature-hashed word unigrams and bigrams into 256 signed dimensions, L2-normalised. */
export const hashEmbedding = (text: string): Array<number> => {
  const words = text.toLowerCase().normalize("NFKD").match(/[\p{L}\p{N}]+/gu) ?? []
  const features = [...words, ...words.slice(1).map((w, i) => `${words[i]} ${w}`)]
  const v = new Array<number>(DIMENSIONS).fill(0)
  for (const f of features) {
    const h = fnv1a(f)
    v[h % DIMENSIONS]! += (h & 0x80000000) === 0 ? 1 : -1
  }
  const norm = Math.sqrt(v.reduce((n, x) => n + x * x, 0))
  return norm === 0 ? v : v.map((x) => Math.round((x / norm) * 1e6) / 1e6)
}

export const LEXICAL_NAME = "local:hash-256"

/** Characters hashed per turn of the event loop: 2,048 texts of a few KB would otherwise hold it for seconds. */
const HASHED_PER_TURN = 100_000

const lexicalEmbedded = (texts: ReadonlyArray<string>): Effect.Effect<Embedded> =>
  Effect.map(inTurns(texts, (t) => t.length, HASHED_PER_TURN, hashEmbedding), (vectors) => ({ name: LEXICAL_NAME, semantic: false, vectors }))

export const lexical: TextEmbedderService = {
  name: LEXICAL_NAME,
  semantic: false,
  embed: (texts) => Effect.map(lexicalEmbedded(texts), (e) => e.vectors),
  embedNamed: lexicalEmbedded
}

export const layerLexical = Layer.succeed(TextEmbedder, lexical)

/** The model, with the lexical embedder for every call it cannot answer. */
export const fromModel = (model: SentenceModel.SentenceModel): TextEmbedderService => {
  let failed = false
  const embedNamed = (texts: ReadonlyArray<string>) =>
    Effect.flatMap(
      model.embed(texts),
      Either.match({
        onRight: (vectors) => Effect.succeed<Embedded>({ name: SentenceModel.MODEL_NAME, semantic: true, vectors }),
        onLeft: (reason) =>
          Effect.zipRight(
            failed || model.state() !== "failed"
              ? Effect.void
              : Effect.zipRight(
                Effect.sync(() => (failed = true)),
                Effect.logWarning(`AIGW_LOCAL_EMBEDDER=use-lite: ${reason}; local embeddings are lexical (${LEXICAL_NAME}) from now on in this process`)
              ),
            lexicalEmbedded(texts)
          )
      })
    )
  return {
    get name() {
      return this.semantic ? SentenceModel.MODEL_NAME : LEXICAL_NAME
    },
    get semantic() {
      return model.state() !== "failed" && model.state() !== "closed"
    },
    embed: (texts) => Effect.map(embedNamed(texts), (e) => e.vectors),
    embedNamed
  }
}

/** The model embedder (its worker ends with the scope); options point elsewhere in tests. */
export const layerModel = (options: SentenceModel.SentenceModelOptions = {}) =>
  Layer.scoped(TextEmbedder, Effect.map(SentenceModel.make(options), fromModel))

/** What `AIGW_LOCAL_EMBEDDER` (GatewayConfig.localEmbedder) asks for. */
export const layer = Layer.unwrapEffect(
  Effect.map(GatewayConfig, (c) => (c.localEmbedder === "hash" ? layerLexical : layerModel()))
)
