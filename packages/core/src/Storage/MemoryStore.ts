/**
 * Memories for /v1/memory: text with its embedding vector, owned by an avatar and filed under
 * a user id chosen by the caller (an end user of the caller's app; the avatar id by default).
 * `embedder` names the vector space (`local:hash-256` or `<provider>/<model>`), so a query is
 * compared only with vectors of the same space.
 */
import { Context, Effect, Layer } from "effect"

export interface MemoryRecord {
  readonly id: string
  readonly avatarId: string
  readonly userId: string
  readonly content: string
  readonly embedder: string
  readonly vector: ReadonlyArray<number>
  readonly createdAt: number
}

export interface MemoryStoreService {
  readonly insert: (memory: MemoryRecord) => Effect.Effect<void>
  /** The avatar's memories under `userId`, newest first, at most `limit`. */
  readonly list: (avatarId: string, userId: string, limit: number) => Effect.Effect<ReadonlyArray<MemoryRecord>>
}

export class MemoryStore extends Context.Tag("aigw/MemoryStore")<MemoryStore, MemoryStoreService>() {}

export const makeMemory = Effect.sync((): MemoryStoreService => {
  const all: Array<MemoryRecord> = []
  return {
    insert: (m) => Effect.sync(() => void all.push(m)),
    list: (avatarId, userId, limit) =>
      Effect.sync(() =>
        all.filter((m) => m.avatarId === avatarId && m.userId === userId).sort((a, b) => b.createdAt - a.createdAt).slice(0, limit)
      )
  }
})

export const layerMemory = Layer.effect(MemoryStore, makeMemory)
