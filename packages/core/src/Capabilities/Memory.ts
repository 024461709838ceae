/**
 * Memory store and semantic query. Vectors come from a configured embedding provider when one
 * is available (or named), else from the in-process `local` embedder (Ml/TextEmbedder.ts: a
 * sentence model, `local:use-lite-512`, or hashed words, `local:hash-256`). Each memory keeps the
 * name of its embedder and queries compare only vectors of the same embedder; when the local
 * model is unavailable, memories stored with it are compared lexically, by their content, and
 * their results say `local:hash-256`.
 *
 * A named external memory vendor (mem0, zep, letta, supermemory: Providers/Memory) keeps and
 * searches the memories itself, under a vendor-side user id derived from the avatar
 * (`vendorUserId`), so an avatar reaches only its own. `auto` stays local for the routes: it
 * never sends an avatar's memories to a third party it did not name. The MCP tools
 * `gateway_memory_external_*` always go to a vendor (`auto` there: the first configured one).
 */
import { Context, Effect, Layer, Option, Schema } from "effect"
import { Catalog, type ConfiguredProvider } from "../Catalog/Catalog.ts"
import { Unprocessable } from "../Errors.ts"
import type { Plan } from "../Plans.ts"
import { type MemoryAdapter, vendorUserId } from "../Providers/Memory/MemoryAdapter.ts"
import { servedBy } from "../Providers/Registry.ts"
import type { UpstreamError } from "../Providers/UpstreamError.ts"
import { routed, Routing } from "../Routing.ts"
import { Usage } from "../Usage.ts"
import { ProviderCalls } from "../Engine/ProviderCalls.ts"
import type { AvatarRecord } from "../Storage/AvatarStore.ts"
import { vendorCall } from "./VendorCall.ts"
import { type MemoryRecord, MemoryStore } from "../Storage/MemoryStore.ts"
import { hashEmbedding, LEXICAL_NAME, TextEmbedder } from "../Ml/TextEmbedder.ts"
import { Embeddings } from "./Embeddings.ts"

/** Memories compared per query (newest first). */
export const QUERY_WINDOW = 10_000

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

const ExternalProvider = Schema.optionalWith(
  Schema.String.pipe(Schema.minLength(1), Schema.maxLength(100)).annotations({
    description: "External memory provider: mem0, zep, letta or supermemory (see gateway_memory_external_list_providers), or auto for the first configured one",
    default: "auto"
  }),
  { default: () => "auto" }
)

/** A required text field of at most `max` characters. */
const TextField = (name: string, max: number, description: string) =>
  Schema.String.pipe(
    Schema.minLength(1, { message: () => `${name} must not be empty` }),
    Schema.maxLength(max, { message: () => `${name} is limited to ${max} characters` })
  ).annotations({ description })

/** The parameters of the MCP tool gateway_memory_external_add. */
export const ExternalAddParams = {
  provider: ExternalProvider,
  text: TextField("text", 100_000, "The memory to keep"),
  metadata: Schema.optionalWith(
    Schema.Record({ key: Schema.String.pipe(Schema.maxLength(100)), value: Schema.Union(Schema.String.pipe(Schema.maxLength(1000)), Schema.Number, Schema.Boolean) }).annotations({
      description: "Key/value pairs stored with the memory (strings, numbers, booleans; Zep keeps at most 10 keys, Letta takes none)"
    }),
    { exact: true }
  )
}

/** The parameters of the MCP tool gateway_memory_external_search. */
export const ExternalSearchParams = {
  provider: ExternalProvider,
  query: TextField("query", 10_000, "What to look for, in natural language"),
  limit: Schema.optionalWith(
    Schema.Int.pipe(Schema.between(1, 50, { message: () => "limit must be an integer from 1 to 50" })).annotations({ description: "Most results to return (default 5)", default: 5 }),
    { default: () => 5 }
  )
}

/** A text for an external memory vendor (the MCP tool gateway_memory_external_add). */
export interface ExternalAdd {
  readonly provider: string
  readonly text: string
  readonly metadata?: Readonly<Record<string, string | number | boolean>> | undefined
}

/** What a store answers (POST /v1/memory/store). */
export interface Stored {
  readonly memoryId: string
  readonly userId: string
  /** `local`, or the external memory vendor that keeps it. */
  readonly provider: string
  readonly embedder: string
  /** null when an external vendor embeds (its vectors are not exposed). */
  readonly dimensions: number | null
  readonly createdAtUtc: string
}

