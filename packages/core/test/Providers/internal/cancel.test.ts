import { getEventListeners } from "node:events"
import { describe, expect, it } from "vitest"
import { Cancel } from "../../../src/Providers/internal/cancel.ts"

describe("Cancel (what an AbortController does for upstream calls)", () => {
  it("aborts once, running its hooks in order with the reason; a removed hook does not run", () => {
    const cancel = new Cancel()
    const seen: Array<string> = []
    cancel.onAbort((r) => seen.push(`a:${r}`))
    const remove = cancel.onAbort((r) => seen.push(`b:${r}`))
    cancel.onAbort((r) => seen.push(`c:${r}`))
    remove()
    remove()
    expect(cancel.aborted).toBe(false)
    expect(cancel.reason).toBeUndefined()
    cancel.abort("gone")
    cancel.abort("again")
    expect(seen).toEqual(["a:gone", "c:gone"])
    expect(cancel.aborted).toBe(true)
    expect(cancel.reason).toBe("gone")
  })

  it("runs a hook added after the abort at once, and its remover does nothing", () => {
    const cancel = new Cancel()
    cancel.abort(42)
    const seen: Array<unknown> = []
    const remove = cancel.onAbort((r) => seen.push(r))
    expect(seen).toEqual([42])
    remove()
  })

  it("aborts with an AbortError when given no reason, as AbortController does", () => {
    const cancel = new Cancel()
    cancel.abort()
    expect(cancel.reason).toBeInstanceOf(DOMException)
    expect((cancel.reason as DOMException).name).toBe("AbortError")
  })

  it("gives a real AbortSignal that follows it, made before or after the abort", () => {
    const before = new Cancel()
    const signal = before.signal()
    expect(before.signal()).toBe(signal)
    let fired: unknown
    signal.addEventListener("abort", () => (fired = signal.reason))
    before.abort("late")
    expect(signal.aborted).toBe(true)
    expect(fired).toBe("late")

    const after = new Cancel()
    after.abort("early")
    expect(after.signal().aborted).toBe(true)
    expect(after.signal().reason).toBe("early")
  })

  it("follows an AbortSignal, whether it aborts later or already did, until released", () => {
    const controller = new AbortController()
    const { cancel } = Cancel.following(controller.signal)
    expect(cancel.aborted).toBe(false)
    controller.abort("bye")
    expect(cancel.aborted).toBe(true)
    expect(cancel.reason).toBe("bye")
    expect(Cancel.following(AbortSignal.abort("done")).cancel.reason).toBe("done")

    const later = new AbortController()
    const released = Cancel.following(later.signal)
    expect(getEventListeners(later.signal, "abort")).toHaveLength(1)
    released.release()
    expect(getEventListeners(later.signal, "abort")).toHaveLength(0)
    later.abort()
    expect(released.cancel.aborted).toBe(false)
  })

  it("runs every hook when one removes itself or throws; the error is rethrown on its own tick", async () => {
    const cancel = new Cancel()
    const seen: Array<string> = []
    const removeFirst: () => void = cancel.onAbort(() => {
      seen.push("first")
      removeFirst()
    })
    cancel.onAbort(() => {
      seen.push("second")
      throw new Error("hook failed")
    })
    cancel.onAbort(() => seen.push("third"))
    const uncaught = new Promise<unknown>((resolve) => process.once("uncaughtException", resolve))
    cancel.abort()
    expect(seen).toEqual(["first", "second", "third"])
    expect(await uncaught).toMatchObject({ message: "hook failed" })
  })
})
