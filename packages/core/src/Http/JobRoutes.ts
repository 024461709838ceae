/** Long-running endpoints: batch, video and fine-tuning. Each answers the job id at once. */
import { Effect, Option, Schema } from "effect"
import { Catalog, data } from "../Catalog/Catalog.ts"
import { type CompletionInput, Completions } from "../Capabilities/Completions.ts"
import { NotFound } from "../Errors.ts"
import { Jobs } from "../Jobs/Jobs.ts"
import type { BatchInput } from "../Jobs/Runners.ts"
import { CompleteBody, toChatMessages, toInput } from "./CompletionRoutes.ts"
import { BadRequest } from "../Errors.ts"
import { GatewayConfig } from "../Config.ts"
import { baseModelRouted, type FineTuneInput, type VideoInput } from "../Jobs/Runners.ts"
import { servedBy } from "../Providers/Registry.ts"
import { Routing } from "../Routing.ts"
import type { AvatarRecord } from "../Storage/AvatarStore.ts"
import * as UrlGuard from "../UrlGuard.ts"
import { storedId } from "../Accounts/Schemas.ts"
import { BatchAccepted, BatchStatus, FineTuneAccepted, JobView, VideoAccepted } from "./ResponseSchemas.ts"
import { onLane } from "./Lane.ts"
import { describeParseError as describe } from "./DecodeProblems.ts"
import { authed, Reply } from "./Route.ts"
import { BoundedArray } from "../RequestFields.ts"

const CallbackUrl = Schema.String.pipe(Schema.maxLength(2048))
export const MAX_BATCH = 100
export const MAX_TRAINING_EXAMPLES = 50_000

const VideoBody = Schema.Struct({
  prompt: Schema.String.pipe(Schema.minLength(1, { message: () => "prompt is required" }), Schema.maxLength(4000)),
  provider: Schema.optionalWith(Schema.String.pipe(Schema.maxLength(100)), { default: () => "auto" }),
  model: Schema.optional(Schema.String.pipe(Schema.maxLength(200))),
  imageUrl: Schema.optional(Schema.String.pipe(Schema.maxLength(2048))),
  duration: Schema.optional(Schema.Int.pipe(Schema.between(1, 60, { message: () => "duration must be 1 to 60 seconds" }))),
  aspectRatio: Schema.optional(Schema.String.pipe(Schema.pattern(/^[1-9]\d{0,2}:[1-9]\d{0,2}$/, { message: () => "aspectRatio must look like W:H, e.g. 16:9" }))),
  callbackUrl: Schema.optional(CallbackUrl)
})

const FineTuneBody = Schema.Struct({
  baseModel: Schema.String.pipe(Schema.minLength(1, { message: () => "baseModel is required" }), Schema.maxLength(200)),
  trainingData: BoundedArray(Schema.Unknown, {
    min: 1,
    max: MAX_TRAINING_EXAMPLES,
    minMessage: "trainingData must hold at least one example",
    maxMessage: `trainingData holds at most ${MAX_TRAINING_EXAMPLES} examples`
  }),
  provider: Schema.optionalWith(Schema.String.pipe(Schema.maxLength(100)), { default: () => "openai" }),
  suffix: Schema.optional(Schema.String.pipe(Schema.pattern(/^[A-Za-z0-9_-]{1,40}$/, { message: () => "suffix: 1-40 letters, digits, _ or -" }))),
  callbackUrl: Schema.optional(CallbackUrl)
})

/** One chat-format training example: `{ messages: [{ role, content }, ...] }` with an assistant answer. */
const TrainingExample = Schema.Struct({
  messages: Schema.Array(
    Schema.Struct({
      role: Schema.Literal("system", "user", "assistant"),
      content: Schema.String.pipe(Schema.maxLength(200_000))
    })
  ).pipe(Schema.minItems(2))
}).pipe(Schema.filter((e) => e.messages.some((m) => m.role === "assistant") || "an example needs at least one assistant message"))

/** Checks every example; the error names the first bad one by index. */
const checkTrainingData = (data: ReadonlyArray<unknown>) =>
  Effect.suspend(() => {
    const decode = Schema.decodeUnknownEither(TrainingExample)
    for (const [i, example] of data.entries()) {
      const result = decode(example, { onExcessProperty: "ignore" })
      if (result._tag === "Left") {
        return Effect.fail(new BadRequest({ message: `trainingData[${i}] is not a chat example ({ messages: [{ role, content }] } with an assistant answer): ${describe(result.left)}` }))
      }
    }
    return Effect.void
  })

const BatchBody = Schema.Struct({
  requests: BoundedArray(CompleteBody, {
    min: 1,
    max: MAX_BATCH,
    minMessage: "requests must hold at least one completion request",
    maxMessage: `a batch holds at most ${MAX_BATCH} requests`
  }),
  provider: Schema.optionalWith(Schema.String.pipe(Schema.maxLength(100)), { default: () => "auto" }),
  callbackUrl: Schema.optional(CallbackUrl)
})

