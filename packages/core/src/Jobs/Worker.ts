/**
 * The job worker: claims due jobs (bounded concurrency), advances each one step with its
 * type's runner, and saves progress or finishes the job, enqueueing its webhook in the same
 * transaction. `drainOnce` is one round of jobs and deliveries (the Lambda scheduled handler runs
 * rounds); `layerLoop` works on both continuously, apart, for long-lived hosts and stops with the host.
 */
import { Cause, Context, Duration, Effect, Layer, Option, Queue } from "effect"
import { GatewayConfig } from "../Config.ts"
import { DELIVERIES_AT_ONCE, WebhookDelivery } from "../Webhooks/Delivery.ts"
import { MAILS_AT_ONCE, MailOutbox } from "../Mail/Outbox.ts"
import { type JobOutcome, type JobProgress, type JobRecord, JobStore } from "./JobStore.ts"
import type { JobRunner, Step } from "./Runner.ts"
import { JobRunners } from "./Runners.ts"
import { type Revocation, revocationOf, standingNow, standingStores } from "../Accounts/StillActing.ts"
import type { AvatarRecord } from "../Storage/AvatarStore.ts"
import { claimedRound } from "./ClaimedRound.ts"
import { UpstreamError } from "../Providers/UpstreamError.ts"
import { isVendorId } from "../Providers/internal/vendorId.ts"

/** Retryable step failures are retried this many times (with backoff) before the job fails. */
export const MAX_STEP_ATTEMPTS = 8
export const LEASE_MS = 5 * 60 * 1000
/**
 * The longest a step runs: well inside its lease, so that no step is still working (calling, billing) when
 * the job is claimed again. A step of several slow vendor calls (each allowed REQUEST_TIMEOUT) could outlive
 * the lease, and the step that took the job over did its work a second time. A step cut off so fails as a
 * retryable upstream timeout: the job is tried again, as after any slow vendor.
 */
export const STEP_DEADLINE_MS = LEASE_MS - 60 * 1000
/** Jobs one process advances at once (and claims at once: see `drainJobs`). */
const JOBS_AT_ONCE = 4

export const completedAtUtc = (ms: number) => new Date(ms).toISOString()

/** The spec's webhook payload. */
export const webhookBody = (job: JobRecord, outcome: JobOutcome) =>
  JSON.stringify({
    jobId: job.id,
    jobType: job.type,
    status: outcome.status,
    result: outcome.result ?? {},
    error: outcome.error,
    completedAtUtc: completedAtUtc(outcome.completedAt)
  })

/** The lease a claimed job was handed (claimDue sets it). */
const leaseOf = (job: JobRecord) => job.lockedUntil!

/** A step that outlived its lease: another worker may hold the job now, so nothing of this step is written. */
const leaseLost = (job: JobRecord, what: string) =>
  Effect.logWarning(`job ${job.id} (${job.type}): the step outlived its lease (${LEASE_MS} ms) or the job ended; ${what} was not saved`)

/** A step that ran out its time (`STEP_DEADLINE_MS`): retried with backoff as a slow vendor's is. */
const stepTimedOut = (job: JobRecord) =>
  new UpstreamError({
    provider: job.provider,
    kind: "timeout",
    message: `the job's step did not finish within ${STEP_DEADLINE_MS / 1000} s (${job.provider} answered too slowly); it will be tried again`,
    retryable: true
  })

/** Why the job of a deleted avatar ended. */
export const OWNER_GONE = "the job's avatar was deleted: the job was stopped"
/** Why a job submitted before its avatar's password was reset ended (the reset revoked the credentials that submitted it). */
export const CREDENTIALS_REVOKED = "the avatar's password was reset after the job was submitted, revoking the keys and sessions that could have submitted it: the job was stopped"
/** Why a job ended whose API key was revoked with its jobs (`DELETE /v1/keys/{id}?stopJobs=true`). */
export const KEY_REVOKED = "the API key that submitted the job was revoked with its jobs: the job was stopped"

const REASONS: Record<Revocation, string> = { deleted: OWNER_GONE, reset: CREDENTIALS_REVOKED, keyRevoked: KEY_REVOKED }