/** What a query answers (POST /v1/memory/query). */
export interface Queried {
  readonly userId: string
  readonly provider: string
  readonly results: ReadonlyArray<{
    readonly memoryId: string
    readonly content: string
    /** Cosine similarity (local), the vendor's relevance score, or null when the vendor gives none. */
    readonly score: number | null
    readonly embedder: string
    readonly createdAtUtc: string | null
  }>
  readonly searched: number
}

const makeService = Effect.gen(function*() {
  const store = yield* MemoryStore
  const embeddings = yield* Embeddings
  const routing = yield* Routing
  const catalog = yield* Catalog
  const usage = yield* Usage
  const calls = yield* ProviderCalls
  const local = yield* TextEmbedder

  /** Whether a provider name is an external memory vendor (else: local, auto or an embedding provider). */
  const isVendor = (provider: string) =>
    Option.match(catalog.provider(provider), { onNone: () => false, onSome: (p) => servedBy(p).memory !== undefined })

  /** The vendor (named, or for `auto` the first configured) with its adapter; refused when it cannot be used. */
  const vendorFor = (avatar: AvatarRecord, provider: string) =>
    Effect.map(routing.providerFor("memory", provider, avatar.plan as Plan), (p) => ({ provider: p, adapter: servedBy(p).memory! }))

  const refusal = (adapter: MemoryAdapter, metadata: ExternalAdd["metadata"]) => {
    const why = adapter.unsupported?.({ userId: "", text: "", metadata })
    return why === undefined ? Effect.void : Effect.fail(new Unprocessable({ message: why }))
  }

  /** Runs a vendor call, recorded in usage (no tokens, no cost known), its errors mapped (VendorCall.ts). */
  const call = <A>(avatar: AvatarRecord, provider: ConfiguredProvider, capability: string, effect: Effect.Effect<A, UpstreamError>) =>
    vendorCall(avatar.id, provider, capability, effect).pipe(Effect.provideService(Usage, usage), Effect.provideService(ProviderCalls, calls))

  /** Adds a text to a vendor under the avatar's (and user id's) scope. */
  const addExternal = (avatar: AvatarRecord, input: ExternalAdd & { readonly userId?: string | undefined }) =>
    Effect.gen(function*() {
      const { adapter, provider } = yield* vendorFor(avatar, input.provider)
      yield* refusal(adapter, input.metadata)
      const added = yield* call(avatar, provider, "memory", adapter.add(provider, { userId: vendorUserId(avatar.id, input.userId), text: input.text, metadata: input.metadata }))
      return { provider: provider.id, memoryId: added.id, userId: input.userId ?? avatar.id, createdAtUtc: added.createdAt ?? new Date().toISOString() }
    })

  /** Searches a vendor within the avatar's (and user id's) scope. */
  const searchExternal = (avatar: AvatarRecord, input: { readonly provider: string; readonly query: string; readonly limit: number; readonly userId?: string | undefined }) =>
    Effect.gen(function*() {
      const { adapter, provider } = yield* vendorFor(avatar, input.provider)
      const items = yield* call(avatar, provider, "memory", adapter.search(provider, { userId: vendorUserId(avatar.id, input.userId), query: input.query, limit: input.limit }))
      return { provider: provider.id, userId: input.userId ?? avatar.id, results: items.slice(0, input.limit) }
    })

  /** The catalogue's memory vendors: whether each is configured, and what to set when not. */
  const externalProviders = () => {
    const providers = catalog.providers.filter((p) => servedBy(p).memory !== undefined).map((p) => ({
      id: p.id,
      name: p.name,
      configured: p.configured,
      ...(p.missing !== undefined ? { missing: p.missing } : {}),
      minPlan: p.minPlan,
      website: p.website
    }))
    return { total: providers.length, configured: providers.filter((p) => p.configured).length, providers }
  }

  /** `local`, a named provider, or `auto`: the best configured embedding model, else local. */
  const chooseEmbedder = (avatar: AvatarRecord, provider: string) =>
    provider === "local"
      ? Effect.succeed("local")
      : routed(routing.targets({ kind: "embeddings", provider, model: "auto", plan: avatar.plan as Plan, needsTools: false, contextTokens: 0 })).pipe(
        Effect.map((ts) => `${ts[0]!.provider.id}/${ts[0]!.model.id}`),
        Effect.catchAll((e) => (provider === "auto" ? Effect.succeed("local") : Effect.fail(e)))
      )

  /**
   * A text's vector in an embedder's space, with the name of the embedder that made it: `local`
   * is the in-process embedder as it is now, `local:hash-256` always the hashed words, another
   * `local:` name the in-process model (answered lexically when it is unavailable), `provider/model` a provider.
   */
  const embedWith = (avatar: AvatarRecord, embedder: string, text: string) => {
    if (embedder === LEXICAL_NAME) return Effect.succeed({ embedder, vector: hashEmbedding(text) })
    if (embedder === "local" || embedder.startsWith("local:")) return Effect.map(local.embedNamed([text]), (e) => ({ embedder: e.name, vector: e.vectors[0]! }))
    const slash = embedder.indexOf("/")
    return Effect.map(
      embeddings.embed(avatar, { texts: [text], provider: embedder.slice(0, slash), model: embedder.slice(slash + 1) }),
      (r) => ({ embedder, vector: r.embeddings[0]! })
    )
  }

  /**
   * The refusal of a store or query that depends only on the request and configuration (answered
   * before admission): an unknown provider, one that neither embeds nor keeps memories, or one not
   * configured or not allowed for the plan. A query searches the gateway's own store for any provider
   * but a memory vendor; it is checked as a store naming it would be, never taken as `auto`.
   */
  const checkProvider = (avatar: AvatarRecord, provider: string) =>
    isVendor(provider) ? Effect.asVoid(vendorFor(avatar, provider)) : Effect.asVoid(chooseEmbedder(avatar, provider))

  const store_ = Effect.fn("Memory.store")(function*(avatar: AvatarRecord, input: { readonly content: string; readonly userId?: string | undefined; readonly provider: string }) {
    if (isVendor(input.provider)) {
      const added = yield* addExternal(avatar, { provider: input.provider, text: input.content, userId: input.userId })
      const stored: Stored = { memoryId: added.memoryId, userId: added.userId, provider: added.provider, embedder: added.provider, dimensions: null, createdAtUtc: added.createdAtUtc }
      return stored
    }
    const { embedder, vector } = yield* embedWith(avatar, yield* chooseEmbedder(avatar, input.provider), input.content)
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
    const stored: Stored = { memoryId: record.id, userId: record.userId, provider: "local", embedder, dimensions: vector.length, createdAtUtc: new Date(record.createdAt).toISOString() }
    return stored
  })

  const query = Effect.fn("Memory.query")(function*(
    avatar: AvatarRecord,
    input: { readonly query: string; readonly userId?: string | undefined; readonly provider: string; readonly topK: number }
  ) {
    if (isVendor(input.provider)) {
      const found = yield* searchExternal(avatar, { provider: input.provider, query: input.query, limit: input.topK, userId: input.userId })
      const results = found.results.map((r) => ({ memoryId: r.id, content: r.text, score: r.score, embedder: found.provider, createdAtUtc: r.createdAt }))
      const queried: Queried = { userId: found.userId, provider: found.provider, results, searched: results.length }
      return queried
    }
    const userId = input.userId ?? avatar.id
    const memories = yield* store.list(avatar.id, userId, QUERY_WINDOW)
    const spaces = [...new Set(memories.map((m) => m.embedder))]
    const queryVectors = new Map<string, { readonly embedder: string; readonly vector: ReadonlyArray<number> }>()
    for (const space of spaces) queryVectors.set(space, yield* embedWith(avatar, space, input.query))
    /** The memory's stored vector, or its content's hashed words when its space could not embed the query. */
    const compared = (m: MemoryRecord) => {
      const q = queryVectors.get(m.embedder)!
      return q.embedder === m.embedder ? { q, vector: m.vector } : { q, vector: hashEmbedding(m.content) }
    }
    const results = memories
      .map((m) => {
        const { q, vector } = compared(m)
        return { memoryId: m.id, content: m.content, score: Math.round(cosine(q.vector, vector) * 1e6) / 1e6, embedder: q.embedder, createdAtUtc: new Date(m.createdAt).toISOString() }
      })
      .sort((a, b) => b.score - a.score)
      .slice(0, input.topK)
    const queried: Queried = { userId, provider: "local", results, searched: memories.length }
    return queried
  })

  return {
    checkProvider,
    store: store_,
    query,
    addExternal,
    searchExternal,
    externalProviders,
    /** The MCP external tools' refusals that depend only on the request and configuration. */
    checkExternal: (avatar: AvatarRecord, provider: string, metadata?: ExternalAdd["metadata"]) =>
      Effect.flatMap(vendorFor(avatar, provider), ({ adapter }) => refusal(adapter, metadata))
  }
})

export class Memory extends Context.Tag("aigw/Memory")<Memory, Effect.Effect.Success<typeof makeService>>() {}

export const layer = Layer.effect(Memory, makeService)
