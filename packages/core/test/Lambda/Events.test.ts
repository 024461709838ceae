/**
 * Event <-> Request / Response mapping on the AWS documentation's sample events, result
 * encoding (text, binary, cookies) and malformed events.
 */
import { Either } from "effect"
import { describe, expect, it } from "vitest"
import { BadEvent, classify, isTextual, toRequest, toResult, UnroutablePath } from "../../src/Lambda/Events.ts"
import { fixture, functionUrlEvent, v1Event, v2Event } from "./support/events.ts"

const requestOf = (event: unknown) => {
  const http = classify(event)
  if (Either.isLeft(http)) throw http.left
  return toRequest(http.right)
}

describe("events -> Request (AWS sample payloads)", () => {
  it("HTTP API payload 2.0: raw path and query, comma-joined headers, cookies, text body", async () => {
    const request = requestOf(fixture("http-api-v2"))
    expect(request.method).toBe("POST")
    expect(request.url).toBe("https://id.execute-api.us-east-1.amazonaws.com/my/path?parameter1=value1&parameter1=value2&parameter2=value")
    expect(request.headers.get("header1")).toBe("value1")
    expect(request.headers.get("header2")).toBe("value1,value2")
    expect(request.headers.get("cookie")).toBe("cookie1; cookie2")
    expect(await request.text()).toBe("Hello from Lambda")
  })

  it("Function URL: the same 2.0 shape on the lambda-url domain", async () => {
    const request = requestOf(fixture("function-url"))
    // The sample's placeholder domain "<url-id>.lambda-url…" is not a valid host: the URL falls back to
    // localhost (routing never looks at the host; e-mail links use PUBLIC_URL).
    expect(request.url).toBe("https://localhost/my/path?parameter1=value1&parameter1=value2&parameter2=value")
    expect(request.headers.get("x-forwarded-for")).toBe("123.123.123.123")
    const real = fixture("function-url")
    real.requestContext.domainName = "abcdefg.lambda-url.us-east-1.on.aws"
    expect(new URL(requestOf(real).url).host).toBe("abcdefg.lambda-url.us-east-1.on.aws")
    expect(request.headers.get("cookie")).toBe("cookie1; cookie2")
    expect(await request.text()).toBe("Hello from client!")
  })

  it("REST API 1.0: multi-value headers and query win over single values; the empty header name is skipped", async () => {
    const request = requestOf(fixture("rest-api-v1"))
    expect(request.method).toBe("POST")
    const url = new URL(request.url)
    expect(url.origin).toBe("https://gy415nuibc.execute-api.us-east-1.amazonaws.com")
    expect(url.pathname).toBe("/hello/world")
    expect(url.searchParams.getAll("multivalueName")).toEqual(["you", "me"])
    expect(url.searchParams.getAll("name")).toEqual(["me"])
    // The client's own X-Forwarded-For is replaced by the address API Gateway saw (login throttling counts it).
    expect(request.headers.get("x-forwarded-for")).toBe("192.168.196.186")
    expect(request.headers.get("content-type")).toBe("application/json")
    expect(JSON.parse(await request.text())).toEqual({ a: 1 })
  })

  it("HTTP API payload 1.0: repeated headers become one comma-joined header; GET has no body", async () => {
    const request = requestOf(fixture("http-api-v1"))
    expect(request.method).toBe("GET")
    expect(request.headers.get("header2")).toBe("value1, value2")
    expect(new URL(request.url).searchParams.getAll("parameter1")).toEqual(["value1", "value2"])
    expect(request.body).toBeNull()
  })

  it("REST API query values are decoded by API Gateway and re-encoded here", () => {
    const request = requestOf(v1Event({ method: "GET", path: "/v1/models?q=a b&x=%26" }))
    const url = new URL(request.url)
    expect(url.searchParams.get("q")).toBe("a b")
    expect(url.searchParams.get("x")).toBe("&")
  })

  it("base64 bodies are decoded to the exact bytes (binary uploads)", async () => {
    const bytes = Buffer.from([0, 1, 2, 250, 251, 252, 253, 254, 255, 10, 13])
    for (const event of [v2Event({ method: "POST", path: "/x" }), v1Event({ method: "POST", path: "/x" }), functionUrlEvent({ method: "PUT", path: "/x" })]) {
      event.body = bytes.toString("base64")
      event.isBase64Encoded = true
      const request = requestOf(event)
      expect(Buffer.from(await request.arrayBuffer())).toEqual(bytes)
    }
  })

  it("a named HTTP API stage is removed from rawPath", () => {
    const event = v2Event({ method: "GET", path: "/prod/v1/health" })
    event.requestContext.stage = "prod"
    expect(new URL(requestOf(event).url).pathname).toBe("/v1/health")
    event.rawPath = "/v1/health" // custom domain: no stage in the path
    expect(new URL(requestOf(event).url).pathname).toBe("/v1/health")
  })
})

