/**
 * The credential cache (Storage/Sql/KeyCache.ts): its rules with a fake clock; on SQLite, a
 * gateway's layers on a real file with other connections to it (another gateway process, an
 * operator's shell): a hit skips the database, and every change, through the gateway or not, is
 * seen on the very next call; on PostgreSQL, two gateway processes' worth of layers ("replicas")
 * on one real database: a hit skips the database, and revocations, avatar changes and an
 * operator's SQL reach every replica; a lost LISTEN connection turns the cache off until it is back.
 */
import BetterSqlite from "better-sqlite3"
import * as SqlClient from "@effect/sql/SqlClient"
import { Effect, Layer, ManagedRuntime, Option } from "effect"
import * as net from "node:net"
import pg from "pg"
import { afterAll, assert, beforeAll, describe, it } from "vitest"
import { ApiKeyStore } from "../../src/Storage/ApiKeyStore.ts"
import { type AvatarRecord, AvatarStore } from "../../src/Storage/AvatarStore.ts"
import * as Database from "../../src/Storage/Database.ts"
import { Metering } from "../../src/Storage/Metering.ts"
import { avatarEntry, KeyCache, keyEntry, make as makeCache, makeState, SQLITE_TRIGGERS, TRIGGERS } from "../../src/Storage/Sql/KeyCache.ts"
import { migrate } from "../../src/Storage/Sql/Migrations.ts"
import { SqliteDatabase } from "../../src/Storage/Sql/Sqlite.ts"
import * as Stores from "../../src/Storage/Stores.ts"
import { freshPgDatabase, freshSqliteUrl, hasPg } from "../support/databases.ts"
import { avatar } from "./stores.suite.ts"

const owner = (id = crypto.randomUUID()) => ({ id }) as AvatarRecord

describe("key cache rules", () => {
  const setup = () => {
    let clock = 1_000
    const state = makeState(60_000, () => clock)
    let loads = 0
    const answers = new Map<string, AvatarRecord | undefined>()
    const load = (hash: string) => () => {
      loads++
      return Promise.resolve(answers.get(hash))
    }
    return { state, cache: state.service, answers, load, loads: () => loads, tick: (ms: number) => (clock += ms) }
  }

  it("goes to the database until it listens, then serves active owners from memory", async () => {
    const t = setup()
    const a = owner()
    t.answers.set("h1", a)
    await t.cache.lookup("h1", t.load("h1"))
    await t.cache.lookup("h1", t.load("h1"))
    assert.strictEqual(t.loads(), 2, "not listening: no cache")
    t.state.setListening(true)
    assert.strictEqual(await t.cache.lookup("h1", t.load("h1")), a)
    assert.strictEqual(await t.cache.lookup("h1", t.load("h1")), a)
    assert.strictEqual(t.loads(), 3, "the second lookup was a hit")
  })

  it("never caches unknown or refused keys", async () => {
    const t = setup()
    t.state.setListening(true)
    for (let i = 0; i < 3; i++) assert.isUndefined(await t.cache.lookup("nope", t.load("nope")))
    assert.strictEqual(t.loads(), 3)
    assert.strictEqual(t.state.size(), 0)
  })

  it("expires entries after the lifetime", async () => {
    const t = setup()
    t.state.setListening(true)
    t.answers.set("h", owner())
    await t.cache.lookup("h", t.load("h"))
    t.tick(59_999)
    await t.cache.lookup("h", t.load("h"))
    assert.strictEqual(t.loads(), 1)
    t.tick(2)
    await t.cache.lookup("h", t.load("h"))
    assert.strictEqual(t.loads(), 2)
  })

  it("a notification drops that avatar's keys only", async () => {
    const t = setup()
    t.state.setListening(true)
    const a = owner()
    const b = owner()
    t.answers.set("a1", a).set("a2", a).set("b1", b)
    for (const h of ["a1", "a2", "b1"]) await t.cache.lookup(h, t.load(h))
    t.state.notified(a.id)
    for (const h of ["a1", "a2", "b1"]) await t.cache.lookup(h, t.load(h))
    assert.strictEqual(t.loads(), 5, "a1 and a2 loaded again, b1 still a hit")
  })

  it("an avatar's own entry (a token's) and its keys' entries are distinct, and go together", async () => {
    const t = setup()
    t.state.setListening(true)
    const a = owner()
    const b = owner()
    const entries = [keyEntry("a1"), avatarEntry(a.id), avatarEntry(b.id)]
    t.answers.set(entries[0]!, a).set(entries[1]!, a).set(entries[2]!, b)
    for (const e of entries) await t.cache.lookup(e, t.load(e))
    assert.strictEqual(t.state.size(), 3)
    t.state.notified(a.id)
    assert.strictEqual(t.state.size(), 1, "a's key and a's own entry dropped, b's kept")
    t.cache.invalidate(b.id)
    assert.strictEqual(t.state.size(), 0)
  })

  it("a local write keeps the avatar out of the cache until its notification has surely come", async () => {
    const t = setup()
    t.state.setListening(true)
    const a = owner()
    t.answers.set("a1", a)
    await t.cache.lookup("a1", t.load("a1"))
    t.cache.invalidate(a.id)
    await t.cache.lookup("a1", t.load("a1"))
    await t.cache.lookup("a1", t.load("a1"))
    assert.strictEqual(t.loads(), 3, "held: every lookup asks the database")
    t.tick(5_001)
    await t.cache.lookup("a1", t.load("a1"))
    await t.cache.lookup("a1", t.load("a1"))
    assert.strictEqual(t.loads(), 4, "cached again after the hold")
  })

  it("does not cache an answer that was in flight when any change was announced", async () => {
    const t = setup()
    t.state.setListening(true)
    const a = owner()
    let release!: (v: AvatarRecord) => void
    const pending = t.cache.lookup("a1", () => new Promise((resolve) => (release = resolve)))
    t.state.notified(crypto.randomUUID())
    release(a)
    assert.strictEqual(await pending, a)
    assert.strictEqual(t.state.size(), 0, "read before the change: not kept")
  })

  it("losing the connection empties it and turns it off", async () => {
    const t = setup()
    t.state.setListening(true)
    t.answers.set("h", owner())
    await t.cache.lookup("h", t.load("h"))
    t.state.setListening(false)
    assert.strictEqual(t.state.size(), 0)
    await t.cache.lookup("h", t.load("h"))
    await t.cache.lookup("h", t.load("h"))
    assert.strictEqual(t.loads(), 3)
  })
})

