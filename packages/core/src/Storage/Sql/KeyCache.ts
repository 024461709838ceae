/**
 * The credential -> avatar cache of the metering path (Sql/Metering.ts): a call with an API key
 * seen recently, or a token (JWT) whose avatar was read recently, skips that lookup (a round trip
 * on PostgreSQL, a joined read on SQLite). Both kinds of entry hold an avatar and follow the same
 * rules, so "the avatar's entries" below means its keys and its own entry.
 *
 * Consistency on PostgreSQL, in this order of strength:
 * - A write through this process (revoking keys, any avatar update: plan, deactivation, deletion)
 *   drops the avatar's entries and keeps the avatar out of the cache for `HOLD_MS`, so the
 *   process that answered "revoked" refuses the key on its very next call (and one that logged an
 *   avatar out everywhere refuses its older tokens on the next call).
 * - Every other writer (other replicas, an operator's SQL) is seen through PostgreSQL: triggers on
 *   `api_keys` and `avatars` (migration 0007) send `NOTIFY aigw_key_owner, <avatar id>` on commit,
 *   and this process LISTENs on a connection of its own. The stale window is the notification's
 *   delivery, milliseconds.
 * - A lookup that was in flight while any invalidation arrived is not cached (the epoch check), so
 *   an answer read before a commit never outlives that commit's notification.
 * - The cache is used only while the LISTEN connection is up and the triggers exist; a lost
 *   connection empties it and lookups go to the database until it is back (notifications sent in
 *   between are lost, so it starts empty again). Entries also expire after the configured seconds.
 *
 * On SQLite (`forSqlite`) the database counts: triggers on `api_keys` and `avatars` (migration
 * 0009) add one to a single-row counter on every insert, update and delete, in the writer's own
 * transaction, whoever the writer is (this process, another process on the same file, an operator's
 * sqlite3 shell; `REPLACE` too, whose deletions run no delete triggers but whose insert counts).
 * Every lookup first reads the schema's version and the counter: if the counter moved, the whole
 * cache is dropped, so for every write made with SQL the cache answers what a read of the file
 * would. A rolled-back write takes its count back with it. Lookups inside a transaction are not
 * cached. A schema change empties the cache and checks the triggers: caching is on only while all
 * of them exist as migrated (not before migrations, not while an operator has dropped or renamed
 * one) and the counter row holds an integer. Not seen, within the entries' lifetime: writes that
 * skip triggers (a connection with triggers switched off, blob I/O, a file replaced underneath the
 * process, which an uncached read would not notice either) and a counter set back by hand.
 *
 * Only active owners are cached: unknown and revoked keys always ask the database, so guessing keys
 * cannot fill memory (avatar entries come only from tokens whose signature held), and the cache
 * holds at most `MAX_ENTRIES` entries (oldest dropped first).
 */
import { Context, Effect, Layer, Option } from "effect"
import Pg from "pg"
import type { AvatarRecord } from "../AvatarStore.ts"
import type BetterSqlite from "better-sqlite3"
import type { SqliteHandle } from "./Sqlite.ts"

export const CHANNEL = "aigw_key_owner"
/** The triggers of migration 0007 that notify CHANNEL. */
export const TRIGGERS = ["aigw_api_keys_owner_changed", "aigw_avatars_owner_changed"] as const

const MAX_ENTRIES = 10_000
/** How long a local write keeps its avatar out of the cache: far longer than its notification takes. */
const HOLD_MS = 5_000
const RECONNECT_MIN_MS = 500
const RECONNECT_MAX_MS = 30_000
/** How often a connection that found no triggers (migrations not applied yet) looks again. */
const TRIGGER_RECHECK_MS = 1_000

/** The cache entry of an API key (by its hash) and of an avatar by id: one map, two name spaces. */
export const keyEntry = (hash: string) => `key ${hash}`
export const avatarEntry = (id: string) => `avatar ${id}`

