/**
 * Test databases: a temp SQLite file, or a fresh PostgreSQL database on the server named by
 * AIGW_TEST_PG_URL (.ci/run starts one). In CI a missing URL fails loudly; locally the
 * PostgreSQL suites are skipped with a warning.
 */
import * as path from "node:path"
import pg from "pg"
import { scratchDir } from "./scratch.ts"

export const pgUrl = process.env.AIGW_TEST_PG_URL
if (!pgUrl && process.env.CI) throw new Error("AIGW_TEST_PG_URL is not set: CI must run the PostgreSQL suites")
export const hasPg = pgUrl !== undefined && pgUrl !== ""
if (!hasPg) console.warn("AIGW_TEST_PG_URL not set: skipping PostgreSQL suites (run `eval \"$(bash .ci/pg.sh start)\"`)")

/**
 * A new, empty PostgreSQL database; returns its URL. `icuLocale` makes ICU's collation of that locale the
 * database's default (e.g. `da`, where "aa" sorts after "z").
 */
export const freshPgDatabase = async (options: { readonly icuLocale?: "da" } = {}): Promise<string> => {
  const name = `aigw_test_${Date.now().toString(36)}_${Math.random().toString(36).slice(2, 8)}`
  const client = new pg.Client({ connectionString: pgUrl })
  await client.connect()
  try {
    await client.query(options.icuLocale === undefined
      ? `CREATE DATABASE ${name}`
      : `CREATE DATABASE ${name} TEMPLATE template0 LOCALE_PROVIDER icu ICU_LOCALE '${options.icuLocale}' LOCALE 'C.UTF-8'`)
  } finally {
    await client.end()
  }
  const url = new URL(pgUrl!)
  url.pathname = `/${name}`
  return url.toString()
}

/** A new SQLite file URL under the OS temp dir. */
export const freshSqliteUrl = (): string => {
  const dir = scratchDir("aigw-sqlite-")
  return `sqlite:${path.join(dir, "test.sqlite")}`
}

export const freshDatabaseUrl = (kind: "sqlite" | "pg") => (kind === "pg" ? freshPgDatabase() : Promise.resolve(freshSqliteUrl()))
