/** The host's own wiring: which background work the scheduled entry point runs (core's Lambda tests cover the adapter). */
import { describe, expect, it } from "vitest"
import { drainers, handler, migrate, scheduled, streamHandler, streamingHandler } from "../src/handler.ts"

describe("Lambda entry points", () => {
  it("the scheduled handler drains core's jobs and webhooks, then the usage records past their retention", () => {
    expect(drainers.map((d) => d.name)).toEqual(["jobs+webhooks", "usage retention"])
  })

  it("exports every entry point; without the awslambda global the stream handler is the plain one", () => {
    for (const entry of [handler, migrate, scheduled, streamingHandler]) expect(typeof entry).toBe("function")
    expect(streamHandler).toBe(streamingHandler)
  })
})
