/**
 * Holonic memory: a hierarchy of memory units (holons) rooted at the planetary "Earth" holon
 * (planet → continent → country → region → city → community → household → individual, or any
 * level name). Each avatar's get-or-create lands in a holon of its own (the id derives from
 * parent, owner and name), so nobody can claim a name first and receive others' memories; only
 * the owner or an Admin sets its membrane rule. Avatars record memory items at a holon; an item
 * is private to its author unless recorded with consent. The membrane rule decides which items
 * propagate one level up: consented items whose tags the rule allows; an item recorded without
 * consent never propagates, whatever the rule says (docs/authorization.md). Propagation copies
 * items to the parent, once. Search ranks the items the caller may see by cosine similarity of
 * in-process embeddings (Ml/TextEmbedder.ts), computed at query time over the newest items
 * (`SEMANTIC_SEARCH_ITEMS` with the sentence model, `SEARCH_ITEMS` with hashed words).
 */
import { Context, Effect, Layer, Option, Schema } from "effect"
import * as crypto from "node:crypto"
import { Forbidden, NotFound } from "../Errors.ts"
import { activeAmong, type AvatarRecord, AvatarStore } from "../Storage/AvatarStore.ts"
import { type DocumentRecord, DocumentStore, modify } from "../Storage/DocumentStore.ts"
import { TextEmbedder } from "../Ml/TextEmbedder.ts"
import { cosine } from "./Memory.ts"
import { BoundedArray } from "../RequestFields.ts"

export const HOLON = "holon"
export const ITEM = "holon_item"
export const EARTH_ID = "earth"
/**
 * Items a search reads, newest first, of the caller's own and again of everyone's (the visible ones of
 * those): with a model, items carry no stored vectors and each costs model time; with hashed words, the
 * hashing is on the event loop. A holon anyone may record into cannot make a search read all it holds,
 * nor push the caller's own items out of it.
 */
export const SEMANTIC_SEARCH_ITEMS = 200
export const SEARCH_ITEMS = 1_000
/** Items propagation reads from the store at a time. */
const PAGE = 500

export interface MembraneRule {
  /** Tags allowed through; ["*"] lets every tag through. */
  readonly allowTags: ReadonlyArray<string>
  /** Always true since consent became unconditional; rules stored earlier may say false, which is ignored. */
  readonly requireConsent: boolean
}

export interface Holon {
  readonly id: string
  readonly name: string
  readonly level: string
  readonly parentId: string | null
  readonly path: ReadonlyArray<string>
  readonly membrane: MembraneRule | null
  readonly createdBy: string | null
}

export interface HolonItem {
  readonly id: string
  readonly holonId: string
  readonly content: string
  readonly tags: ReadonlyArray<string>
  readonly consent: boolean
  readonly authorAvatarId: string
  /** Where a propagated copy came from. */
  readonly origin: { readonly holonId: string; readonly itemId: string } | null
  readonly createdAtUtc: string
}

const Name = Schema.String.pipe(Schema.minLength(1, { message: () => "name must not be empty" }), Schema.maxLength(200))
const Tag = Schema.String.pipe(Schema.pattern(/^[\w*:-]{1,64}$/, { message: () => "tags are 1-64 letters, digits, _, -, : (or *)" }))
export const HolonId = Schema.String.pipe(Schema.minLength(1), Schema.maxLength(100)).annotations({ description: "A holon id (\"earth\" for the root)" })

export const Params = {
  getOrCreate: { name: Name, level: Schema.String.pipe(Schema.minLength(1), Schema.maxLength(50)).annotations({ description: "Level name, e.g. continent, country, city, community" }), parentId: Schema.optional(HolonId) },
  membrane: {
    holonId: HolonId,
    allowTags: BoundedArray(Tag, { max: 100, description: "Tags allowed to propagate upward; [\"*\"] for all" }),
    requireConsent: Schema.optionalWith(Schema.Boolean, { default: () => true }).annotations({ description: "Accepted for compatibility; consent is always required: an item recorded without it never propagates" })
  },
  record: {
    holonId: HolonId,
    content: Schema.String.pipe(Schema.minLength(1, { message: () => "content must not be empty" }), Schema.maxLength(20_000)),
    tags: Schema.optionalWith(BoundedArray(Tag, { max: 50 }), { default: () => [] }),
    consent: Schema.optionalWith(Schema.Boolean, { default: () => false }).annotations({ description: "Whether the item may be shared and propagated" })
  },
  propagate: { holonId: HolonId },
  propagateUp: {
    holonId: HolonId,
    levels: Schema.optional(Schema.Int.pipe(Schema.between(1, 20, { message: () => "levels must be an integer from 1 to 20" }))).annotations({ description: "How many levels up; omit to go to the root" })
  },
  search: {
    holonId: HolonId,
    query: Schema.String.pipe(Schema.minLength(1, { message: () => "query must not be empty" }), Schema.maxLength(5000)),
    topK: Schema.optionalWith(Schema.Int.pipe(Schema.between(1, 100)), { default: () => 5 })
  }
}

