/** The JSON-RPC 2.0 front of /mcp: batch bound, message checks, anonymous refusal, answer rewriting. */
import { describe, expect, it } from "vitest"
import * as JsonRpc from "../../src/Mcp/JsonRpc.ts"

const REFUSED = { isError: true, content: [{ type: "text", text: "Authentication required" }] }
const anonymous: JsonRpc.PlanOptions = { maxBatch: 3, refuseTool: (name) => (name === "gateway_health" ? undefined : REFUSED) }
const authenticated: JsonRpc.PlanOptions = { maxBatch: 3, refuseTool: () => undefined }
const slotsOf = (body: unknown, options = authenticated) => (JsonRpc.plan(body, options) as JsonRpc.Plan).slots

describe("JsonRpc.plan", () => {
  it("bounds the batch: empty and over the limit are one -32600 naming the limit", () => {
    expect(JsonRpc.plan([], authenticated)).toEqual({ code: -32600, message: "Invalid Request: empty batch." })
    const ping = { jsonrpc: "2.0", id: 1, method: "ping" }
    expect(JsonRpc.plan([ping, ping, ping, ping], authenticated)).toEqual({
      code: -32600,
      message: "Invalid Request: a batch may hold at most 3 messages (AIGW_MCP_MAX_BATCH); this one has 4."
    })
    expect(JsonRpc.plan([ping, ping, ping], authenticated)).toMatchObject({ batch: true, slots: [{ _tag: "Forward" }, { _tag: "Forward" }, { _tag: "Forward" }] })
  })

  it("answers invalid requests -32600, unknown methods -32601, bad params -32602; drops notifications and responses", () => {
    const slots = slotsOf([
      5,
      { jsonrpc: "2.0", id: "a", method: "no/such" },
      { jsonrpc: "2.0", id: 2, method: "initialize", params: {} }
    ])
    expect(slots.map((s) => (s._tag === "Answer" ? [s.response.id, s.response.error?.code] : s._tag))).toEqual([[null, -32600], ["a", -32601], [2, -32602]])
    expect(slotsOf({ jsonrpc: "2.0", id: 1, result: {} })).toEqual([])
    expect(slotsOf([{ jsonrpc: "2.0", method: "notifications/initialized" }, { jsonrpc: "2.0", method: "nope" }])).toEqual([])
    expect(slotsOf({ jsonrpc: "2.0", id: null, method: "ping" })).toMatchObject([{ response: { id: null, error: { code: -32600 } } }])
    expect(slotsOf({ jsonrpc: "1.0", id: 1, method: "ping" })).toMatchObject([{ response: { id: 1, error: { code: -32600 } } }])
    // MCP ids are strings or integers, and one that JSON.parse rounded (past 2^53 − 1) cannot be echoed as sent.
    for (const id of [1.5, JSON.parse("9007199254740993"), -Infinity]) {
      expect(slotsOf({ jsonrpc: "2.0", id, method: "ping" })).toMatchObject([{ response: { id: null, error: { code: -32600, message: expect.stringMatching(/id must be a string or an integer/) } } }])
    }
    expect(slotsOf({ jsonrpc: "2.0", id: 9007199254740991, method: "ping" })).toMatchObject([{ _tag: "Forward", id: 9007199254740991 }])
    // No resources are offered: a read of any URI is MCP's resource-not-found, not an empty read.
    expect(slotsOf({ jsonrpc: "2.0", id: 3, method: "resources/read", params: { uri: "file:///etc/passwd" } }))
      .toMatchObject([{ response: { id: 3, error: { code: -32002, message: "Resource not found: file:///etc/passwd" } } }])
  })

  it("refuses anonymous calls of tools that need credentials before decoding anything, and renumbers the rest", () => {
    const slots = slotsOf([
      { jsonrpc: "2.0", id: "x", method: "tools/call", params: { name: "gateway_complete", arguments: {} } },
      { jsonrpc: "2.0", id: "y", method: "tools/call", params: 42 },
      { jsonrpc: "2.0", id: "z", method: "tools/call", params: { name: "gateway_health" } }
    ], anonymous)
    expect(slots[0]).toEqual({ _tag: "Answer", response: { jsonrpc: "2.0", id: "x", result: REFUSED } })
    expect(slots[1]).toEqual({ _tag: "Answer", response: { jsonrpc: "2.0", id: "y", result: REFUSED } })
    // MCP's optional `arguments` is filled in; ids become the server's numeric ones.
    expect(slots[2]).toEqual({
      _tag: "Forward",
      id: "z",
      internalId: 3,
      message: { jsonrpc: "2.0", id: 3, method: "tools/call", params: { name: "gateway_health", arguments: {} } }
    })
    expect(JSON.parse(JsonRpc.forwardedBody(slots)!)).toEqual([{ jsonrpc: "2.0", id: 3, method: "tools/call", params: { name: "gateway_health", arguments: {} } }])
    expect(JsonRpc.forwardedBody(slots.slice(0, 2))).toBeUndefined()
  })
})

