/**
 * A single call to a task vendor (`vendorCall`) is the engine's attempt of one candidate: recorded in
 * usage whatever its end, and, made for a request after a graceful stop's notice, refused before it
 * reaches the vendor (a 503 to retry elsewhere), while background work's call goes on.
 */
import { Effect, Either, Layer, ManagedRuntime } from "effect"
import { describe, expect, it } from "vitest"
import type { ConfiguredProvider } from "../../src/Catalog/Catalog.ts"
import { vendorCall } from "../../src/Capabilities/VendorCall.ts"
import * as ProviderCalls from "../../src/Engine/ProviderCalls.ts"
import type { UsageRecord } from "../../src/Engine/ProviderCalls.ts"
import { fromHttp } from "../../src/Providers/UpstreamError.ts"
import * as RequestId from "../../src/RequestId.ts"
import { Usage } from "../../src/Usage.ts"
import { engineLayer } from "../support/engine.ts"

const vendor = { id: "deepl" } as ConfiguredProvider

/** An engine of its own (a stopped engine stays stopped) and the usage records its calls make. */
const services = () => {
  const records: Array<UsageRecord> = []
  const usage = Layer.succeed(Usage, {
    record: (u: UsageRecord) => Effect.sync(() => void records.push(u)),
    summary: () => Effect.die("not used here")
  } as unknown as Usage["Type"])
  const runtime = ManagedRuntime.make(Layer.merge(engineLayer(), usage))
  const run = <A, E>(effect: Effect.Effect<A, E, ProviderCalls.ProviderCalls | Usage>) => runtime.runPromise(Effect.either(effect))
  return { records, run }
}

const forRequest = <A, E, R>(effect: Effect.Effect<A, E, R>) => Effect.locally(effect, RequestId.CurrentRequest, { id: "r1", route: "/v1/translate" })

describe("vendorCall", () => {
  it("records the call under the vendor whatever its end", async () => {
    const { records, run } = services()
    const ok = await run(vendorCall("av1", vendor, "translate", Effect.succeed("Hallo")))
    expect(Either.isRight(ok) && ok.right).toBe("Hallo")
    const failed = await run(vendorCall("av1", vendor, "translate", Effect.fail(fromHttp("deepl", 500, "{}"))))
    expect(Either.isLeft(failed) && failed.left._tag).toBe("UpstreamFailed")
    expect(records.map((r) => [r.provider, r.model, r.capability, r.ok])).toEqual([["deepl", "deepl", "translate", true], ["deepl", "deepl", "translate", false]])
  })

  // The lead left in session 47: the engine's loop was tested for the stop, not a vendor's single call made through it.
  it("after a graceful stop's notice refuses a request's call before the vendor is asked, and runs background work's", async () => {
    const { records, run } = services()
    await run(Effect.map(ProviderCalls.ProviderCalls, (calls) =>
      calls.stopCalls({ message: "the gateway is stopping", code: "Busy" }, "the gateway is stopping this call")))
    let asked = 0
    const call = Effect.sync(() => (asked++, "Hallo"))
    const refused = await run(forRequest(vendorCall("av1", vendor, "translate", call)))
    expect(asked).toBe(0)
    expect(Either.isLeft(refused) && refused.left).toMatchObject({ _tag: "Busy", message: "the gateway is stopping this call", retryAfterSeconds: 1 })
    expect(records.at(-1)).toMatchObject({ provider: "deepl", ok: false })
    const background = await run(vendorCall("av1", vendor, "translate", call))
    expect(Either.isRight(background) && background.right).toBe("Hallo")
    expect(asked).toBe(1)
  })
})
