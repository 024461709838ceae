/**
 * Memory store and semantic query. Vectors come from a configured embedding provider when one
 * is available (or named), else from the in-process `local` embedder: feature-hashed word
 * unigrams and bigrams into 256 signed dimensions, L2-normalised (lexical similarity, no
 * model). Queries compare only vectors of the same embedder.
 */
import { Context, Effect, Layer } from "effect"
import type { Plan } from "../Plans.ts"
import { routed, Routing } from "../Routing.ts"
import type { AvatarRecord } from "../Storage/AvatarStore.ts"
import { type MemoryRecord, MemoryStore } from "../Storage/MemoryStore.ts"
import { Embeddings } from "./Embeddings.ts"

export const LOCAL_EMBEDDER = "local:hash-256"
const DIMENSIONS = 256
/** Memories compared per query (newest first). */
export const QUERY_WINDOW = 10_000

const fnv1a = (s: string) => {
  let h = 0x811c9dc5
  for (let i = 0; i < s.length; i++) {
    h ^= s.charCodeAt(i)
    h = Math.imul(h, 0x01000193)
  }
  return h >>> 0
}

export const localEmbedding = (text: string): Array<number> => {
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

export const cosine = (a: ReadonlyArray<number>, b: ReadonlyArray<number>) => {
  let dot = 0
  let na = 0
  let nb = 0
  for (let i = 0; i < Math.min(a.length, b.length); i++) {
    dot += a[i]! * b[i]!
    na += a[i]! * a[i]!
    nb += b[i]! * b[i]!
  }
  return na === 0 || nb === 0 ? 0 : dot / Math.sqrt(na * nb)
}

const makeService = Effect.gen(function*() {
  const store = yield* MemoryStore
  const embeddings = yield* Embeddings
  const routing = yield* Routing

  /** `local`, a named provider, or `auto`: the best configured embedding model, else local. */
  const chooseEmbedder = (avatar: AvatarRecord, provider: string) =>
    provider === "local"
      ? Effect.succeed(LOCAL_EMBEDDER)
      : routed(routing.targets({ kind: "embeddings", provider, model: "auto", plan: avatar.plan as Plan, needsTools: false, contextTokens: 0 })).pipe(
        Effect.map((ts) => `${ts[0]!.provider.id}/${ts[0]!.model.id}`),
        Effect.catchAll((e) => (provider === "auto" ? Effect.succeed(LOCAL_EMBEDDER) : Effect.fail(e)))
      )

  const embedWith = (avatar: AvatarRecord, embedder: string, text: string) => {
    if (embedder === LOCAL_EMBEDDER) return Effect.succeed(localEmbedding(text))
    const slash = embedder.indexOf("/")
    return Effect.map(
      embeddings.embed(avatar, { texts: [text], provider: embedder.slice(0, slash), model: embedder.slice(slash + 1) }),
      (r) => r.embeddings[0]!
    )
  }

  /** The refusal of a store that depends only on the request and configuration (answered before admission). */
  const checkStore = (avatar: AvatarRecord, provider: string) => Effect.asVoid(chooseEmbedder(avatar, provider))

  const store_ = Effect.fn("Memory.store")(function*(avatar: AvatarRecord, input: { readonly content: string; readonly userId?: string | undefined; readonly provider: string }) {
    const embedder = yield* chooseEmbedder(avatar, input.provider)
    const vector = yield* embedWith(avatar, embedder, input.content)
    const record: MemoryRecord = {
      id: crypto.randomUUID(),
      avatarId: avatar.id,
      userId: input.userId ?? avatar.id,
      content: input.content,
      embedder,
      vector,
      createdAt: Date.now()
    }
    yield* store.insert(record)
    return { memoryId: record.id, userId: record.userId, embedder, dimensions: vector.length, createdAtUtc: new Date(record.createdAt).toISOString() }
  })

  const query = Effect.fn("Memory.query")(function*(
    avatar: AvatarRecord,
    input: { readonly query: string; readonly userId?: string | undefined; readonly provider: string; readonly topK: number }
  ) {
    const userId = input.userId ?? avatar.id
    const memories = yield* store.list(avatar.id, userId, QUERY_WINDOW)
    const spaces = [...new Set(memories.map((m) => m.embedder))]
    const queryVectors = new Map<string, ReadonlyArray<number>>()
    for (const space of spaces) queryVectors.set(space, yield* embedWith(avatar, space, input.query))
    const results = memories
      .map((m) => ({ memoryId: m.id, content: m.content, score: Math.round(cosine(queryVectors.get(m.embedder)!, m.vector) * 1e6) / 1e6, embedder: m.embedder, createdAtUtc: new Date(m.createdAt).toISOString() }))
      .sort((a, b) => b.score - a.score)
      .slice(0, input.topK)
    return { userId, results, searched: memories.length }
  })

  return { checkStore, store: store_, query }
})

export class Memory extends Context.Tag("aigw/Memory")<Memory, Effect.Effect.Success<typeof makeService>>() {}

export const layer = Layer.effect(Memory, makeService)
