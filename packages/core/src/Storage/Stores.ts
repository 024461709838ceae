/**
 * All stores at once, with the Metering port: the memory layer (unit tests, throw-away embedding)
 * and the SQL layer (SQLite or PostgreSQL, whichever SqlClient is provided).
 */
import { Layer } from "effect"
import * as JobStore from "../Jobs/JobStore.ts"
import * as MailOutboxStore from "./MailOutboxStore.ts"
import * as SqlMailOutboxStore from "./Sql/MailOutboxStore.ts"
import * as ApiKeyStore from "./ApiKeyStore.ts"
import * as DocumentStore from "./DocumentStore.ts"
import * as MemoryStore from "./MemoryStore.ts"
import * as Metering from "./Metering.ts"
import * as SqlDocumentStore from "./Sql/DocumentStore.ts"
import * as SqlMemoryStore from "./Sql/MemoryStore.ts"
import * as AvatarStore from "./AvatarStore.ts"
import * as OneTimeTokenStore from "./OneTimeTokenStore.ts"
import * as SendLimitStore from "./SendLimitStore.ts"
import * as SqlApiKeyStore from "./Sql/ApiKeyStore.ts"
import * as SqlAvatarStore from "./Sql/AvatarStore.ts"
import * as SqlJobStore from "./Sql/JobStore.ts"
import * as SqlMetering from "./Sql/Metering.ts"
import * as SqlOneTimeTokenStore from "./Sql/OneTimeTokenStore.ts"
import * as SqlSendLimitStore from "./Sql/SendLimitStore.ts"
import * as SqlUsageStore from "./Sql/UsageStore.ts"
import * as UsageStore from "./UsageStore.ts"

// Memory Metering works on the memory stores' data (keys, avatars, daily counters).
export const layerMemory = Metering.layerMemory.pipe(Layer.provideMerge(Layer.mergeAll(
  AvatarStore.layerMemory,
  OneTimeTokenStore.layerMemory,
  SendLimitStore.layerMemory,
  ApiKeyStore.layerMemory,
  UsageStore.layerMemory,
  JobStore.layerMemory,
  MemoryStore.layerMemory,
  DocumentStore.layerMemory,
  MailOutboxStore.layerMemory
)))

export const layerSql = Layer.mergeAll(
  SqlAvatarStore.layer,
  SqlOneTimeTokenStore.layer,
  SqlSendLimitStore.layer,
  SqlApiKeyStore.layer,
  SqlUsageStore.layer,
  SqlJobStore.layer,
  SqlMemoryStore.layer,
  SqlDocumentStore.layer,
  SqlMailOutboxStore.layer,
  SqlMetering.layer
)

export type Stores =
  | AvatarStore.AvatarStore
  | OneTimeTokenStore.OneTimeTokenStore
  | SendLimitStore.SendLimitStore
  | ApiKeyStore.ApiKeyStore
  | UsageStore.UsageStore
  | JobStore.JobStore
  | MemoryStore.MemoryStore
  | DocumentStore.DocumentStore
  | MailOutboxStore.MailOutboxStore
  | Metering.Metering
