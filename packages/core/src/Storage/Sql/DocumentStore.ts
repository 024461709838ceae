import * as SqlClient from "@effect/sql/SqlClient"
import { Effect, Layer, Option } from "effect"
import { type DocumentQuery, type DocumentRecord, DocumentStore } from "../DocumentStore.ts"
import { num } from "./util.ts"

const fromRow = (r: any): DocumentRecord => ({
  kind: r.kind,
  id: r.id,
  owner: r.owner ?? null,
  key: r.doc_key ?? null,
  data: JSON.parse(r.data),
  version: num(r.version),
  createdAt: num(r.created_at),
  updatedAt: num(r.updated_at)
})

const toRow = (d: DocumentRecord) => ({
  kind: d.kind,
  id: d.id,
  owner: d.owner,
  doc_key: d.key,
  data: JSON.stringify(d.data),
  version: d.version,
  created_at: d.createdAt,
  updated_at: d.updatedAt
})

export const make = Effect.gen(function*() {
  const sql = yield* SqlClient.SqlClient
  const filters = (q: Pick<DocumentQuery, "owner" | "key">) => {
    const owner = q.owner === undefined ? sql`` : q.owner === null ? sql`AND owner IS NULL` : sql`AND owner = ${q.owner}`
    const key = q.key === undefined ? sql`` : sql`AND doc_key = ${q.key}`
    return sql`${owner} ${key}`
  }
  return DocumentStore.of({
    insert: (d) => sql`INSERT INTO documents ${sql.insert(toRow(d))}`.pipe(Effect.asVoid, Effect.orDie),
    insertIfAbsent: (d) =>
      sql`INSERT INTO documents ${sql.insert(toRow(d))} ON CONFLICT (kind, id) DO NOTHING RETURNING id`.pipe(
        Effect.map((rows) => rows.length > 0),
        Effect.orDie
      ),
    get: (kind, id) =>
      sql`SELECT * FROM documents WHERE kind = ${kind} AND id = ${id}`.pipe(
        Effect.map((rows) => Option.map(Option.fromNullable(rows[0]), fromRow)),
        Effect.orDie
      ),
    list: (kind, q = {}) => {
      const after = q.after === undefined ? sql`` : sql`AND (created_at < ${q.after.createdAt} OR (created_at = ${q.after.createdAt} AND id < ${q.after.id}))`
      return sql`SELECT * FROM documents WHERE kind = ${kind} ${filters(q)} ${after} ORDER BY created_at DESC, id DESC LIMIT ${q.limit ?? 1000}`.pipe(
        Effect.map((rows) => rows.map(fromRow)),
        Effect.orDie
      )
    },
    count: (kind, q = {}) =>
      sql<{ readonly n: number | string }>`SELECT COUNT(*) AS n FROM documents WHERE kind = ${kind} ${filters(q)}`.pipe(
        Effect.map((rows) => num(rows[0]?.n ?? 0)),
        Effect.orDie
      ),
    update: (kind, id, expected, data, now) =>
      sql`UPDATE documents SET data = ${JSON.stringify(data)}, version = ${expected + 1}, updated_at = ${now}
          WHERE kind = ${kind} AND id = ${id} AND version = ${expected} RETURNING id`.pipe(
        Effect.map((rows) => rows.length > 0),
        Effect.orDie
      )
  })
})

export const layer = Layer.effect(DocumentStore, make)
