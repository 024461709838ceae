/**
 * What a caller learns of an upstream's error body (`upstreamMessage`, in every "<provider>
 * answered HTTP <status>: …" error): the message of the usual JSON shapes, the start of a plain-text
 * body, an HTML error page named but not shown, and never an Authorization credential it echoes.
 */
import { describe, expect, it } from "vitest"
import { fromHttp, upstreamMessage } from "../../src/Providers/UpstreamError.ts"

describe("upstreamMessage", () => {
  it("reads the message of the usual JSON error shapes", () => {
    expect(upstreamMessage(JSON.stringify({ error: { message: "Invalid 'messages'." } }))).toBe("Invalid 'messages'.")
    expect(upstreamMessage(JSON.stringify({ message: "Throttled" }))).toBe("Throttled")
    expect(upstreamMessage(JSON.stringify({ detail: "Not found" }))).toBe("Not found")
    expect(upstreamMessage(JSON.stringify({ errors: [{ message: "bad model" }] }))).toBe("bad model")
  })

  it("gives the start of a plain-text body, and says when there is none", () => {
    expect(upstreamMessage("model is loading")).toBe("model is loading")
    expect(upstreamMessage("x".repeat(1000))).toHaveLength(300)
    expect(upstreamMessage("")).toBe("no error body")
  })

  it("names an HTML error page without showing it", () => {
    const page = "<html><body>Internal <b>boom</b> at /srv/app.py line 3</body></html>"
    expect(upstreamMessage(page)).toBe(`an HTML page of ${page.length} characters (not shown)`)
    expect(upstreamMessage(`\n  <!DOCTYPE html>${page}`)).toMatch(/^an HTML page of \d+ characters \(not shown\)$/)
    expect(fromHttp("openai", 500, page).message).not.toContain("/srv/app.py")
  })

  it("redacts an Authorization credential the upstream echoes, in text and in JSON messages", () => {
    expect(upstreamMessage("bad request; headers: Authorization: Bearer sk-live-123456789abcdef")).toBe("bad request; headers: Authorization: Bearer [redacted]")
    expect(upstreamMessage(JSON.stringify({ error: { message: "denied for basic dXNlcjpwYXNz, retry" } }))).toBe("denied for basic [redacted], retry")
    expect(fromHttp("p", 401, "Authorization: Bearer sk-secret-0123456789").message).not.toContain("sk-secret")
  })
})
