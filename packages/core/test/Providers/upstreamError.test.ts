/**
 * What a caller learns of an upstream's error body (`upstreamMessage`, in every "<provider>
 * answered HTTP <status>: …" error): the message of the usual JSON shapes, the start of a plain-text
 * body, an HTML error page named but not shown, and never an Authorization credential it echoes.
 */
import { describe, expect, it } from "vitest"
import { errorParts } from "../../src/Http/Edge.ts"
import { eventJson } from "../../src/Providers/internal/http.ts"
import { fromHttp, knowCredential, protocolError, retryAfterOf, toGatewayError, type UpstreamError, upstreamMessage } from "../../src/Providers/UpstreamError.ts"

describe("upstreamMessage", () => {
  it("reads the message of the usual JSON error shapes", () => {
    expect(upstreamMessage(JSON.stringify({ error: { message: "Invalid 'messages'." } }))).toBe("Invalid 'messages'.")
    expect(upstreamMessage(JSON.stringify({ message: "Throttled" }))).toBe("Throttled")
    expect(upstreamMessage(JSON.stringify({ detail: "Not found" }))).toBe("Not found")
    expect(upstreamMessage(JSON.stringify({ errors: [{ message: "bad model" }] }))).toBe("bad model")
  })

  it("gives the start of a plain-text body, and says when there is none", () => {
    expect(upstreamMessage("model is loading")).toBe("model is loading")
    expect(upstreamMessage("x".repeat(1000))).toBe(`${"x".repeat(300)}… (1000 characters)`)
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

  it("redacts the key headers, query keys and well-known key formats too, in error bodies and in stream errors", () => {
    const echoed = "denied: x-api-key: sk-ant-SECRET456 / x-goog-api-key=AIzaGOOGLESECRET789abcdefghij / https://h/v1?key=co-SECRET000&x=1 / api-key: \"az-SECRET\" / gsk_abcdefghijklmnopqrstuvwx"
    const shown = upstreamMessage(JSON.stringify({ error: { message: echoed } }))
    for (const secret of ["SECRET456", "AIzaGOOGLE", "co-SECRET000", "az-SECRET", "gsk_abc"]) expect(shown, secret).not.toContain(secret)
    expect(shown).toContain("x-api-key: [redacted]")
    expect(shown).toContain("?key=[redacted]&x=1")
    // A stream's error event reaches the client through protocolError: the same rules.
    const inStream = protocolError("openai", "stream error: overloaded Bearer sk-oa-SECRET123 x-api-key: sk-ant-SECRET456").message
    expect(inStream).toBe("openai sent an unexpected answer: stream error: overloaded Bearer [redacted] x-api-key: [redacted]")
  })

  it("redacts every credential the gateway holds for an upstream, whatever its format or scheme, also where the cut would split it", () => {
    // Deepgram's scheme is `Token`, mem0's keys start `m0-`: no pattern knows them; the configured values are known.
    knowCredential("dg-0123456789abcdef")
    knowCredential("m0-KEYVALUE-42")
    knowCredential("short")
    const shown = upstreamMessage(JSON.stringify({ err_msg: "Invalid credentials: Token dg-0123456789abcdef", message: "m0-KEYVALUE-42 is not allowed" }))
    expect(shown).toBe("[redacted] is not allowed")
    expect(fromHttp("deepgram", 401, JSON.stringify({ error: "bad auth: authorization: Token dg-0123456789abcdef" })).message).not.toContain("0123456789")
    expect(fromHttp("deepl", 403, "DeepL-Auth-Key 00000000-aaaa-bbbb:fx is wrong").message).toContain("DeepL-Auth-Key [redacted]")
    // At the edge of the cut: no half of the key is shown.
    const atCut = protocolError("p", `${"y".repeat(970)}dg-0123456789abcdef and more`).message
    expect(atCut).not.toContain("dg-01234")
    expect(atCut).toContain(`${"y".repeat(970)}[redacted]`)
    expect(upstreamMessage(`${"y".repeat(290)}dg-0123456789abcdef and more`)).toBe(`${"y".repeat(290)}[redacted]… (318 characters)`)
    // Written with JSON escapes in a field that is no message, or URL-encoded: still the key.
    knowCredential("ak+secret/key=val99")
    expect(upstreamMessage('{"err":"bad key dg-0123456789\\u0061bcdef"}')).toBe('{"err":"bad key [redacted]"}')
    expect(upstreamMessage("bad key ak%2Bsecret%2Fkey%3Dval99")).toBe("bad key [redacted]")
    // Texts cut shorter than a message (a stream's bad JSON) are redacted before their cut.
    const badEvent = eventJson("p", { event: "", data: `{${"x".repeat(90)}dg-0123456789abcdef` }) as UpstreamError
    expect(badEvent.message).toBe(`p sent an unexpected answer: bad JSON in stream: {${"x".repeat(90)}[redacted… (110 characters)`)
    // Short values are ordinary words: left alone.
    expect(upstreamMessage("a short answer")).toBe("a short answer")
  })

  it("cuts a long message and names an HTML one, also inside JSON", () => {
    const long = upstreamMessage(JSON.stringify({ error: { message: `bad ${"A".repeat(3_000_000)}` } }))
    expect(long.length).toBeLessThan(1_100)
    expect(long).toMatch(/… \(3000004 characters\)$/)
    expect(upstreamMessage(JSON.stringify({ message: "<html><pre>Traceback at /srv/app.py</pre></html>" }))).toMatch(/^an HTML page of \d+ characters \(not shown\)$/)
    expect(protocolError("p", `stream error: ${"x".repeat(200_000)}`).message.length).toBeLessThan(1_200)
  })
})

describe("an upstream's Retry-After", () => {
  it("is kept from a 429 or 503 when it is a minute or less, as seconds or an HTTP date", () => {
    const now = Date.parse("2026-11-30T12:00:00Z")
    expect(retryAfterOf("7", now)).toBe(7)
    expect(retryAfterOf("0", now)).toBe(0)
    expect(retryAfterOf("Mon, 30 Nov 2026 12:00:20 GMT", now)).toBe(20)
    for (const ignored of ["61", "3600", "-1", "1.5", "soon", "", null, undefined, "Mon, 30 Nov 2026 13:00:00 GMT"]) expect(retryAfterOf(ignored, now)).toBeUndefined()
    expect(fromHttp("openai", 429, "{}", "3").retryAfterSeconds).toBe(3)
    expect(fromHttp("openai", 503, "{}", "3").retryAfterSeconds).toBe(3)
    expect(fromHttp("openai", 500, "{}", "3").retryAfterSeconds).toBeUndefined()
    expect(fromHttp("openai", 429, "{}", "86400").retryAfterSeconds).toBeUndefined()
  })

  it("goes on to the client on the 502 it becomes, in every envelope", () => {
    const failed = toGatewayError(fromHttp("openai", 429, JSON.stringify({ error: { message: "Rate limit reached" } }), "2"))
    for (const kind of ["gateway", "openai", "anthropic"] as const) {
      const parts = errorParts(kind, failed)
      expect([parts.status, parts.headers["retry-after"], parts.headers["x-should-retry"]]).toEqual([502, "2", undefined])
    }
    expect(errorParts("openai", toGatewayError(fromHttp("openai", 429, "{}"))).headers["retry-after"]).toBeUndefined()
  })
})