/**
 * Why the worker stops a job rather than advancing it, if it does: its avatar is gone or deleted,
 * revoked every credential since the job was submitted (a password reset moves `tokensValidAfter`), or
 * the API key that submitted it was revoked with its jobs (`keyStands` false): a job that a stolen key or
 * session submitted must not run on for the thief, nor deliver to its callback.
 */
export const stopReason = (owner: Option.Option<AvatarRecord>, job: JobRecord, keyStands = true): string | undefined => {
  const revocation = revocationOf(owner, job.createdAt, keyStands)
  return revocation === undefined ? undefined : REASONS[revocation]
}

const makeService = Effect.gen(function*() {
  const store = yield* JobStore
  const runners = yield* JobRunners
  const stores = yield* standingStores
  /** The job's avatar as stored now, and why the job must stop, if it must. */
  const standing = (job: JobRecord) =>
    Effect.map(standingNow(stores, job.avatarId, job.submittedWithKey, "job"), ([owner, stands]) => ({ owner, reason: stopReason(owner, job, stands) }))

  /** Ends the job; its webhook goes to its callback unless `notify` is false (a job the worker stopped). */
  const settle = (job: JobRecord, status: JobOutcome["status"], result: unknown, error: string | null, notify: boolean) =>
    Effect.suspend(() => {
      const outcome: JobOutcome = { status, result, error, completedAt: Date.now() }
      const delivery = Option.map(Option.fromNullable(notify ? job.callbackUrl : null), (url) => ({
        id: crypto.randomUUID(),
        jobId: job.id,
        url,
        event: job.type,
        body: webhookBody(job, outcome),
        status: "pending" as const,
        attempts: 0,
        nextAttemptAt: outcome.completedAt,
        lockedUntil: null,
        createdAt: outcome.completedAt,
        deliveredAt: null,
        lastError: null,
        requestId: job.requestId ?? null
      }))
      return store.finish(job.id, leaseOf(job), outcome, delivery).pipe(
        Effect.tap((ended) =>
          ended ? Effect.logInfo(`job ${job.id} (${job.type}) ${status}${error ? `: ${error}` : ""}`) : leaseLost(job, `its ${status} outcome`)
        ),
        // Only the worker that ended the job settles what its runner owes, so it is done once.
        Effect.tap((ended) => {
          const owed = runners[job.type]?.ended
          if (!ended || owed === undefined) return Effect.void
          return owed(job, status).pipe(Effect.catchAllCause((cause) => Effect.logError(`job ${job.id} (${job.type}) ${status}: settling its runner's part failed`, cause)))
        })
      )
    })

  /** Saves a step's progress if this worker still holds the job. */
  const progress = (job: JobRecord, p: JobProgress) =>
    Effect.tap(store.progress(job.id, leaseOf(job), p, Date.now()), (saved) => saved ? Effect.void : leaseLost(job, "its progress"))

  const apply = (job: JobRecord, step: Step) => {
    switch (step._tag) {
      case "Wait":
        return progress(job, {
          status: "running",
          ...(step.upstreamId !== undefined ? { upstreamId: step.upstreamId } : {}),
          ...(step.provider !== undefined ? { provider: step.provider } : {}),
          ...(step.state !== undefined ? { state: step.state } : {}),
          ...(step.result !== undefined ? { result: step.result } : {}),
          attempts: 0,
          nextRunAt: Date.now() + step.afterMs
        })
      case "Done":
        return finish(job, "completed", step.result, null)
      case "Failed":
        return finish(job, "failed", step.result ?? null, step.error)
      case "Cancelled":
        return finish(job, "cancelled", step.result ?? null, step.error)
    }
  }

  /**
   * A job the worker stops (`stopReason`): its upstream work is stopped where the vendor has a way, and it
   * ends cancelled, without its webhook: nothing more is done or sent for an avatar that no longer exists,
   * or to a callback that revoked credentials may have named. A stop the vendor refuses is logged; the job
   * ends all the same.
   */
  const stopped = (job: JobRecord, reason: string) => {
    const stop = runners[job.type]?.stop
    return Effect.zipRight(
      stop === undefined || !isVendorId(job.upstreamId)
        ? Effect.void
        : stop(job).pipe(Effect.catchAll((e) => Effect.logWarning(`job ${job.id} (${job.type}): ${reason}; stopping it upstream failed: ${e.message}`))),
      settle(job, "cancelled", job.result, reason, false)
    )
  }

  /**
   * Ends the job with its step's outcome and its webhook, unless its avatar was deleted or reset while the
   * step ran: stopped then, as before a step (a step in flight at the reset must not deliver its answers).
   */
  const finish = (job: JobRecord, status: JobOutcome["status"], result: unknown, error: string | null) =>
    Effect.flatMap(standing(job), ({ reason }) => reason === undefined ? settle(job, status, result, error, true) : stopped(job, reason))

  /** One step of one job; failures of the step are handled here (retry or fail the job). */
  const advance = (job: JobRecord) => {
    const runner: JobRunner | undefined = runners[job.type]
    if (!runner) return finish(job, "failed", null, `no runner for job type ${job.type}`).pipe(Effect.asVoid)
    return standing(job).pipe(
      Effect.flatMap(({ owner, reason }) => {
        if (reason !== undefined || Option.isNone(owner)) return stopped(job, reason ?? OWNER_GONE)
        // Ids are checked as the vendor gives them; one stored before that was checked is not put in a request path.
        if (job.upstreamId !== null && !isVendorId(job.upstreamId)) return finish(job, "failed", job.result, `${job.provider} gave the job an id aigw cannot use in a request`)
        const step = runner.advance(job, owner.value).pipe(
          Effect.timeoutFail({ duration: STEP_DEADLINE_MS, onTimeout: () => stepTimedOut(job) })
        )
        return Effect.flatMap(step, (step) => apply(job, step))
      }),
      Effect.catchAll((error) => {
        const retryable = error._tag === "UpstreamError" && error.retryable
        const attempts = job.attempts + 1
        if (retryable && attempts < MAX_STEP_ATTEMPTS) {
          // A step ran, even if it failed: the job is running (docs/webhooks.md), no longer queued.
          return progress(job, { status: "running", attempts, nextRunAt: Date.now() + Math.min(300_000, 1000 * 2 ** attempts) })
        }
        return finish(job, "failed", job.result, error.message)
      }),
      Effect.catchAllDefect((defect) =>
        Effect.zipRight(Effect.logError(`job ${job.id} step crashed`, defect), finish(job, "failed", job.result, "internal error while running the job"))
      ),
      // A step cut off (a Lambda drain at its deadline, a host stopping) releases its lease: the job is due again
      // now, as it was (or as the step saved it: a gateway batch keeps the answers that came), not held until the lease ends.
      Effect.onInterrupt(() => Effect.asVoid(store.progress(job.id, leaseOf(job), { nextRunAt: Date.now() }, Date.now()))),
      Effect.asVoid
    )
  }

  // Claims only as many jobs as it advances at once: each step starts when claimed and ends inside its
  // lease. (Jobs waiting for a second wave could outlive it, and another process would run them again.)
  const claim = (n: number) => store.claimDue(Date.now(), n, LEASE_MS)

  const drainJobs = claimedRound(claim, advance, JOBS_AT_ONCE)

  return { advance, claim, drainJobs }
})