describe("events -> Request, as the node host would see the request", () => {
  it("a path a URL would resolve into another (dot segments, backslashes) is not routed: UnroutablePath", () => {
    for (const path of ["/v1/x/../health", "/v1/x/%2e%2e/health", "/v1/./health", "/v1\\health"]) {
      for (const event of [v2Event({ method: "GET", path }), v1Event({ method: "GET", path })]) {
        let thrown: unknown
        try {
          requestOf(event)
        } catch (e) {
          thrown = e
        }
        expect([path, thrown]).toEqual([path, expect.any(UnroutablePath)])
        expect((thrown as UnroutablePath).path).toBe(path)
      }
    }
    // A leading // stays the path (the router sees it as the node host's does), never another host.
    for (const event of [v2Event({ method: "GET", path: "//evil.example/v1/health" }), v1Event({ method: "GET", path: "//evil.example/v1/health" })]) {
      const url = new URL(requestOf(event).url)
      expect(url.host).not.toBe("evil.example")
      expect(url.pathname).toBe("//evil.example/v1/health")
    }
    // Encoding differences alone still route: REST API paths arrive decoded.
    expect(new URL(requestOf(v1Event({ method: "GET", path: "/api/avatar/resend-verification-email/a b@example.com" })).url).pathname)
      .toBe("/api/avatar/resend-verification-email/a%20b@example.com")
  })

  it("a header value with characters above U+00FF is kept as its bytes read as Latin-1 (node's reading), not dropped", () => {
    const event = v2Event({ method: "POST", path: "/mcp" })
    event.headers = { ...event.headers, "x-api-key": "aigw_key✓", host: "ex✓.com" }
    const request = requestOf(event)
    expect(request.headers.get("x-api-key")).toBe(Buffer.from("aigw_key✓", "utf8").toString("latin1"))
    expect(request.headers.get("host")).toBe(Buffer.from("ex✓.com", "utf8").toString("latin1"))
  })

  it("a repeated header (REST API multi-value headers) is joined, as the node host's server joins it", () => {
    const event = v1Event({ method: "GET", path: "/v1/usage" })
    event.multiValueHeaders = { Authorization: ["Bearer first", "Bearer second"], "X-Tag": ["a", "b"], Host: ["a.example", "b.example"] }
    const request = requestOf(event)
    expect(request.headers.get("authorization")).toBe("Bearer first, Bearer second")
    expect(request.headers.get("x-tag")).toBe("a, b")
    expect(request.headers.get("host")).toBe("a.example, b.example")
  })
})

