/**
 * Usage exporters (docs/observability.md "Exporting to Langfuse, PromptLayer, Braintrust"): every
 * call the engine records (ProviderCalls.ts `recordUsage`) is also handed to the observability
 * vendors that are configured (`LANGFUSE_API_KEY`, `PROMPTLAYER_API_KEY`, `BRAINTRUST_API_KEY` +
 * `BRAINTRUST_PROJECT_ID`). Handing over is synchronous and cannot fail: the event goes into a
 * fixed-size queue per vendor (when full, the oldest is dropped and counted), and the queues are
 * sent in batches on an interval, at scope close (shutdown) and when a host asks (Lambda, at the end
 * of an invocation). A batch that fails with a retryable error (5xx, 429, network, timeout) is
 * retried with exponential backoff and given up after `maxAttempts`.
 *
 * Privacy: the avatar id leaves only as an HMAC-SHA256 under a per-deployment salt (`saltOf`);
 * prompt and completion text never reach this module, so they are never exported.
 */
import { Context, Effect, Layer, Option, Redacted, Runtime } from "effect"
import { createHash, createHmac, randomBytes } from "node:crypto"
import { existsSync, readFileSync, writeFileSync } from "node:fs"
import { join } from "node:path"
import { Catalog, type ConfiguredProvider } from "../Catalog/Catalog.ts"
import { GatewayConfig } from "../Config.ts"
import { startupError } from "../StartupError.ts"
import * as Metrics from "../Metrics.ts"
import { Cancel } from "../Providers/internal/cancel.ts"
import { UpstreamError } from "../Providers/UpstreamError.ts"
import type { UsageEvent } from "../Storage/UsageStore.ts"
import * as Braintrust from "./Braintrust.ts"
import * as Langfuse from "./Langfuse.ts"
import * as PromptLayer from "./PromptLayer.ts"
import { makeDirectory } from "../Directories.ts"

/** What the engine hands over: its usage record (ProviderCalls.ts `UsageRecord`). */
export type ObservedUsage = Omit<UsageEvent, "day" | "at">

/** One recorded call as exported: no text, the avatar hashed. */
export interface ExportEvent extends Omit<ObservedUsage, "avatarId"> {
  /** Unique per event (vendors deduplicate by it). */
  readonly id: string
  /** When the call ended (epoch ms). */
  readonly at: number
  readonly requestId: string | undefined
  /** HMAC-SHA256 of the avatar id under the deployment's salt, hex. */
  readonly avatar: string
}

/** A vendor's transport: sends one batch, resolves with how many events the vendor rejected, rejects with an UpstreamError. */
export interface Exporter {
  readonly id: string
  readonly send: (events: ReadonlyArray<ExportEvent>, cancel: Cancel) => Promise<number>
}

export interface ExportOptions {
  /** Events kept per vendor while waiting to be sent. */
  readonly capacity: number
  /** Events per request. */
  readonly batchSize: number
  readonly intervalMs: number
  /** Attempts per batch before it is given up. */
  readonly maxAttempts: number
  /** The first retry's wait; doubled for each further one. */
  readonly backoffMs: number
  /** Per request. */
  readonly timeoutMs: number
}

export const defaultOptions: ExportOptions = { capacity: 10_000, batchSize: 100, intervalMs: 5_000, maxAttempts: 4, backoffMs: 500, timeoutMs: 10_000 }

/** Exported events by vendor and outcome: sent, dropped (queue full: the oldest), failed (given up or rejected). */
export const exportedEvents = Metrics.registry.counter(
  "aigw_export_events_total",
  "Usage events for observability vendors, by exporter and outcome (sent, dropped: queue full, failed: given up or rejected).",
  ["exporter", "outcome"]
)

const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms).unref())

