/**
 * The runner of each job type. Batches run through the gateway's own routing (bounded
 * concurrency, a few items per step so progress survives restarts) unless they go to
 * OpenAI's Batch API; video and fine-tuning submit upstream and poll.
 */
import { Context, Effect, Layer, Option } from "effect"
import { cutText } from "../Cut.ts"
import type { CompletionInput } from "../Capabilities/Completions.ts"
import { Completions } from "../Capabilities/Completions.ts"
import { GatewayConfig } from "../Config.ts"
import { Catalog, type ConfiguredProvider, uncataloguedModel } from "../Catalog/Catalog.ts"
import {
  answeredText,
  chatAnswerOf,
  estimatedUsage,
  failedUsage,
  NO_USAGE,
  ProviderCalls,
  reportedUsage,
  type UsageRecord,
  type UsageReport,
  usageRecordOf
} from "../Engine/ProviderCalls.ts"
import type { Plan } from "../Plans.ts"
import { UpstreamError } from "../Providers/UpstreamError.ts"
import { finishedVideo } from "../Providers/Delivered.ts"
import * as OpenAiCompatible from "../Providers/OpenAiCompatible.ts"
import {
  type Batch,
  batchInputLine,
  batchResults,
  batchCreatedFor,
  cancelBatch,
  cancelFineTune,
  fineTuneCreatedFor,
  JOB_METADATA_KEY,
  createBatch,
  createFineTune,
  getBatch,
  getFineTune,
  listFineTuneEvents,
  uploadJsonl
} from "../Providers/OpenAiJobs.ts"
import { servedBy } from "../Providers/Registry.ts"
import type { VideoRequest } from "../Providers/Video/VideoAdapter.ts"
import { routed, Routing } from "../Routing.ts"
import { type AvatarRecord, AvatarStore } from "../Storage/AvatarStore.ts"
import { standingSince, standingStores } from "../Accounts/StillActing.ts"
import { isVendorId } from "../Providers/internal/vendorId.ts"
import { Usage } from "../Usage.ts"
import { type JobRecord, JobStore, type JobType } from "./JobStore.ts"
import { cancelled, done, failed, type JobRunner, wait } from "./Runner.ts"

export interface RunnerOptions {
  /** Pause between polls of an upstream job. */
  readonly pollMs: number
}

export const defaultRunnerOptions: RunnerOptions = { pollMs: 5_000 }

/** Items of a gateway-run batch per step, and how many of them run at once. */
export const BATCH_STEP_ITEMS = 8
export const BATCH_CONCURRENCY = 4

export interface BatchInput {
  readonly mode: "gateway" | "openai"
  readonly requests: ReadonlyArray<CompletionInput>
}

export interface BatchItem {
  readonly index: number
  readonly ok: boolean
  readonly result?: unknown
  readonly error?: string
}

/**
 * Where a gateway batch stands: the next request, and the characters of answers its items keep. The
 * items themselves are kept once, in the job's result (before, in its state too).
 */
export interface BatchState {
  readonly next: number
  readonly kept?: number
}

/**
 * The most characters of answers (as JSON) a gateway batch keeps. Its result is one record, written
 * at every step, read whole by every status poll and sent whole in its webhook: a hundred answers of
 * megabytes held the event loop for seconds at each. An answer past the bound is an item that failed
 * and says so; the call was made and counted.
 */
export const MAX_BATCH_RESULT_CHARS = 16 * 1024 * 1024

/**
 * Answered items as a batch keeps them, in item order: each answer within the characters the batch keeps
 * (`chars` of them kept already), else a failed item saying so. Both kinds of batch keep their answers so.
 */
export const keptWithin = (answered: ReadonlyArray<BatchItem>, chars: number) => {
  let total = chars
  const items = [...answered].sort((a, b) => a.index - b.index).map((item): BatchItem => {
    if (!item.ok) return item
    const size = JSON.stringify(item.result).length
    if (total + size > MAX_BATCH_RESULT_CHARS) {
      return { index: item.index, ok: false, error: `the answer (${size} characters) was not kept: a batch keeps at most ${MAX_BATCH_RESULT_CHARS} characters of answers; the call was made and counted` }
    }
    total += size
    return item
  })
  return { items, chars: total }
}

