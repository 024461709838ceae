import { Duration, Effect, Fiber, Layer, Logger, Option, TestClock, TestContext } from "effect"
import { describe, expect, it } from "vitest"
import { type JobRecord, JobStore } from "../../src/Jobs/JobStore.ts"
import { BadRequest } from "../../src/Errors.ts"
import { done, type Step, wait } from "../../src/Jobs/Runner.ts"
import { JobRunners } from "../../src/Jobs/Runners.ts"
import * as Worker from "../../src/Jobs/Worker.ts"
import { loggingStateChanges } from "../../src/Jobs/Worker.ts"
import { jsonLine } from "../../src/Logging.ts"
import { ApiKeyStore } from "../../src/Storage/ApiKeyStore.ts"
import { AvatarStore } from "../../src/Storage/AvatarStore.ts"
import * as Stores from "../../src/Storage/Stores.ts"
import { liveHeapBytes } from "../support/heap.ts"
import { testAvatar } from "../support/inProcess.ts"

/** An active avatar in the store, whose jobs the worker advances; its id. */
const owner = Effect.gen(function*() {
  const id = crypto.randomUUID()
  yield* Effect.flatMap(AvatarStore, (s) => s.insert(testAvatar(id)))
  return id
})

/** A worker on memory stores whose runner for `type` is `runner`. */
const workerWith = (type: string, runner: unknown) =>
  Worker.layer.pipe(Layer.provideMerge(Stores.layerMemory), Layer.provide(Layer.succeed(JobRunners, { [type]: runner } as any)))

/** Stores a job of a new avatar, due now, with `fields`; its id. */
const dueJob = (fields: Pick<JobRecord, "type" | "provider" | "upstreamId" | "status">) =>
  Effect.gen(function*() {
    const now = Date.now()
    const id = crypto.randomUUID()
    const avatarId = yield* owner
    yield* Effect.flatMap(JobStore, (jobs) =>
      jobs.insert({
        id, avatarId, ...fields,
        input: {}, state: null, result: null, error: null, callbackUrl: null, attempts: 0, nextRunAt: now, lockedUntil: null,
        createdAt: now, updatedAt: now, completedAt: null
      }))
    return id
  })

describe("background rounds", () => {
  it("log the first failure with its cause, then only the recovery, once per state change", async () => {
    const lines: Array<string> = []
    const capture = Logger.replace(Logger.defaultLogger, Logger.map(jsonLine, (l) => void lines.push(l)))
    // Rounds: ok, fail x3, ok, ok, fail, ok.
    const script = [true, false, false, false, true, true, false, true]
    let i = 0
    const round = Effect.suspend(() => (script[i++] ? Effect.succeed("done") : Effect.fail(new Error(`database is down (round ${i})`))))
    const looped = loggingStateChanges("jobs", round, "fallback")
    const results: Array<string> = []
    await Effect.runPromise(
      Effect.gen(function*() {
        for (let n = 0; n < script.length; n++) results.push(yield* looped)
      }).pipe(Effect.provide(capture))
    )
    expect(results).toEqual(["done", "fallback", "fallback", "fallback", "done", "done", "fallback", "done"])
    const logged = lines.map((l) => JSON.parse(l))
    expect(logged.map((l) => [l.level, l.message])).toEqual([
      ["ERROR", 'background round "jobs" failed (logged again only when it recovers)'],
      ["INFO", 'background round "jobs" recovered after 3 failures'],
      ["ERROR", 'background round "jobs" failed (logged again only when it recovers)'],
      ["INFO", 'background round "jobs" recovered after 1 failure']
    ])
    expect(logged[0].cause).toContain("database is down (round 2)")
    expect(logged[2].cause).toContain("database is down (round 7)")
  })

  it("lets interruption through", async () => {
    const exit = await Effect.runPromiseExit(loggingStateChanges("jobs", Effect.interrupt, "fallback"))
    expect(exit._tag).toBe("Failure")
  })
})