/** A vendor's bounded queue and its sender. `flush` never rejects; flushes run one after another. */
export const makeQueue = (exporter: Exporter, options: ExportOptions, warn: (message: string) => void = () => {}) => {
  const queue: Array<ExportEvent> = []
  let chain: Promise<void> = Promise.resolve()
  let pending = 0

  const push = (event: ExportEvent) => {
    if (queue.length >= options.capacity) {
      queue.shift()
      exportedEvents.inc([exporter.id, "dropped"])
    }
    queue.push(event)
  }

  /** One request, aborted after `timeoutMs` or at the deadline. */
  const once = (batch: ReadonlyArray<ExportEvent>, deadlineMs: number) => {
    const cancel = new Cancel()
    const ms = Math.max(0, Math.min(options.timeoutMs, deadlineMs - Date.now()))
    const timer = setTimeout(() => cancel.abort(new Error(`no answer in ${ms} ms`)), ms)
    return exporter.send(batch, cancel).finally(() => clearTimeout(timer))
  }

  /** Sends a batch, retrying retryable failures until `maxAttempts` or the deadline. */
  const deliver = async (batch: ReadonlyArray<ExportEvent>, deadlineMs: number) => {
    for (let attempt = 1; ; attempt++) {
      try {
        const rejected = await once(batch, deadlineMs)
        exportedEvents.inc([exporter.id, "sent"], batch.length - rejected)
        if (rejected > 0) {
          exportedEvents.inc([exporter.id, "failed"], rejected)
          warn(`${exporter.id} rejected ${rejected} of ${batch.length} usage events`)
        }
        return
      } catch (e) {
        const retryable = !(e instanceof UpstreamError) || e.retryable
        const wait = options.backoffMs * 2 ** (attempt - 1)
        if (!retryable || attempt >= options.maxAttempts || Date.now() + wait >= deadlineMs) {
          exportedEvents.inc([exporter.id, "failed"], batch.length)
          warn(`${exporter.id}: ${batch.length} usage events given up after ${attempt} attempt(s): ${(e as Error).message}`)
          return
        }
        await sleep(wait)
      }
    }
  }

  const drain = async (deadlineMs: number) => {
    while (queue.length > 0 && Date.now() < deadlineMs) await deliver(queue.splice(0, options.batchSize), deadlineMs)
  }

  /** Sends what is queued (and what arrives meanwhile) until the queue is empty or the deadline passes. */
  const flush = (deadlineMs = Infinity): Promise<void> => {
    pending++
    chain = chain.then(() => drain(deadlineMs)).catch(() => undefined).finally(() => {
      pending--
    })
    return chain
  }

  /** The interval's flush: skipped while one runs (a slow vendor does not pile up flushes). */
  const tick = () => {
    if (pending === 0 && queue.length > 0) void flush()
  }

  return { push, flush, tick, size: () => queue.length }
}

/** The salt's file under the data dir, when JWT_SECRET is not set. */
export const SALT_FILE = "export-salt"

/**
 * The per-deployment salt: derived from JWT_SECRET when set (the same on every instance, Lambda
 * included), else a random value kept in `<data dir>/export-salt` (created on first use).
 */
export const saltOf = (jwtSecret: Option.Option<Redacted.Redacted>, dataDir: string): Buffer => {
  if (Option.isSome(jwtSecret)) return createHash("sha256").update("aigw usage export salt\n").update(Redacted.value(jwtSecret.value)).digest()
  const file = join(dataDir, SALT_FILE)
  const read = () => {
    const salt = Buffer.from(readFileSync(file, "utf8").trim(), "hex")
    if (salt.length !== 32) throw new Error(`${file} does not hold the 64 hex digits aigw wrote there: delete it (a new salt gives new user ids at the vendors)`)
    return salt
  }
  if (existsSync(file)) return read()
  makeDirectory(dataDir)
  try {
    writeFileSync(file, randomBytes(32).toString("hex"), { mode: 0o600, flag: "wx" })
  } catch (e) {
    // Another process sharing the data dir wrote it first: use theirs.
    if ((e as NodeJS.ErrnoException).code !== "EEXIST") throw e
  }
  return read()
}

/** The exported form of an avatar id. */
export const hashAvatar = (salt: Buffer, avatarId: string) => createHmac("sha256", salt).update(avatarId).digest("hex")

