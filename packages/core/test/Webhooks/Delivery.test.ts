/**
 * Webhook delivery attempts: counted durably before they are sent (an attempt cut short, as by
 * kill -9, is not re-sent under the same number), and a host that does not resolve is retried,
 * not given up. An attempt that outlived its lease writes no state (another process holds the delivery).
 */
import { Duration, Effect, Exit, Fiber, Layer, Logger, Option } from "effect"
import * as http from "node:http"
import type { AddressInfo } from "node:net"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import * as GatewayConfig from "../../src/Config.ts"
import { type DeliveryRecord, type JobRecord, JobStore } from "../../src/Jobs/JobStore.ts"
import * as Database from "../../src/Storage/Database.ts"
import * as Stores from "../../src/Storage/Stores.ts"
import * as WebhookDelivery from "../../src/Webhooks/Delivery.ts"
import { freshSqliteUrl } from "../support/databases.ts"

const TIMEOUT_MS = 200

const stores = {
  memory: Stores.layerMemory,
  sqlite: Layer.unwrapEffect(Effect.sync(() => Stores.layerSql.pipe(Layer.provide(Database.layer(freshSqliteUrl())))))
}

/** The caller whose jobs the deliveries are (receivers are kept per caller). */
const OWNER = crypto.randomUUID()

/** A job of `owner` finished with a pending delivery to `url`; returns the delivery id. */
const enqueue = (url: string, owner = OWNER) =>
  Effect.gen(function*() {
    const jobs = yield* JobStore
    const now = Date.now()
    const job: JobRecord = {
      id: crypto.randomUUID(), type: "batch", avatarId: owner, provider: "openai", upstreamId: null, status: "running",
      input: {}, state: null, result: null, error: null, callbackUrl: url, attempts: 0, nextRunAt: now, lockedUntil: null,
      createdAt: now, updatedAt: now, completedAt: null
    }
    yield* jobs.insert(job)
    const delivery: DeliveryRecord = {
      id: crypto.randomUUID(), jobId: job.id, url, event: "batch", body: "{}", status: "pending", attempts: 0,
      nextAttemptAt: now, lockedUntil: null, createdAt: now, deliveredAt: null, lastError: null
    }
    const lease = (yield* jobs.claimDue(now, 100, 60_000)).find((j) => j.id === job.id)!.lockedUntil!
    yield* jobs.finish(job.id, lease, { status: "completed", result: null, error: null, completedAt: now }, Option.some(delivery))
    return { jobId: job.id, deliveryId: delivery.id }
  })

const deliveryOf = (jobId: string) => Effect.map(Effect.flatMap(JobStore, (jobs) => jobs.deliveriesOf(jobId)), (ds) => ds[0]!)

