/**
 * Graph retrieval over the caller's memories: an entity graph is built from the memories
 * (entities = capitalised names and multi-word proper nouns, linked when they occur in the same
 * memory); the question's best-matching memories seed a walk of up to two hops over shared
 * entities; a routed chat model answers from the collected memories and cites them by number.
 * Matching uses the in-process embedder (Ml/TextEmbedder.ts): the stored vectors of memories
 * embedded by it, the hashed words of the others' content (no provider call per question).
 */
import { Context, Effect, Layer } from "effect"
import { MemoryStore } from "../Storage/MemoryStore.ts"
import type { AvatarRecord } from "../Storage/AvatarStore.ts"
import { Completions } from "./Completions.ts"
import { hashEmbedding, TextEmbedder } from "../Ml/TextEmbedder.ts"
import { cosine, QUERY_WINDOW } from "./Memory.ts"

const STOP = new Set(["The", "A", "An", "I", "It", "He", "She", "We", "They", "You", "My", "Our", "This", "That", "In", "On", "At", "And", "But", "If", "When", "What", "Which", "Who", "How", "Why"])

/** Proper-noun-like entities of a text: runs of capitalised words, minus sentence starters. */
export const entitiesOf = (text: string): Array<string> => {
  const found = new Set<string>()
  for (const m of text.matchAll(/\b(?:[A-Z][\p{L}\p{N}'-]*)(?:\s+[A-Z][\p{L}\p{N}'-]*)*/gu)) {
    const words = m[0].split(/\s+/).filter((w) => !STOP.has(w))
    if (words.length > 0) found.add(words.join(" "))
  }
  return [...found]
}

/**
 * Characters of each memory read for its entities and, when it has no vector of the in-process embedder,
 * its hashed words: every query reads every memory of the window again, so its cost is bounded per memory.
 */
export const READ_CHARS = 4_000
const readOf = (content: string) => (content.length <= READ_CHARS ? content : content.slice(0, READ_CHARS))

export const MAX_CONTEXT_MEMORIES = 12
/** At most this many seeds, each scoring at least `SEED_RATIO` of the best memory's score. */
export const MAX_SEEDS = 3
export const SEED_RATIO = 0.5

const makeService = Effect.gen(function*() {
  const store = yield* MemoryStore
  const completions = yield* Completions
  const embedder = yield* TextEmbedder

  const query = Effect.fn("GraphRag.query")(function*(
    avatar: AvatarRecord,
    input: { readonly query: string; readonly userId?: string | undefined; readonly provider: string }
  ) {
    const userId = input.userId ?? avatar.id
    const memories = yield* store.list(avatar.id, userId, QUERY_WINDOW)
    const entities = memories.map((m) => entitiesOf(readOf(m.content)))
    const byEntity = new Map<string, Array<number>>()
    entities.forEach((es, i) =>
      es.forEach((e) => {
        const key = e.toLowerCase()
        const holders = byEntity.get(key)
        if (holders === undefined) byEntity.set(key, [i])
        else if (holders.at(-1) !== i) holders.push(i)
      })
    )
    const q = yield* embedder.embedNamed([input.query])
    const lexicalQuery = hashEmbedding(input.query)
    const similarity = (m: (typeof memories)[number]) =>
      m.embedder === q.name ? cosine(q.vectors[0]!, m.vector) : cosine(lexicalQuery, hashEmbedding(readOf(m.content)))
    const queryEntities = new Set(entitiesOf(input.query).map((e) => e.toLowerCase()))
    const scored = memories.map((m, i) => ({
      i,
      score: similarity(m) + (entities[i]!.some((e) => queryEntities.has(e.toLowerCase())) ? 0.5 : 0)
    }))
    // A sentence model scores unrelated texts above 0 too: seeds must come close to the best match.
    const best = Math.max(0, ...scored.map((s) => s.score))
    const seeds = scored.filter((s) => s.score > 0 && s.score >= best * SEED_RATIO).sort((a, b) => b.score - a.score).slice(0, MAX_SEEDS).map((s) => s.i)
    // Walk up to two hops over shared entities from the seeds.
    const hops = new Map<number, number>(seeds.map((i) => [i, 0]))
    let frontier = seeds
    for (let hop = 1; hop <= 2 && hops.size < MAX_CONTEXT_MEMORIES; hop++) {
      const next: Array<number> = []
      for (const i of frontier) {
        for (const e of entities[i]!) {
          for (const j of byEntity.get(e.toLowerCase()) ?? []) {
            if (!hops.has(j) && hops.size < MAX_CONTEXT_MEMORIES) {
              hops.set(j, hop)
              next.push(j)
            }
          }
        }
      }
      frontier = next
    }
    // Each memory's entities also as a set: comparing every pair of entities was quadratic in a memory's entities.
    const context = [...hops.entries()].map(([i, hop], n) => ({
      n: n + 1,
      hop,
      memory: memories[i]!,
      entities: entities[i]!,
      held: new Set(entities[i]!.map((e) => e.toLowerCase()))
    }))
    const edges = context.flatMap((a) =>
      context.filter((b) => b.n > a.n).flatMap((b) => a.entities.filter((e) => b.held.has(e.toLowerCase())).map((e) => ({ from: a.memory.id, to: b.memory.id, via: e })))
    )
    if (context.length === 0) {
      return { answer: null, message: "No stored memory relates to the question; store memories with /v1/memory/store first.", sources: [], graph: { nodes: [], edges: [] }, searched: memories.length }
    }
    const result = yield* completions.complete(avatar, {
      provider: input.provider,
      model: "auto",
      messages: [
        { role: "system", content: "Answer the question using only the numbered notes. Combine facts across notes when the question needs several steps, cite the notes you used like [1][3], and say so if the notes do not contain the answer." },
        { role: "user", content: `Notes:\n${context.map((c) => `[${c.n}] ${c.memory.content}`).join("\n")}\n\nQuestion: ${input.query}` }
      ]
    })
    return {
      answer: result.content,
      sources: context.map((c) => ({ n: c.n, memoryId: c.memory.id, content: c.memory.content, hop: c.hop, entities: c.entities })),
      graph: { nodes: context.map((c) => c.memory.id), edges },
      searched: memories.length,
      provider: result.provider,
      model: result.model,
      usage: result.usage,
      costUSD: result.costUSD
    }
  })

  return { query }
})

export class GraphRag extends Context.Tag("aigw/GraphRag")<GraphRag, Effect.Effect.Success<typeof makeService>>() {}

export const layer = Layer.effect(GraphRag, makeService)
