import * as SqlClient from "@effect/sql/SqlClient"
import { Effect, Layer } from "effect"
import { MemoryStore } from "../MemoryStore.ts"
import { num } from "./util.ts"

export const make = Effect.gen(function*() {
  const sql = yield* SqlClient.SqlClient
  return MemoryStore.of({
    insert: (m) =>
      sql`INSERT INTO memories ${
        sql.insert({
          id: m.id,
          avatar_id: m.avatarId,
          user_id: m.userId,
          content: m.content,
          embedder: m.embedder,
          vector: JSON.stringify(m.vector),
          created_at: m.createdAt
        })
      }`.pipe(Effect.asVoid, Effect.orDie),
    list: (avatarId, userId, limit) =>
      sql`SELECT * FROM memories WHERE avatar_id = ${avatarId} AND user_id = ${userId} ORDER BY created_at DESC, id LIMIT ${limit}`.pipe(
        Effect.map((rows) =>
          rows.map((r: any) => ({
            id: r.id,
            avatarId: r.avatar_id,
            userId: r.user_id,
            content: r.content,
            embedder: r.embedder,
            vector: JSON.parse(r.vector) as Array<number>,
            createdAt: num(r.created_at)
          }))
        ),
        Effect.orDie
      )
  })
})

export const layer = Layer.effect(MemoryStore, make)
