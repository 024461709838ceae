/** Small helpers shared by the SQL stores (row decoding across SQLite and PostgreSQL). */
import type { SqlClient } from "@effect/sql/SqlClient"
import type { Fragment } from "@effect/sql/Statement"
import type { SqlError } from "@effect/sql/SqlError"

/** PostgreSQL returns BIGINT and SUM() as strings; SQLite returns numbers. */
export const num = (v: unknown): number => (v === null || v === undefined ? 0 : Number(v))
export const numOrNull = (v: unknown): number | null => (v === null || v === undefined ? null : Number(v))
export const bool = (v: unknown): boolean => v === true || v === 1 || v === "1" || v === "t"

/** True when the driver reports a unique-constraint violation; `column` narrows to one index. */
export const isUniqueViolation = (error: SqlError, column?: string): boolean => {
  const cause = error.cause as { code?: string; constraint?: string; message?: string } | undefined
  const unique = cause?.code === "23505" || (cause?.code ?? "").startsWith("SQLITE_CONSTRAINT")
  if (!unique || column === undefined) return unique
  return `${cause?.constraint ?? ""} ${cause?.message ?? ""}`.includes(column)
}

/**
 * The clause that makes a claim's `SELECT … LIMIT n` skip rows another transaction is claiming
 * (PostgreSQL: concurrent workers take different rows). SQLite serialises writers, so the plain
 * `UPDATE … WHERE id IN (SELECT …)` is already exclusive there.
 */
export const skipLocked = (sql: SqlClient) => sql.onDialectOrElse({ pg: () => sql.literal("FOR UPDATE SKIP LOCKED"), orElse: () => sql.literal("") })

/**
 * Claims up to `limit` rows of `table` (one of the attempt queues: webhook deliveries, mails) due at `now` and
 * held by no process, oldest due first: each leased until `now + leaseMs`, its attempt counted before it is
 * made (a crash mid-attempt cannot make the same attempt number twice). `due`: the queue's own condition.
 */
export const claimAttempts = (sql: SqlClient, table: string, due: Fragment, now: number, limit: number, leaseMs: number) =>
  sql`UPDATE ${sql(table)} SET locked_until = ${now + leaseMs}, attempts = attempts + 1 WHERE id IN (
        SELECT id FROM ${sql(table)}
        WHERE ${due} AND next_attempt_at <= ${now} AND (locked_until IS NULL OR locked_until < ${now})
        ORDER BY next_attempt_at LIMIT ${limit} ${skipLocked(sql)}
      ) RETURNING *`
