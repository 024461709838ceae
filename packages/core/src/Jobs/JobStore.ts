/**
 * Durable jobs (video, batch, fine-tuning) and the webhook outbox. Finishing a job and
 * enqueueing its webhook happen in one transaction, so a completion is never reported twice
 * or lost. Workers claim due rows with a lease (`FOR UPDATE SKIP LOCKED` on PostgreSQL), so
 * several processes share the work and a crashed process's rows come back when the lease ends.
 */
import { Context, Effect, Layer, Option } from "effect"

export type JobType = "video" | "batch" | "finetune"
export type JobStatus = "queued" | "running" | "completed" | "failed" | "cancelled"
export const isTerminal = (s: JobStatus) => s === "completed" || s === "failed" || s === "cancelled"

export interface JobRecord {
  readonly id: string
  readonly type: JobType
  readonly avatarId: string
  readonly provider: string
  readonly upstreamId: string | null
  readonly status: JobStatus
  /** The validated request, as submitted. */
  readonly input: unknown
  /** Runner-private progress between steps (upstream ids, item cursor, partial results). */
  readonly state: unknown
  readonly result: unknown
  readonly error: string | null
  readonly callbackUrl: string | null
  /** Consecutive failed steps (retryable upstream errors). */
  readonly attempts: number
  readonly nextRunAt: number
  readonly lockedUntil: number | null
  readonly createdAt: number
  readonly updatedAt: number
  readonly completedAt: number | null
  /** The id of the request that submitted the job (RequestId.ts), sent with its webhook. */
  readonly requestId?: string | null
  /**
   * The hash of the API key that submitted the job (null: a signed-in session, or a job from before
   * this was kept): revoking that key stops the job (Worker.ts `stopReason`).
   */
  readonly submittedWithKey?: string | null
}

export type DeliveryStatus = "pending" | "delivered" | "dead"

export interface DeliveryRecord {
  readonly id: string
  readonly jobId: string
  readonly url: string
  readonly event: string
  /** The exact JSON bytes that are signed and sent. */
  readonly body: string
  readonly status: DeliveryStatus
  readonly attempts: number
  readonly nextAttemptAt: number
  readonly lockedUntil: number | null
  readonly createdAt: number
  readonly deliveredAt: number | null
  readonly lastError: string | null
  /** The id of the request that submitted the job: the `X-GATEWAY-Request-Id` header. */
  readonly requestId?: string | null
}

export interface DeliveryAttempt {
  readonly deliveryId: string
  readonly at: number
  readonly statusCode: number | null
  readonly error: string | null
  readonly durationMs: number
}

export interface JobProgress {
  readonly status?: "queued" | "running"
  readonly upstreamId?: string | null
  /** The provider that accepted the job at submit, when it is not the one stored at creation. */
  readonly provider?: string
  readonly state?: unknown
  readonly result?: unknown
  readonly attempts?: number
  readonly nextRunAt: number
}

export interface JobOutcome {
  readonly status: "completed" | "failed" | "cancelled"
  readonly result: unknown
  readonly error: string | null
  readonly completedAt: number
}

export interface JobStoreService {
  readonly insert: (job: JobRecord) => Effect.Effect<void>
  readonly get: (id: string) => Effect.Effect<Option.Option<JobRecord>>
  /** Leases up to `limit` due, unfinished jobs until `now + leaseMs`; a claimed job is `running` (picked up, its step under way). */
  readonly claimDue: (now: number, limit: number, leaseMs: number) => Effect.Effect<ReadonlyArray<JobRecord>>
  /**
   * Saves a step's progress and releases the lease, if `lease` (the `lockedUntil` its claim
   * returned) is still the job's: a step that outlived its lease, while another worker claimed the
   * job, writes nothing. Answers whether it wrote.
   */
  readonly progress: (id: string, lease: number, progress: JobProgress, now: number) => Effect.Effect<boolean>
  /**
   * Ends the job and enqueues its webhook (if any) in one transaction, if `lease` is still the
   * job's (as `progress`); no-op if already ended or leased again. Answers whether it ended the job.
   */
  readonly finish: (id: string, lease: number, outcome: JobOutcome, delivery: Option.Option<DeliveryRecord>) => Effect.Effect<boolean>
  /**
   * Leases up to `limit` due, pending deliveries until `now + leaseMs` and counts the attempt about
   * to be made (`attempts` + 1, durably, before anything is sent): an attempt cut short by a crash
   * still counts, and the next one carries the next number.
   */
  readonly claimDeliveries: (now: number, limit: number, leaseMs: number) => Effect.Effect<ReadonlyArray<DeliveryRecord>>
  /**
   * Records an attempt's outcome (counted at claim) and, if `lease` (the `lockedUntil` its claim
   * returned) is still the delivery's, its next state, releasing the lease. An attempt that outlived
   * its lease is kept in the history, but another process has claimed the delivery since: its state
   * is that process's to write (a late "pending" must not undo its "delivered"). Answers whether
   * the state was written.
   */
  readonly recordAttempt: (
    attempt: DeliveryAttempt,
    lease: number,
    next: { readonly status: DeliveryStatus; readonly nextAttemptAt: number; readonly lastError: string | null }
  ) => Effect.Effect<boolean>
  /**
   * Puts a claimed delivery back unsent, due again at `nextAttemptAt`: its claim's attempt is taken back
   * (`attempts` − 1), nothing goes in the history, and the lease is released. Only while `lease` is still
   * the delivery's; answers whether it was.
   */
  readonly putBack: (deliveryId: string, lease: number, nextAttemptAt: number) => Effect.Effect<boolean>
  readonly deliveriesOf: (jobId: string) => Effect.Effect<ReadonlyArray<DeliveryRecord>>
  readonly attemptsOf: (deliveryId: string) => Effect.Effect<ReadonlyArray<DeliveryAttempt>>
}