/** The SSRF guard on a caller's URL (Jobs.submit applies it again when it stores the job). */
const checkUrl = (url: string | undefined, field: string) =>
  url === undefined ? Effect.void : Effect.flatMap(GatewayConfig, (config) => Effect.asVoid(UrlGuard.check(url, { allowPrivate: config.allowPrivateUrls, field })))

const videoProvider = (avatar: AvatarRecord, provider: string) =>
  Effect.flatMap(Routing, (r) => r.providerFor("video", provider, avatar.plan))
const fineTuneProvider = (avatar: AvatarRecord, provider: string) =>
  Effect.flatMap(Routing, (r) => r.providerFor("finetune", provider, avatar.plan))
/** The fine-tuning provider, with the base model refused as a chat call on that provider would refuse it (`baseModelRouted`). */
const fineTuneTarget = (avatar: AvatarRecord, provider: string, baseModel: string) =>
  Effect.flatMap(fineTuneProvider(avatar, provider), (p) => Effect.as(baseModelRouted(p.id, baseModel, avatar.plan), p))

/** The upstream batch API a provider's batches go to (Providers/Registry.ts), if it has one. */
const batchApiOf = (provider: string) =>
  Effect.map(Catalog, (c) => Option.match(c.provider(provider), { onNone: () => undefined, onSome: (p) => servedBy(p).batchApi }))

/** A batch's requests as completion inputs, each on the batch's provider unless it names its own. */
const batchRequestsOf = (body: typeof BatchBody.Type) =>
  Effect.forEach(body.requests, (r) =>
    Effect.map(toChatMessages(r.messages), (messages): CompletionInput => toInput({ ...r, provider: r.provider === "auto" ? body.provider : r.provider }, messages)))

const jobView = (type: "video" | "finetune") => ({ caller, params }: { readonly caller: AvatarRecord; readonly params: Readonly<Record<string, string | undefined>> }) =>
  Effect.flatMap(Jobs, (jobs) => Effect.flatMap(jobs.get(caller, params.jobId ?? "", type), jobs.view))

