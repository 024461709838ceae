/**
 * A job whose vendor never settles (an attack run's Luma generation went dreaming, queued, dreaming…
 * for as long as it liked) is failed once it has waited past its type's limit, not polled forever.
 */
import { describe, expect, it } from "vitest"
import type { JobRecord } from "../../src/Jobs/JobStore.ts"
import { stillWaiting, VENDOR_WAIT_LIMITS_HOURS } from "../../src/Jobs/Runners.ts"

const job = (type: JobRecord["type"], ageHours: number): JobRecord => ({
  id: "j", type, avatarId: "a", provider: "luma", upstreamId: "u1", status: "running", input: {}, state: null, result: null,
  error: null, callbackUrl: null, attempts: 0, nextRunAt: 0, lockedUntil: null, createdAt: Date.now() - ageHours * 3_600_000,
  updatedAt: 0, completedAt: null
})

describe("a job its vendor is still working on", () => {
  it("is polled again within its type's limit, failed past it, naming the last status", () => {
    expect(stillWaiting(job("video", 5.9), "running", 1_000, { result: { upstreamStatus: "running" } })).toMatchObject({ _tag: "Wait", afterMs: 1_000 })
    expect(stillWaiting(job("video", 6.1), "pending", 1_000, {})).toEqual({
      _tag: "Failed",
      error: "luma did not finish the video job within 6 hours (its last status: pending)",
      result: { provider: "luma", upstreamId: "u1" }
    })
    expect(VENDOR_WAIT_LIMITS_HOURS).toEqual({ batch: 26, video: 6, finetune: 168 })
    expect(stillWaiting(job("batch", 25), "in_progress", 1_000, {})).toMatchObject({ _tag: "Wait" })
    expect(stillWaiting(job("batch", 27), "in_progress", 1_000, {})).toMatchObject({ _tag: "Failed" })
  })
})
