/** Small helpers shared by the SQL stores (row decoding across SQLite and PostgreSQL). */
import type { SqlClient } from "@effect/sql/SqlClient"
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
