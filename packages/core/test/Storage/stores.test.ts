import { Effect, Layer } from "effect"
import { describe } from "vitest"
import * as Database from "../../src/Storage/Database.ts"
import * as Stores from "../../src/Storage/Stores.ts"
import { freshPgDatabase, freshSqliteUrl, hasPg } from "../support/databases.ts"
import { storeSuite } from "./stores.suite.ts"

/** The SQL stores on a fresh database, with its client (the suite checks the dialect it runs on). */
const sqlStores = (url: Effect.Effect<string>) =>
  Layer.unwrapEffect(Effect.map(url, (u) => Stores.layerSql.pipe(Layer.provideMerge(Database.layer(u)))))

storeSuite("memory", Stores.layerMemory)
storeSuite("sqlite", sqlStores(Effect.sync(freshSqliteUrl)), "sqlite")
describe.skipIf(!hasPg)("postgres", () => {
  storeSuite("postgres", sqlStores(Effect.promise(() => freshPgDatabase())), "pg")
  // A default collation with contractions: Danish ICU, where "aa" sorts after "z" (the usage ids' order, 0014).
  storeSuite("postgres with a Danish collation", sqlStores(Effect.promise(() => freshPgDatabase({ icuLocale: "da" }))), "pg")
})
