/**
 * What the gateway writes that holds secrets is readable by its owner only: the file mailer's mails
 * (live verification and reset links) and a new SQLite database (password and token hashes), whose
 * -wal and -shm files SQLite makes with the database file's permissions. They were 0644 in a 0755
 * directory: any local user could reset any account.
 */
import * as SqlClient from "@effect/sql/SqlClient"
import { Effect } from "effect"
import * as fs from "node:fs"
import * as path from "node:path"
import { describe, expect, it } from "vitest"
import * as Mailer from "../../src/Mail/Mailer.ts"
import * as Database from "../../src/Storage/Database.ts"
import { scratchDir } from "../support/scratch.ts"

const modeOf = (file: string) => fs.statSync(file).mode & 0o777

describe("files that hold secrets", () => {
  it("the file mailer writes each mail 0600 in a 0700 directory", async () => {
    const dataDir = scratchDir("aigw-perm-mail-")
    await Effect.runPromise(
      Effect.flatMap(Mailer.Mailer, (m) => m.send({ to: "a@example.com", subject: "Reset", text: "https://gw.example/reset?token=t", html: "<p>reset</p>" })).pipe(
        Effect.provide(Mailer.layerFile(dataDir))
      )
    )
    const dir = path.join(dataDir, "mail")
    expect(modeOf(dir)).toBe(0o700)
    const [mail] = fs.readdirSync(dir)
    expect(modeOf(path.join(dir, mail!))).toBe(0o600)
  })

  it("a new SQLite database and its WAL are 0600; an existing file keeps its mode", async () => {
    const dir = scratchDir("aigw-perm-db-")
    const fresh = path.join(dir, "fresh.sqlite")
    const kept = path.join(dir, "kept.sqlite")
    fs.writeFileSync(kept, "", { mode: 0o640 })
    fs.chmodSync(kept, 0o640)
    // The modes of the database's files while it is open (the WAL goes at the last close).
    const modesWhileOpen = (file: string) =>
      Effect.runPromise(
        Effect.flatMap(SqlClient.SqlClient, (sql) => sql`CREATE TABLE IF NOT EXISTS t (x INTEGER)`.pipe(Effect.zipRight(sql`INSERT INTO t VALUES (1)`))).pipe(
          Effect.map(() => [modeOf(file), modeOf(`${file}-wal`)]),
          Effect.provide(Database.layer(`sqlite:${file}`, { migrate: false }))
        )
      )
    expect(await modesWhileOpen(fresh)).toEqual([0o600, 0o600])
    expect((await modesWhileOpen(kept))[0]).toBe(0o640)
  })
})
