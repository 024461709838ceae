/**
 * Receivers that stopped answering (Webhooks/Receivers.ts): at most 4 attempts to one receiver at once;
 * stalled after two silent attempts, then one at a time; cleared by any answer.
 */
import { describe, expect, it } from "vitest"
import { makeReceivers, MAX_SENDING_TO_ONE } from "../../src/Webhooks/Receivers.ts"

describe("receivers", () => {
  it("take at most 4 attempts at once, each receiver (scheme, host, port and path) on its own", () => {
    const r = makeReceivers()
    const url = "https://hooks.example.com/a"
    const admitted = Array.from({ length: 6 }, (_, i) => r.admit(`${url}?${i}`, 0))
    expect(admitted).toEqual([...Array(MAX_SENDING_TO_ONE).fill("send"), "busy", "busy"])
    expect(r.admit("https://hooks.example.com:8443/a", 0)).toBe("send")
    r.ended(url, "answered", 0)
    expect(r.admit(url, 1)).toBe("send")
  })

  it("keep paths of one host apart: one caller's silent path does not hold up another's that answers", () => {
    // A shared webhook host with a path per customer: a stall was kept per host, and a delivery to
    // /victim waited 53 s behind three to /hang.
    const r = makeReceivers()
    for (let i = 0; i < 3; i++) expect(r.admit("https://hooks.example.com/hang", 0)).toBe("send")
    r.ended("https://hooks.example.com/hang", "unanswered", 10)
    r.ended("https://hooks.example.com/hang", "unanswered", 10)
    expect(r.admit("https://hooks.example.com/hang", 11)).toBe("stalled")
    expect(r.admit("https://hooks.example.com/victim", 11)).toBe("send")
    // The query is no part of the receiver.
    expect(r.admit("https://hooks.example.com/hang?token=2", 11)).toBe("stalled")
  })

  it("are stalled after two silent attempts: while one attempt is under way the rest wait, whichever began before; any answer clears them", () => {
    const r = makeReceivers()
    const url = "https://silent.example.com/h"
    // A wave begun before anything was known: three attempts under way.
    expect([r.admit(url, 0), r.admit(url, 0), r.admit(url, 0)]).toEqual(["send", "send", "send"])
    r.ended(url, "unanswered", 10)
    r.ended(url, "unanswered", 10)
    // Stalled, and one attempt of the wave is still under way: nothing more is sent until it ends.
    expect(r.admit(url, 11)).toBe("stalled")
    r.ended(url, "unanswered", 12)
    // Nothing under way: one probe.
    expect([r.admit(url, 13), r.admit(url, 13)]).toEqual(["send", "stalled"])
    r.ended(url, "unanswered", 20)
    expect([r.admit(url, 21), r.admit(url, 21)]).toEqual(["send", "stalled"])
    r.ended(url, "answered", 0) // a 500 is an answer
    expect([r.admit(url, 22), r.admit(url, 22)]).toEqual(["send", "send"])
  })

  it("forget a silence after 10 minutes, and a probe refused before sending frees its place", () => {
    const r = makeReceivers()
    const url = "http://10.0.0.1:9000/x"
    r.admit(url, 0)
    r.ended(url, "unanswered", 0)
    r.admit(url, 1)
    r.ended(url, "unanswered", 1)
    expect(r.admit(url, 2)).toBe("send")
    r.ended(url, "released", 0)
    expect(r.admit(url, 3)).toBe("send")
    r.ended(url, "released", 0)
    expect([r.admit(url, 10 * 60 * 1000 + 2), r.admit(url, 10 * 60 * 1000 + 2)]).toEqual(["send", "send"])
  })
})
