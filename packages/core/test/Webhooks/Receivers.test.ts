/**
 * Receivers that stopped answering (Webhooks/Receivers.ts), one per caller and origin: at most 4 attempts to one receiver at once;
 * stalled after two silent attempts, then one at a time; cleared by any answer.
 */
import { describe, expect, it } from "vitest"
import { makeReceivers, MAX_SENDING_TO_ONE } from "../../src/Webhooks/Receivers.ts"

describe("receivers", () => {
  it("take at most 4 attempts at once, each receiver (a caller's scheme, host and port) on its own", () => {
    const r = makeReceivers()
    const url = "https://hooks.example.com/a"
    const admitted = Array.from({ length: 6 }, (_, i) => r.admit("a", `${url}?${i}`, 0))
    expect(admitted).toEqual([...Array(MAX_SENDING_TO_ONE).fill("send"), "busy", "busy"])
    expect(r.admit("a", "https://hooks.example.com:8443/a", 0)).toBe("send")
    r.ended("a", url, "answered", 0)
    expect(r.admit("a", url, 1)).toBe("send")
  })

  it("keep callers apart on one host: one caller's silent callback does not hold up another's; its own paths are one receiver", () => {
    // A shared webhook host with a path per customer: a stall was kept per host, and another caller's
    // delivery to /victim waited 53 s behind three to /hang.
    const r = makeReceivers()
    for (let i = 0; i < 3; i++) expect(r.admit("attacker", "https://hooks.example.com/hang", 0)).toBe("send")
    r.ended("attacker", "https://hooks.example.com/hang", "unanswered", 10)
    r.ended("attacker", "https://hooks.example.com/hang", "unanswered", 10)
    expect(r.admit("attacker", "https://hooks.example.com/hang", 11)).toBe("stalled")
    expect(r.admit("victim", "https://hooks.example.com/victim", 11)).toBe("send")
    // Keyed by path, one caller's 24 silent paths held every slot: its paths and queries are one receiver.
    expect(r.admit("attacker", "https://hooks.example.com/silent/7", 11)).toBe("stalled")
    expect(r.admit("attacker", "https://hooks.example.com/hang?token=2", 11)).toBe("stalled")
  })

  it("are stalled after two silent attempts: while one attempt is under way the rest wait, whichever began before; any answer clears them", () => {
    const r = makeReceivers()
    const url = "https://silent.example.com/h"
    // A wave begun before anything was known: three attempts under way.
    expect([r.admit("a", url, 0), r.admit("a", url, 0), r.admit("a", url, 0)]).toEqual(["send", "send", "send"])
    r.ended("a", url, "unanswered", 10)
    r.ended("a", url, "unanswered", 10)
    // Stalled, and one attempt of the wave is still under way: nothing more is sent until it ends.
    expect(r.admit("a", url, 11)).toBe("stalled")
    r.ended("a", url, "unanswered", 12)
    // Nothing under way: one probe.
    expect([r.admit("a", url, 13), r.admit("a", url, 13)]).toEqual(["send", "stalled"])
    r.ended("a", url, "unanswered", 20)
    expect([r.admit("a", url, 21), r.admit("a", url, 21)]).toEqual(["send", "stalled"])
    r.ended("a", url, "answered", 0) // a 500 is an answer
    expect([r.admit("a", url, 22), r.admit("a", url, 22)]).toEqual(["send", "send"])
  })

  it("forget a silence after 10 minutes, and a probe refused before sending frees its place", () => {
    const r = makeReceivers()
    const url = "http://10.0.0.1:9000/x"
    r.admit("a", url, 0)
    r.ended("a", url, "unanswered", 0)
    r.admit("a", url, 1)
    r.ended("a", url, "unanswered", 1)
    expect(r.admit("a", url, 2)).toBe("send")
    r.ended("a", url, "released", 0)
    expect(r.admit("a", url, 3)).toBe("send")
    r.ended("a", url, "released", 0)
    expect([r.admit("a", url, 10 * 60 * 1000 + 2), r.admit("a", url, 10 * 60 * 1000 + 2)]).toEqual(["send", "send"])
  })
})