export const batchSummary = (total: number, items: ReadonlyArray<BatchItem>) => ({
  total,
  completed: items.filter((i) => i.ok).length,
  failed: items.filter((i) => !i.ok).length,
  items
})

const gatewayBatch = Effect.gen(function*() {
  const completions = yield* Completions
  const store = yield* JobStore
  const stores = yield* standingStores
  return (job: JobRecord, owner: AvatarRecord) =>
    Effect.gen(function*() {
      // Each item's call goes ahead only while the avatar and the key that submitted the job stand behind it: a
      // reset, deletion or the key's revocation with its jobs during the step fails it, and the worker then stops the job without its
      // webhook (Worker.ts `finish`).
      const standing = standingSince(stores, job.avatarId, job.createdAt, job.submittedWithKey, "job")
      const input = job.input as BatchInput
      const state = (job.state as BatchState | null) ?? { next: 0 }
      const before = (job.result as { readonly items?: ReadonlyArray<BatchItem> } | null)?.items ?? []
      // The step's items, but those a step cut off before it ended had already answered (kept in the result).
      const inResult = new Set(before.map((item) => item.index))
      const slice = input.requests.slice(state.next, state.next + BATCH_STEP_ITEMS)
        .map((request, i) => ({ request, index: state.next + i }))
        .filter(({ index }) => !inResult.has(index))
      /** The answers as the batch keeps them (`keptWithin`), with the items of earlier steps. */
      const kept = (answered: ReadonlyArray<BatchItem>) => {
        const { chars, items } = keptWithin(answered, state.kept ?? 0)
        return { items, chars, summary: batchSummary(input.requests.length, [...before, ...items].sort((a, b) => a.index - b.index)) }
      }
      const answered: Array<BatchItem> = []
      yield* Effect.forEach(
        slice,
        ({ index, request }) =>
          Effect.zipRight(
            standing,
            completions.complete(owner, request).pipe(
              Effect.map((result): BatchItem => ({ index, ok: true, result })),
              Effect.catchAll((e) => Effect.succeed<BatchItem>({ index, ok: false, error: e.message })),
              Effect.map((item) => void answered.push(item))
            )
          ),
        { concurrency: BATCH_CONCURRENCY, discard: true }
      ).pipe(
        // Cut off (a Lambda drain at its deadline, a host stopping): the answers that came are saved, due at once, so
        // that the next step does not call (and bill) them again. The worker's release then finds the lease gone.
        Effect.onInterrupt(() => {
          if (answered.length === 0) return Effect.void
          const { chars, summary } = kept(answered)
          return Effect.asVoid(store.progress(job.id, job.lockedUntil!, { state: { next: state.next, kept: chars }, result: summary, nextRunAt: Date.now() }, Date.now()))
        })
      )
      const { chars, summary } = kept(answered)
      const next: BatchState = { next: Math.min(state.next + BATCH_STEP_ITEMS, input.requests.length), kept: chars }
      return next.next >= input.requests.length ? done(summary) : wait(0, { state: next, result: summary })
    })
})

export interface VideoInput extends VideoRequest {
  /**
   * For `auto` with several usable providers: their ids in routing order (`Routing.providersFor`),
   * the first being the job's provider. The submit step falls back along them on a retryable
   * failure; once submitted, the job keeps the provider that accepted it.
   */
  readonly candidates?: ReadonlyArray<string> | undefined
}

export interface FineTuneInput {
  readonly baseModel: string
  readonly trainingData: ReadonlyArray<unknown>
  readonly suffix?: string | undefined
}

/**
 * The file an earlier step uploaded for the job (its state's `fileId`): the upload is a step of its own,
 * saved before the step that creates the vendor's job, so a retry of that creation does not upload the
 * file again (each retry left an orphan file at the vendor, up to 50,000 training examples a time).
 */
