import * as SqlClient from "@effect/sql/SqlClient"
import { Effect, Layer, Option } from "effect"
import {
  type DeliveryAttempt,
  type DeliveryRecord,
  type DeliveryStatus,
  type JobRecord,
  type JobStatus,
  JobStore,
  type JobType
} from "../../Jobs/JobStore.ts"
import { claimAttempts, num, numOrNull, skipLocked as skipLockedOf } from "./util.ts"

const toJson = (v: unknown) => (v === undefined || v === null ? null : JSON.stringify(v))
const fromJson = (v: unknown) => (v === null || v === undefined ? null : JSON.parse(String(v)))

const jobFromRow = (r: any): JobRecord => ({
  id: r.id,
  type: r.type as JobType,
  avatarId: r.avatar_id,
  provider: r.provider,
  upstreamId: r.upstream_id ?? null,
  status: r.status as JobStatus,
  input: fromJson(r.input),
  state: fromJson(r.state),
  result: fromJson(r.result),
  error: r.error ?? null,
  callbackUrl: r.callback_url ?? null,
  attempts: num(r.attempts),
  nextRunAt: num(r.next_run_at),
  lockedUntil: numOrNull(r.locked_until),
  createdAt: num(r.created_at),
  updatedAt: num(r.updated_at),
  completedAt: numOrNull(r.completed_at),
  requestId: r.request_id ?? null,
  submittedWithKey: r.submitted_with_key ?? null
})

const deliveryFromRow = (r: any): DeliveryRecord => ({
  id: r.id,
  jobId: r.job_id,
  url: r.url,
  event: r.event,
  body: r.body,
  status: r.status as DeliveryStatus,
  attempts: num(r.attempts),
  nextAttemptAt: num(r.next_attempt_at),
  lockedUntil: numOrNull(r.locked_until),
  createdAt: num(r.created_at),
  deliveredAt: numOrNull(r.delivered_at),
  lastError: r.last_error ?? null,
  requestId: r.request_id ?? null
})

const deliveryRow = (d: DeliveryRecord) => ({
  id: d.id,
  job_id: d.jobId,
  url: d.url,
  event: d.event,
  body: d.body,
  status: d.status,
  attempts: d.attempts,
  next_attempt_at: d.nextAttemptAt,
  locked_until: d.lockedUntil,
  created_at: d.createdAt,
  delivered_at: d.deliveredAt,
  last_error: d.lastError,
  request_id: d.requestId ?? null
})