describe("continuous work", () => {
  it("gives each claimed item its own slot: one that never ends holds only its own, the rest go on, and claims ask only for free slots", async () => {
    // Items due over time: "hang" never ends (a receiver that never answers); every other ends at once.
    const due = ["hang", "a", "b", "c", "d", "e", "f"]
    const asked: Array<number> = []
    const done: Array<string> = []
    const claim = (n: number) => Effect.sync(() => {
      asked.push(n)
      return due.splice(0, Math.min(n, 2)) // two become due per look, as a queue fills
    })
    const work = (item: string) => item === "hang" ? Effect.never : Effect.sync(() => void done.push(item))
    await Effect.runPromise(Effect.gen(function*() {
      const loop = yield* Effect.fork(Worker.continuously("test", claim, work, 3, 5))
      yield* Effect.sleep(100)
      yield* Fiber.interrupt(loop)
    }))
    expect(done).toEqual(["a", "b", "c", "d", "e", "f"])
    // The hanging item keeps one of three slots: no claim asked for more than two after it was claimed.
    expect(asked[0]).toBe(3)
    expect(asked.slice(1).every((n) => n <= 2)).toBe(true)
  })

  it("waits for a free slot when every slot is busy, and claims again as soon as one frees", async () => {
    const asked: Array<number> = []
    let next = 0
    const claim = (n: number) => Effect.sync(() => {
      asked.push(n)
      return Array.from({ length: n }, () => next++)
    })
    const work = (item: number) => Effect.sleep(item < 2 ? 30 : 1000)
    await Effect.runPromise(Effect.gen(function*() {
      const loop = yield* Effect.fork(Worker.continuously("test", claim, work, 2, 1000))
      yield* Effect.sleep(80)
      yield* Fiber.interrupt(loop)
    }))
    // Two at first; each of the first two items freed its slot after 30 ms and was replaced at once, one at a time.
    expect(asked).toEqual([2, 1, 1])
  })

  it("keeps nothing of the items it worked: 100,000 on a loop whose slots never all fill leave the heap as it was", async () => {
    let next = 0
    let stop = 0
    // One item per look, after the items forked before have run: each is done before the slots fill.
    const claim = () => Effect.as(Effect.yieldNow(), next < stop ? [next++] : [])
    const run = (items: number) =>
      Effect.gen(function*() {
        stop = next + items
        const loop = yield* Effect.fork(Worker.continuously("test", claim, () => Effect.void, 4, 0))
        while (next < stop) yield* Effect.sleep(5)
        return loop
      })
    await Effect.runPromise(Effect.gen(function*() {
      const warm = yield* run(5_000)
      const before = liveHeapBytes()
      yield* Fiber.interrupt(warm)
      const loop = yield* run(100_000)
      const grownMb = (liveHeapBytes() - before) / 1048576
      yield* Fiber.interrupt(loop)
      // A token per item (an unbounded queue) kept about 5 MB here.
      expect(grownMb).toBeLessThan(2)
    }))
  }, 60_000)
})

describe("the job worker's claims", () => {
  it("claims only the jobs it advances at once: the rest stay free for another process", async () => {
    const started: Array<string> = []
    const runner = { advance: (job: JobRecord) => Effect.as(Effect.zipRight(Effect.sync(() => started.push(job.id)), Effect.sleep(50)), done({ ok: true })) }
    const worker = Worker.layer.pipe(Layer.provideMerge(Stores.layerMemory), Layer.provide(Layer.succeed(JobRunners, { batch: runner } as any)))
    const [first, second] = await Effect.runPromise(Effect.gen(function*() {
      const jobs = yield* JobStore
      const now = Date.now()
      for (let i = 0; i < 6; i++) {
        yield* jobs.insert({
          id: crypto.randomUUID(), type: "batch", avatarId: yield* owner, provider: "openai", upstreamId: null, status: "queued",
          input: {}, state: null, result: null, error: null, callbackUrl: null, attempts: 0, nextRunAt: now, lockedUntil: null,
          createdAt: now, updatedAt: now, completedAt: null
        })
      }
      const w = yield* Worker.JobWorker
      // Two rounds at once, as two processes: the first must not hold jobs it would advance only after a step.
      return yield* Effect.all([w.drainJobs, Effect.zipRight(Effect.sleep(5), w.drainJobs)], { concurrency: 2 })
    }).pipe(Effect.provide(worker)))
    expect([first, second]).toEqual([4, 2])
    expect(new Set(started).size).toBe(6)
  })
})

