/** Receivers that stopped answering (Webhooks/Receivers.ts): stalled after two silent attempts, one probe at a time, cleared by any answer. */
import { describe, expect, it } from "vitest"
import { makeReceivers } from "../../src/Webhooks/Receivers.ts"

describe("receivers that stopped answering", () => {
  it("are stalled after two silent attempts: one probe at a time, the rest deferred; any answer clears them", () => {
    const r = makeReceivers()
    const url = "https://hooks.example.com/a"
    expect(r.admit(url, 0)).toBe("send")
    r.unanswered(url, 0)
    expect([r.admit(url, 1), r.admit(url, 1)]).toEqual(["send", "send"]) // one silence is not enough
    r.unanswered(url, 1)
    expect([r.admit(url, 2), r.admit(`${url}?other`, 2), r.admit("https://hooks.example.com/b", 2)]).toEqual(["send", "defer", "defer"])
    // Another receiver (another host or port) is not held.
    expect(r.admit("https://hooks.example.com:8443/a", 2)).toBe("send")
    r.unanswered(url, 3) // the probe got no answer either: the next probe may go
    expect([r.admit(url, 4), r.admit(url, 4)]).toEqual(["send", "defer"])
    r.answered(url) // a 500 is an answer
    expect([r.admit(url, 5), r.admit(url, 5)]).toEqual(["send", "send"])
  })

  it("forget a silence after 10 minutes, and release a probe that was never sent", () => {
    const r = makeReceivers()
    const url = "http://10.0.0.1:9000/x"
    r.unanswered(url, 0)
    r.unanswered(url, 1)
    expect(r.admit(url, 2)).toBe("send")
    r.released(url) // refused before sending: the next may probe
    expect(r.admit(url, 3)).toBe("send")
    expect(r.admit(url, 10 * 60 * 1000 + 2)).toBe("send")
    expect(r.admit(url, 10 * 60 * 1000 + 2)).toBe("send")
  })
})
