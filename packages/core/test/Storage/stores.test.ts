import { Effect, Layer } from "effect"
import { describe } from "vitest"
import * as Database from "../../src/Storage/Database.ts"
import * as Stores from "../../src/Storage/Stores.ts"
import { freshPgDatabase, freshSqliteUrl, hasPg } from "../support/databases.ts"
import { storeSuite } from "./stores.suite.ts"

const sqlStores = (url: Effect.Effect<string>) =>
  Layer.unwrapEffect(Effect.map(url, (u) => Stores.layerSql.pipe(Layer.provide(Database.layer(u)))))

storeSuite("memory", Stores.layerMemory)
storeSuite("sqlite", sqlStores(Effect.sync(freshSqliteUrl)))
describe.skipIf(!hasPg)("postgres", () => {
  storeSuite("postgres", sqlStores(Effect.promise(freshPgDatabase)))
})
