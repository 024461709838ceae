import { describe, expect, it } from "vitest"
import { once } from "../src/Once.ts"

describe("once", () => {
  it("makes the value once for concurrent callers and shows it once made", async () => {
    let calls = 0
    const value = once(async () => ++calls)
    expect(value.current()).toBeUndefined()
    expect(await Promise.all([value.get(), value.get(), value.get()])).toEqual([1, 1, 1])
    expect(await value.get()).toBe(1)
    expect(value.current()).toBe(1)
    expect(calls).toBe(1)
  })
  it("forgets a failed attempt: its callers see the failure, the next caller tries again", async () => {
    let calls = 0
    const value = once(async () => {
      if (++calls === 1) throw new Error("first import failed")
      return "loaded"
    })
    const first = [value.get(), value.get()]
    for (const p of first) await expect(p).rejects.toThrow("first import failed")
    expect(value.current()).toBeUndefined()
    expect(await value.get()).toBe("loaded")
    expect(calls).toBe(2)
  })
})