const uploadedFileOf = (job: JobRecord): string | undefined => {
  const fileId = (job.state as { readonly fileId?: unknown } | null)?.fileId
  return typeof fileId === "string" ? fileId : undefined
}

/** Fine-tuning and OpenAI batches need a chat message format per line. */
const itemId = (index: number) => `item-${index}`

/** Where a Batch API job stands between steps: the uploaded file, the model of each item, and its end once settled. */
interface OpenAiBatchState {
  readonly fileId?: string
  readonly models?: ReadonlyArray<string>
  /**
   * The vendor's batch ended: how the job ends, and each item's usage record (`records`) until they are written.
   * They are written by a step of their own, right after the job is claimed, then dropped from the state; the
   * step that read the batch's files (slow vendor calls) only keeps them: such a step that outlived its lease
   * wrote them a second time beside the step that took the job over. A job stopped before its records were
   * written writes them as it ends (`ended`). No records: written (or settled by an earlier release, which
   * wrote them then).
   */
  readonly settled?: { readonly status: "completed" | "failed" | "cancelled"; readonly error: string | null; readonly records?: ReadonlyArray<UsageRecord> }
}

const batchStateOf = (job: JobRecord): OpenAiBatchState => (job.state as OpenAiBatchState | null) ?? {}

/** The OpenAI Batch API (of a provider whose registry entry has `batchApi: "openai"`): upload JSONL, create the batch, poll, collect output and error files. */
const openAiBatch = (options: RunnerOptions) =>
  Effect.gen(function*() {
    const routing = yield* Routing
    const catalog = yield* Catalog
    const avatars = yield* AvatarStore
    const usage = yield* Usage

    /**
     * A Batch API item's usage record, as a routed call's (`usageRecordOf`) at the Batch API's half price: under
     * the model routing chose at upload (its entry in the catalogue with the operator's AIGW_MODELS, else the name
     * as forwarded, unpriced).
     */
    const batchUsage = (job: JobRecord, provider: ConfiguredProvider, modelId: string | undefined, report: UsageReport, ok: boolean) => {
      const id = modelId ?? "unknown"
      const model = Option.getOrElse(Option.filter(catalog.model(id), (m) => m.provider === provider.id), () => uncataloguedModel(provider.id, id, "chat"))
      const record = usageRecordOf(job.avatarId, { provider, model }, "batch", report, 0, ok)
      return { ...record, costUSD: record.costUSD * BATCH_DISCOUNT }
    }

    /** The model routing gives each item (on the owner's plan), in item order. */
    const routedModels = (job: JobRecord, provider: ConfiguredProvider, plan: Plan) =>
      Effect.forEach((job.input as BatchInput).requests, (r) =>
        Effect.map(
          routed(routing.targets({ provider: provider.id, model: r.model, plan, needsTools: (r.tools?.length ?? 0) > 0, contextTokens: 0, maxTokens: r.maxTokens })),
          ([target]) => target!.model.id
        ))

    /** Records the items' usage, all or none: a step cut off midway would record them again when repeated. */
    const recordAll = (records: ReadonlyArray<UsageRecord>) => Effect.uninterruptible(Effect.forEach(records, usage.record, { discard: true }))

    /**
     * A call the quota counted and no upstream answered, recorded as failed with no tokens (docs/quota.md),
     * as the engine records one: a vendor batch that failed, expired or was cancelled before the item ran.
     */
    const unanswered = (job: JobRecord, provider: ConfiguredProvider, modelId: string | undefined) => batchUsage(job, provider, modelId, NO_USAGE, false)

    /**
     * The vendor's batch ended (completed, failed, expired, cancelled): each item from its output or error
     * file, or failed without a result, its answer kept within the characters a batch keeps (`keptWithin`),
     * and every item's usage record. The end is saved with the items and the records; the next step writes the
     * records, and the one after ends the job.
     */
    const settle = (job: JobRecord, provider: ConfiguredProvider, batch: Batch, end: NonNullable<OpenAiBatchState["settled"]>) =>
      Effect.gen(function*() {
        const input = job.input as BatchInput
        const state = batchStateOf(job)
        const models = state.models ?? []
        // A batch that failed validation has no files; an expired or cancelled one keeps the answers that came.
        const { results, unreadable } = batch.outputFileId !== null || batch.errorFileId !== null ? yield* batchResults(provider, batch) : { results: [], unreadable: [] }
        // Lines that could not be read answer no item: the items without a result say so.
        const unread = unreadable.length === 0 ? "" : `; ${unreadable.length} line(s) of its files could not be read: ${cutText(unreadable.join("; "), 300)}`
        // Each item's first result (a repeated or foreign line is not the item's): looked up, not searched per item.
        const resultOf = new Map<string, (typeof results)[number]>()
        for (const r of results) if (!resultOf.has(r.customId)) resultOf.set(r.customId, r)
        const items: Array<BatchItem> = []
        const records: Array<UsageRecord> = []
        for (const [index, request] of input.requests.entries()) {
          const r = resultOf.get(itemId(index))
          if (!r || !r.ok) {
            items.push({ index, ok: false, error: r ? r.message : `no result for this item in the batch output (the batch ${batch.status}${unread})` })
            records.push(unanswered(job, provider, models[index]))
            continue
          }
          const body = r.body as any
          // Read as a call's answer is: a field of the wrong type, or a failed finish, is a failed item (still billed).
          const answer = chatAnswerOf(OpenAiCompatible.wire, provider.id, body)
          // Counted as a call's usage is: believable reported counts, else the tokenizer's (the prompt as sent, the answer's text).
          const report = answer instanceof UpstreamError
            ? failedUsage(answer.usage ?? {})
            : reportedUsage(answer.usage) ?? (yield* estimatedUsage(answer.usage, request.messages, answeredText(answer)))
          const record = batchUsage(job, provider, models[index], report, !(answer instanceof UpstreamError))
          records.push(record)
          items.push(
            answer instanceof UpstreamError
              ? { index, ok: false, error: answer.message }
              : {
                index,
                ok: true,
                result: {
                  provider: provider.id,
                  model: isVendorId(body?.model) ? body.model : models[index],
                  content: answer.content,
                  ...(answer.toolCalls.length > 0 ? { toolCalls: answer.toolCalls } : {}),
                  finishReason: answer.finishReason,
                  usage: { promptTokens: report.promptTokens, completionTokens: report.completionTokens, totalTokens: report.totalTokens, estimated: report.estimated },
                  costUSD: record.costUSD
                }
              }
          )
        }
        const result = { ...batchSummary(input.requests.length, keptWithin(items, 0).items), upstreamBatchId: batch.id, upstreamStatus: batch.status }
        return wait(0, { state: { ...state, settled: { ...end, records } }, result })
      })

    const advance = (job: JobRecord, owner: AvatarRecord, provider: ConfiguredProvider) =>
      Effect.gen(function*() {
        const input = job.input as BatchInput
        const state = batchStateOf(job)
        if (state.settled !== undefined) {
          const { error, records, status } = state.settled
          if (records !== undefined) {
            yield* recordAll(records)
            return wait(0, { state: { ...state, settled: { status, error } } })
          }
          return status === "completed" ? done(job.result) : status === "cancelled" ? cancelled(error ?? "", job.result) : failed(error ?? "", job.result)
        }
        const uploaded = uploadedFileOf(job)
        if (job.upstreamId === null && uploaded !== undefined) {
          // A creation whose answer was lost made the batch all the same: taken, not made twice (OpenAiJobs `createdFor`).
          const batch = (yield* batchCreatedFor(provider, job.id, job.createdAt, uploaded)) ??
            (yield* createBatch(provider, uploaded, { [JOB_METADATA_KEY]: job.id }))
          return wait(options.pollMs, { upstreamId: batch.id, state: job.state, result: { upstreamStatus: batch.status, total: input.requests.length } })
        }
        if (job.upstreamId === null) {
          const models = yield* routedModels(job, provider, owner.plan)
          const lines = input.requests.map((r, i) => batchInputLine(itemId(i), OpenAiCompatible.toWireRequest(provider.id, { ...r, model: models[i]! }, false)))
          return wait(0, { state: { models, fileId: yield* uploadJsonl(provider, "batch", lines, `aigw-batch-${job.id}.jsonl`) } })
        }
        const batch = yield* getBatch(provider, job.upstreamId)
        switch (batch.status) {
          case "validating":
          case "in_progress":
          case "finalizing":
          case "cancelling":
            return stillWaiting(job, batch.status, options.pollMs, { result: { upstreamStatus: batch.status, ...batch.requestCounts, total: input.requests.length } })
          case "completed":
            return yield* settle(job, provider, batch, { status: "completed", error: null })
          case "cancelled":
            return yield* settle(job, provider, batch, { status: "cancelled", error: `OpenAI batch ${batch.id} was cancelled upstream` })
          default:
            return yield* settle(job, provider, batch, {
              status: "failed",
              error: `OpenAI batch ${batch.id} ended ${batch.status}${batch.errors.length > 0 ? `: ${batch.errors.map((e) => e.message ?? e.code ?? "an error without a message").join("; ")}` : ""}`
            })
        }
      })

    /**
     * The job ended: the records of a settled batch stopped before its step wrote them are written (whatever
     * became of its provider since). A batch that ended failed or cancelled before its vendor's end was settled
     * (its file refused, its creation failed, the vendor's job never settled) has each item the quota counted
     * recorded as failed, under the model routing gave it (the one it asked for when routing cannot say now),
     * while its provider is configured.
     */
    const ended = (job: JobRecord, configured: Option.Option<ConfiguredProvider>) =>
      Effect.gen(function*() {
        const state = batchStateOf(job)
        if (state.settled !== undefined) return yield* recordAll(state.settled.records ?? [])
        if (Option.isNone(configured)) return
        const provider = configured.value
        const requests = (job.input as BatchInput).requests
        const owner = yield* avatars.findById(job.avatarId)
        const models = state.models ??
          (yield* Option.match(owner, {
            onNone: () => Effect.succeed(requests.map((r) => r.model)),
            onSome: (o) => Effect.orElseSucceed(routedModels(job, provider, o.plan), () => requests.map((r) => r.model))
          }))
        yield* recordAll(requests.map((_, i) => unanswered(job, provider, models[i])))
      })

    return { advance, ended }
  })

