/**
 * Text embeddings computed in the gateway's own process, for the things the gateway itself
 * compares: agent skills against tasks, holon items, memories stored with the `local` embedder.
 * The implementation is a layer: `layerLexical` hashes words (no model: similarity of shared
 * words only, and it says so with `semantic: false`); a sentence-embedding model layer replaces it
 * where one is installed.
 */
import { Context, Effect, Layer } from "effect"
import { localEmbedding } from "../Capabilities/Memory.ts"

export interface TextEmbedderService {
  /** Names the embedder, e.g. `local:hash-256` or a model id; vectors of different names never compare. */
  readonly name: string
  /** True for a model that embeds meaning; false for the lexical fallback. */
  readonly semantic: boolean
  /** One L2-normalised vector per text, in order. */
  readonly embed: (texts: ReadonlyArray<string>) => Effect.Effect<ReadonlyArray<ReadonlyArray<number>>>
}

export class TextEmbedder extends Context.Tag("aigw/TextEmbedder")<TextEmbedder, TextEmbedderService>() {}

export const lexical: TextEmbedderService = {
  name: "local:hash-256",
  semantic: false,
  embed: (texts) => Effect.sync(() => texts.map(localEmbedding))
}

export const layerLexical = Layer.succeed(TextEmbedder, lexical)
