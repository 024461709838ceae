/**
 * Submitting and reading long-running jobs. Callback URLs pass the SSRF guard at submit time
 * (422 otherwise); owners see their jobs, Admins see all, others get 404.
 */
import { Context, Effect, Layer, Option } from "effect"
import { GatewayConfig } from "../Config.ts"
import { NotFound } from "../Errors.ts"
import type { AvatarRecord } from "../Storage/AvatarStore.ts"
import { storedId } from "../Accounts/Schemas.ts"
import { requestKeyHash, standingStores, stillActing } from "../Accounts/StillActing.ts"
import * as RequestId from "../RequestId.ts"
import * as UrlGuard from "../UrlGuard.ts"
import { type JobRecord, JobStore, type JobType } from "./JobStore.ts"

const iso = (ms: number | null) => (ms === null ? null : new Date(ms).toISOString())

const makeService = Effect.gen(function*() {
  const store = yield* JobStore
  const config = yield* GatewayConfig
  const standing = yield* standingStores

  const checkUrl = (url: string | undefined, field: string) =>
    url === undefined ? Effect.succeed(undefined) : Effect.map(UrlGuard.check(url, { allowPrivate: config.allowPrivateUrls, field }), (u) => u.toString())

  const submit = Effect.fn("Jobs.submit")(function*(
    avatar: AvatarRecord,
    job: { readonly type: JobType; readonly provider: string; readonly input: unknown; readonly callbackUrl?: string | undefined }
  ) {
    const callbackUrl = yield* checkUrl(job.callbackUrl, "callbackUrl")
    // Kept with the job for its webhook's X-GATEWAY-Request-Id.
    const requestId = yield* RequestId.current
    const now = Date.now()
    // The credentials were checked when the request came: a reset, deletion or key revocation since is a 401
    // here. A reset after this read has a later time than `now`, and the worker stops the job (Worker.ts
    // `stopReason`), as it does once the key that submitted it is revoked.
    yield* stillActing(standing, avatar)
    const submittedWithKey = yield* requestKeyHash
    const record: JobRecord = {
      id: crypto.randomUUID(),
      type: job.type,
      avatarId: avatar.id,
      provider: job.provider,
      upstreamId: null,
      status: "queued",
      input: job.input,
      state: null,
      result: null,
      error: null,
      callbackUrl: callbackUrl ?? null,
      attempts: 0,
      nextRunAt: now,
      lockedUntil: null,
      createdAt: now,
      updatedAt: now,
      completedAt: null,
      requestId: requestId ?? null,
      submittedWithKey: submittedWithKey ?? null
    }
    yield* store.insert(record)
    return record
  })

  /** The job if the caller may see it (owner or Admin) and it has the expected type. */
  const get = Effect.fn("Jobs.get")(function*(caller: AvatarRecord, id: string, type: JobType) {
    const job = yield* store.get(storedId(id))
    if (Option.isNone(job) || job.value.type !== type || (job.value.avatarId !== caller.id && caller.avatarType !== "Admin")) {
      return yield* Effect.fail(new NotFound({ message: `No ${type} job ${id}.` }))
    }
    return job.value
  })

  /** The public view of a job, with its webhook delivery state. */
  const view = (job: JobRecord) =>
    Effect.map(store.deliveriesOf(job.id), (deliveries) => {
      const d = deliveries[0]
      return {
        jobId: job.id,
        jobType: job.type,
        status: job.status,
        provider: job.provider,
        upstreamId: job.upstreamId,
        result: job.result,
        error: job.error,
        callbackUrl: job.callbackUrl,
        createdAtUtc: iso(job.createdAt),
        updatedAtUtc: iso(job.updatedAt),
        completedAtUtc: iso(job.completedAt),
        webhook: d
          ? { deliveryId: d.id, status: d.status, attempts: d.attempts, deliveredAtUtc: iso(d.deliveredAt), lastError: d.lastError }
          : null
      }
    })

  return { submit, get, view, checkUrl }
})

export class Jobs extends Context.Tag("aigw/Jobs")<Jobs, Effect.Effect.Success<typeof makeService>>() {}

export const layer = Layer.effect(Jobs, makeService)