describe("a step cut off", () => {
  it("releases its job's lease, due again now as it was (a Lambda drain at its deadline, a host stopping)", async () => {
    const runner = { advance: () => Effect.never }
    const worker = Worker.layer.pipe(Layer.provideMerge(Stores.layerMemory), Layer.provide(Layer.succeed(JobRunners, { batch: runner } as any)))
    const { during, after } = await Effect.runPromise(Effect.gen(function*() {
      const jobs = yield* JobStore
      const now = Date.now()
      const id = crypto.randomUUID()
      yield* jobs.insert({
        id, type: "batch", avatarId: yield* owner, provider: "openai", upstreamId: null, status: "queued",
        input: {}, state: { done: 3 }, result: null, error: null, callbackUrl: null, attempts: 1, nextRunAt: now, lockedUntil: null,
        createdAt: now, updatedAt: now, completedAt: null
      })
      const w = yield* Worker.JobWorker
      const fiber = yield* Effect.fork(w.drainJobs)
      yield* Effect.sleep(20)
      const during = Option.getOrThrow(yield* jobs.get(id))
      yield* Fiber.interrupt(fiber)
      return { during, after: Option.getOrThrow(yield* jobs.get(id)) }
    }).pipe(Effect.provide(worker)))
    expect(during.lockedUntil).toBeGreaterThan(Date.now() + Worker.LEASE_MS / 2)
    // Picked up: running while its step is under way (a gateway batch's first items), no longer queued.
    expect(during.status).toBe("running")
    expect(after).toMatchObject({ status: "running", state: { done: 3 }, attempts: 1, lockedUntil: null })
    expect(after.nextRunAt).toBeLessThanOrEqual(Date.now())
  })
})

describe("a step that runs past its deadline", () => {
  it("is cut off inside its lease and retried later as a slow vendor's step is: no step works on when the job can be claimed again", async () => {
    const after = await Effect.runPromise(Effect.gen(function*() {
      const id = yield* dueJob({ type: "batch", provider: "openai", upstreamId: "batch_1", status: "running" })
      const fiber = yield* Effect.fork((yield* Worker.JobWorker).drainJobs)
      yield* TestClock.adjust(Duration.millis(Worker.STEP_DEADLINE_MS))
      yield* Fiber.join(fiber)
      return Option.getOrThrow(yield* Effect.flatMap(JobStore, (jobs) => jobs.get(id)))
    }).pipe(Effect.provide(workerWith("batch", { advance: () => Effect.never })), Effect.provide(TestContext.TestContext)))
    expect(Worker.STEP_DEADLINE_MS).toBeLessThan(Worker.LEASE_MS)
    expect(after).toMatchObject({ status: "running", attempts: 1, lockedUntil: null })
    expect(after.nextRunAt).toBeGreaterThan(Date.now())
  })
})

describe("a job whose stored vendor id is no usable id (stored before ids were checked as the vendor gives them)", () => {
  it("ends failed without its runner putting the id in a request path", async () => {
    const advanced: Array<string> = []
    const runner = { advance: (job: JobRecord) => Effect.as(Effect.sync(() => advanced.push(job.id)), wait(0)) }
    const ended = await Effect.runPromise(Effect.gen(function*() {
      const id = yield* dueJob({ type: "video", provider: "replicate", upstreamId: "..", status: "running" })
      yield* (yield* Worker.JobWorker).drainJobs
      return Option.getOrThrow(yield* Effect.flatMap(JobStore, (jobs) => jobs.get(id)))
    }).pipe(Effect.provide(workerWith("video", runner))))
    expect(advanced).toEqual([])
    expect([ended.status, ended.error]).toEqual(["failed", "replicate gave the job an id aigw cannot use in a request"])
  })
})