describe("malformed events", () => {
  const bad = (event: unknown) => {
    const http = classify(event)
    if (Either.isLeft(http)) return http.left
    try {
      toRequest(http.right)
    } catch (e) {
      return e
    }
    return undefined
  }

  it.each([
    ["null", null],
    ["an array", []],
    ["a string", "GET /"],
    ["an empty object", {}],
    ["a scheduled event", fixture("scheduled-event")],
    ["2.0 without requestContext", { version: "2.0", rawPath: "/" }],
    ["2.0 with a numeric method", { ...fixture("http-api-v2"), requestContext: { http: { method: 1 } } }],
    ["1.0 without path", { httpMethod: "GET" }],
    ["1.0 with a non-string body", { ...fixture("rest-api-v1"), body: { a: 1 } }],
    ["headers that are not strings", { ...fixture("http-api-v2"), headers: { a: 1 } }],
    ["a body flagged base64 that is not", { ...fixture("http-api-v2"), body: "not base64!!", isBase64Encoded: true }],
    ["a base64 body with a character past its last group of four", { ...fixture("http-api-v2"), body: Buffer.from("{\"a\":1}").toString("base64") + "A", isBase64Encoded: true }],
    ["a base64 body of one character", { ...fixture("http-api-v2"), body: "A", isBase64Encoded: true }]
  ])("%s is a BadEvent", (_name, event) => {
    expect(bad(event)).toBeInstanceOf(BadEvent)
  })
})

describe("Response -> result", () => {
  const withCookies = () => {
    const headers = new Headers({ "content-type": "application/json", "x-ratelimit-limit": "100" })
    headers.append("set-cookie", "a=1; Path=/; HttpOnly")
    headers.append("set-cookie", "b=2; Max-Age=60")
    headers.append("vary", "accept")
    headers.append("vary", "origin")
    return new Response(JSON.stringify({ isError: false }), { status: 201, headers })
  }

  it("2.0: single-value headers, Set-Cookie as cookies, text body", async () => {
    const result = await toResult("v2", withCookies())
    expect(result).toEqual({
      statusCode: 201,
      headers: { "content-type": "application/json", "x-ratelimit-limit": "100", vary: "accept, origin" },
      cookies: ["a=1; Path=/; HttpOnly", "b=2; Max-Age=60"],
      body: "{\"isError\":false}",
      isBase64Encoded: false
    })
  })

  it("1.0: multiValueHeaders carry every header, Set-Cookie one value each", async () => {
    const result = await toResult("v1", withCookies())
    expect(result).toMatchObject({
      statusCode: 201,
      headers: { "content-type": "application/json" },
      multiValueHeaders: {
        "content-type": ["application/json"],
        "set-cookie": ["a=1; Path=/; HttpOnly", "b=2; Max-Age=60"]
      },
      isBase64Encoded: false
    })
    expect("set-cookie" in result.headers).toBe(false)
  })

  it("binary bodies (audio) are base64 with isBase64Encoded, byte for byte", async () => {
    const audio = Buffer.from([0x49, 0x44, 0x33, 0x04, 0x00, 0x00, 0xff, 0xfb, 0x90, 0x64, 0x00, 0x80, 0xfe])
    for (const format of ["v1", "v2"] as const) {
      const result = await toResult(format, new Response(audio, { headers: { "content-type": "audio/mpeg" } }))
      expect(result.isBase64Encoded).toBe(true)
      expect(Buffer.from(result.body, "base64")).toEqual(audio)
      expect(result.headers["content-type"]).toBe("audio/mpeg")
    }
  })

  it("SSE is text; compressed or unknown content is base64; hop-by-hop headers are dropped", async () => {
    expect(isTextual(new Headers({ "content-type": "text/event-stream" }))).toBe(true)
    expect(isTextual(new Headers({ "content-type": "application/problem+json; charset=utf-8" }))).toBe(true)
    expect(isTextual(new Headers({ "content-type": "image/svg+xml" }))).toBe(true)
    expect(isTextual(new Headers({ "content-type": "application/json", "content-encoding": "gzip" }))).toBe(false)
    expect(isTextual(new Headers({ "content-type": "application/octet-stream" }))).toBe(false)
    expect(isTextual(new Headers({ "content-type": "image/png" }))).toBe(false)
    const sse = await toResult("v2", new Response("data: {\"a\":1}\n\ndata: [DONE]\n\n", {
      headers: { "content-type": "text/event-stream", "transfer-encoding": "chunked", connection: "keep-alive" }
    }))
    expect(sse.isBase64Encoded).toBe(false)
    expect(sse.body).toBe("data: {\"a\":1}\n\ndata: [DONE]\n\n")
    expect(Object.keys(sse.headers)).toEqual(["content-type"])
  })
})
