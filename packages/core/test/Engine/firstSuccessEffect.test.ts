/**
 * The engine's fallback loop for clients written as Effects (media, vendors' own APIs, video jobs):
 * the next candidate after a retryable upstream failure only, health and metrics per attempt, an
 * abandoned attempt counted as cancelled, and the engine's graceful stop: a request's attempt begun
 * after its notice fails at once, background work's goes on (as `firstSuccess`'s, upstreamCounts.test.ts).
 */
import { Effect, Either, Fiber } from "effect"
import { describe, expect, it } from "vitest"
import * as ProviderCalls from "../../src/Engine/ProviderCalls.ts"
import * as Metrics from "../../src/Metrics.ts"
import * as ProviderHealth from "../../src/Providers/ProviderHealth.ts"
import { fromHttp } from "../../src/Providers/UpstreamError.ts"
import * as RequestId from "../../src/RequestId.ts"
import { engineLayer } from "../support/engine.ts"

/** An engine of its own (a stopped engine stays stopped) and its provider health; this loop records no usage. */
const services = () =>
  Effect.runPromise(
    Effect.provide(
      Effect.all({ calls: ProviderCalls.ProviderCalls, health: ProviderHealth.ProviderHealth }),
      engineLayer(async () => {
        throw new Error("firstSuccessEffect records no usage: its caller does")
      })
    )
  )

/** `effect` run as a request's work (the HTTP edge sets the request on its fiber). */
const forRequest = <A, E>(effect: Effect.Effect<A, E>) => Effect.locally(effect, RequestId.CurrentRequest, { id: "r1", route: "/v1/images/generations" })

describe("firstSuccessEffect", () => {
  const candidates = [{ provider: { id: "a" }, model: "m1" }, { provider: { id: "b" }, model: "m2" }, { provider: { id: "c" }, model: "m3" }]

  it("moves on after retryable upstream failures, reports them as fallbacks and records health", async () => {
    const { health, calls } = await services()
    const tried: Array<string> = []
    const before = { aOk: Metrics.upstreamCalls.get(["a", "ok"]), aError: Metrics.upstreamCalls.get(["a", "error"]), cOk: Metrics.upstreamCalls.get(["c", "ok"]) }
    const result = await Effect.runPromise(calls.firstSuccessEffect(candidates, (c) => {
      tried.push(c.provider.id)
      return c.provider.id === "c" ? Effect.succeed(`from ${c.model}`) : Effect.fail(fromHttp(c.provider.id, c.provider.id === "a" ? 503 : 429, "{}"))
    }))
    expect(tried).toEqual(["a", "b", "c"])
    expect(result.value).toBe("from m3")
    expect(result.candidate.provider.id).toBe("c")
    expect(result.fallbacks.map((f) => [f.provider, f.model])).toEqual([["a", "m1"], ["b", "m2"]])
    expect(health.status("a")).toBe("degraded")
    expect(health.status("c")).toBe("up")
    expect(Metrics.upstreamCalls.get(["a", "error"])).toBe(before.aError + 1)
    expect(Metrics.upstreamCalls.get(["a", "ok"])).toBe(before.aOk)
    expect(Metrics.upstreamCalls.get(["c", "ok"])).toBe(before.cOk + 1)
  })

  it("stops at a non-retryable failure and at the last candidate's failure", async () => {
    const { health, calls } = await services()
    const tried: Array<string> = []
    const badRequest = await Effect.runPromise(Effect.either(calls.firstSuccessEffect(candidates, (c) => {
      tried.push(c.provider.id)
      return Effect.fail(fromHttp(c.provider.id, 400, JSON.stringify({ error: { message: "bad size" } })))
    })))
    expect(tried).toEqual(["a"])
    expect(Either.isLeft(badRequest) && badRequest.left.message).toMatch(/bad size/)
    // A 400 is the request's fault: the provider stays healthy.
    expect(health.status("a")).toBe("up")
    const allDown = await Effect.runPromise(Effect.either(calls.firstSuccessEffect(candidates, (c) => Effect.fail(fromHttp(c.provider.id, 502, "{}")))))
    expect(Either.isLeft(allDown) && allDown.left.provider).toBe("c")
  })

  // A twins review: the engine counted an abandoned attempt as cancelled; this loop counted nothing.
  it("counts an attempt its client abandoned as cancelled, and leaves the provider's health alone", async () => {
    const { health, calls } = await services()
    const before = Metrics.upstreamCalls.get(["a", "cancelled"])
    const fiber = Effect.runFork(calls.firstSuccessEffect(candidates, () => Effect.never))
    await new Promise((r) => setTimeout(r, 10))
    await Effect.runPromise(Fiber.interrupt(fiber))
    expect(Metrics.upstreamCalls.get(["a", "cancelled"])).toBe(before + 1)
    expect(health.status("a")).toBe("unknown")
  })

  it("passes other failures through without trying further", async () => {
    const { calls } = await services()
    const tried: Array<string> = []
    const result = await Effect.runPromise(Effect.either(calls.firstSuccessEffect(candidates, (c) => {
      tried.push(c.provider.id)
      return Effect.fail("not an upstream error" as const)
    })))
    expect(tried).toEqual(["a"])
    expect(Either.isLeft(result) && result.left).toBe("not an upstream error")
  })

  // A twins review: the engine's loop refused a request's attempt after a graceful stop's notice; this one started it,
  // and the attempt ran until the connections were cut.
  it("after a graceful stop's notice fails a request's attempt at once, and lets background work's go on", async () => {
    const { calls, health } = await services()
    calls.stopCalls({ message: "the gateway is stopping", code: "Busy" }, "the gateway is stopping this call")
    const tried: Array<string> = []
    const attempt = (c: (typeof candidates)[number]) => Effect.sync(() => (tried.push(c.provider.id), `from ${c.model}`))
    const before = Metrics.upstreamErrors.get(["a", "stopped"])
    const refused = await Effect.runPromise(Effect.either(forRequest(calls.firstSuccessEffect(candidates, attempt))))
    expect(tried).toEqual([])
    // Not retryable: a stop is no reason to try the next candidate. The provider's health is untouched.
    expect(Either.isLeft(refused) && refused.left).toMatchObject({ kind: "stopped", provider: "a", message: "the gateway is stopping this call", retryable: false })
    expect(Metrics.upstreamErrors.get(["a", "stopped"])).toBe(before + 1)
    expect(health.status("a")).toBe("unknown")
    // A job's step (no request): a stopped process's step is run again by the next one, so it is left to run.
    const background = await Effect.runPromise(calls.firstSuccessEffect(candidates, attempt))
    expect(background.value).toBe("from m1")
    expect(tried).toEqual(["a"])
  })
})