describe("JsonRpc.answers", () => {
  it("restores ids, keeps standard errors, and turns defects and missing answers into -32603 without details", () => {
    const slots = slotsOf([
      { jsonrpc: "2.0", id: "a", method: "ping" },
      { jsonrpc: "2.0", id: "b", method: "tools/list" },
      { jsonrpc: "2.0", id: 0, method: "ping" }
    ])
    const internal: Array<unknown> = []
    const out = JsonRpc.answers(slots, [
      { jsonrpc: "2.0", id: 1, result: {} },
      { jsonrpc: "2.0", id: 2, error: { _tag: "Cause", code: 0, message: "{\"_tag\":\"Die\"}", data: { stack: "at x.ts:1" } } },
      { jsonrpc: "2.0", id: -32603, error: { _tag: "Defect", code: 1, message: "A defect occurred", data: "boom" } }
    ], (o) => internal.push(o))
    expect(out).toEqual([
      { jsonrpc: "2.0", id: "a", result: {} },
      { jsonrpc: "2.0", id: "b", error: { code: -32603, message: "Internal error" } },
      { jsonrpc: "2.0", id: 0, error: { code: -32603, message: "Internal error" } }
    ])
    expect(internal).toHaveLength(1 + 1)
    const notFound = JsonRpc.answers(slots.slice(0, 1), [{ jsonrpc: "2.0", id: 1, error: { _tag: "Cause", code: -32602, message: "Tool 'x' not found", data: {} } }], () => {})
    expect(notFound).toEqual([{ jsonrpc: "2.0", id: "a", error: { code: -32602, message: "Tool 'x' not found" } }])
    // A message quoting the request (a tool name of a megabyte) is cut, not answered whole.
    const long = JsonRpc.answers(slots.slice(0, 1), [{ jsonrpc: "2.0", id: 1, error: { _tag: "Cause", code: -32602, message: `Tool '${"x".repeat(1_000_000)}' not found`, data: {} } }], () => {})
    const message = (long[0] as any).error.message as string
    expect(message.length).toBeLessThan(400)
    expect(message).toMatch(/^Tool 'x+… \(1000017 characters\)$/)
  })
})

describe("cut messages", () => {
  it("never cut through a surrogate pair: half an emoji is a lone surrogate a strict JSON decoder refuses", async () => {
    const { cutText } = await import("../../src/Cut.ts")
    const text = `${"a".repeat(299)}😀😀😀😀`
    const cut = cutText(text, 300)
    expect(cut).toBe(`${"a".repeat(299)}… (307 characters)`)
    expect(/[\uD800-\uDBFF](?![\uDC00-\uDFFF])/.test(cut)).toBe(false)
    expect(cutText("😀", 1)).toBe("… (2 characters)")
    expect(cutText("short", 300)).toBe("short")
  })
})
