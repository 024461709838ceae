import fc from "fast-check"
import { describe, expect, it } from "vitest"
import { dailyLimit, defaultPlanLimits, karmaMultiplier, planAllows } from "../src/Plans.ts"
import { nextUtcMidnight, secondsToReset, utcDay } from "../src/Quota.ts"

describe("karma multiplier", () => {
  it("is 1.0 at zero karma and capped at 10.0", () => {
    expect(karmaMultiplier(0)).toBe(1)
    expect(karmaMultiplier(-50)).toBe(1)
    expect(karmaMultiplier(1e9)).toBe(10)
    expect(karmaMultiplier(Number.NaN)).toBe(1)
  })
  it("matches the documented table", () => {
    expect([100, 1_000, 10_000, 99_900].map(karmaMultiplier)).toEqual([1.9, 4.12, 7.01, 10])
  })
  it("is monotonic and within [1, 10]", () => {
    fc.assert(
      fc.property(fc.double({ min: 0, max: 1e7, noNaN: true }), fc.double({ min: 0, max: 1e7, noNaN: true }), (a, b) => {
        const [lo, hi] = a <= b ? [a, b] : [b, a]
        const m = karmaMultiplier(lo)
        return m >= 1 && m <= 10 && m <= karmaMultiplier(hi)
      })
    )
  })
  it("daily limit is base x multiplier, rounded down", () => {
    expect(dailyLimit(defaultPlanLimits.Free, 0)).toBe(100)
    expect(dailyLimit(100, 1_000)).toBe(412)
    // Multiplier 2.01: 100 x 2.01 is 200.99999999999997 in floating point, and the limit was 200.
    expect(karmaMultiplier(117)).toBe(2.01)
    expect(dailyLimit(100, 117)).toBe(201)
    // Every multiplier, against exact integer arithmetic in hundredths.
    for (let karma = 0; karma <= 100_000; karma += 7) {
      const hundredths = BigInt(Math.round(karmaMultiplier(karma) * 100))
      for (const base of [100, 5_000, 20_000, 100_000]) expect(dailyLimit(base, karma)).toBe(Number((BigInt(base) * hundredths) / 100n))
    }
  })
  it("plans are ordered", () => {
    expect(planAllows("Gold", "Silver")).toBe(true)
    expect(planAllows("Free", "Bronze")).toBe(false)
    expect(planAllows("Enterprise", "Gold")).toBe(true)
  })
})

describe("UTC quota day", () => {
  it("resets at the next UTC midnight", () => {
    const t = Date.UTC(2026, 10, 21, 23, 59, 30, 500)
    expect(utcDay(t)).toBe("2026-11-21")
    expect(nextUtcMidnight(t)).toBe(Date.UTC(2026, 10, 22))
    expect(secondsToReset(t)).toBe(30)
    expect(secondsToReset(Date.UTC(2026, 11, 31, 12))).toBe(12 * 3600)
  })
})
