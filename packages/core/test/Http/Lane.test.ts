/**
 * `Lane.onLane`: a route's check and handler Effects run on the lane. The check runs at once before
 * admission (`runNowOn`): its refusal is answered, a check that has to wait leaves the request to
 * the route (and is interrupted), a defect reaches the lane's last resort; the handler runs through
 * the admitted call's `run`.
 */
import { Effect, Runtime, Schema } from "effect"
import { describe, expect, it } from "vitest"
import { BadRequest } from "../../src/Errors.ts"
import { type LaneCall, type LaneServices, onLane, runNowOn } from "../../src/Http/Lane.ts"
import type { AvatarRecord } from "../../src/Storage/AvatarStore.ts"

const runNow = runNowOn(Runtime.defaultRuntime)
const services = { runNow } as unknown as LaneServices
const avatar = { id: "a1", plan: "Free" } as unknown as AvatarRecord
const Body = Schema.Struct({ text: Schema.String })

/** An admitted call whose `run` runs the Effect as it is. */
const admitted = { run: (effect: Effect.Effect<unknown, any, any>) => Effect.runPromise(effect as Effect.Effect<unknown, any>) } as unknown as LaneCall

describe("runNowOn", () => {
  it("gives the exit of an Effect that completes at once, success or failure", () => {
    expect(runNow(Effect.succeed(42))).toMatchObject({ _tag: "Success", value: 42 })
    expect(runNow(Effect.fail("no"))).toMatchObject({ _tag: "Failure" })
  })

  it("interrupts an Effect that has to wait, and gives undefined", async () => {
    let interrupted = false
    const waiting = Effect.never.pipe(Effect.onInterrupt(() => Effect.sync(() => (interrupted = true))))
    expect(runNow(waiting)).toBeUndefined()
    await new Promise((r) => setTimeout(r, 10))
    expect(interrupted).toBe(true)
  })
})

describe("onLane", () => {
  const handled: Array<string> = []
  const parts = (check: (text: string) => Effect.Effect<void, BadRequest>) =>
    onLane(Body, {
      check: ({ body }) => check(body.text),
      handle: ({ avatar, body }) => Effect.sync(() => (handled.push(body.text), { text: body.text, avatar: avatar.id }))
    })

  it("keeps the route's body, check and handler, and adds the lane", () => {
    const route = parts(() => Effect.void)
    expect(route.body).toBe(Body)
    expect(typeof route.check).toBe("function")
    expect(typeof route.handle).toBe("function")
    expect(typeof route.lane.plan).toBe("function")
  })

  it("answers the check's refusal before admission, without running the handler", () => {
    const refusal = new BadRequest({ message: "text is not welcome" })
    const plan = parts(() => Effect.fail(refusal)).lane.plan(services, avatar, { text: "x" }, {})
    expect(plan).toBe(refusal)
    expect(handled).not.toContain("x")
  })

  it("leaves a request whose check has to wait to the route", () => {
    expect(parts(() => Effect.sleep("5 millis")).lane.plan(services, avatar, { text: "y" }, {})).toBeUndefined()
  })

  it("throws a check's defect (the lane's last resort answers 500 and logs it)", () => {
    expect(() => parts(() => Effect.die(new Error("broken check"))).lane.plan(services, avatar, { text: "z" }, {})).toThrow("broken check")
  })

  it("serves a passed check with the handler, run through the admitted call", async () => {
    const serve = parts(() => Effect.void).lane.plan(services, avatar, { text: "hello" }, {})
    expect(typeof serve).toBe("function")
    expect(await (serve as (call: LaneCall) => Promise<unknown>)(admitted)).toEqual({ text: "hello", avatar: "a1" })
    expect(handled).toEqual(["hello"])
  })
})