export const make = Effect.gen(function*() {
  const sql = yield* SqlClient.SqlClient
  const skipLocked = skipLockedOf(sql)

  return JobStore.of({
    insert: (job) =>
      sql`INSERT INTO jobs ${
        sql.insert({
          id: job.id,
          type: job.type,
          avatar_id: job.avatarId,
          provider: job.provider,
          upstream_id: job.upstreamId,
          status: job.status,
          input: JSON.stringify(job.input ?? null),
          state: toJson(job.state),
          result: toJson(job.result),
          error: job.error,
          callback_url: job.callbackUrl,
          attempts: job.attempts,
          next_run_at: job.nextRunAt,
          locked_until: job.lockedUntil,
          created_at: job.createdAt,
          updated_at: job.updatedAt,
          completed_at: job.completedAt,
          request_id: job.requestId ?? null,
          submitted_with_key: job.submittedWithKey ?? null
        })
      }`.pipe(Effect.asVoid, Effect.orDie),
    get: (id) =>
      sql`SELECT * FROM jobs WHERE id = ${id}`.pipe(
        Effect.map((rows) => Option.map(Option.fromNullable(rows[0]), jobFromRow)),
        Effect.orDie
      ),
    claimDue: (now, limit, leaseMs) =>
      sql`UPDATE jobs SET locked_until = ${now + leaseMs}, status = 'running' WHERE id IN (
            SELECT id FROM jobs
            WHERE status IN ('queued', 'running') AND next_run_at <= ${now} AND (locked_until IS NULL OR locked_until < ${now})
            ORDER BY next_run_at LIMIT ${limit} ${skipLocked}
          ) RETURNING *`.pipe(Effect.map((rows) => rows.map(jobFromRow)), Effect.orDie),
    progress: (id, lease, p, now) => {
      const values: Record<string, unknown> = { next_run_at: p.nextRunAt, locked_until: null, updated_at: now }
      if (p.status !== undefined) values.status = p.status
      if (p.upstreamId !== undefined) values.upstream_id = p.upstreamId
      if (p.provider !== undefined) values.provider = p.provider
      if (p.state !== undefined) values.state = toJson(p.state)
      if (p.result !== undefined) values.result = toJson(p.result)
      if (p.attempts !== undefined) values.attempts = p.attempts
      return sql`UPDATE jobs SET ${sql.update(values)} WHERE id = ${id} AND locked_until = ${lease} RETURNING id`.pipe(
        Effect.map((rows) => rows.length > 0),
        Effect.orDie
      )
    },
    finish: (id, lease, outcome, delivery) =>
      sql.withTransaction(
        Effect.gen(function*() {
          const ended = yield* sql`UPDATE jobs SET ${
            sql.update({
              status: outcome.status,
              result: toJson(outcome.result),
              error: outcome.error,
              completed_at: outcome.completedAt,
              updated_at: outcome.completedAt,
              locked_until: null
            })
          } WHERE id = ${id} AND locked_until = ${lease} AND status IN ('queued', 'running') RETURNING id`
          if (ended.length === 0) return false
          if (Option.isSome(delivery)) yield* sql`INSERT INTO webhook_deliveries ${sql.insert(deliveryRow(delivery.value))}`
          return true
        })
      ).pipe(Effect.orDie),
    claimDeliveries: (now, limit, leaseMs) =>
      // The attempt is counted here, before it is sent (see JobStoreService.claimDeliveries).
      claimAttempts(sql, "webhook_deliveries", sql`status = 'pending'`, now, limit, leaseMs).pipe(Effect.map((rows) => rows.map(deliveryFromRow)), Effect.orDie),
    recordAttempt: (attempt, lease, next) =>
      sql.withTransaction(
        Effect.zipRight(
          sql`INSERT INTO webhook_attempts ${
            sql.insert({
              id: crypto.randomUUID(),
              delivery_id: attempt.deliveryId,
              at: attempt.at,
              status_code: attempt.statusCode,
              error: attempt.error,
              duration_ms: Math.round(attempt.durationMs)
            })
          }`,
          sql`UPDATE webhook_deliveries SET ${
            sql.update({
              status: next.status,
              next_attempt_at: next.nextAttemptAt,
              last_error: next.lastError,
              locked_until: null,
              ...(next.status === "delivered" ? { delivered_at: attempt.at } : {})
            })
          } WHERE id = ${attempt.deliveryId} AND locked_until = ${lease} RETURNING id`
        )
      ).pipe(Effect.map((rows) => rows.length > 0), Effect.orDie),
    putBack: (deliveryId, lease, nextAttemptAt) =>
      sql`UPDATE webhook_deliveries SET attempts = CASE WHEN attempts > 0 THEN attempts - 1 ELSE 0 END, next_attempt_at = ${nextAttemptAt}, locked_until = NULL
          WHERE id = ${deliveryId} AND locked_until = ${lease} RETURNING id`.pipe(Effect.map((rows) => rows.length > 0), Effect.orDie),
    deliveriesOf: (jobId) =>
      sql`SELECT * FROM webhook_deliveries WHERE job_id = ${jobId} ORDER BY created_at`.pipe(
        Effect.map((rows) => rows.map(deliveryFromRow)),
        Effect.orDie
      ),
    attemptsOf: (deliveryId) =>
      sql`SELECT * FROM webhook_attempts WHERE delivery_id = ${deliveryId} ORDER BY at`.pipe(
        Effect.map((rows) =>
          rows.map((r: any): DeliveryAttempt => ({
            deliveryId: r.delivery_id,
            at: num(r.at),
            statusCode: numOrNull(r.status_code),
            error: r.error ?? null,
            durationMs: num(r.duration_ms)
          }))
        ),
        Effect.orDie
      )
  })
})

export const layer = Layer.effect(JobStore, make)