describe("key cache without a database to listen to", () => {
  it("keeps trying in the background, never crashes, and sends every lookup to the database", async () => {
    const server = net.createServer((socket) => socket.destroy())
    await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve))
    const port = (server.address() as net.AddressInfo).port
    try {
      await Effect.runPromise(Effect.scoped(Effect.gen(function*() {
        const cache = yield* makeCache(`postgres://nobody@127.0.0.1:${port}/none`, 60_000)
        let loads = 0
        const a = owner()
        for (let i = 0; i < 5; i++) {
          assert.strictEqual(yield* Effect.promise(() => cache.lookup("h", () => (loads++, Promise.resolve(a)))), a)
          yield* Effect.sleep("300 millis")
        }
        assert.isFalse(cache.active())
        assert.strictEqual(loads, 5)
      })))
    } finally {
      server.close()
    }
  }, 10_000)
})

describe("key cache on SQLite", () => {
  type Gateway = ManagedRuntime.ManagedRuntime<Stores.Stores, unknown>
  let url: string
  let a: Gateway
  let b: Gateway
  /** Another connection to the file, as an operator's sqlite3 shell or another program has. */
  let shell: BetterSqlite.Database
  const gateways: Array<Gateway> = []

  const gateway = (options: Database.DatabaseOptions & { readonly migrate?: boolean } = {}) => {
    const g = ManagedRuntime.make(Stores.layerSql.pipe(Layer.provideMerge(Database.layer(url, options))) as Layer.Layer<Stores.Stores>)
    gateways.push(g)
    return g
  }
  const cacheOf = (g: Gateway) => g.runPromise(Effect.map(Effect.serviceOption(KeyCache), Option.getOrThrow))
  const ownerOf = (g: Gateway, hash: string) => g.runPromise(Effect.flatMap(Metering, (m) => Effect.promise(() => m.avatarOfKey(hash))))
  const tokenAvatar = (g: Gateway, id: string) => g.runPromise(Effect.flatMap(Metering, (m) => Effect.promise(() => m.activeAvatar(id))))
  /** A statement on the gateway's own connection, as an embedder's SQL through its SqlClient runs. */
  const ownSql = (g: Gateway, text: string, params: ReadonlyArray<unknown>) =>
    g.runPromise(Effect.flatMap(SqlClient.SqlClient, (sql) => sql.unsafe(text, params)))
  const newKey = async (g: Gateway) => {
    const record = avatar()
    const key = { id: crypto.randomUUID(), avatarId: record.id, name: "k", prefix: "aigw_kc", hash: `hash_${crypto.randomUUID()}`, createdAt: 1, lastUsedAt: null, revokedAt: null }
    await g.runPromise(Effect.gen(function*() {
      yield* (yield* AvatarStore).insert(record)
      yield* (yield* ApiKeyStore).insert(key)
    }))
    return { key, avatarId: key.avatarId }
  }

  beforeAll(async () => {
    url = freshSqliteUrl()
    a = gateway()
    b = gateway()
    await a.runPromise(Effect.void)
    await b.runPromise(Effect.void)
    shell = new BetterSqlite(url.slice("sqlite:".length))
  })
  afterAll(async () => {
    shell?.close()
    for (const g of gateways) await g.dispose()
  })

  it("a hit does not read the database", async () => {
    // A gateway of its own: its triggers are dropped, so a change on its connection goes unseen.
    const g = gateway()
    const { key, avatarId } = await newKey(g)
    assert.isTrue((await cacheOf(g)).active())
    assert.strictEqual((await ownerOf(g, key.hash))?.id, avatarId)
    const db = await g.runPromise(SqliteDatabase)
    for (const [name] of SQLITE_TRIGGERS) db.exec(`DROP TRIGGER temp.${name}`)
    db.prepare("UPDATE api_keys SET revoked_at = 1 WHERE id = ?").run(key.id)
    assert.strictEqual((await ownerOf(g, key.hash))?.id, avatarId, "served from the cache")
    assert.isUndefined(await ownerOf(a, key.hash), "another gateway reads the database: revoked")
  })

  it("a revocation through this process is refused on the very next call", async () => {
    const { key, avatarId } = await newKey(a)
    assert.strictEqual((await ownerOf(a, key.hash))?.id, avatarId)
    assert.strictEqual((await ownerOf(a, key.hash))?.id, avatarId)
    assert.isTrue(await a.runPromise(Effect.flatMap(ApiKeyStore, (s) => s.revoke(avatarId, key.id, Date.now()))))
    assert.isUndefined(await ownerOf(a, key.hash))
  })

  it("a change by SQL on the gateway's own connection is seen on the very next call, one rolled back changes nothing", async () => {
    const { key, avatarId } = await newKey(a)
    assert.strictEqual((await ownerOf(a, key.hash))?.plan, "Free")
    await ownSql(a, "UPDATE avatars SET plan = 'Gold' WHERE id = ?", [avatarId])
    assert.strictEqual((await ownerOf(a, key.hash))?.plan, "Gold")
    // Rolled back: the key still works, and is cached again.
    const failed = await a.runPromise(
      Effect.flatMap(SqlClient.SqlClient, (sql) =>
        sql.withTransaction(Effect.zipRight(sql.unsafe("UPDATE api_keys SET revoked_at = 1 WHERE id = ?", [key.id]), Effect.fail("abort" as const)))
      ).pipe(Effect.flip)
    )
    assert.strictEqual(failed, "abort")
    assert.strictEqual((await ownerOf(a, key.hash))?.id, avatarId)
    // Committed inside a transaction.
    await a.runPromise(Effect.flatMap(SqlClient.SqlClient, (sql) => sql.withTransaction(sql.unsafe("DELETE FROM api_keys WHERE id = ?", [key.id]))))
    assert.isUndefined(await ownerOf(a, key.hash))
  })

  it("a change by another process or an operator's shell is seen on the very next call", async () => {
    const first = await newKey(a)
    const second = await newKey(a)
    assert.strictEqual((await ownerOf(a, first.key.hash))?.id, first.avatarId)
    assert.strictEqual((await ownerOf(a, second.key.hash))?.id, second.avatarId)
    // Another gateway process revokes through its store.
    await b.runPromise(Effect.flatMap(ApiKeyStore, (s) => s.revokeAll(first.avatarId, Date.now())))
    assert.isUndefined(await ownerOf(a, first.key.hash))
    // An operator deactivates an avatar from a shell.
    shell.prepare("UPDATE avatars SET is_active = 0 WHERE id = ?").run(second.avatarId)
    assert.isUndefined(await ownerOf(a, second.key.hash))
  })

  it("a token's avatar is cached the same way, and every change reaches it on the very next check", async () => {
    const { avatarId } = await newKey(a)
    assert.strictEqual((await tokenAvatar(a, avatarId))?.tokensValidAfter, 0)
    await a.runPromise(Effect.flatMap(AvatarStore, (s) => s.update(avatarId, { tokensValidAfter: 5 })))
    assert.strictEqual((await tokenAvatar(a, avatarId))?.tokensValidAfter, 5)
    await b.runPromise(Effect.flatMap(AvatarStore, (s) => s.update(avatarId, { tokensValidAfter: 9 })))
    assert.strictEqual((await tokenAvatar(a, avatarId))?.tokensValidAfter, 9)
    shell.prepare("DELETE FROM avatars WHERE id = ?").run(avatarId)
    assert.isUndefined(await tokenAvatar(a, avatarId))
  })

  it("built before the migrations ran, it stays off until the tables exist", async () => {
    url = freshSqliteUrl()
    const g = gateway({ migrate: false })
    const cache = await cacheOf(g)
    assert.isFalse(cache.active())
    await g.runPromise(migrate)
    assert.isTrue(cache.active())
    const { key, avatarId } = await newKey(g)
    assert.strictEqual((await ownerOf(g, key.hash))?.id, avatarId)
    await ownSql(g, "UPDATE api_keys SET revoked_at = 1 WHERE id = ?", [key.id])
    assert.isUndefined(await ownerOf(g, key.hash))
  })

  it("AIGW_KEY_CACHE_SECONDS=0 turns it off", async () => {
    const g = gateway({ keyCacheSeconds: 0 })
    assert.isTrue(Option.isNone(await g.runPromise(Effect.serviceOption(KeyCache))))
  })
})

