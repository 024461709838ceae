/**
 * External memory vendors (mem0, Zep, Letta, Supermemory): add a text to a user's memory, and
 * search it. One small adapter per vendor API; the vendor embeds, stores and ranks. The user id
 * an adapter gets is already the vendor-side scope derived from the calling avatar
 * (`vendorUserId`), so no caller can name another avatar's memories.
 */
import { createHash } from "node:crypto"
import { Effect, Option, Redacted } from "effect"
import type { ConfiguredProvider } from "../../Catalog/Catalog.ts"
import { protocolError, type UpstreamError } from "../UpstreamError.ts"

export interface MemoryAddRequest {
  /** The vendor-side user (or container) id: `vendorUserId` of the avatar and its user id. */
  readonly userId: string
  readonly text: string
  readonly metadata?: Readonly<Record<string, unknown>> | undefined
}

export interface MemorySearchRequest {
  readonly userId: string
  readonly query: string
  readonly limit: number
}

export interface MemoryItem {
  readonly id: string
  readonly text: string
  /** The vendor's relevance score, or null when it gives none. */
  readonly score: number | null
  readonly metadata: Readonly<Record<string, unknown>>
  /** ISO time the vendor says the memory was created, or null. */
  readonly createdAt: string | null
}

export interface MemoryAdded {
  readonly id: string
  readonly createdAt: string | null
}

export interface MemoryAdapter {
  readonly add: (provider: ConfiguredProvider, request: MemoryAddRequest) => Effect.Effect<MemoryAdded, UpstreamError>
  readonly search: (provider: ConfiguredProvider, request: MemorySearchRequest) => Effect.Effect<ReadonlyArray<MemoryItem>, UpstreamError>
  /** Why a request cannot be served as asked (a field the vendor cannot take), or undefined. */
  readonly unsupported?: (request: MemoryAddRequest) => string | undefined
}

/**
 * The vendor-side id of an avatar's memories: `aigw-<avatar id>`, and for a user id of the
 * avatar's own choosing `aigw-<avatar id>-<first 16 hex of its SHA-256>` (letters, digits and
 * hyphens only, which every vendor accepts as a user id, tag or container tag).
 */
export const vendorUserId = (avatarId: string, userId?: string | undefined): string =>
  userId === undefined || userId === avatarId
    ? `aigw-${avatarId}`
    : `aigw-${avatarId}-${createHash("sha256").update(userId).digest("hex").slice(0, 16)}`

/** A JSON object, or the empty object for anything else (vendors send null for no metadata). */
export const objectOr = (value: unknown): Readonly<Record<string, unknown>> =>
  typeof value === "object" && value !== null && !Array.isArray(value) ? (value as Record<string, unknown>) : {}

/** A finite number, or null. */
export const scoreOr = (value: unknown): number | null => (typeof value === "number" && Number.isFinite(value) ? value : null)

/** A timestamp as ISO 8601 UTC, or null when absent or not a date. */
export const isoOr = (value: unknown): string | null => {
  if (typeof value !== "string" || value.length === 0) return null
  const t = Date.parse(value)
  return Number.isNaN(t) ? null : new Date(t).toISOString()
}

/** The API key as the vendor's own header wants it (for vendors whose scheme the catalogue's auth styles lack). */
export const keyOf = (provider: ConfiguredProvider): string | undefined =>
  Option.isSome(provider.apiKey) ? Redacted.value(provider.apiKey.value) : undefined

/**
 * The list in a vendor's answer: the answer itself when it is an array, else the first of
 * `fields` that holds one; a protocol error otherwise.
 */
export const listIn = (provider: string, answer: unknown, fields: ReadonlyArray<string>): Effect.Effect<ReadonlyArray<any>, UpstreamError> => {
  if (Array.isArray(answer)) return Effect.succeed(answer)
  const object = objectOr(answer)
  for (const f of fields) if (Array.isArray(object[f])) return Effect.succeed(object[f] as ReadonlyArray<any>)
  return Effect.fail(protocolError(provider, `the answer holds no ${fields.join(" or ")} list`))
}

/** One search hit from the vendor's id and text fields; a protocol error when either is missing. */
export const itemOf = (
  provider: string,
  fields: { readonly id: unknown; readonly text: unknown; readonly score?: unknown; readonly metadata?: unknown; readonly createdAt?: unknown }
): Effect.Effect<MemoryItem, UpstreamError> =>
  typeof fields.id === "string" && fields.id.length > 0 && typeof fields.text === "string"
    ? Effect.succeed({ id: fields.id, text: fields.text, score: scoreOr(fields.score), metadata: objectOr(fields.metadata), createdAt: isoOr(fields.createdAt) })
    : Effect.fail(protocolError(provider, "a search result has no id or no text"))
