/**
 * Schema migrations, kept in code (`Migrator.fromRecord`) so bundles (Lambda) carry them.
 * The SQL is portable between SQLite and PostgreSQL: times are epoch milliseconds in BIGINT,
 * booleans are 0/1 INTEGERs, JSON is TEXT; case-insensitive uniqueness uses *_lower columns.
 */
import * as Migrator from "@effect/sql/Migrator"
import * as SqlClient from "@effect/sql/SqlClient"
import type { SqlError } from "@effect/sql/SqlError"
import { Effect } from "effect"
import {
  CHANNEL as KEY_OWNER_CHANNEL,
  SQLITE_COUNTER as KEY_CHANGES,
  SQLITE_TRIGGERS as KEY_CHANGES_TRIGGERS,
  TRIGGERS as KEY_OWNER_TRIGGERS
} from "./KeyCache.ts"

/** Runs each `;`-separated statement on its own (SQLite prepares one statement at a time). */
const statements = (ddl: string) =>
  Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    for (const statement of ddl.split(/;\s*\n/).map((s) => s.trim()).filter(Boolean)) {
      yield* sql.unsafe(statement)
    }
  })

export const migrations: Record<string, Effect.Effect<void, unknown, SqlClient.SqlClient>> = {
  "0001_accounts_usage": statements(`
    CREATE TABLE avatars (
      id TEXT PRIMARY KEY,
      username TEXT NOT NULL,
      username_lower TEXT NOT NULL UNIQUE,
      email TEXT NOT NULL,
      email_lower TEXT NOT NULL UNIQUE,
      password_hash TEXT NOT NULL,
      title TEXT NOT NULL,
      description TEXT NOT NULL,
      image TEXT NOT NULL,
      dob TEXT,
      karma_total DOUBLE PRECISION NOT NULL,
      avatar_type TEXT NOT NULL,
      provider_type TEXT NOT NULL,
      plan TEXT NOT NULL,
      email_verified INTEGER NOT NULL,
      pending_email TEXT,
      is_active INTEGER NOT NULL,
      created_at BIGINT NOT NULL,
      updated_at BIGINT NOT NULL,
      deleted_at BIGINT,
      tokens_valid_after BIGINT NOT NULL
    );
    CREATE TABLE one_time_tokens (
      hash TEXT PRIMARY KEY,
      avatar_id TEXT NOT NULL,
      purpose TEXT NOT NULL,
      email TEXT,
      expires_at BIGINT NOT NULL,
      created_at BIGINT NOT NULL,
      used_at BIGINT
    );
    CREATE INDEX one_time_tokens_avatar ON one_time_tokens (avatar_id, purpose);
    CREATE TABLE send_limits (
      key TEXT PRIMARY KEY,
      t1 BIGINT,
      t2 BIGINT,
      t3 BIGINT
    );
    CREATE TABLE api_keys (
      id TEXT PRIMARY KEY,
      avatar_id TEXT NOT NULL,
      name TEXT NOT NULL,
      prefix TEXT NOT NULL,
      hash TEXT NOT NULL UNIQUE,
      created_at BIGINT NOT NULL,
      last_used_at BIGINT,
      revoked_at BIGINT
    );
    CREATE INDEX api_keys_avatar ON api_keys (avatar_id);
    CREATE TABLE daily_usage (
      avatar_id TEXT NOT NULL,
      day TEXT NOT NULL,
      calls INTEGER NOT NULL,
      tokens BIGINT NOT NULL,
      spend_usd DOUBLE PRECISION NOT NULL,
      PRIMARY KEY (avatar_id, day)
    );
    CREATE TABLE usage_events (
      id TEXT PRIMARY KEY,
      avatar_id TEXT NOT NULL,
      day TEXT NOT NULL,
      provider TEXT NOT NULL,
      model TEXT NOT NULL,
      capability TEXT NOT NULL,
      prompt_tokens INTEGER NOT NULL,
      completion_tokens INTEGER NOT NULL,
      cost_usd DOUBLE PRECISION NOT NULL,
      latency_ms INTEGER NOT NULL,
      estimated INTEGER NOT NULL,
      ok INTEGER NOT NULL,
      at BIGINT NOT NULL
    );
    CREATE INDEX usage_events_avatar_day ON usage_events (avatar_id, day)
  `),
  "0002_jobs_webhooks": statements(`
    CREATE TABLE jobs (
      id TEXT PRIMARY KEY,
      type TEXT NOT NULL,
      avatar_id TEXT NOT NULL,
      provider TEXT NOT NULL,
      upstream_id TEXT,
      status TEXT NOT NULL,
      input TEXT NOT NULL,
      state TEXT,
      result TEXT,
      error TEXT,
      callback_url TEXT,
      attempts INTEGER NOT NULL,
      next_run_at BIGINT NOT NULL,
      locked_until BIGINT,
      created_at BIGINT NOT NULL,
      updated_at BIGINT NOT NULL,
      completed_at BIGINT
    );
    CREATE TABLE webhook_deliveries (
      id TEXT PRIMARY KEY,
      job_id TEXT NOT NULL,
      url TEXT NOT NULL,
      event TEXT NOT NULL,
      body TEXT NOT NULL,
      status TEXT NOT NULL,
      attempts INTEGER NOT NULL,
      next_attempt_at BIGINT NOT NULL,
      locked_until BIGINT,
      created_at BIGINT NOT NULL,
      delivered_at BIGINT,
      last_error TEXT
    );
    CREATE TABLE webhook_attempts (
      id TEXT PRIMARY KEY,
      delivery_id TEXT NOT NULL,
      at BIGINT NOT NULL,
      status_code INTEGER,
      error TEXT,
      duration_ms INTEGER NOT NULL
    );
    CREATE INDEX jobs_due ON jobs (status, next_run_at);
    CREATE INDEX jobs_avatar ON jobs (avatar_id);
    CREATE INDEX webhook_deliveries_due ON webhook_deliveries (status, next_attempt_at);
    CREATE INDEX webhook_deliveries_job ON webhook_deliveries (job_id);
    CREATE INDEX webhook_attempts_delivery ON webhook_attempts (delivery_id)
  `),
  "0003_memories": statements(`
    CREATE TABLE memories (
      id TEXT PRIMARY KEY,
      avatar_id TEXT NOT NULL,
      user_id TEXT NOT NULL,
      content TEXT NOT NULL,
      embedder TEXT NOT NULL,
      vector TEXT NOT NULL,
      created_at BIGINT NOT NULL
    );
    CREATE INDEX memories_owner ON memories (avatar_id, user_id, created_at)
  `),
  "0004_documents": statements(`
    CREATE TABLE documents (
      kind TEXT NOT NULL,
      id TEXT NOT NULL,
      owner TEXT,
      doc_key TEXT,
      data TEXT NOT NULL,
      version INTEGER NOT NULL,
      created_at BIGINT NOT NULL,
      updated_at BIGINT NOT NULL,
      PRIMARY KEY (kind, id)
    );
    CREATE INDEX documents_key ON documents (kind, doc_key);
    CREATE INDEX documents_owner ON documents (kind, owner)
  `),
  // Counters of failed logins per account and per client address (SendLimitStore.tryCount).
  "0005_limit_windows": statements(`
    CREATE TABLE limit_windows (
      key TEXT PRIMARY KEY,
      hits INTEGER NOT NULL,
      expires_at BIGINT NOT NULL
    );
    CREATE INDEX limit_windows_expiry ON limit_windows (expires_at)
  `),
  // The id of the request that submitted a job, sent with its webhook (X-GATEWAY-Request-Id).
  "0006_request_ids": statements(`
    ALTER TABLE jobs ADD COLUMN request_id TEXT;
    ALTER TABLE webhook_deliveries ADD COLUMN request_id TEXT
  `),
  // PostgreSQL only: every committed change of an API key or an avatar notifies the API key caches
  // of all processes (Sql/KeyCache.ts) with the avatar's id. SQLite's counterpart is 0009.
  "0007_key_owner_notify": Effect.flatMap(SqlClient.SqlClient, (sql) =>
    sql.onDialectOrElse({
      pg: () =>
        Effect.gen(function*() {
          yield* sql.unsafe(`CREATE FUNCTION aigw_notify_key_owner() RETURNS trigger LANGUAGE plpgsql AS $$
            BEGIN
              PERFORM pg_notify('${KEY_OWNER_CHANNEL}', to_jsonb(OLD) ->> TG_ARGV[0]);
              RETURN NULL;
            END $$`)
          yield* sql.unsafe(`CREATE TRIGGER ${KEY_OWNER_TRIGGERS[0]} AFTER UPDATE OR DELETE ON api_keys
            FOR EACH ROW EXECUTE FUNCTION aigw_notify_key_owner('avatar_id')`)
          yield* sql.unsafe(`CREATE TRIGGER ${KEY_OWNER_TRIGGERS[1]} AFTER UPDATE OR DELETE ON avatars
            FOR EACH ROW EXECUTE FUNCTION aigw_notify_key_owner('id')`)
        }),
      orElse: () => Effect.void
    })),
  /**
   * PostgreSQL's quota gate (Metering.ts): the admissions of one event-loop turn in one round trip,
   * each the conditional upsert SQLite runs as `admit`, in the order given (callers sort by avatar
   * and day, so two batches lock rows in one order), each seeing the ones before it. An element of
   * the result is the day's calls after an admitted request, null for a refused one.
   */
  "0008_admit_many": Effect.flatMap(SqlClient.SqlClient, (sql) =>
    sql.onDialectOrElse({
      pg: () =>
        sql.unsafe(`CREATE FUNCTION aigw_admit_many(avatar_ids TEXT[], days TEXT[], counts INTEGER[], limits INTEGER[])
          RETURNS INTEGER[] LANGUAGE plpgsql AS $$
          DECLARE
            result INTEGER[] := '{}';
            calls_now INTEGER;
          BEGIN
            FOR i IN 1 .. coalesce(array_length(avatar_ids, 1), 0) LOOP
              calls_now := NULL;
              INSERT INTO daily_usage (avatar_id, day, calls, tokens, spend_usd) VALUES (avatar_ids[i], days[i], counts[i], 0, 0)
                ON CONFLICT (avatar_id, day) DO UPDATE SET calls = daily_usage.calls + excluded.calls
                WHERE daily_usage.calls + excluded.calls <= limits[i]
                RETURNING daily_usage.calls INTO calls_now;
              result := array_append(result, calls_now);
            END LOOP;
            RETURN result;
          END $$`),
      orElse: () => Effect.void
    })),
  /**
   * SQLite only: every change of an API key or an avatar, by any connection, adds one to a counter
   * that the credential caches of all processes read before each lookup (Sql/KeyCache.ts).
   */
  "0009_key_changes": Effect.flatMap(SqlClient.SqlClient, (sql) =>
    sql.onDialectOrElse({
      sqlite: () =>
        Effect.forEach([KEY_CHANGES.table, KEY_CHANGES.row, ...KEY_CHANGES_TRIGGERS.map((t) => t.sql)], (ddl) => sql.unsafe(ddl), { discard: true }),
      orElse: () => Effect.void
    })),
  /** One row that readiness writes (Health.ts `ready`): a database that answers but takes no write is not ready. */
  "0010_readiness_probe": statements(`
    CREATE TABLE aigw_probe (id INTEGER PRIMARY KEY, checked_at BIGINT NOT NULL);
    INSERT INTO aigw_probe (id, checked_at) VALUES (1, 0)
  `),
  /**
   * A key's hourly `last_used_at` (ApiKeyStore `markUsed`) is no change of who a key names: the key
   * triggers of 0007 and 0009 fire only on the columns that are (its avatar, hash and revocation).
   */
  "0011_key_use_not_a_key_change": Effect.flatMap(SqlClient.SqlClient, (sql) =>
    sql.onDialectOrElse({
      pg: () =>
        Effect.zipRight(
          sql.unsafe(`DROP TRIGGER ${KEY_OWNER_TRIGGERS[0]} ON api_keys`),
          sql.unsafe(`CREATE TRIGGER ${KEY_OWNER_TRIGGERS[0]} AFTER UPDATE OF avatar_id, hash, revoked_at OR DELETE ON api_keys
            FOR EACH ROW EXECUTE FUNCTION aigw_notify_key_owner('avatar_id')`)
        ),
      sqlite: () => {
        const update = KEY_CHANGES_TRIGGERS.find((t) => t.name === "aigw_api_keys_update_counted")!
        return Effect.zipRight(sql.unsafe(`DROP TRIGGER IF EXISTS ${update.name}`), sql.unsafe(update.sql))
      },
      orElse: () => Effect.void
    })),
  /** Mails the mail server did not take at once, until sent or expired (Mail/Outbox.ts). */
  "0012_mail_outbox": statements(`
    CREATE TABLE mail_outbox (
      id TEXT PRIMARY KEY,
      to_address TEXT NOT NULL,
      subject TEXT NOT NULL,
      text_body TEXT NOT NULL,
      html_body TEXT NOT NULL,
      created_at BIGINT NOT NULL,
      expires_at BIGINT NOT NULL,
      attempts INTEGER NOT NULL,
      next_attempt_at BIGINT NOT NULL,
      locked_until BIGINT,
      last_error TEXT
    );
    CREATE INDEX mail_outbox_due ON mail_outbox (next_attempt_at)
  `),
  /**
   * The hash of the API key that submitted a job, and when a key's revocation also stopped the jobs it
   * submitted (`DELETE /v1/keys/{id}?stopJobs=true`; Jobs/Worker.ts).
   */
  "0013_job_submitting_key": statements(`
    ALTER TABLE jobs ADD COLUMN submitted_with_key TEXT;
    ALTER TABLE api_keys ADD COLUMN jobs_stopped_at BIGINT
  `),
  /**
   * PostgreSQL only: usage record ids compare byte by byte, as SQLite's do, whatever the database's
   * collation. The retention's delete (Sql/UsageStore.ts `pruneEvents`) takes the records below a time's
   * UUIDv7 as a range of this index; under a collation with contractions (Danish and Norwegian read
   * "aa" as "å", after "z") ids of some times sorted above later ones and were never pruned.
   * Rebuilds the primary key's index once.
   */
  "0014_usage_event_ids_bytewise": Effect.flatMap(SqlClient.SqlClient, (sql) =>
    sql.onDialectOrElse({
      pg: () => sql.unsafe(`ALTER TABLE usage_events ALTER COLUMN id TYPE TEXT COLLATE "C"`),
      orElse: () => Effect.void
    }))
}

