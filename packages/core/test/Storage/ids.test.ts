import { describe, expect, it } from "vitest"
import { uuidv7, uuidv7Floor } from "../../src/Storage/Sql/ids.ts"

describe("uuidv7", () => {
  it("is a version-7, RFC-variant UUID carrying the time, ordered by it", () => {
    const at = Date.UTC(2026, 10, 21, 23, 30)
    const id = uuidv7(at)
    expect(id).toMatch(/^[0-9a-f]{8}-[0-9a-f]{4}-7[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/)
    expect(parseInt(id.slice(0, 8) + id.slice(9, 13), 16)).toBe(at)
    const ids = Array.from({ length: 50 }, (_, i) => uuidv7(at + i * 7))
    expect([...ids].sort()).toEqual(ids)
    expect(new Set(Array.from({ length: 1000 }, () => uuidv7(at))).size).toBe(1000)
  })

  it("its floor for a time sorts above every id made before it and below every id made at or after it", () => {
    const at = Date.UTC(2026, 11, 3, 16, 0)
    const floor = uuidv7Floor(at)
    for (let i = 0; i < 200; i++) {
      expect(uuidv7(at - 1 - i * 997) < floor).toBe(true)
      expect(uuidv7(at + i * 997) > floor).toBe(true)
    }
    expect(uuidv7Floor(0)).toBe("00000000-0000")
    expect(uuidv7Floor(-1_000_000_000_000)).toBe("00000000-0000")
  })
})