describe.each(Object.entries(stores))("webhook delivery attempts on %s", (_name, storeLayer) => {
  let receiver: http.Server
  let url: string
  const attempts: Array<string> = []
  let hangNext = false
  let failNext = false
  beforeAll(async () => {
    receiver = http.createServer((req, res) => {
      req.resume()
      attempts.push(String(req.headers["x-gateway-attempt"]))
      if (hangNext) {
        hangNext = false
        return // holds the request: the sender is cut off mid-attempt
      }
      if (failNext) {
        failNext = false
        return res.writeHead(500).end()
      }
      res.writeHead(204).end()
    })
    await new Promise<void>((resolve) => receiver.listen(0, "127.0.0.1", resolve))
    url = `http://127.0.0.1:${(receiver.address() as AddressInfo).port}/hook`
  })
  afterAll(() => {
    receiver.closeAllConnections()
    receiver.close()
  })

  const run = <A, E>(allowPrivateUrls: boolean, effect: Effect.Effect<A, E, JobStore | WebhookDelivery.WebhookDelivery>) =>
    Effect.runPromise(
      Effect.scoped(effect).pipe(
        Effect.provide(WebhookDelivery.layer({ timeoutMs: TIMEOUT_MS }).pipe(
          Layer.provideMerge(storeLayer),
          Layer.provide(GatewayConfig.layer({ allowPrivateUrls, webhookRetryBaseMs: 50 }))
        ))
      )
    )

  it("counts an attempt before sending it: one cut short is not sent again under its number", async () => {
    attempts.length = 0
    const headers = await run(true, Effect.gen(function*() {
      const delivery = yield* WebhookDelivery.WebhookDelivery
      const { jobId } = yield* enqueue(url)
      hangNext = true
      // The first round is cut off while the receiver holds the request (a crash: nothing recorded after).
      const round = yield* Effect.fork(delivery.drain)
      while (attempts.length === 0) yield* Effect.sleep(10)
      yield* Fiber.interrupt(round)
      expect(yield* deliveryOf(jobId)).toMatchObject({ status: "pending", attempts: 1 })
      // The lease of the cut-off attempt ends; the next round sends attempt 2.
      yield* Effect.sleep(TIMEOUT_MS + 5_000 + 100)
      expect(yield* delivery.drain).toBe(1)
      expect(yield* deliveryOf(jobId)).toMatchObject({ status: "delivered", attempts: 2 })
      return attempts
    }))
    expect(headers).toEqual(["1", "2"])
  }, 20_000)

  it("an attempt that outlived its lease does not write the delivery's state: a late failure cannot undo another process's delivery", async () => {
    attempts.length = 0
    const state = await run(true, Effect.gen(function*() {
      const delivery = yield* WebhookDelivery.WebhookDelivery
      const jobs = yield* JobStore
      const { jobId, deliveryId } = yield* enqueue(url)
      const now = Date.now()
      // Claimed with a lease that runs out at once (a process paused past it), then claimed and delivered by another.
      const stale = (yield* jobs.claimDeliveries(now, 100, 1)).find((d) => d.id === deliveryId)!
      const fresh = (yield* jobs.claimDeliveries(now + 10, 100, 60_000)).find((d) => d.id === deliveryId)!
      expect(yield* delivery.deliver(fresh)).toBe(true)
      // The stale attempt is sent late and fails.
      failNext = true
      expect(yield* delivery.deliver(stale)).toBe(false)
      return yield* deliveryOf(jobId)
    }))
    expect(state).toMatchObject({ status: "delivered", attempts: 2, lastError: null, lockedUntil: null })
    expect(attempts).toEqual(["2", "1"])
  })

  it("claims only the deliveries it sends at once: the rest stay free for another process", async () => {
    attempts.length = 0
    const [first, second] = await run(true, Effect.gen(function*() {
      const delivery = yield* WebhookDelivery.WebhookDelivery
      const ids = yield* Effect.forEach(Array.from({ length: 12 }), () => enqueue(url))
      // Two rounds at once, as two processes: the first must not hold deliveries it will send only later.
      const rounds = yield* Effect.all([delivery.drain, Effect.zipRight(Effect.sleep(5), delivery.drain)], { concurrency: 2 })
      const states = yield* Effect.forEach(ids, ({ jobId }) => deliveryOf(jobId))
      // All twelve go to one receiver, which takes 4 attempts at once (Receivers.ts): the others are put back, uncounted, for later rounds.
      const sent = states.filter((d) => d.status === "delivered")
      expect(sent.every((d) => d.attempts === 1)).toBe(true)
      expect(states.filter((d) => d.status === "pending").every((d) => d.attempts === 0 && d.lockedUntil === null)).toBe(true)
      expect(sent.length).toBe(attempts.length)
      expect(sent.length).toBeGreaterThanOrEqual(4)
      // Later rounds deliver the rest.
      for (let round = 0; round < 20 && (yield* Effect.forEach(ids, ({ jobId }) => deliveryOf(jobId))).some((d) => d.status !== "delivered"); round++) {
        yield* Effect.sleep(100)
        yield* delivery.drain
      }
      expect((yield* Effect.forEach(ids, ({ jobId }) => deliveryOf(jobId))).map((d) => [d.status, d.attempts])).toEqual(ids.map(() => ["delivered", 1]))
      return rounds
    }))
    expect([first, second]).toEqual([8, 4])
    expect(attempts).toHaveLength(12)
  })

  it("retries a callback host that does not resolve instead of giving up", async () => {
    const exit = await run(false, Effect.gen(function*() {
      const delivery = yield* WebhookDelivery.WebhookDelivery
      const { jobId } = yield* enqueue("http://aigw-delivery-test.invalid/hook")
      expect(yield* delivery.drain).toBe(1)
      return yield* deliveryOf(jobId)
    }).pipe(Effect.exit))
    expect(Exit.isSuccess(exit)).toBe(true)
    if (Exit.isSuccess(exit)) {
      expect(exit.value).toMatchObject({ status: "pending", attempts: 1 })
      expect(exit.value.lastError).toMatch(/does not resolve/)
      expect(exit.value.nextAttemptAt).toBeGreaterThan(Date.now() - 1000)
    }
  })

  it("logs a failed attempt's URL with its query's values redacted (a receiver's secret travels there)", async () => {
    const logged: Array<string> = []
    const capture = Logger.replace(Logger.defaultLogger, Logger.make(({ message }) => logged.push(String(message))))
    failNext = true
    await run(true, Effect.gen(function*() {
      const delivery = yield* WebhookDelivery.WebhookDelivery
      yield* enqueue(`${url}?token=SuperSecretToken123&x=1`)
      yield* delivery.drain
    }).pipe(Effect.provide(capture)))
    const line = logged.find((l) => l.includes("HTTP 500"))
    expect(line).toContain(`${url}?token=REDACTED&x=REDACTED attempt 1: HTTP 500 -> pending`)
    expect(logged.join("\n")).not.toContain("SuperSecretToken123")
  })

  it("gives up at once on a URL the SSRF guard refuses", async () => {
    const result = await run(false, Effect.gen(function*() {
      const delivery = yield* WebhookDelivery.WebhookDelivery
      const { jobId } = yield* enqueue("http://[::127.0.0.1]/hook")
      yield* delivery.drain
      return yield* deliveryOf(jobId)
    }))
    expect(result).toMatchObject({ status: "dead", attempts: 1 })
    expect(result.lastError).toMatch(/callbackUrl refused/)
  })

  it("gives a receiver that stopped answering one slot: after two silent attempts one delivery at a time is tried, the rest put back unsent and uncounted", async () => {
    const silent = http.createServer((req) => void req.resume()) // never answers
    await new Promise<void>((resolve) => silent.listen(0, "127.0.0.1", resolve))
    const silentUrl = `http://127.0.0.1:${(silent.address() as AddressInfo).port}/hook`
    try {
      const result = await run(true, Effect.gen(function*() {
        const delivery = yield* WebhookDelivery.WebhookDelivery
        const jobs = yield* JobStore
        // Two attempts that get no answer make the receiver stalled.
        for (let i = 0; i < 2; i++) {
          const { deliveryId } = yield* enqueue(silentUrl)
          const [claimed] = (yield* jobs.claimDeliveries(Date.now(), 100, 60_000)).filter((d) => d.id === deliveryId)
          expect(yield* delivery.deliver(claimed!)).toBe(false)
        }
        // Five more to it, and one to a receiver that answers: one probe is sent, four are put back at once, the other is delivered.
        const stuck = yield* Effect.forEach(Array.from({ length: 5 }), () => enqueue(silentUrl))
        const ok = yield* enqueue(url)
        // Another caller's delivery to the same silent host is its own receiver: tried, not put back.
        const other = yield* enqueue(silentUrl, crypto.randomUUID())
        const claimed = (yield* jobs.claimDeliveries(Date.now(), 100, 60_000)).filter((d) => [...stuck, ok, other].some((e) => e.deliveryId === d.id))
        const outcomes = yield* Effect.forEach(claimed, (d) => Effect.map(Effect.timed(delivery.deliver(d)), ([took, delivered]) => ({ id: d.id, ms: Duration.toMillis(took), delivered })), { concurrency: "unbounded" })
        const states = yield* Effect.forEach(stuck, (e) => Effect.zip(deliveryOf(e.jobId), jobs.attemptsOf(e.deliveryId)))
        return { outcomes, states, okId: ok.deliveryId, otherAttempts: yield* jobs.attemptsOf(other.deliveryId) }
      }))
      expect(result.otherAttempts.map((a) => a.error)).toEqual([expect.stringMatching(/no answer within/)])
      const okOutcome = result.outcomes.find((o) => o.id === result.okId)!
      expect(okOutcome.delivered).toBe(true)
      expect(okOutcome.ms).toBeLessThan(TIMEOUT_MS)
      // Put back: not counted, nothing in the history, due again later; one probe tried and timed out.
      const putBack = result.states.filter(([d, attempts]) => d.attempts === 0 && attempts.length === 0)
      expect(putBack).toHaveLength(4)
      expect(putBack.every(([d]) => d.status === "pending" && d.lockedUntil === null && d.nextAttemptAt > Date.now() - 1000)).toBe(true)
      const probed = result.states.filter(([d]) => d.attempts === 1)
      expect(probed.map(([, attempts]) => attempts.map((a) => a.error))).toEqual([[expect.stringMatching(/no answer within/)]])
    } finally {
      silent.closeAllConnections()
      silent.close()
    }
  })
})