const TABLE = "aigw_migrations"
/** Key of the PostgreSQL advisory lock that serialises migrators (any constant; "aigw" in ASCII). */
const LOCK_KEY = 0x61696777

const migrator = Migrator.make({})({ loader: Migrator.fromRecord(migrations), table: TABLE })

/**
 * Applies pending migrations; safe to run at every start, also by several processes at once on a
 * fresh database. The Migrator alone races there: two processes both miss the migrations table and
 * both create it (PostgreSQL: duplicate `pg_type` entry). So the whole run is one transaction that
 * first takes a lock: on PostgreSQL a transaction-scoped advisory lock, then the table is created
 * under it (inside the transaction the Migrator's own probe-then-create would abort it on a miss);
 * on SQLite the client's `BEGIN IMMEDIATE` (Sqlite.ts) takes the write lock and others wait on it.
 */
export const migrate = Effect.flatMap(SqlClient.SqlClient, (sql) => {
  const lock: Effect.Effect<unknown, SqlError> = sql.onDialectOrElse({
    pg: () =>
      Effect.zipRight(
        sql`SELECT pg_advisory_xact_lock(${LOCK_KEY})`,
        // The Migrator's own PostgreSQL definition of the table.
        sql`CREATE TABLE IF NOT EXISTS ${sql(TABLE)} (
          migration_id integer primary key,
          created_at timestamp with time zone not null default now(),
          name text not null
        )`
      ),
    orElse: () => Effect.void
  })
  return sql.withTransaction(Effect.zipRight(lock, migrator))
})