describe.skipIf(!hasPg)("key cache on PostgreSQL, two replicas", () => {
  type Replica = ManagedRuntime.ManagedRuntime<Stores.Stores, unknown>
  let url: string
  let a: Replica
  let b: Replica
  let admin: pg.Client

  const replica = () => ManagedRuntime.make(Stores.layerSql.pipe(Layer.provideMerge(Database.layer(url))) as Layer.Layer<Stores.Stores>)
  const cacheOf = (r: Replica) => r.runPromise(Effect.map(Effect.serviceOption(KeyCache), Option.getOrThrow))
  const ownerOf = (r: Replica, hash: string) => r.runPromise(Effect.flatMap(Metering, (m) => Effect.promise(() => m.avatarOfKey(hash))))
  /** What a token naming this avatar resolves to (Auth's check before the token's issue instant). */
  const tokenAvatar = (r: Replica, id: string) => r.runPromise(Effect.flatMap(Metering, (m) => Effect.promise(() => m.activeAvatar(id))))
  const until = async (what: string, check: () => Promise<boolean>, ms = 5_000) => {
    const start = Date.now()
    while (!(await check())) {
      if (Date.now() - start > ms) throw new Error(`timed out waiting for ${what}`)
      await new Promise((r) => setTimeout(r, 10))
    }
    return Date.now() - start
  }
  const newKey = async (r: Replica, avatarId?: string) => {
    const record = avatar()
    const key = { id: crypto.randomUUID(), avatarId: avatarId ?? record.id, name: "k", prefix: "aigw_kc", hash: `hash_${crypto.randomUUID()}`, createdAt: 1, lastUsedAt: null, revokedAt: null }
    await r.runPromise(Effect.gen(function*() {
      if (avatarId === undefined) yield* (yield* AvatarStore).insert(record)
      yield* (yield* ApiKeyStore).insert(key)
    }))
    return { key, avatarId: key.avatarId }
  }
  /** A row changed with its table's notification trigger off: only a cache can still give the old answer. */
  const changeSilently = async (table: "api_keys" | "avatars", id: string, assignment: string) => {
    const trigger = TRIGGERS[table === "api_keys" ? 0 : 1]
    await admin.query("BEGIN")
    await admin.query(`ALTER TABLE ${table} DISABLE TRIGGER ${trigger}`)
    await admin.query(`UPDATE ${table} SET ${assignment} WHERE id = $1`, [id])
    await admin.query(`ALTER TABLE ${table} ENABLE TRIGGER ${trigger}`)
    await admin.query("COMMIT")
  }
  const revokeSilently = (keyId: string) => changeSilently("api_keys", keyId, "revoked_at = 1")

  beforeAll(async () => {
    url = await freshPgDatabase()
    a = replica()
    b = replica()
    admin = new pg.Client({ connectionString: url })
    await admin.connect()
    await until("both caches listening", async () => (await cacheOf(a)).active() && (await cacheOf(b)).active())
  }, 30_000)
  afterAll(async () => {
    await admin?.end()
    await a?.dispose()
    await b?.dispose()
  })

  it("a hit does not ask the database", async () => {
    const { key, avatarId } = await newKey(a)
    assert.strictEqual((await ownerOf(a, key.hash))?.id, avatarId)
    await revokeSilently(key.id)
    assert.strictEqual((await ownerOf(a, key.hash))?.id, avatarId, "served from A's cache")
    assert.isUndefined(await ownerOf(b, key.hash), "B never cached it: the database says revoked")
  })

  it("a revocation through this process is refused on the very next call", async () => {
    const { key, avatarId } = await newKey(a)
    assert.strictEqual((await ownerOf(a, key.hash))?.id, avatarId)
    assert.isTrue(await a.runPromise(Effect.flatMap(ApiKeyStore, (s) => s.revoke(avatarId, key.id, Date.now()))))
    assert.isUndefined(await ownerOf(a, key.hash))
  })

  it("a revocation through another replica reaches this one within milliseconds", async () => {
    const { key, avatarId } = await newKey(a)
    assert.strictEqual((await ownerOf(a, key.hash))?.id, avatarId)
    assert.strictEqual((await ownerOf(a, key.hash))?.id, avatarId)
    await b.runPromise(Effect.flatMap(ApiKeyStore, (s) => s.revokeAll(avatarId, Date.now())))
    const ms = await until("A refuses the key", async () => (await ownerOf(a, key.hash)) === undefined, 2_000)
    assert.isBelow(ms, 2_000)
  })

  it("an avatar changed by another replica or by an operator's SQL is read again", async () => {
    const { key, avatarId } = await newKey(a)
    assert.strictEqual((await ownerOf(a, key.hash))?.plan, "Free")
    await b.runPromise(Effect.flatMap(AvatarStore, (s) => s.update(avatarId, { plan: "Gold" })))
    await until("A sees the new plan", async () => (await ownerOf(a, key.hash))?.plan === "Gold", 2_000)
    await admin.query("UPDATE avatars SET is_active = 0 WHERE id = $1", [avatarId])
    await until("A refuses the deactivated avatar's key", async () => (await ownerOf(a, key.hash)) === undefined, 2_000)
  })

  it("a token's avatar is served from the cache, and changes by other replicas or by SQL reach it", async () => {
    const { avatarId } = await newKey(a)
    const plan = async (r: Replica) => (await tokenAvatar(r, avatarId))?.plan
    assert.strictEqual(await plan(a), "Free")
    await changeSilently("avatars", avatarId, "plan = 'Gold'")
    assert.strictEqual(await plan(a), "Free", "served from A's cache")
    assert.strictEqual(await plan(b), "Gold", "B reads the database")
    // Logged out everywhere through B: A drops its entry when the notification comes.
    await b.runPromise(Effect.flatMap(AvatarStore, (s) => s.update(avatarId, { tokensValidAfter: 9 })))
    await until("A sees B's logout", async () => (await tokenAvatar(a, avatarId))?.tokensValidAfter === 9, 2_000)
    // Cached again, then deactivated by an operator's SQL: the same.
    await changeSilently("avatars", avatarId, "plan = 'Silver'")
    assert.strictEqual(await plan(a), "Gold", "cached again")
    await admin.query("UPDATE avatars SET is_active = 0 WHERE id = $1", [avatarId])
    await until("A refuses the deactivated avatar's tokens", async () => (await tokenAvatar(a, avatarId)) === undefined, 2_000)
  })

  it("a token's avatar changed through this process is read again on the very next check", async () => {
    const { avatarId } = await newKey(a)
    assert.strictEqual((await tokenAvatar(a, avatarId))?.tokensValidAfter, 0)
    await changeSilently("avatars", avatarId, "plan = 'Gold'")
    assert.strictEqual((await tokenAvatar(a, avatarId))?.plan, "Free", "served from A's cache")
    await a.runPromise(Effect.flatMap(AvatarStore, (s) => s.update(avatarId, { tokensValidAfter: 5 })))
    const after = await tokenAvatar(a, avatarId)
    assert.deepStrictEqual([after?.tokensValidAfter, after?.plan], [5, "Gold"])
  })

  it("a lost LISTEN connection turns the cache off until it is back, then it starts empty", async () => {
    const { key, avatarId } = await newKey(a)
    assert.strictEqual((await ownerOf(a, key.hash))?.id, avatarId)
    const cache = await cacheOf(a)
    await admin.query("SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = 'aigw-key-cache'")
    await until("A's cache off", async () => !cache.active())
    await revokeSilently(key.id)
    assert.isUndefined(await ownerOf(a, key.hash), "off: the database answers")
    await until("A's cache back", async () => cache.active())
    assert.isUndefined(await ownerOf(a, key.hash), "back, and empty")
    const fresh = await newKey(a)
    assert.strictEqual((await ownerOf(a, fresh.key.hash))?.id, fresh.avatarId)
    await revokeSilently(fresh.key.id)
    assert.strictEqual((await ownerOf(a, fresh.key.hash))?.id, fresh.avatarId, "caching again")
  }, 20_000)
})
