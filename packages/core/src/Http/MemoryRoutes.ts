/** POST /v1/memory/store and /v1/memory/query. */
import { Effect, Schema } from "effect"
import { Memory } from "../Capabilities/Memory.ts"
import { onLane } from "./Lane.ts"
import { authed } from "./Route.ts"
import { Provider } from "../RequestFields.ts"
import { MemoryQueryResult, MemoryStored } from "./ResponseSchemas.ts"

const UserId = Schema.optional(Schema.String.pipe(Schema.minLength(1), Schema.maxLength(200)))
const AvatarId = Schema.optional(Schema.UUID.annotations({ message: () => "avatarId must be a UUID" }))

const StoreBody = Schema.Struct({
  content: Schema.String.pipe(Schema.minLength(1, { message: () => "content must not be empty" }), Schema.maxLength(100_000)),
  userId: UserId,
  provider: Provider,
  avatarId: AvatarId
})

const QueryBody = Schema.Struct({
  query: Schema.String.pipe(Schema.minLength(1, { message: () => "query must not be empty" }), Schema.maxLength(10_000)),
  userId: UserId,
  provider: Provider,
  topK: Schema.optionalWith(Schema.Int.pipe(Schema.between(1, 100, { message: () => "topK must be an integer from 1 to 100" })), { default: () => 5 }),
  avatarId: AvatarId
})

export const memoryRoutes = [
  authed({
    method: "POST",
    path: "/v1/memory/store",
    success: MemoryStored,
    tag: "Memory",
    metered: true,
    summary: "Store a memory (embedded for semantic search) under a user id of the calling avatar",
    description: "userId defaults to the avatar's id. provider: auto (a configured embedding model, else local), local, an embedding provider id, or an external memory provider (mem0, zep, letta, supermemory) that keeps the memory under an id derived from the avatar and userId. Admins may act for another avatar with avatarId.",
    avatarIdOf: (b) => b.avatarId,
    ...onLane(StoreBody, {
      check: ({ avatar, body }) => Effect.flatMap(Memory, (m) => m.checkProvider(avatar, body.provider)),
      handle: ({ avatar, body }) => Effect.flatMap(Memory, (m) => m.store(avatar, body))
    })
  }),
  authed({
    method: "POST",
    path: "/v1/memory/query",
    success: MemoryQueryResult,
    tag: "Memory",
    metered: true,
    summary: "Semantic search over a user's memories (cosine similarity); the best topK (default 5)",
    description: "provider: auto, local or an embedding provider id search the gateway's own store (each stored embedding space; a named provider must be one a store could use: unknown 404, not allowed for the plan 403, not configured or not embedding 422); an external memory provider (mem0, zep, letta, supermemory) searches the memories stored there for this avatar and userId.",
    avatarIdOf: (b) => b.avatarId,
    ...onLane(QueryBody, {
      check: ({ avatar, body }) => Effect.flatMap(Memory, (m) => m.checkProvider(avatar, body.provider)),
      handle: ({ avatar, body }) => Effect.flatMap(Memory, (m) => m.query(avatar, body))
    })
  })
]