export const jobRoutes = [
  authed({
    method: "POST",
    path: "/v1/batch/submit",
    success: BatchAccepted,
    tag: "Batch",
    metered: true,
    meteredCalls: (b) => b.requests.length,
    summary: "Submit completion requests as a batch; answers the batch id at once, reports by webhook",
    description:
      "Each request counts as one call against the daily quota. `provider: \"openai\"` uses OpenAI's Batch API (up to 50% cheaper); otherwise the gateway runs the items through its own routing.",
    ...onLane(BatchBody, {
      check: ({ avatar, body }) =>
        Effect.gen(function*() {
          const requests = yield* batchRequestsOf(body)
          // A batch runs as one avatar, the caller: an item naming another would be run, and billed, as the caller.
          const other = body.requests.findIndex((r) => r.avatarId !== undefined && storedId(r.avatarId) !== avatar.id)
          if (other !== -1) {
            return yield* Effect.fail(new BadRequest({
              message: `Invalid request: requests.${other}.avatarId: a batch runs as one avatar, the caller's (an item naming another would be run and billed as the caller); submit it as the avatar it is for`,
              param: `requests.${other}.avatarId`
            }))
          }
          // The upstream Batch API needs the provider configured and allowed now, not at the first step.
          if (yield* batchApiOf(body.provider)) yield* Effect.flatMap(Routing, (r) => r.providerFor("batch", body.provider, avatar.plan))
          // Each request's refusals that depend only on it and the configuration (an unknown model or provider, a
          // provider not configured): now, before the batch is counted, not as failed items of an accepted batch.
          yield* Effect.flatMap(Completions, (c) => Effect.forEach(requests, (r) => c.check(avatar, r), { discard: true }))
          yield* checkUrl(body.callbackUrl, "callbackUrl")
        }),
      handle: ({ avatar, body }) =>
        Effect.gen(function*() {
          const requests = yield* batchRequestsOf(body)
          const mode = (yield* batchApiOf(body.provider)) ?? "gateway"
          const input: BatchInput = { mode, requests }
          const jobs = yield* Jobs
          const job = yield* jobs.submit(avatar, { type: "batch", provider: body.provider, input, callbackUrl: body.callbackUrl })
          return new Reply(
            { batchId: job.id, jobId: job.id, jobType: "batch", status: job.status, provider: job.provider, total: requests.length, statusUrl: `/v1/batch/${job.id}/status` },
            "Batch accepted."
          )
        })
    })
  }),
  authed({
    method: "GET",
    path: "/v1/batch/:batchId/status",
    success: BatchStatus,
    tag: "Batch",
    summary: "Status of a batch: counts, per-item results and errors",
    query: Schema.Struct({ provider: Schema.optional(Schema.String) }),
    handle: ({ caller, params, query }) =>
      Effect.gen(function*() {
        const jobs = yield* Jobs
        const job = yield* jobs.get(caller, params.batchId ?? "", "batch")
        if (query.provider !== undefined && query.provider !== job.provider) {
          return yield* Effect.fail(new NotFound({ message: `Batch ${job.id} was submitted with provider ${job.provider}, not ${query.provider}.` }))
        }
        const view = yield* jobs.view(job)
        return { batchId: job.id, ...view }
      })
  }),
  authed({
    method: "POST",
    path: "/v1/video/generate",
    success: VideoAccepted,
    tag: "Video",
    metered: true,
    summary: "Start a video generation (long-running); answers the job id at once, reports by webhook",
    description: `Providers with a video client: ${data.providers.filter((p) => p.capabilities.includes("video")).map((p) => p.id).join(", ")}. imageUrl and callbackUrl must be public http(s) URLs (422 otherwise).`,
    ...onLane(VideoBody, {
      check: ({ avatar, body }) =>
        Effect.gen(function*() {
          // Input first: a refused URL is reported whatever the provider situation.
          yield* checkUrl(body.imageUrl, "imageUrl")
          yield* checkUrl(body.callbackUrl, "callbackUrl")
          const provider = yield* videoProvider(avatar, body.provider)
          // What the vendor cannot honour is a 400 naming it, before a job exists.
          const request = { prompt: body.prompt, imageUrl: body.imageUrl, durationSeconds: body.duration, aspectRatio: body.aspectRatio, model: body.model }
          const refusal = servedBy(provider).video?.unsupported?.(provider, request)
          if (refusal !== undefined) return yield* Effect.fail(new BadRequest({ message: refusal }))
        }),
      handle: ({ avatar, body }) =>
        Effect.gen(function*() {
          const config = yield* GatewayConfig
          const imageUrl = body.imageUrl === undefined
            ? undefined
            : (yield* UrlGuard.check(body.imageUrl, { allowPrivate: config.allowPrivateUrls, field: "imageUrl" })).toString()
          const providers = yield* Effect.flatMap(Routing, (r) => r.providersFor("video", body.provider, avatar.plan))
          const provider = providers[0]!
          const request = { prompt: body.prompt, imageUrl, durationSeconds: body.duration, aspectRatio: body.aspectRatio, model: body.model }
          // `auto` falls back at submit (Jobs/Runners.ts) to the other providers that can honour the request; a named
          // provider comes alone, and a named model belongs to the first provider only (like Capabilities/Media.ts).
          const candidates = body.model !== undefined
            ? [provider.id]
            : providers.filter((p) => p === provider || servedBy(p).video?.unsupported?.(p, request) === undefined).map((p) => p.id)
          const input: VideoInput = candidates.length > 1 ? { ...request, candidates } : request
          const job = yield* Effect.flatMap(Jobs, (j) => j.submit(avatar, { type: "video", provider: provider.id, input, callbackUrl: body.callbackUrl }))
          return new Reply({ jobId: job.id, jobType: "video", status: job.status, provider: provider.id, statusUrl: `/v1/video/${job.id}` }, "Video generation accepted.")
        })
    })
  }),
  authed({
    method: "GET",
    path: "/v1/video/:jobId",
    success: JobView,
    tag: "Video",
    summary: "Status and result of a video job (not in the spec; for polling)",
    handle: jobView("video")
  }),
  authed({
    method: "POST",
    path: "/v1/fine-tuning/jobs",
    success: FineTuneAccepted,
    tag: "Fine-tuning",
    metered: true,
    summary: "Create a fine-tuning job from chat-format training examples; reports by webhook",
    description:
      "trainingData: [{ messages: [{ role: system|user|assistant, content }] }, …], each with an assistant answer; a bad example is a 400 naming its index. The data is uploaded as JSONL to the provider's fine-tuning API.",
    ...onLane(FineTuneBody, {
      // In order (Effect.all is sequential): the first refusal is the one reported.
      check: ({ avatar, body }) =>
        Effect.all([checkTrainingData(body.trainingData), fineTuneTarget(avatar, body.provider, body.baseModel), checkUrl(body.callbackUrl, "callbackUrl")], { discard: true }),
      handle: ({ avatar, body }) =>
        Effect.gen(function*() {
          const provider = yield* fineTuneProvider(avatar, body.provider)
          const input: FineTuneInput = { baseModel: body.baseModel, trainingData: body.trainingData, suffix: body.suffix }
          const job = yield* Effect.flatMap(Jobs, (j) => j.submit(avatar, { type: "finetune", provider: provider.id, input, callbackUrl: body.callbackUrl }))
          return new Reply(
            { jobId: job.id, jobType: "finetune", status: job.status, provider: provider.id, baseModel: body.baseModel, examples: body.trainingData.length, statusUrl: `/v1/fine-tuning/jobs/${job.id}` },
            "Fine-tuning job accepted."
          )
        })
    })
  }),
  authed({
    method: "GET",
    path: "/v1/fine-tuning/jobs/:jobId",
    success: JobView,
    tag: "Fine-tuning",
    summary: "Status of one fine-tuning job",
    handle: jobView("finetune")
  })
]