export const BATCH_DISCOUNT = 0.5

/**
 * How long a job may wait on its vendor, from its submission: a vendor whose job never settles (its
 * status going back and forth) is not polled forever. OpenAI batches have a 24-hour window; video
 * generations take minutes; fine-tuning can take days.
 */
export const VENDOR_WAIT_LIMITS_HOURS: Readonly<Record<JobType, number>> = { batch: 26, video: 6, finetune: 7 * 24 }

/** The next poll of a job its vendor is still working on, or its failure once it waited past its limit. */
export const stillWaiting = (job: JobRecord, upstreamStatus: string, afterMs: number, extra: Parameters<typeof wait>[1]) => {
  const hours = VENDOR_WAIT_LIMITS_HOURS[job.type]
  return Date.now() - job.createdAt > hours * 3_600_000
    ? failed(`${job.provider} did not finish the ${job.type} job within ${hours} hours (its last status: ${upstreamStatus})`, { provider: job.provider, upstreamId: job.upstreamId })
    : wait(afterMs, extra)
}

export type JobRunnersMap = Partial<Record<JobType, JobRunner>>

/**
 * The usage record of a job that is one counted call (a video, a fine-tune), when it ends: at cost 0, as
 * calls to vendors that bill per unit of their own are (docs/quota.md), failed unless it completed, its
 * latency the job's life. It was counted at submission and never recorded.
 */