export interface KeyCacheService {
  /** The active avatar of an entry: from the cache, else `load` (the database), cached when allowed. */
  readonly lookup: (entry: string, load: () => Promise<AvatarRecord | undefined>) => Promise<AvatarRecord | undefined>
  /** A write through this process changed the avatar or its keys. */
  readonly invalidate: (avatarId: string) => void
  /** Whether lookups are cached now (PostgreSQL: the LISTEN connection is up and the triggers exist; SQLite: the tables and triggers exist). */
  readonly active: () => boolean
}

export class KeyCache extends Context.Tag("aigw/KeyCache")<KeyCache, KeyCacheService>() {}

/**
 * For the stores' writes, given the cache found when the store was built (if any): the write, then
 * the avatar dropped from the cache, before the write is answered.
 */
export const invalidating = (cache: Option.Option<KeyCacheService>) => (avatarId: string) => <A, E, R>(write: Effect.Effect<A, E, R>) =>
  Option.isSome(cache) ? Effect.tap(write, () => cache.value.invalidate(avatarId)) : write

/** The cache's state and rules, without the connection (the part the unit tests drive). */
export const makeState = (ttlMs: number, now: () => number = Date.now) => {
  const entries = new Map<string, { readonly avatar: AvatarRecord; readonly expires: number }>()
  const held = new Map<string, number>()
  let epoch = 0
  let listening = false

  const isHeld = (avatarId: string) => {
    const until = held.get(avatarId)
    if (until === undefined) return false
    if (until > now()) return true
    held.delete(avatarId)
    return false
  }
  const drop = (avatarId: string) => {
    epoch++
    for (const [name, cached] of entries) if (cached.avatar.id === avatarId) entries.delete(name)
  }
  const clear = () => {
    epoch++
    entries.clear()
  }
  const service: KeyCacheService = {
    lookup: (entry, load) => {
      if (!listening) return load()
      const hit = entries.get(entry)
      if (hit !== undefined) {
        if (hit.expires > now() && !isHeld(hit.avatar.id)) return Promise.resolve(hit.avatar)
        entries.delete(entry)
      }
      const started = epoch
      return load().then((avatar) => {
        if (avatar !== undefined && listening && epoch === started && !isHeld(avatar.id)) {
          if (entries.size >= MAX_ENTRIES) entries.delete(entries.keys().next().value!)
          entries.set(entry, { avatar, expires: now() + ttlMs })
        }
        return avatar
      })
    },
    invalidate: (avatarId) => {
      // Holds are otherwise removed when their avatar is looked up: sweep the expired ones now and then.
      if (held.size >= MAX_ENTRIES) for (const [id, until] of held) if (until <= now()) held.delete(id)
      held.set(avatarId, now() + HOLD_MS)
      drop(avatarId)
    },
    active: () => listening
  }
  return {
    service,
    /** A notification: another writer committed a change of this avatar or its keys. */
    notified: drop,
    /** Every entry dropped (SQLite: a change whose avatar is not known). */
    clear,
    /** Caching on (the connection listens and the triggers exist) or off (lost); either way empty. */
    setListening: (on: boolean) => {
      listening = on
      clear()
    },
    size: () => entries.size
  }
}

/**
 * The cache for a database URL, with its LISTEN connection kept up for the scope's lifetime (it
 * reconnects with backoff). Starting does not wait for the connection: until it listens, every
 * lookup goes to the database.
 */