describe("a step that outlives its lease", () => {
  it("writes nothing once another worker has claimed the job: neither its progress nor its outcome", async () => {
    const lines: Array<string> = []
    const capture = Logger.replace(Logger.defaultLogger, Logger.map(jsonLine, (l) => void lines.push(l)))
    // Each step lets another worker claim the job past the lease before it answers, as a step slower than LEASE_MS would.
    const stolen = (step: Step) => (job: JobRecord) =>
      Effect.flatMap(JobStore, (jobs) => Effect.as(jobs.claimDue(job.lockedUntil! + 1, 10, Worker.LEASE_MS), step))
    const steps = [stolen(wait(1000, { upstreamId: "up_stale" })), stolen(done({ stale: true }))]
    let n = 0
    const runner = { advance: (job: JobRecord) => Effect.suspend(() => steps[n++]!(job)) }
    const worker = Worker.layer.pipe(Layer.provideMerge(Stores.layerMemory), Layer.provide(Layer.succeed(JobRunners, { batch: runner } as any)))
    const saved = await Effect.runPromise(Effect.gen(function*() {
      const jobs = yield* JobStore
      const now = Date.now()
      const id = crypto.randomUUID()
      yield* jobs.insert({
        id, type: "batch", avatarId: yield* owner, provider: "openai", upstreamId: null, status: "queued",
        input: {}, state: null, result: null, error: null, callbackUrl: "https://example.com/hook", attempts: 0, nextRunAt: now, lockedUntil: null,
        createdAt: now, updatedAt: now, completedAt: null
      })
      const w = yield* Worker.JobWorker
      yield* w.drainJobs
      const afterWait = yield* jobs.get(id)
      // The thief's lease has ended too; the next round's step finishes, but it too was claimed away.
      yield* jobs.insert({ ...Option.getOrThrow(afterWait), lockedUntil: null, nextRunAt: now })
      yield* w.drainJobs
      return { afterWait: Option.getOrThrow(afterWait), end: Option.getOrThrow(yield* jobs.get(id)), deliveries: yield* jobs.deliveriesOf(id) }
    }).pipe(Effect.provide(worker), Effect.provide(capture)))
    // Running: claimed (by the other worker), but nothing of the stale steps.
    expect([saved.afterWait.status, saved.afterWait.upstreamId]).toEqual(["running", null])
    expect([saved.end.status, saved.end.result, saved.end.completedAt]).toEqual(["running", null, null])
    expect(saved.deliveries).toEqual([])
    const warnings = lines.map((l) => JSON.parse(l)).filter((l) => l.level === "WARN").map((l) => l.message)
    expect(warnings).toEqual([
      expect.stringMatching(/the step outlived its lease .* its progress was not saved/),
      expect.stringMatching(/the step outlived its lease .* its completed outcome was not saved/)
    ])
  })
})