const digest = (s: string) => crypto.createHash("sha256").update(s).digest("hex").slice(0, 24)

/** Holon ids derive from the parent, the owner and the name: get-or-create is idempotent per avatar. */
export const holonIdOf = (parentId: string, owner: string, name: string) => digest(`${parentId}/${owner}/${name.trim().toLowerCase()}`)

const earth: Holon = { id: EARTH_ID, name: "Earth", level: "planet", parentId: null, path: ["Earth"], membrane: null, createdBy: null }

const makeService = Effect.gen(function*() {
  const docs = yield* DocumentStore
  const embedder = yield* TextEmbedder
  const avatars = yield* AvatarStore

  const put = (h: Holon) =>
    Effect.suspend(() => {
      const now = Date.now()
      return docs.insertIfAbsent({ kind: HOLON, id: h.id, owner: null, key: h.parentId, data: h, version: 0, createdAt: now, updatedAt: now })
    })

  const getHolon = (id: string) =>
    Effect.flatMap(id === EARTH_ID ? Effect.zipRight(put(earth), docs.get(HOLON, id)) : docs.get(HOLON, id), (d) =>
      Option.isSome(d) ? Effect.succeed(d.value.data as Holon) : Effect.fail(new NotFound({ message: `No holon ${id}.` })))

  const itemsOf = (list: ReadonlyArray<DocumentRecord>) => list.map((d) => d.data as HolonItem)

  const describe = (h: Holon) => Effect.map(docs.count(ITEM, { key: h.id }), (items) => ({ ...h, items }))

  /** Every item of a holon, a page at a time (newest first), each page handed to `f`. */
  const eachPage = (holonId: string, f: (items: ReadonlyArray<HolonItem>) => Effect.Effect<void>) =>
    Effect.iterate({ after: undefined as DocumentRecord | undefined, done: false }, {
      while: (state) => !state.done,
      body: ({ after }) =>
        Effect.flatMap(docs.list(ITEM, { key: holonId, limit: PAGE, after }), (page) =>
          Effect.as(f(itemsOf(page)), { after: page.at(-1), done: page.length < PAGE }))
    })

  const getEarth = Effect.flatMap(getHolon(EARTH_ID), describe)

  const getOrCreate = Effect.fn("Holons.getOrCreate")(function*(avatar: AvatarRecord, input: { readonly name: string; readonly level: string; readonly parentId?: string | undefined }) {
    const parent = yield* getHolon(input.parentId ?? EARTH_ID)
    const holon: Holon = {
      id: holonIdOf(parent.id, avatar.id, input.name),
      name: input.name.trim(),
      level: input.level,
      parentId: parent.id,
      path: [...parent.path, input.name.trim()],
      membrane: null,
      createdBy: avatar.id
    }
    const created = yield* put(holon)
    return { ...(yield* describe(yield* getHolon(holon.id))), created }
  })

  const setMembrane = Effect.fn("Holons.setMembrane")(function*(avatar: AvatarRecord, input: { readonly holonId: string; readonly allowTags: ReadonlyArray<string>; readonly requireConsent: boolean }) {
    const holon = yield* getHolon(input.holonId)
    if (avatar.avatarType !== "Admin" && holon.createdBy !== avatar.id) {
      return yield* Effect.fail(new Forbidden({ message: "Only the holon's owner or an Admin can set its membrane rule." }))
    }
    // requireConsent is not taken from the input: an item recorded without consent never leaves its holon.
    const updated = yield* modify<Holon>(docs, HOLON, holon.id, (h) => ({ ...h, membrane: { allowTags: [...new Set(input.allowTags)], requireConsent: true } }))
    return Option.getOrThrow(updated)
  })

  const record = Effect.fn("Holons.record")(function*(avatar: AvatarRecord, input: { readonly holonId: string; readonly content: string; readonly tags: ReadonlyArray<string>; readonly consent: boolean }) {
    const holon = yield* getHolon(input.holonId)
    const item: HolonItem = {
      id: crypto.randomUUID(),
      holonId: holon.id,
      content: input.content,
      tags: [...new Set(input.tags)],
      consent: input.consent,
      authorAvatarId: avatar.id,
      origin: null,
      createdAtUtc: new Date().toISOString()
    }
    const now = Date.now()
    yield* docs.insert({ kind: ITEM, id: item.id, owner: avatar.id, key: holon.id, data: item, version: 0, createdAt: now, updatedAt: now })
    return item
  })

  /** The author's consent first, whatever the rule says; then the rule's tags. */
  const permitted = (rule: MembraneRule, item: HolonItem) =>
    item.consent && (rule.allowTags.includes("*") || item.tags.some((t) => rule.allowTags.includes(t)))

  /** Copies the holon's permitted items to its parent, each once (copies have deterministic ids). */
  const propagateOnce = (holon: Holon) =>
    Effect.gen(function*() {
      if (holon.parentId === null) return { from: holon.id, to: null, propagated: 0, reason: "the root has no parent" }
      if (holon.membrane === null) return { from: holon.id, to: holon.parentId, propagated: 0, reason: "no membrane rule: nothing may pass" }
      const { membrane, parentId } = holon
      let propagated = 0
      const copyUp = (item: HolonItem) => {
        const origin = item.origin ?? { holonId: holon.id, itemId: item.id }
        const copy: HolonItem = { ...item, id: digest(`${parentId}/${origin.holonId}:${origin.itemId}`), holonId: parentId, origin }
        const now = Date.now()
        return Effect.map(
          docs.insertIfAbsent({ kind: ITEM, id: copy.id, owner: item.authorAvatarId, key: parentId, data: copy, version: 0, createdAt: now, updatedAt: now }),
          (inserted) => void (inserted && propagated++)
        )
      }
      // A deleted author's consent ended with its account: its items propagate no further.
      yield* eachPage(holon.id, (page) => {
        const passing = page.filter((item) => permitted(membrane, item))
        return Effect.flatMap(activeAmong(avatars, passing.map((item) => item.authorAvatarId)), (authors) =>
          Effect.forEach(passing.filter((item) => authors.has(item.authorAvatarId)), copyUp, { discard: true }))
      })
      return { from: holon.id, to: holon.parentId, propagated, reason: null }
    })

  const propagate = (holonId: string) => Effect.flatMap(getHolon(holonId), propagateOnce)

  const propagateUp = Effect.fn("Holons.propagateUp")(function*(input: { readonly holonId: string; readonly levels?: number | undefined }) {
    const steps: Array<{ from: string; to: string | null; propagated: number; reason: string | null }> = []
    let current = yield* getHolon(input.holonId)
    for (let level = 0; level < (input.levels ?? 20) && current.parentId !== null; level++) {
      steps.push(yield* propagateOnce(current))
      current = yield* getHolon(current.parentId)
    }
    return { steps, reached: current.id, total: steps.reduce((n, s) => n + s.propagated, 0) }
  })

  const search = Effect.fn("Holons.search")(function*(avatar: AvatarRecord, input: { readonly holonId: string; readonly query: string; readonly topK: number }) {
    const holon = yield* getHolon(input.holonId)
    const limit = embedder.semantic ? SEMANTIC_SEARCH_ITEMS : SEARCH_ITEMS
    // The caller's own items are read apart: however many others record here, they cannot push them out.
    const [own, recent] = yield* Effect.all([
      docs.list(ITEM, { key: holon.id, owner: avatar.id, limit }),
      docs.list(ITEM, { key: holon.id, limit })
    ])
    const visible = new Map<string, HolonItem>()
    for (const i of itemsOf([...own, ...recent])) if (i.consent || i.authorAvatarId === avatar.id) visible.set(i.id, i)
    const searched = [...visible.values()]
    // One call for the query and the items: their vectors come from the same embedder.
    const embedded = yield* embedder.embedNamed([input.query, ...searched.map((i) => i.content)])
    const [q, ...vectors] = embedded.vectors
    const results = searched
      .map((i, n) => ({ ...i, score: Math.round(cosine(q!, vectors[n]!) * 1e6) / 1e6 }))
      .sort((a, b) => b.score - a.score)
      .slice(0, input.topK)
    return { holonId: holon.id, path: holon.path, embedder: embedded.name, results, searched: searched.length }
  })

  /** The refusal of a write to a holon that does not exist, answered before admission. */
  const checkHolon = (input: { readonly holonId: string }) => Effect.asVoid(getHolon(input.holonId))

  return { getEarth, getOrCreate, setMembrane, record, propagate, propagateUp, search, checkHolon }
})

export class Holons extends Context.Tag("aigw/Holons")<Holons, Effect.Effect.Success<typeof makeService>>() {}

export const layer = Layer.effect(Holons, makeService)
