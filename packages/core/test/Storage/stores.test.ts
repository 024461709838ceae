import { Effect, Layer } from "effect"
import { describe } from "vitest"
import * as Database from "../../src/Storage/Database.ts"
import * as Metering from "../../src/Storage/Metering.ts"
import * as Stores from "../../src/Storage/Stores.ts"
import { freshPgDatabase, freshSqliteUrl, hasPg } from "../support/databases.ts"
import { storeSuite } from "./stores.suite.ts"

// Layer.fresh: the suites of this file must not share a build of the same layer value.
const sqlStores = (url: Effect.Effect<string>) =>
  Layer.unwrapEffect(Effect.map(url, (u) => Layer.fresh(Metering.layer).pipe(Layer.provideMerge(Layer.fresh(Stores.layerSql)), Layer.provide(Database.layer(u)))))

storeSuite("memory", Layer.fresh(Metering.layer).pipe(Layer.provideMerge(Stores.layerMemory)))
storeSuite("sqlite", sqlStores(Effect.sync(freshSqliteUrl)))
describe.skipIf(!hasPg)("postgres", () => {
  storeSuite("postgres", sqlStores(Effect.promise(freshPgDatabase)))
})
