/** The host's own wiring: which background work the scheduled entry point runs (core's Lambda tests cover the adapter). */
import { describe, expect, it } from "vitest"
import { drainers, handler, migrate, scheduled, streamHandler, streamingHandler } from "../src/handler.ts"

describe("Lambda entry points", () => {
  it("the scheduled handler prunes the usage records past their retention, then drains core's jobs and webhooks", () => {
    expect(drainers.map((d) => d.name)).toEqual(["usage retention", "jobs+webhooks"])
  })

  it("exports every entry point; without the awslambda global the stream handler is the plain one", () => {
    for (const entry of [handler, migrate, scheduled, streamingHandler]) expect(typeof entry).toBe("function")
    expect(streamHandler).toBe(streamingHandler)
  })
})
