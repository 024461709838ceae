/**
 * Layer presets. `layerServices` needs stores, a Mailer and GatewayConfig; the presets add them:
 * `layerMemory` (unit tests, throw-away embedding) and `layerDatabase(url)` (SQLite or PostgreSQL).
 */
import { Config, Effect, Layer, Option } from "effect"
import * as ApiKeys from "./Accounts/ApiKeys.ts"
import * as Auth from "./Accounts/Auth.ts"
import * as Avatars from "./Accounts/Avatars.ts"
import * as Jwt from "./Accounts/Jwt.ts"
import * as Passwords from "./Accounts/Passwords.ts"
import * as GatewayConfig from "./Config.ts"
import * as Mailer from "./Mail/Mailer.ts"
import * as MailOutbox from "./Mail/Outbox.ts"
import * as Smtp from "./Mail/Smtp.ts"
import * as UsageRetention from "./UsageRetention.ts"
import * as Completions from "./Capabilities/Completions.ts"
import * as Embeddings from "./Capabilities/Embeddings.ts"
import * as LlmTasks from "./Capabilities/LlmTasks.ts"
import * as Agents from "./Capabilities/Agents.ts"
import * as Braid from "./Capabilities/Braid.ts"
import * as Learning from "./Capabilities/Learning.ts"
import * as Holons from "./Capabilities/Holons.ts"
import * as Orchestrators from "./Capabilities/Orchestrators.ts"
import * as CodeExecution from "./Capabilities/CodeExecution.ts"
import * as Sandboxes from "./Capabilities/Sandboxes.ts"
import * as GraphRag from "./Capabilities/GraphRag.ts"
import * as Media from "./Capabilities/Media.ts"
import * as Memory from "./Capabilities/Memory.ts"
import * as Orchestration from "./Capabilities/Orchestration.ts"
import * as ReasoningNetwork from "./Capabilities/ReasoningNetwork.ts"
import * as TaskClassifier from "./Ml/TaskClassifier.ts"
import * as TextEmbedder from "./Ml/TextEmbedder.ts"
import * as Catalog from "./Catalog/Catalog.ts"
import * as Jobs from "./Jobs/Jobs.ts"
import * as JobRunners from "./Jobs/Runners.ts"
import * as JobWorker from "./Jobs/Worker.ts"
import * as WebhookDelivery from "./Webhooks/Delivery.ts"
import * as Routing from "./Routing.ts"
import * as ProviderHealth from "./Providers/ProviderHealth.ts"
import { layerReplyLimit } from "./Providers/internal/http.ts"
import * as Quota from "./Quota.ts"
import * as Usage from "./Usage.ts"
import * as ProviderCalls from "./Engine/ProviderCalls.ts"
import * as Exporters from "./Observability/Exporters.ts"
import * as Database from "./Storage/Database.ts"
import * as Metering from "./Storage/Metering.ts"
import * as Stores from "./Storage/Stores.ts"
import * as Tracing from "./Tracing.ts"

/** Every core service, given stores, a Mailer and GatewayConfig. */
export const layerServices = Layer.mergeAll(Jobs.layer, JobWorker.layer, WebhookDelivery.layer()).pipe(
  Layer.provideMerge(JobRunners.layer()),
  Layer.provideMerge(Layer.mergeAll(LlmTasks.layer, Memory.layer, Orchestration.layer, ReasoningNetwork.layer, Media.layer, GraphRag.layer, CodeExecution.layer, Holons.layer, Orchestrators.layer)),
  // The agent registry and learning sit under the reasoning network that ranks and records with them.
  Layer.provideMerge(Learning.layer),
  Layer.provideMerge(Agents.layer),
  Layer.provideMerge(Layer.mergeAll(Completions.layer, Embeddings.layer)),
  Layer.provideMerge(Layer.mergeAll(Routing.layer, Avatars.layer, Auth.layer, Quota.layer, Usage.layer)),
  Layer.provideMerge(ProviderCalls.layer),
  Layer.provideMerge(Exporters.layer),
  Layer.provideMerge(Layer.mergeAll(Jwt.layer, Passwords.layer, ApiKeys.layer, Catalog.layer, ProviderHealth.layer, TaskClassifier.layer, TextEmbedder.layer, Braid.layer, layerReplyLimit, Sandboxes.layer, MailOutbox.layer))
)

/** What the HTTP application and the MCP toolkit need from their host (Metering comes with the stores). */
export type CoreServices = Layer.Layer.Success<typeof layerServices> | Metering.Metering | GatewayConfig.GatewayConfig

/** Services on memory stores. Provide a Mailer (e.g. Mailer.layerMemory) and GatewayConfig. */
export const layerMemory = layerServices.pipe(Layer.provideMerge(Stores.layerMemory))

/** Services on SQL stores for a DATABASE_URL (migrations applied). Provide a Mailer and GatewayConfig. */
export const layerDatabase = (url: string, options: Database.DatabaseOptions & { readonly migrate?: boolean } = {}) =>
  layerServices.pipe(Layer.provideMerge(Stores.layerSql), Layer.provideMerge(Database.layer(url, options)))

/** The Mailer the configuration asks for: SMTP when SMTP_URL is set, else log + files under the data dir. */
export const layerMailer = Layer.unwrapEffect(
  Effect.map(GatewayConfig.GatewayConfig, (c) =>
    Option.match(c.smtpUrl, {
      onNone: () => Mailer.layerFile(c.dataDir),
      onSome: (url) => Smtp.layer({ url, from: c.mailFrom })
    }))
)

/**
 * Background work for long-lived hosts: job, webhook and mail rounds, and the usage records' retention
 * (the Lambda host drains on a schedule instead).
 */
export const layerBackground = Layer.merge(JobWorker.layerLoop, UsageRetention.layerLoop)

/** Creates the AIGW_ADMIN_* avatar at start when no Admin exists. */
export const layerBootstrap = Layer.effectDiscard(Effect.flatMap(Avatars.Avatars, (a) => a.bootstrapAdmin))

export const DEFAULT_DATABASE_URL = "sqlite:./data/aigw.sqlite"

/**
 * Everything from the environment (DESIGN.md §3): what the node and lambda hosts run.
 * `keyCacheSeconds`: the host's default for AIGW_KEY_CACHE_SECONDS.
 */
export const layerFromEnv = (options: { readonly migrate?: boolean; readonly keyCacheSeconds?: number } = {}) =>
  Layer.unwrapEffect(
    Effect.map(
      Config.all([
        Config.string("DATABASE_URL").pipe(Config.withDefault(DEFAULT_DATABASE_URL)),
        Config.integer("AIGW_KEY_CACHE_SECONDS").pipe(
          Config.validate({ message: "must be 0 (off) or a number of seconds up to 2147483647", validation: (n) => n >= 0 && n <= GatewayConfig.LIMIT_MAX }),
          Config.withDefault(options.keyCacheSeconds ?? Database.DEFAULT_KEY_CACHE_SECONDS)
        )
      ]),
      ([url, keyCacheSeconds]) =>
        layerBootstrap.pipe(
          Layer.provideMerge(layerDatabase(url, { migrate: options.migrate, keyCacheSeconds })),
          Layer.provideMerge(layerMailer),
          Layer.provideMerge(GatewayConfig.layerConfig)
        )
    )
  ).pipe(Layer.orDie, Layer.provide(Tracing.layerFromEnv))
