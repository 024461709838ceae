/**
 * Small JSON documents of several kinds (braid graphs, registered agents, agent skills, holons,
 * holon memories, orchestrator endpoints): id, optional owner and lookup key, JSON data and a
 * version for compare-and-set updates, so concurrent writers never lose an update.
 */
import { Context, Effect, Layer, Option } from "effect"

export interface DocumentRecord<A = unknown> {
  readonly kind: string
  readonly id: string
  /** Owning avatar; null for shared documents. */
  readonly owner: string | null
  /** Lookup key within the kind (e.g. a task type or a parent id). */
  readonly key: string | null
  readonly data: A
  readonly version: number
  readonly createdAt: number
  readonly updatedAt: number
}

export interface DocumentQuery {
  readonly owner?: string | null | undefined
  readonly key?: string | undefined
  readonly limit?: number | undefined
  /** Only documents after this one in `list`'s order (older, or as old with a smaller id): the next page. */
  readonly after?: Pick<DocumentRecord, "createdAt" | "id"> | undefined
}

export interface DocumentStoreService {
  readonly insert: (doc: DocumentRecord) => Effect.Effect<void>
  /** Inserts unless a document of that kind and id exists; true when inserted. */
  readonly insertIfAbsent: (doc: DocumentRecord) => Effect.Effect<boolean>
  readonly get: (kind: string, id: string) => Effect.Effect<Option.Option<DocumentRecord>>
  /** Newest first (then by id, descending). `owner: null` selects shared documents; undefined does not filter. */
  readonly list: (kind: string, query?: DocumentQuery) => Effect.Effect<ReadonlyArray<DocumentRecord>>
  /** How many documents `list` would find without a limit. */
  readonly count: (kind: string, query?: Pick<DocumentQuery, "owner" | "key">) => Effect.Effect<number>
  /** Replaces the data if the stored version is `expectedVersion`; false when another write won. */
  readonly update: (kind: string, id: string, expectedVersion: number, data: unknown, now: number) => Effect.Effect<boolean>
}

export class DocumentStore extends Context.Tag("aigw/DocumentStore")<DocumentStore, DocumentStoreService>() {}

const matches = (d: DocumentRecord, kind: string, q: Pick<DocumentQuery, "owner" | "key">) =>
  d.kind === kind && (q.owner === undefined || d.owner === q.owner) && (q.key === undefined || d.key === q.key)

/** `list`'s order, as the SQL stores sort: newest first, then by id (code units), descending. */
const newestFirst = (a: Pick<DocumentRecord, "createdAt" | "id">, b: Pick<DocumentRecord, "createdAt" | "id">) =>
  b.createdAt - a.createdAt || (a.id < b.id ? 1 : a.id > b.id ? -1 : 0)

export const makeMemory = Effect.sync((): DocumentStoreService => {
  const docs = new Map<string, DocumentRecord>()
  const keyOf = (kind: string, id: string) => `${kind}\u0000${id}`
  return {
    // An id taken is a defect, as the SQL stores' unique key makes it (a caller that may meet one takes `insertIfAbsent`).
    insert: (doc) =>
      Effect.suspend(() =>
        docs.has(keyOf(doc.kind, doc.id))
          ? Effect.die(new Error(`document ${doc.kind}/${doc.id} exists`))
          : Effect.sync(() => void docs.set(keyOf(doc.kind, doc.id), doc))
      ),
    insertIfAbsent: (doc) =>
      Effect.sync(() => {
        if (docs.has(keyOf(doc.kind, doc.id))) return false
        docs.set(keyOf(doc.kind, doc.id), doc)
        return true
      }),
    get: (kind, id) => Effect.sync(() => Option.fromNullable(docs.get(keyOf(kind, id)))),
    list: (kind, q = {}) =>
      Effect.sync(() => {
        const { after } = q
        return [...docs.values()]
          .filter((d) => matches(d, kind, q) && (after === undefined || newestFirst(after, d) < 0))
          .sort(newestFirst)
          .slice(0, q.limit ?? 1000)
      }),
    count: (kind, q = {}) => Effect.sync(() => [...docs.values()].filter((d) => matches(d, kind, q)).length),
    update: (kind, id, expected, data, now) =>
      Effect.sync(() => {
        const d = docs.get(keyOf(kind, id))
        if (!d || d.version !== expected) return false
        docs.set(keyOf(kind, id), { ...d, data, version: expected + 1, updatedAt: now })
        return true
      })
  }
})

export const layerMemory = Layer.effect(DocumentStore, makeMemory)

/** Read-modify-write with compare-and-set, retried on conflicting writes. */
export const modify = <A>(
  store: DocumentStoreService,
  kind: string,
  id: string,
  f: (data: A) => A
): Effect.Effect<Option.Option<A>> =>
  Effect.gen(function*() {
    for (let attempt = 0; attempt < 20; attempt++) {
      const doc = yield* store.get(kind, id)
      if (Option.isNone(doc)) return Option.none()
      const next = f(doc.value.data as A)
      if (yield* store.update(kind, id, doc.value.version, next, Date.now())) return Option.some(next)
    }
    return yield* Effect.die(new Error(`document ${kind}/${id}: too many conflicting updates`))
  })