export const make = (url: string, ttlMs: number) =>
  Effect.acquireRelease(
    Effect.sync(() => {
      const state = makeState(ttlMs)
      let closed = false
      let client: Pg.Client | undefined
      let timer: NodeJS.Timeout | undefined
      let backoff = RECONNECT_MIN_MS

      const later = (ms: number, f: () => void) => {
        timer = setTimeout(f, ms)
        timer.unref()
      }
      const endQuietly = (c: Pg.Client): Promise<void> => {
        try {
          return c.end().catch(() => {})
        } catch {
          // A client that never connected may throw rather than reject: it is gone either way.
          return Promise.resolve()
        }
      }
      const lost = (c: Pg.Client) => {
        if (client !== c) return
        client = undefined
        state.setListening(false)
        endQuietly(c)
        if (closed) return
        later(backoff, connect)
        backoff = Math.min(backoff * 2, RECONNECT_MAX_MS)
      }
      const checkTriggers = (c: Pg.Client) => {
        c.query("SELECT count(*)::int AS n FROM pg_trigger WHERE tgname = ANY($1)", [TRIGGERS]).then(
          (r) => {
            if (client !== c) return
            if (r.rows[0].n === TRIGGERS.length) {
              backoff = RECONNECT_MIN_MS
              state.setListening(true)
            } else later(TRIGGER_RECHECK_MS, () => checkTriggers(c))
          },
          () => lost(c)
        )
      }
      const connect = () => {
        if (closed) return
        const c = new Pg.Client({ connectionString: url, application_name: "aigw-key-cache" })
        client = c
        c.on("error", () => lost(c))
        c.on("end", () => lost(c))
        c.on("notification", (message) => {
          if (message.channel === CHANNEL && message.payload) state.notified(message.payload)
        })
        c.connect()
          .then(() => c.query(`LISTEN ${CHANNEL}`))
          .then(() => checkTriggers(c), () => lost(c))
          .catch(() => {})
      }
      connect()
      return {
        service: state.service,
        close: () => {
          closed = true
          if (timer !== undefined) clearTimeout(timer)
          state.setListening(false)
          const c = client
          client = undefined
          return c === undefined ? Promise.resolve() : endQuietly(c)
        }
      }
    }),
    (cache) => Effect.promise(cache.close).pipe(Effect.timeoutOption(1000))
  ).pipe(Effect.map((cache) => cache.service))

export const layer = (url: string, ttlMs: number): Layer.Layer<KeyCache> => Layer.scoped(KeyCache, make(url, ttlMs))

/**
 * SQLite's change counter, migration 0009 as applied: one row, one more on every insert, update and
 * delete of `api_keys` and `avatars` (an upsert, so a deleted row comes back). Written out, never to
 * be edited: databases hold these texts as they were, and the cache checks for them by text (a
 * trigger of the same name doing something else does not count). A change needs a new migration.
 */
export const SQLITE_COUNTER = {
  table: "CREATE TABLE aigw_key_changes (id INTEGER PRIMARY KEY CHECK (id = 1), n INTEGER NOT NULL)",
  row: "INSERT INTO aigw_key_changes (id, n) VALUES (1, 0)",
  /** The schema's version and the counter, in one read (one snapshot, one statement per lookup). */
  read: "SELECT v.schema_version, (SELECT n FROM main.aigw_key_changes WHERE id = 1) FROM pragma_schema_version() AS v"
} as const
export const SQLITE_TRIGGERS: ReadonlyArray<{ readonly name: string; readonly sql: string }> = [
  {
    name: "aigw_api_keys_insert_counted",
    sql: "CREATE TRIGGER aigw_api_keys_insert_counted AFTER INSERT ON api_keys BEGIN INSERT INTO aigw_key_changes (id, n) VALUES (1, 1) ON CONFLICT (id) DO UPDATE SET n = n + 1; END"
  },
  {
    name: "aigw_api_keys_update_counted",
    // Not a key's last use (its hourly `last_used_at`): that changes no caller, and would empty every cache.
    sql: "CREATE TRIGGER aigw_api_keys_update_counted AFTER UPDATE OF avatar_id, hash, revoked_at ON api_keys BEGIN INSERT INTO aigw_key_changes (id, n) VALUES (1, 1) ON CONFLICT (id) DO UPDATE SET n = n + 1; END"
  },
  {
    name: "aigw_api_keys_delete_counted",
    sql: "CREATE TRIGGER aigw_api_keys_delete_counted AFTER DELETE ON api_keys BEGIN INSERT INTO aigw_key_changes (id, n) VALUES (1, 1) ON CONFLICT (id) DO UPDATE SET n = n + 1; END"
  },
  {
    name: "aigw_avatars_insert_counted",
    sql: "CREATE TRIGGER aigw_avatars_insert_counted AFTER INSERT ON avatars BEGIN INSERT INTO aigw_key_changes (id, n) VALUES (1, 1) ON CONFLICT (id) DO UPDATE SET n = n + 1; END"
  },
  {
    name: "aigw_avatars_update_counted",
    sql: "CREATE TRIGGER aigw_avatars_update_counted AFTER UPDATE ON avatars BEGIN INSERT INTO aigw_key_changes (id, n) VALUES (1, 1) ON CONFLICT (id) DO UPDATE SET n = n + 1; END"
  },
  {
    name: "aigw_avatars_delete_counted",
    sql: "CREATE TRIGGER aigw_avatars_delete_counted AFTER DELETE ON avatars BEGIN INSERT INTO aigw_key_changes (id, n) VALUES (1, 1) ON CONFLICT (id) DO UPDATE SET n = n + 1; END"
  }
]

