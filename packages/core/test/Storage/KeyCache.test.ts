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
import { execFileSync } from "node:child_process"
import { createRequire } from "node:module"
import * as net from "node:net"
import pg from "pg"
import { afterAll, assert, beforeAll, describe, it } from "vitest"
import { ApiKeyStore } from "../../src/Storage/ApiKeyStore.ts"
import { type AvatarRecord, AvatarStore } from "../../src/Storage/AvatarStore.ts"
import * as Database from "../../src/Storage/Database.ts"
import { Metering } from "../../src/Storage/Metering.ts"
import { avatarEntry, KeyCache, keyEntry, make as makeCache, makeState, SQLITE_COUNTER, SQLITE_TRIGGERS, TRIGGERS } from "../../src/Storage/Sql/KeyCache.ts"
import { migrate } from "../../src/Storage/Sql/Migrations.ts"
import { SqliteDatabase } from "../../src/Storage/Sql/Sqlite.ts"
import * as Stores from "../../src/Storage/Stores.ts"
import { freshPgDatabase, freshSqliteUrl, hasPg } from "../support/databases.ts"
import { avatar } from "./stores.suite.ts"

const owner = (id = crypto.randomUUID()) => ({ id }) as AvatarRecord

/** A gateway process's layers on a real database (SQLite and PostgreSQL describes below). */
type Gateway = ManagedRuntime.ManagedRuntime<Stores.Stores, unknown>
const cacheOf = (g: Gateway) => g.runPromise(Effect.map(Effect.serviceOption(KeyCache), Option.getOrThrow))
const ownerOf = (g: Gateway, hash: string) => g.runPromise(Effect.flatMap(Metering, (m) => Effect.promise(() => m.avatarOfKey(hash))))
/** What a token naming this avatar resolves to (Auth's check before the token's issue instant). */
const tokenAvatar = (g: Gateway, id: string) => g.runPromise(Effect.flatMap(Metering, (m) => Effect.promise(() => m.activeAvatar(id))))
/** A new API key, of a new avatar unless `avatarId` names one. */
const newKey = async (g: Gateway, avatarId?: string) => {
  const record = avatar()
  const key = { id: crypto.randomUUID(), avatarId: avatarId ?? record.id, name: "k", prefix: "aigw_kc", hash: `hash_${crypto.randomUUID()}`, createdAt: 1, lastUsedAt: null, revokedAt: null }
  await g.runPromise(Effect.gen(function*() {
    if (avatarId === undefined) yield* (yield* AvatarStore).insert(record)
    yield* (yield* ApiKeyStore).insert(key)
  }))
  return { key, avatarId: key.avatarId, record }
}

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
  type Services = Stores.Stores | SqlClient.SqlClient | SqliteDatabase
  type SqliteGateway = ManagedRuntime.ManagedRuntime<Services, unknown>
  const url = freshSqliteUrl()
  let a: SqliteGateway
  let b: SqliteGateway
  /** The key and token reads of gateway A's connection. */
  let readsA: Reads
  /** Another connection to the file, as an operator's sqlite3 shell or another program has. */
  let shell: BetterSqlite.Database
  const gateways: Array<SqliteGateway> = []

  const gateway = (options: Database.DatabaseOptions & { readonly migrate?: boolean } = {}, at = url) => {
    const g = ManagedRuntime.make(Stores.layerSql.pipe(Layer.provideMerge(Database.layer(at, options))) as Layer.Layer<Services>)
    gateways.push(g)
    return g
  }
  interface Reads {
    key: number
    avatar: number
  }
  /**
   * Counts the reads of the key and token lookups on a gateway's connection, from now on (its
   * statements are prepared on first use): a hit is a lookup that does not read.
   */
  const countReads = async (g: SqliteGateway): Promise<Reads> => {
    const db = await g.runPromise(SqliteDatabase)
    const reads: Reads = { key: 0, avatar: 0 }
    const prepare = db.prepare.bind(db)
    db.prepare = ((text: string) => {
      const statement = prepare(text)
      const kind = text.includes("FROM api_keys k LEFT JOIN avatars") ? "key" : /^SELECT .* FROM avatars WHERE id = \?$/s.test(text) ? "avatar" : undefined
      if (kind === undefined) return statement
      const get = statement.get.bind(statement)
      statement.get = ((...params: Array<unknown>) => {
        reads[kind]++
        return get(...params)
      }) as typeof statement.get
      return statement
    }) as typeof db.prepare
    return reads
  }
  /** A statement on the gateway's own connection, as an embedder's SQL through its SqlClient runs. */
  const ownSql = (g: SqliteGateway, text: string, params: ReadonlyArray<unknown> = []) =>
    g.runPromise(Effect.flatMap(SqlClient.SqlClient, (sql) => sql.unsafe(text, params)))
  /** A key looked up twice: read once, then served from the cache. */
  const cachedKey = async (g: SqliteGateway, reads: Reads) => {
    const made = await newKey(g)
    const before = reads.key
    assert.strictEqual((await ownerOf(g, made.key.hash))?.id, made.avatarId)
    assert.strictEqual((await ownerOf(g, made.key.hash))?.id, made.avatarId)
    assert.strictEqual(reads.key - before, 1, "the second lookup is a hit")
    return made
  }

  beforeAll(async () => {
    a = gateway()
    b = gateway()
    readsA = await countReads(a)
    await b.runPromise(Effect.void)
    shell = new BetterSqlite(url.slice("sqlite:".length))
  })
  afterAll(async () => {
    shell?.close()
    for (const g of gateways) await g.dispose()
  })

  it("serves keys and tokens seen before from memory", async () => {
    assert.isTrue((await cacheOf(a)).active())
    const { key, avatarId } = await cachedKey(a, readsA)
    for (let i = 0; i < 3; i++) assert.strictEqual((await ownerOf(a, key.hash))?.id, avatarId)
    const before = { ...readsA }
    for (let i = 0; i < 3; i++) assert.strictEqual((await tokenAvatar(a, avatarId))?.id, avatarId)
    assert.deepStrictEqual([readsA.key - before.key, readsA.avatar - before.avatar], [0, 1])
    // Unknown keys are always read.
    await ownerOf(a, "hash_unknown")
    await ownerOf(a, "hash_unknown")
    assert.strictEqual(readsA.key - before.key, 2)
  })

  it("a revocation through this process is refused on the very next call", async () => {
    const { key, avatarId } = await cachedKey(a, readsA)
    assert.isTrue(await a.runPromise(Effect.flatMap(ApiKeyStore, (s) => s.revoke(avatarId, key.id, Date.now()))))
    assert.isUndefined(await ownerOf(a, key.hash))
  })

  it("a change by SQL on the gateway's own connection is seen on the very next call, one rolled back changes nothing", async () => {
    const { key, avatarId } = await cachedKey(a, readsA)
    await ownSql(a, "UPDATE avatars SET plan = 'Gold' WHERE id = ?", [avatarId])
    assert.strictEqual((await ownerOf(a, key.hash))?.plan, "Gold")
    // Rolled back: the key still works, still from the cache (the count went back with the write).
    const failed = await a.runPromise(
      Effect.flatMap(SqlClient.SqlClient, (sql) =>
        sql.withTransaction(Effect.zipRight(sql.unsafe("UPDATE api_keys SET revoked_at = 1 WHERE id = ?", [key.id]), Effect.fail("abort" as const)))
      ).pipe(Effect.flip)
    )
    assert.strictEqual(failed, "abort")
    const before = readsA.key
    assert.strictEqual((await ownerOf(a, key.hash))?.id, avatarId)
    assert.strictEqual((await ownerOf(a, key.hash))?.id, avatarId)
    assert.strictEqual(readsA.key - before, 0, "still cached")
    // Committed inside a transaction.
    await a.runPromise(Effect.flatMap(SqlClient.SqlClient, (sql) => sql.withTransaction(sql.unsafe("DELETE FROM api_keys WHERE id = ?", [key.id]))))
    assert.isUndefined(await ownerOf(a, key.hash))
  })

  it("REPLACE on the gateway's own connection, which deletes rows without delete triggers, is seen too", async () => {
    const first = await cachedKey(a, readsA)
    // The key's row replaced by a revoked one.
    await ownSql(a, "INSERT OR REPLACE INTO api_keys SELECT id, avatar_id, name, prefix, hash, created_at, last_used_at, 1, jobs_stopped_at FROM api_keys WHERE id = ?", [first.key.id])
    assert.isUndefined(await ownerOf(a, first.key.hash))
    // An update taking another avatar's unique e-mail deletes that avatar: its key stops working.
    const second = await cachedKey(a, readsA)
    const third = await newKey(a)
    await ownSql(a, "UPDATE OR REPLACE avatars SET email_lower = ? WHERE id = ?", [second.record.email.toLowerCase(), third.avatarId])
    assert.isUndefined(await ownerOf(a, second.key.hash))
  })

  it("a change by another gateway on the file or another program is seen on the very next call", async () => {
    const first = await cachedKey(a, readsA)
    const second = await cachedKey(a, readsA)
    // Another gateway on the same file (its own connection, as another process has) revokes through its store.
    await b.runPromise(Effect.flatMap(ApiKeyStore, (s) => s.revokeAll(first.avatarId, Date.now())))
    assert.isUndefined(await ownerOf(a, first.key.hash))
    // An operator deactivates an avatar from a program of their own: another OS process.
    const driver = createRequire(import.meta.url).resolve("better-sqlite3")
    const program = `new (require(${JSON.stringify(driver)}))(process.argv[1]).prepare("UPDATE avatars SET is_active = 0 WHERE id = ?").run(process.argv[2])`
    execFileSync(process.execPath, ["-e", program, url.slice("sqlite:".length), second.avatarId])
    assert.isUndefined(await ownerOf(a, second.key.hash))
  })

  it("a token's avatar: every change reaches it on the very next check", async () => {
    const { avatarId } = await newKey(a)
    const before = readsA.avatar
    assert.strictEqual((await tokenAvatar(a, avatarId))?.tokensValidAfter, 0)
    assert.strictEqual((await tokenAvatar(a, avatarId))?.tokensValidAfter, 0)
    assert.strictEqual(readsA.avatar - before, 1, "cached")
    await a.runPromise(Effect.flatMap(AvatarStore, (s) => s.update(avatarId, { tokensValidAfter: 5 })))
    assert.strictEqual((await tokenAvatar(a, avatarId))?.tokensValidAfter, 5)
    await b.runPromise(Effect.flatMap(AvatarStore, (s) => s.update(avatarId, { tokensValidAfter: 9 })))
    assert.strictEqual((await tokenAvatar(a, avatarId))?.tokensValidAfter, 9)
    shell.prepare("DELETE FROM avatars WHERE id = ?").run(avatarId)
    assert.isUndefined(await tokenAvatar(a, avatarId))
  })

  it("another process's calls (usage writes) leave it alone", async () => {
    const other = await newKey(b)
    const { key, avatarId } = await cachedKey(a, readsA)
    await b.runPromise(Effect.flatMap(Metering, (m) => Effect.promise(() => m.admit(other.avatarId, "2026-11-25", 100, 1))))
    shell.prepare("UPDATE daily_usage SET tokens = tokens + 1").run()
    const before = readsA.key
    assert.strictEqual((await ownerOf(a, key.hash))?.id, avatarId)
    assert.strictEqual(readsA.key - before, 0, "still cached")
  })

  it("a key's last use (its hourly lastUsedAt) leaves it alone, from this gateway or another", async () => {
    const { key, avatarId } = await cachedKey(a, readsA)
    assert.isNotNull(await b.runPromise(Effect.flatMap(ApiKeyStore, (s) => s.markUsed(key.hash, Date.now()))))
    assert.isNotNull(await a.runPromise(Effect.flatMap(ApiKeyStore, (s) => s.markUsed(key.hash, Date.now() + 2 * 3_600_000))))
    const before = readsA.key
    assert.strictEqual((await ownerOf(a, key.hash))?.id, avatarId)
    assert.strictEqual(readsA.key - before, 0, "still cached")
  })

  describe("an operator's changes to the counting", () => {
    const file = freshSqliteUrl()
    let g: SqliteGateway
    let reads: Reads
    let db: BetterSqlite.Database
    let operator: BetterSqlite.Database
    const updateTrigger = SQLITE_TRIGGERS.find((t) => t.name === "aigw_api_keys_update_counted")!
    beforeAll(async () => {
      g = gateway({}, file)
      reads = await countReads(g)
      db = await g.runPromise(SqliteDatabase)
      operator = new BetterSqlite(file.slice("sqlite:".length))
    })
    afterAll(() => {
      operator?.close()
    })
    /** The key is read on every lookup: the cache is off. */
    const readEveryTime = async <K extends { readonly key: { readonly hash: string }; readonly avatarId: string }>(made: K) => {
      const before = reads.key
      assert.strictEqual((await ownerOf(g, made.key.hash))?.id, made.avatarId)
      assert.strictEqual((await ownerOf(g, made.key.hash))?.id, made.avatarId)
      assert.strictEqual(reads.key - before, 2, "read every time")
      assert.isFalse((await cacheOf(g)).active())
      return made
    }
    /** A new key, read on every lookup. */
    const uncached = async () => readEveryTime(await newKey(g))
    const revoke = (...keys: Array<{ readonly key: { readonly id: string } }>) =>
      operator.prepare(`UPDATE api_keys SET revoked_at = 1 WHERE id IN (${keys.map(() => "?").join(", ")})`).run(...keys.map((k) => k.key.id))
    const refused = async (...keys: Array<{ readonly key: { readonly hash: string } }>) => {
      for (const k of keys) assert.isUndefined(await ownerOf(g, k.key.hash))
    }

    it("a dropped trigger turns the cache off until the migration's trigger is back", async () => {
      const first = await cachedKey(g, reads)
      operator.exec(`DROP TRIGGER ${updateTrigger.name}`)
      const second = await uncached()
      revoke(first, second)
      await refused(first, second)
      operator.exec(updateTrigger.sql)
      await cachedKey(g, reads)
      assert.isTrue((await cacheOf(g)).active())
    })

    it("a trigger of the same name that does not count turns it off", async () => {
      const first = await cachedKey(g, reads)
      operator.exec(`DROP TRIGGER ${updateTrigger.name}; CREATE TRIGGER ${updateTrigger.name} AFTER UPDATE ON api_keys BEGIN SELECT 1; END`)
      const second = await uncached()
      revoke(first, second)
      await refused(first, second)
      operator.exec(`DROP TRIGGER ${updateTrigger.name}; ${updateTrigger.sql}`)
      await cachedKey(g, reads)
    })

    it("a change made while the trigger was away, in one transaction, is seen", async () => {
      const first = await cachedKey(g, reads)
      operator.exec("BEGIN")
      operator.exec(`DROP TRIGGER ${updateTrigger.name}`)
      revoke(first)
      operator.exec(updateTrigger.sql)
      operator.exec("COMMIT")
      await refused(first)
    })

    it("a deleted counter row turns it off until the next counted write brings the row back", async () => {
      const first = await cachedKey(g, reads)
      const second = await cachedKey(g, reads)
      operator.exec("DELETE FROM aigw_key_changes")
      await readEveryTime(second)
      revoke(first)
      assert.deepStrictEqual(operator.prepare("SELECT id, n FROM aigw_key_changes").all(), [{ id: 1, n: 1 }])
      await refused(first)
      await cachedKey(g, reads)
      revoke(second)
      await refused(second)
    })

    it("without the counter table every lookup still answers, from the file", async () => {
      const first = await cachedKey(g, reads)
      operator.exec("DROP TABLE aigw_key_changes")
      await readEveryTime(first)
      operator.exec(`${SQLITE_COUNTER.table}; ${SQLITE_COUNTER.row}`)
      await cachedKey(g, reads)
    })

    it("a rebuilt table (the old one renamed, its triggers with it) turns it off", async () => {
      const first = await cachedKey(g, reads)
      db.exec("ALTER TABLE api_keys RENAME TO api_keys_old; CREATE TABLE api_keys AS SELECT * FROM api_keys_old")
      const second = await uncached()
      revoke(first, second)
      await refused(first, second)
    })
  })

  it("caches nothing read inside a transaction", async () => {
    const cache = await cacheOf(a)
    const entry = keyEntry(`hash_${crypto.randomUUID()}`)
    const owner = avatar()
    let loads = 0
    const load = () => {
      loads++
      return Promise.resolve(owner)
    }
    await a.runPromise(Effect.flatMap(SqlClient.SqlClient, (sql) => sql.withTransaction(Effect.promise(() => cache.lookup(entry, load)))))
    await cache.lookup(entry, load)
    await cache.lookup(entry, load)
    assert.strictEqual(loads, 2, "read inside the transaction, then once more outside it")
  })

  it("built before the migrations ran, it stays off until the tables exist", async () => {
    const g = gateway({ migrate: false }, freshSqliteUrl())
    const cache = await cacheOf(g)
    assert.isFalse(cache.active())
    await g.runPromise(migrate)
    assert.isTrue(cache.active())
    const reads = await countReads(g)
    const { key } = await cachedKey(g, reads)
    await ownSql(g, "UPDATE api_keys SET revoked_at = 1 WHERE id = ?", [key.id])
    assert.isUndefined(await ownerOf(g, key.hash))
  })

  it("AIGW_KEY_CACHE_SECONDS=0 turns it off", async () => {
    const g = gateway({ keyCacheSeconds: 0 })
    assert.isTrue(Option.isNone(await g.runPromise(Effect.serviceOption(KeyCache))))
    const reads = await countReads(g)
    const { key } = await newKey(g)
    await ownerOf(g, key.hash)
    await ownerOf(g, key.hash)
    assert.strictEqual(reads.key, 2)
  })
})

describe.skipIf(!hasPg)("key cache on PostgreSQL, two replicas", () => {
  type Replica = Gateway
  let url: string
  let a: Replica
  let b: Replica
  let admin: pg.Client

  const replica = () => ManagedRuntime.make(Stores.layerSql.pipe(Layer.provideMerge(Database.layer(url))) as Layer.Layer<Stores.Stores>)
  const until = async (what: string, check: () => Promise<boolean>, ms = 5_000) => {
    const start = Date.now()
    while (!(await check())) {
      if (Date.now() - start > ms) throw new Error(`timed out waiting for ${what}`)
      await new Promise((r) => setTimeout(r, 10))
    }
    return Date.now() - start
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