/** The exporters over their queues: `observe` (engine), `flush` (shutdown, hosts), `close`. */
export const makeExporters = (exporters: ReadonlyArray<Exporter>, salt: Buffer, options: ExportOptions = defaultOptions, warn?: (message: string) => void) => {
  const queues = exporters.map((e) => makeQueue(e, options, warn))
  const timer = queues.length === 0 ? undefined : setInterval(() => queues.forEach((q) => q.tick()), options.intervalMs).unref()
  return {
    ids: exporters.map((e) => e.id),
    /** Queues a recorded call for every vendor; never throws, never waits. */
    observe: (usage: ObservedUsage, at: number, requestId: string | undefined): void => {
      if (queues.length === 0) return
      try {
        // Field by field: a field added to the usage record is not exported until chosen here.
        const event: ExportEvent = {
          id: crypto.randomUUID(),
          at,
          requestId,
          avatar: hashAvatar(salt, usage.avatarId),
          provider: usage.provider,
          model: usage.model,
          capability: usage.capability,
          promptTokens: usage.promptTokens,
          completionTokens: usage.completionTokens,
          costUSD: usage.costUSD,
          latencyMs: usage.latencyMs,
          estimated: usage.estimated,
          ok: usage.ok
        }
        for (const q of queues) q.push(event)
      } catch {
        // Exporting must never fail a call.
      }
    },
    /** Sends everything queued, until the deadline (epoch ms). */
    flush: (deadlineMs = Infinity) => Promise.all(queues.map((q) => q.flush(deadlineMs))).then(() => undefined),
    pending: () => queues.reduce((n, q) => n + q.size(), 0),
    /** Stops the interval and sends what is left, until the deadline. */
    close: (deadlineMs: number) => {
      clearInterval(timer)
      return Promise.all(queues.map((q) => q.flush(deadlineMs))).then(() => undefined)
    }
  }
}

export class Exporters extends Context.Tag("aigw/Exporters")<Exporters, ReturnType<typeof makeExporters>>() {}

/** A vendor's exporter from its configured provider, or why it cannot export. */
const exporterOf = (p: ConfiguredProvider): Exporter | string => {
  switch (p.id) {
    case "langfuse":
      return Langfuse.exporter(p)
    case "promptlayer":
      return PromptLayer.exporter(p)
    case "braintrust":
      return Braintrust.exporter(p)
    default:
      return `${p.id} is not an observability vendor`
  }
}

export const VENDORS: ReadonlyArray<string> = ["langfuse", "promptlayer", "braintrust"]

/** Time the shutdown flush may take. */
const SHUTDOWN_MS = 5_000

/** The exporters of the configured vendors (none: `observe` does nothing); flushed when the scope closes. */
export const layer = Layer.scoped(
  Exporters,
  Effect.gen(function*() {
    const catalog = yield* Catalog
    const config = yield* GatewayConfig
    const exporters: Array<Exporter> = []
    for (const p of catalog.providers) {
      if (!VENDORS.includes(p.id) || !p.configured) continue
      const made = exporterOf(p)
      if (typeof made === "string") yield* Effect.logError(`usage export to ${p.id} is off: ${made}`)
      else exporters.push(made)
    }
    const salt = exporters.length === 0 ? Buffer.alloc(0) : yield* Effect.try({
      try: () => saltOf(config.jwtSecret, config.dataDir),
      catch: (e) => startupError(`usage export: ${(e as Error).message}`, "set JWT_SECRET, or fix AIGW_DATA_DIR (docs/observability.md)")
    })
    const fork = Runtime.runFork(yield* Effect.runtime<never>())
    const service = makeExporters(exporters, salt, defaultOptions, (m) => void fork(Effect.logWarning(`usage export: ${m}`)))
    if (exporters.length > 0) yield* Effect.logInfo(`usage export to ${service.ids.join(", ")}`)
    yield* Effect.addFinalizer(() => Effect.promise(() => service.close(Date.now() + SHUTDOWN_MS)))
    return service
  })
)

/** Sends what is queued before `deadlineMs` (Lambda: before the invocation returns); nothing when no exporter is configured. */
export const flushUntil = (deadlineMs: number) =>
  Effect.flatMap(Effect.serviceOption(Exporters), (e) => Option.isSome(e) ? Effect.promise(() => e.value.flush(deadlineMs)) : Effect.void)
