import { describe, expect, it } from "vitest"
import { nextUtcMidnight, utcDay } from "../src/Quota.ts"

describe("utcDay", () => {
  it("names the UTC day of any instant, also across midnight and back in time (its cache holds one day)", () => {
    const midnight = Date.UTC(2026, 10, 22)
    expect(utcDay(midnight - 1)).toBe("2026-11-21")
    expect(utcDay(midnight)).toBe("2026-11-22")
    expect(utcDay(midnight - 1)).toBe("2026-11-21")
    expect(utcDay(Date.UTC(2024, 1, 29, 12))).toBe("2024-02-29")
    expect(utcDay(midnight + 86_399_999)).toBe("2026-11-22")
    expect(utcDay(midnight + 86_400_000)).toBe("2026-11-23")
    for (let t = Date.UTC(2026, 0, 1); t < Date.UTC(2027, 0, 1); t += 3_600_000 * 7 + 13) {
      expect(utcDay(t)).toBe(new Date(t).toISOString().slice(0, 10))
    }
    expect(nextUtcMidnight(midnight - 1)).toBe(midnight)
  })
})