export class JobStore extends Context.Tag("aigw/JobStore")<JobStore, JobStoreService>() {}

export const makeMemory = Effect.sync((): JobStoreService => {
  const jobs = new Map<string, JobRecord>()
  const deliveries = new Map<string, DeliveryRecord>()
  const attempts: Array<DeliveryAttempt> = []
  const free = (lockedUntil: number | null, now: number) => lockedUntil === null || lockedUntil < now
  return {
    insert: (job) => Effect.sync(() => void jobs.set(job.id, job)),
    get: (id) => Effect.sync(() => Option.fromNullable(jobs.get(id))),
    claimDue: (now, limit, leaseMs) =>
      Effect.sync(() => {
        const due = [...jobs.values()]
          .filter((j) => (j.status === "queued" || j.status === "running") && j.nextRunAt <= now && free(j.lockedUntil, now))
          .sort((a, b) => a.nextRunAt - b.nextRunAt)
          .slice(0, limit)
          .map((j) => ({ ...j, status: "running" as const, lockedUntil: now + leaseMs }))
        for (const j of due) jobs.set(j.id, j)
        return due
      }),
    progress: (id, lease, p, now) =>
      Effect.sync(() => {
        const j = jobs.get(id)
        if (!j || j.lockedUntil !== lease) return false
        jobs.set(id, {
          ...j,
          ...(p.status !== undefined ? { status: p.status } : {}),
          ...(p.upstreamId !== undefined ? { upstreamId: p.upstreamId } : {}),
          ...(p.provider !== undefined ? { provider: p.provider } : {}),
          ...(p.state !== undefined ? { state: p.state } : {}),
          ...(p.result !== undefined ? { result: p.result } : {}),
          ...(p.attempts !== undefined ? { attempts: p.attempts } : {}),
          nextRunAt: p.nextRunAt,
          lockedUntil: null,
          updatedAt: now
        })
        return true
      }),
    finish: (id, lease, outcome, delivery) =>
      Effect.sync(() => {
        const j = jobs.get(id)
        if (!j || j.lockedUntil !== lease || j.status === "completed" || j.status === "failed" || j.status === "cancelled") return false
        jobs.set(id, { ...j, ...outcome, lockedUntil: null, updatedAt: outcome.completedAt })
        if (Option.isSome(delivery)) deliveries.set(delivery.value.id, delivery.value)
        return true
      }),
    claimDeliveries: (now, limit, leaseMs) =>
      Effect.sync(() => {
        const due = [...deliveries.values()]
          .filter((d) => d.status === "pending" && d.nextAttemptAt <= now && free(d.lockedUntil, now))
          .sort((a, b) => a.nextAttemptAt - b.nextAttemptAt)
          .slice(0, limit)
          .map((d) => ({ ...d, attempts: d.attempts + 1, lockedUntil: now + leaseMs }))
        for (const d of due) deliveries.set(d.id, d)
        return due
      }),
    recordAttempt: (attempt, lease, next) =>
      Effect.sync(() => {
        attempts.push(attempt)
        const d = deliveries.get(attempt.deliveryId)
        if (!d || d.lockedUntil !== lease) return false
        deliveries.set(d.id, {
          ...d,
          ...next,
          lockedUntil: null,
          deliveredAt: next.status === "delivered" ? attempt.at : d.deliveredAt
        })
        return true
      }),
    putBack: (deliveryId, lease, nextAttemptAt) =>
      Effect.sync(() => {
        const d = deliveries.get(deliveryId)
        if (!d || d.lockedUntil !== lease) return false
        deliveries.set(d.id, { ...d, attempts: Math.max(0, d.attempts - 1), nextAttemptAt, lockedUntil: null })
        return true
      }),
    deliveriesOf: (jobId) => Effect.sync(() => [...deliveries.values()].filter((d) => d.jobId === jobId)),
    attemptsOf: (deliveryId) => Effect.sync(() => attempts.filter((a) => a.deliveryId === deliveryId).sort((a, b) => a.at - b.at))
  }
})

export const layerMemory = Layer.effect(JobStore, makeMemory)
