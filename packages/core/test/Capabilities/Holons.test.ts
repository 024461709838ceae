/**
 * Authorization of holons (docs/authorization.md): get-or-create lands in the caller's own
 * holon, only its owner or an Admin sets the membrane, and an item recorded without consent
 * never propagates, whatever the membrane says.
 */
import { Effect, Layer, Option } from "effect"
import { describe, expect, it } from "vitest"
import * as Holons from "../../src/Capabilities/Holons.ts"
import * as TextEmbedder from "../../src/Ml/TextEmbedder.ts"
import * as AvatarStores from "../../src/Storage/AvatarStore.ts"
import { type AvatarRecord, AvatarStore } from "../../src/Storage/AvatarStore.ts"
import { DocumentStore, layerMemory } from "../../src/Storage/DocumentStore.ts"

const avatar = (id: string, avatarType: "User" | "Admin" = "User"): AvatarRecord => ({
  id, username: id, email: `${id}@example.com`, passwordHash: "x", title: "", description: "", image: "", dob: null, karmaTotal: 0,
  avatarType, providerType: "Default", plan: "Free", emailVerified: true, pendingEmail: null, isActive: true, createdAt: 0, updatedAt: 0, deletedAt: null, tokensValidAfter: 0
})
const a = avatar("a")
const b = avatar("b")
const admin = avatar("root", "Admin")

/** Runs `f` with the holons, their documents and the avatars a, b and root (Admin) stored. */
const run = <A, E>(f: (holons: typeof Holons.Holons.Service, docs: typeof DocumentStore.Service, avatars: typeof AvatarStore.Service) => Effect.Effect<A, E>) =>
  Effect.runPromise(Effect.gen(function*() {
    const avatars = yield* AvatarStore
    for (const one of [a, b, admin]) yield* avatars.insert(one)
    return yield* f(yield* Holons.Holons, yield* DocumentStore, avatars)
  }).pipe(Effect.provide(Holons.layer.pipe(Layer.provideMerge(Layer.mergeAll(layerMemory, TextEmbedder.layerLexical, AvatarStores.layerMemory))))))

const tagOf = (e: Effect.Effect<unknown, { readonly _tag: string }>) => Effect.map(Effect.flip(e), (x) => x._tag)
const contents = (r: { readonly results: ReadonlyArray<{ readonly content: string }> }) => r.results.map((x) => x.content)

describe("holon authorization", () => {
  it("gives each avatar its own holon of a name: a first creator receives nobody else's", () =>
    run((holons) => Effect.gen(function*() {
      const bs = yield* holons.getOrCreate(b, { name: "Lisbon", level: "city" })
      const as = yield* holons.getOrCreate(a, { name: "lisbon ", level: "city" })
      expect(as).toMatchObject({ created: true, createdBy: "a", parentId: "earth" })
      expect(as.id).not.toBe(bs.id)
      expect((yield* holons.getOrCreate(a, { name: "Lisbon", level: "city" }))).toMatchObject({ id: as.id, created: false })
      // Only the owner or an Admin sets a membrane rule.
      expect(yield* tagOf(holons.setMembrane(b, { holonId: as.id, allowTags: ["*"], requireConsent: false }))).toBe("Forbidden")
      expect(yield* tagOf(holons.setMembrane(b, { holonId: Holons.EARTH_ID, allowTags: ["*"], requireConsent: false }))).toBe("Forbidden")
      expect((yield* holons.setMembrane(admin, { holonId: as.id, allowTags: ["food"], requireConsent: true })).membrane).toEqual({ allowTags: ["food"], requireConsent: true })
    })))

  it("never propagates an item recorded without consent, whatever the membrane says", () =>
    run((holons) => Effect.gen(function*() {
      const bs = yield* holons.getOrCreate(b, { name: "Lisbon", level: "city" })
      const open = yield* holons.setMembrane(b, { holonId: bs.id, allowTags: ["*"], requireConsent: false })
      // A records straight into B's holon (by id): still A's to share or not.
      yield* holons.record(a, { holonId: bs.id, content: "My flat's door code is 4821", tags: ["private"], consent: false })
      yield* holons.record(a, { holonId: bs.id, content: "The tram 28 is crowded in summer", tags: ["transport"], consent: true })
      expect((yield* holons.propagateUp({ holonId: bs.id })).total).toBe(1)
      expect(contents(yield* holons.search(b, { holonId: "earth", query: "door code", topK: 10 }))).toEqual(["The tram 28 is crowded in summer"])
      expect(contents(yield* holons.search(a, { holonId: "earth", query: "door code", topK: 10 }))).toEqual(["The tram 28 is crowded in summer"])
      expect(open.membrane).toEqual({ allowTags: ["*"], requireConsent: true })
    })))

  it("propagates a deleted author's items no further: its consent ended with its account", () =>
    run((holons, _docs, avatars) => Effect.gen(function*() {
      const bs = yield* holons.getOrCreate(b, { name: "Braga", level: "city" })
      yield* holons.setMembrane(b, { holonId: bs.id, allowTags: ["*"], requireConsent: true })
      const gone = avatar("gone")
      yield* avatars.insert(gone)
      yield* holons.record(gone, { holonId: bs.id, content: "Recorded before the account was deleted", tags: ["x"], consent: true })
      yield* holons.record(a, { holonId: bs.id, content: "Shared by an active author", tags: ["x"], consent: true })
      yield* avatars.update(gone.id, { isActive: false, deletedAt: 1 })
      expect((yield* holons.propagate(bs.id)).propagated).toBe(1)
      expect(contents(yield* holons.search(b, { holonId: "earth", query: "account deleted author", topK: 10 }))).toEqual(["Shared by an active author"])
    })))

  it("ignores requireConsent:false in rules stored before consent became unconditional", () =>
    run((holons, docs) => Effect.gen(function*() {
      const bs = yield* holons.getOrCreate(b, { name: "Faro", level: "city" })
      yield* holons.record(a, { holonId: bs.id, content: "secret", tags: ["x"], consent: false })
      const doc = Option.getOrThrow(yield* docs.get(Holons.HOLON, bs.id))
      yield* docs.update(Holons.HOLON, bs.id, doc.version, { ...(doc.data as Holons.Holon), membrane: { allowTags: ["*"], requireConsent: false } }, Date.now())
      expect((yield* holons.propagate(bs.id)).propagated).toBe(0)
    })))
})