export class JobWorker extends Context.Tag("aigw/JobWorker")<JobWorker, Effect.Effect.Success<typeof makeService>>() {}

export const layer = Layer.effect(JobWorker, makeService)

/** One round of background work: due jobs, webhook deliveries and mail retries, side by side (none waits for another's slow calls). */
export const drainOnce = Effect.gen(function*() {
  const worker = yield* JobWorker
  const delivery = yield* WebhookDelivery
  const outbox = yield* MailOutbox
  return yield* Effect.all({ jobs: worker.drainJobs, deliveries: delivery.drain, mails: outbox.drain }, { concurrency: 3 })
})

/** Runs rounds until `deadline` (epoch ms) or until nothing is due; for time-boxed hosts (Lambda). */
export const drainUntil = (deadline: number) =>
  Effect.gen(function*() {
    const total = { jobs: 0, deliveries: 0, mails: 0 }
    while (Date.now() < deadline) {
      const round = yield* drainOnce
      total.jobs += round.jobs
      total.deliveries += round.deliveries
      total.mails += round.mails
      if (round.jobs === 0 && round.deliveries === 0 && round.mails === 0) break
    }
    return total
  })

/**
 * A repeated round whose failures are logged once per state change, not once per round: the first
 * failure with its cause, then nothing until a round succeeds again, which logs
 * `background round "<name>" recovered after N failures`. The name tells the rounds apart (jobs,
 * webhook deliveries, mail retries and usage retention fail together when the database does). A
 * failed round answers `fallback`. Interruption (the host stopping) passes through. Each call keeps
 * its own state.
 */
