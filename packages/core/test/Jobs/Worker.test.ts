import { Effect, Logger } from "effect"
import { describe, expect, it } from "vitest"
import { loggingStateChanges } from "../../src/Jobs/Worker.ts"
import { jsonLine } from "../../src/Logging.ts"

describe("background rounds", () => {
  it("log the first failure with its cause, then only the recovery, once per state change", async () => {
    const lines: Array<string> = []
    const capture = Logger.replace(Logger.defaultLogger, Logger.map(jsonLine, (l) => void lines.push(l)))
    // Rounds: ok, fail x3, ok, ok, fail, ok.
    const script = [true, false, false, false, true, true, false, true]
    let i = 0
    const round = Effect.suspend(() => (script[i++] ? Effect.succeed("done") : Effect.fail(new Error(`database is down (round ${i})`))))
    const looped = loggingStateChanges(round, "fallback")
    const results: Array<string> = []
    await Effect.runPromise(
      Effect.gen(function*() {
        for (let n = 0; n < script.length; n++) results.push(yield* looped)
      }).pipe(Effect.provide(capture))
    )
    expect(results).toEqual(["done", "fallback", "fallback", "fallback", "done", "done", "fallback", "done"])
    const logged = lines.map((l) => JSON.parse(l))
    expect(logged.map((l) => [l.level, l.message])).toEqual([
      ["ERROR", "background round failed (logged again only when it recovers)"],
      ["INFO", "background round recovered after 3 failures"],
      ["ERROR", "background round failed (logged again only when it recovers)"],
      ["INFO", "background round recovered after 1 failure"]
    ])
    expect(logged[0].cause).toContain("database is down (round 2)")
    expect(logged[2].cause).toContain("database is down (round 7)")
  })

  it("lets interruption through", async () => {
    const exit = await Effect.runPromiseExit(loggingStateChanges(Effect.interrupt, "fallback"))
    expect(exit._tag).toBe("Failure")
  })
})