const jobCallRecorded = (usage: Usage["Type"], capability: "video" | "finetune", modelOf: (job: JobRecord) => string | undefined) =>
  (job: JobRecord, status: "completed" | "failed" | "cancelled") =>
    usage.record({
      avatarId: job.avatarId,
      provider: job.provider,
      model: modelOf(job) ?? job.provider,
      capability,
      promptTokens: 0,
      completionTokens: 0,
      costUSD: 0,
      latencyMs: Math.max(0, Date.now() - job.createdAt),
      estimated: false,
      ok: status === "completed"
    })

/**
 * A fine-tuning base model, routed as a chat call on that provider would be (the model's plan, a gated
 * model named another way): training makes a copy of the model to call. At submit and until the vendor
 * has the job.
 */
export const baseModelRouted = (provider: string, baseModel: string, plan: Plan) =>
  Effect.flatMap(Routing, (r) => routed(r.targets({ provider, model: baseModel, plan, needsTools: false, contextTokens: 0 })))

const make = (options: RunnerOptions) =>
  Effect.gen(function*() {
    const catalog = yield* Catalog
    const routing = yield* Routing
    const calls = yield* ProviderCalls
    const runGatewayBatch = yield* gatewayBatch
    const vendorBatch = yield* openAiBatch(options)
    const usage = yield* Usage
    /** The job's provider with credentials, or a failed step when it is no longer configured. */
    const providerOf = (job: JobRecord) =>
      Option.filter(catalog.provider(job.provider), (p) => p.configured)
    /** A runner's `stop`: `cancel` the job's upstream work at its provider, when that is still configured. */
    const atVendor = (job: JobRecord, cancel: (p: ConfiguredProvider, upstreamId: string) => Effect.Effect<unknown, UpstreamError>) =>
      Option.match(providerOf(job), { onNone: () => Effect.void, onSome: (p) => Effect.asVoid(cancel(p, job.upstreamId!)) })

    const runners: JobRunnersMap = {
      batch: {
        advance: (job, owner) => {
          if ((job.input as BatchInput).mode === "gateway") return runGatewayBatch(job, owner)
          return Option.match(providerOf(job), {
            onNone: () => Effect.succeed(failed(`provider ${job.provider} is not configured any more`)),
            onSome: (p) => vendorBatch.advance(job, owner, p)
          })
        },
        // A gateway batch has no upstream job; a Batch API batch is cancelled at its vendor.
        stop: (job) => ((job.input as BatchInput).mode === "gateway" ? Effect.void : atVendor(job, cancelBatch)),
        // The provider as stored: its records name it even when it is no longer configured.
        // A completed Batch API batch recorded its items when it settled; a gateway batch records each item as it is called.
        ended: (job) =>
          (job.input as BatchInput).mode === "gateway"
            ? Effect.void
            : vendorBatch.ended(job, catalog.provider(job.provider))
      },
      video: {
        ended: jobCallRecorded(usage, "video", (job) => (job.input as VideoInput).model),
        stop: (job) => atVendor(job, (p, id) => servedBy(p).video?.cancel?.(p, id) ?? Effect.void),
        advance: (job) =>
          Effect.gen(function*() {
            const cannot = failed(`provider ${job.provider} cannot generate video here`)
            if (job.upstreamId === null) {
              const { candidates, ...request } = job.input as VideoInput
              // The job's provider first, then the other `auto` candidates; those still configured with a video client.
              const usable = [...new Set([job.provider, ...(candidates ?? [])])].flatMap((id) =>
                Option.toArray(Option.filter(catalog.provider(id), (p) => p.configured && servedBy(p).video !== undefined))
              )
              if (usable.length === 0) return cannot
              const accepted = yield* calls.firstSuccessEffect(
                usable.map((p) => ({ provider: p, model: request.model ?? "" })),
                (c) => servedBy(c.provider).video!.submit(c.provider, request)
              )
              return wait(options.pollMs, {
                upstreamId: accepted.value.upstreamId,
                provider: accepted.candidate.provider.id,
                result: { upstreamStatus: "submitted", ...(accepted.fallbacks.length > 0 ? { fallbacks: accepted.fallbacks } : {}) }
              })
            }
            const provider = providerOf(job)
            const adapter = Option.isSome(provider) ? servedBy(provider.value).video : undefined
            if (Option.isNone(provider) || !adapter) return cannot
            const poll = yield* adapter.poll(provider.value, job.upstreamId)
            switch (poll.status) {
              case "pending":
              case "running":
                return stillWaiting(job, poll.status, options.pollMs, { result: { upstreamStatus: poll.status } })
              case "succeeded": {
                // Whichever vendor made it: a link a client may follow, details that are short text or numbers.
                const video = finishedVideo(poll.videoUrl, poll.details)
                if ("problem" in video) {
                  return failed(`${job.provider} finished the video, but ${video.problem}`, { provider: job.provider, upstreamId: job.upstreamId })
                }
                return done({ videoUrl: poll.videoUrl, provider: job.provider, upstreamId: job.upstreamId, ...video.details })
              }
              case "failed":
                return failed(poll.error, { provider: job.provider, upstreamId: job.upstreamId })
              case "cancelled":
                return cancelled(poll.error, { provider: job.provider, upstreamId: job.upstreamId })
            }
          })
      },
      finetune: {
        ended: jobCallRecorded(usage, "finetune", (job) => (job.input as FineTuneInput).baseModel),
        stop: (job) => atVendor(job, cancelFineTune),
        advance: (job, owner) =>
          Effect.gen(function*() {
            const provider = providerOf(job)
            if (Option.isNone(provider)) return failed(`provider ${job.provider} is not configured any more`)
            const input = job.input as FineTuneInput
            if (job.upstreamId === null) {
              // Until the vendor has the job, the base model is routed on the owner's plan as at submit
              // (a plan lowered since fails the job, as it fails a batch's first step).
              yield* Effect.provideService(baseModelRouted(provider.value.id, input.baseModel, owner.plan), Routing, routing)
              const fileId = uploadedFileOf(job)
              if (fileId === undefined) return wait(0, { state: { fileId: yield* uploadJsonl(provider.value, "fine-tune", input.trainingData, `aigw-finetune-${job.id}.jsonl`) } })
              const created = (yield* fineTuneCreatedFor(provider.value, job.id, job.createdAt, fileId)) ??
                (yield* createFineTune(provider.value, { trainingFileId: fileId, model: input.baseModel, suffix: input.suffix, metadata: { [JOB_METADATA_KEY]: job.id } }))
              return wait(options.pollMs, { upstreamId: created.id, result: { upstreamStatus: created.status, baseModel: input.baseModel, trainingFile: fileId } })
            }
            const ft = yield* getFineTune(provider.value, job.upstreamId)
            const summary = { baseModel: input.baseModel, upstreamStatus: ft.status, trainingFile: ft.trainingFile, fineTunedModel: ft.fineTunedModel, trainedTokens: ft.trainedTokens }
            if (ft.status === "validating_files" || ft.status === "queued" || ft.status === "running") return stillWaiting(job, ft.status, options.pollMs, { result: summary })
            // The events are the job's log, told beside its end: a list the vendor could not give does not change that end.
            const { events } = yield* listFineTuneEvents(provider.value, job.upstreamId, { limit: 20 }).pipe(
              Effect.catchAll((e) => Effect.as(Effect.logWarning(`job ${job.id} (finetune): its events could not be read: ${e.message}`), { events: [] }))
            )
            const withEvents = { ...summary, events: events.map((e) => ({ at: new Date(e.createdAt * 1000).toISOString(), level: e.level, message: e.message })) }
            if (ft.status === "succeeded") return done(withEvents)
            if (ft.status === "cancelled") return cancelled(ft.error?.message ?? `fine-tuning job ${ft.id} was cancelled upstream`, withEvents)
            return failed(ft.error?.message ?? `fine-tuning ended ${ft.status}`, withEvents)
          })
      }
    }
    return runners
  })

export class JobRunners extends Context.Tag("aigw/JobRunners")<JobRunners, JobRunnersMap>() {}

export const layer = (options: Partial<RunnerOptions> = {}) =>
  Layer.effect(JobRunners, Effect.flatMap(GatewayConfig, (c) => make({ ...defaultRunnerOptions, pollMs: c.jobPollMs, ...options })))