/** The cache on a SQLite connection (see the module comment). */
export const forSqlite = (db: SqliteHandle, ttlMs: number): KeyCacheService => {
  const state = makeState(ttlMs)
  const schemaVersion = db.prepare("PRAGMA main.schema_version").pluck()
  // By text: SQLite keeps a trigger's CREATE statement as written, and rewrites it when its table is renamed.
  const triggers = db.prepare(
    `SELECT count(*) FROM main.sqlite_master WHERE type = 'trigger' AND sql IN (${SQLITE_TRIGGERS.map(() => "?").join(", ")})`
  ).pluck()
  const triggerTexts = SQLITE_TRIGGERS.map((t) => t.sql)
  /** The counter's statement while caching is on; undefined sends the next lookup through the full check. */
  let changes: BetterSqlite.Statement | undefined
  let seenSchema: unknown
  let seenChanges: unknown
  const off = () => {
    changes = undefined
    state.setListening(false)
  }
  /**
   * Before each lookup, outside transactions. A schema change (migrations, a dropped trigger, a
   * rebuilt table) empties the cache and checks the triggers again: caching is on only while all
   * of them count. Otherwise a moved counter empties it. While caching is on, one statement reads
   * both the schema's version and the counter.
   */
  const current = () => {
    if (changes !== undefined) {
      const [schema, n] = changes.get() as [unknown, unknown]
      if (schema === seenSchema) {
        if (n === seenChanges) return
        seenChanges = n
        // A counter that holds no integer turns caching off, as at a schema change.
        if (Number.isSafeInteger(n)) state.clear()
        else off()
        return
      }
    }
    // Off and empty first: if anything below throws, nothing stale stays and the next lookup checks again.
    off()
    const schema = schemaVersion.get()
    if (triggers.get(...triggerTexts) === SQLITE_TRIGGERS.length) {
      const read = db.prepare(SQLITE_COUNTER.read).raw(true)
      seenChanges = (read.get() as [unknown, unknown])[1]
      // A missing row (deleted by hand: the next counted write brings it back) cannot tell changes apart.
      if (Number.isSafeInteger(seenChanges)) changes = read
    }
    seenSchema = schema
    state.setListening(changes !== undefined)
  }
  const check = () => {
    try {
      current()
    } catch {
      // Off and empty until a check succeeds; the lookup's own read answers (or fails) as without a cache.
      off()
    }
  }
  return {
    lookup: (entry, load) => {
      // Inside a transaction a read may see its own uncommitted writes: not cached.
      if (db.inTransaction) return load()
      check()
      return state.service.lookup(entry, load)
    },
    invalidate: state.notified,
    active: () => {
      if (!db.inTransaction) check()
      return state.service.active()
    }
  }
}