export const loggingStateChanges = <A, E, R>(name: string, round: Effect.Effect<A, E, R>, fallback: A): Effect.Effect<A, never, R> => {
  let failures = 0
  return round.pipe(
    Effect.tap(() => {
      if (failures === 0) return Effect.void
      const n = failures
      failures = 0
      return Effect.logInfo(`background round "${name}" recovered after ${n} failure${n === 1 ? "" : "s"}`)
    }),
    Effect.catchAllCause((cause) => {
      if (Cause.isInterruptedOnly(cause)) return Effect.failCause(cause as Cause.Cause<never>)
      failures++
      return failures === 1
        ? Effect.as(Effect.logError(`background round "${name}" failed (logged again only when it recovers)`, cause), fallback)
        : Effect.succeed(fallback)
    })
  )
}

/**
 * Claimed work, each item in its own fiber as slots free up: `claim(n)` takes up to `n` due items,
 * each started at once (inside the lease its claim took). A slow item (a receiver that never
 * answers, an upstream that hangs) holds its own slot only, never the other items nor the next
 * claims, as rounds that waited for every item of a batch did. Waits `idleMs` when nothing is due
 * or a claim failed (logged once until it recovers), and for a free slot when all are busy. Runs
 * until interrupted; its items are interrupted with it.
 */
export const continuously = <A, E, R>(
  name: string,
  claim: (n: number) => Effect.Effect<ReadonlyArray<A>, E, R>,
  work: (item: A) => Effect.Effect<unknown, unknown, R>,
  atOnce: number,
  idleMs: number
) =>
  Effect.scoped(Effect.gen(function*() {
    // A slot freed while the loop was not waiting for one needs no token: one kept is enough to wake a wait
    // (the loop looks at `busy` again), where an unbounded queue kept one per item for the process's life.
    const freed = yield* Queue.sliding<void>(1)
    let busy = 0
    const settle = Effect.suspend(() => {
      busy--
      return Queue.offer(freed, undefined)
    })
    const round = Effect.gen(function*() {
      const claimed = yield* claim(atOnce - busy)
      for (const item of claimed) {
        busy++
        const worked = work(item).pipe(Effect.catchAllCause((cause) => Cause.isInterruptedOnly(cause) ? Effect.failCause(cause) : Effect.logError("background work failed", cause)))
        yield* Effect.forkScoped(Effect.ensuring(worked, settle))
      }
      return claimed.length
    })
    const guarded = loggingStateChanges(name, round, 0)
    while (true) {
      if (busy >= atOnce) {
        yield* Queue.take(freed)
        continue
      }
      if ((yield* guarded) === 0) yield* Effect.sleep(Duration.millis(idleMs))
    }
  }))

/**
 * Background work for long-lived hosts: jobs, webhook deliveries and mail retries each worked on continuously
 * (`continuously`), apart, looking again every `workerIntervalMs` when nothing was due; a failing
 * claim is logged once until it recovers (`loggingStateChanges`), never fatal. Stops with the host's scope.
 */
export const layerLoop = Layer.scopedDiscard(
  Effect.gen(function*() {
    const { workerIntervalMs } = yield* GatewayConfig
    const worker = yield* JobWorker
    const delivery = yield* WebhookDelivery
    const outbox = yield* MailOutbox
    yield* Effect.forkScoped(continuously("jobs", worker.claim, worker.advance, JOBS_AT_ONCE, workerIntervalMs))
    yield* Effect.forkScoped(continuously("webhook deliveries", delivery.claim, delivery.deliver, DELIVERIES_AT_ONCE, workerIntervalMs))
    yield* Effect.forkScoped(continuously("mail retries", outbox.claim, outbox.retry, MAILS_AT_ONCE, workerIntervalMs))
  })
)