describe("the job of a deleted avatar, or of revoked credentials", () => {
  it("is stopped upstream and ends cancelled at its next step, without its webhook, as is one submitted before a password reset or with a key revoked with its jobs since (not one revoked alone); a stop the vendor refuses is logged", async () => {
    const lines: Array<string> = []
    const capture = Logger.replace(Logger.defaultLogger, Logger.map(jsonLine, (l) => void lines.push(l)))
    const advanced: Array<string> = []
    const stopped: Array<string> = []
    const runner = {
      advance: (job: JobRecord) => Effect.as(Effect.sync(() => advanced.push(job.id)), wait(0, { upstreamId: `up_${job.id}` })),
      stop: (job: JobRecord) =>
        Effect.suspend(() => {
          stopped.push(job.upstreamId!)
          return job.upstreamId === "up_refused" ? Effect.fail(new BadRequest({ message: "already ended" })) : Effect.void
        })
    }
    const worker = Worker.layer.pipe(Layer.provideMerge(Stores.layerMemory), Layer.provide(Layer.succeed(JobRunners, { batch: runner } as any)))
    const r = await Effect.runPromise(Effect.gen(function*() {
      const jobs = yield* JobStore
      const avatars = yield* AvatarStore
      const now = Date.now()
      const job = (id: string, avatarId: string, upstreamId: string | null, submittedWithKey: string | null = null): JobRecord => ({
        id, type: "batch", avatarId, provider: "openai", upstreamId, status: upstreamId === null ? "queued" : "running",
        input: {}, state: null, result: { kept: id }, error: null, callbackUrl: "https://example.com/hook", attempts: 0, nextRunAt: now, lockedUntil: null,
        createdAt: now, updatedAt: now, completedAt: null, submittedWithKey
      })
      const alive = yield* owner
      // Keys of the live avatar, after each submitted a job: one kept, one revoked (a rotation), one revoked with its jobs.
      const keys = yield* ApiKeyStore
      const key = (id: string) => ({ id, avatarId: alive, name: id, prefix: "aigw_x", hash: `hash-${id}`, createdAt: now, lastUsedAt: null, revokedAt: null })
      for (const id of ["live", "revoked", "stopped"]) yield* keys.insert(key(id))
      yield* keys.revoke(alive, "revoked", now + 1)
      yield* keys.revoke(alive, "stopped", now + 1, true)
      const deleted = yield* owner
      const reset = yield* owner
      yield* avatars.update(deleted, { isActive: false, deletedAt: now })
      // A password reset after the job was submitted moves the avatar's token generation past it.
      yield* avatars.update(reset, { tokensValidAfter: now + 1 })
      yield* avatars.update(alive, { tokensValidAfter: now - 1 })
      yield* jobs.insert(job("kept", alive, null))
      yield* jobs.insert(job("running", deleted, "up_running"))
      yield* jobs.insert(job("refused", deleted, "up_refused"))
      yield* jobs.insert(job("queued", deleted, null))
      yield* jobs.insert(job("orphan", crypto.randomUUID(), "up_orphan"))
      yield* jobs.insert(job("reset", reset, "up_reset"))
      yield* jobs.insert(job("keyLive", alive, null, "hash-live"))
      yield* jobs.insert(job("keyRevoked", alive, null, "hash-revoked"))
      yield* jobs.insert(job("keyStopped", alive, "up_key", "hash-stopped"))
      yield* jobs.insert(job("keyUnknown", alive, null, "hash-unknown"))
      const w = yield* Worker.JobWorker
      yield* w.drainJobs
      yield* w.drainJobs
      yield* w.drainJobs
      const ids = ["kept", "running", "refused", "queued", "orphan", "reset", "keyLive", "keyRevoked", "keyStopped", "keyUnknown"]
      const ended = yield* Effect.forEach(ids, (id) => Effect.map(jobs.get(id), Option.getOrThrow))
      const deliveries = yield* Effect.forEach(ids, (id) => jobs.deliveriesOf(id))
      return { ended, deliveries }
    }).pipe(Effect.provide(worker), Effect.provide(capture)))
    expect(new Set(advanced)).toEqual(new Set(["kept", "keyLive", "keyRevoked"]))
    expect(stopped.sort()).toEqual(["up_key", "up_orphan", "up_refused", "up_reset", "up_running"])
    expect(r.ended.map((j) => j.status)).toEqual(["running", "cancelled", "cancelled", "cancelled", "cancelled", "cancelled", "running", "running", "cancelled", "cancelled"])
    for (const j of r.ended.slice(1, 5)) expect([j.error, j.result]).toEqual([Worker.OWNER_GONE, { kept: j.id }])
    expect([r.ended[5]!.error, r.ended[5]!.result]).toEqual([Worker.CREDENTIALS_REVOKED, { kept: "reset" }])
    for (const j of r.ended.slice(8)) expect([j.error, j.result]).toEqual([Worker.KEY_REVOKED, { kept: j.id }])
    expect(r.deliveries.flat()).toEqual([])
    expect(lines.map((l) => JSON.parse(l)).filter((l) => l.level === "WARN").map((l) => l.message)).toEqual([
      expect.stringMatching(/job refused \(batch\): the job's avatar was deleted: the job was stopped; stopping it upstream failed: already ended/)
    ])
  })

  it("stops a job whose avatar is reset while its step runs: the step's outcome and webhook are not kept", async () => {
    const runner = {
      advance: (job: JobRecord) =>
        Effect.zipRight(
          Effect.flatMap(AvatarStore, (s) => s.update(job.avatarId, { tokensValidAfter: Date.now() + 1 })),
          Effect.succeed(done({ fineTunedModel: "ft:x" }))
        ),
      stop: () => Effect.void
    }
    const worker = Worker.layer.pipe(Layer.provideMerge(Stores.layerMemory), Layer.provide(Layer.succeed(JobRunners, { finetune: runner } as any)))
    const r = await Effect.runPromise(Effect.gen(function*() {
      const jobs = yield* JobStore
      const now = Date.now() - 5
      const id = crypto.randomUUID()
      yield* jobs.insert({
        id, type: "finetune", avatarId: yield* owner, provider: "openai", upstreamId: "ftjob-1", status: "running",
        input: {}, state: null, result: { upstreamStatus: "running" }, error: null, callbackUrl: "https://example.com/hook", attempts: 0, nextRunAt: now, lockedUntil: null,
        createdAt: now, updatedAt: now, completedAt: null
      })
      yield* (yield* Worker.JobWorker).drainJobs
      return { job: Option.getOrThrow(yield* jobs.get(id)), deliveries: yield* jobs.deliveriesOf(id) }
    }).pipe(Effect.provide(worker)))
    expect([r.job.status, r.job.error, r.job.result]).toEqual(["cancelled", Worker.CREDENTIALS_REVOKED, { upstreamStatus: "running" }])
    expect(r.deliveries).toEqual([])
  })
})
