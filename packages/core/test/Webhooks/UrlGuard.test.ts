import { Effect } from "effect"
import { describe, expect, it } from "vitest"
import * as UrlGuard from "../../src/UrlGuard.ts"
import { backoffMs } from "../../src/Webhooks/Delivery.ts"
import { sign, verify } from "../../src/Webhooks/Signature.ts"

const fakeDns = (table: Record<string, Array<string>>): UrlGuard.Resolver => (host) =>
  host in table ? Promise.resolve(table[host]!) : Promise.reject(new Error("ENOTFOUND"))

const check = (url: string, allowPrivate = false) =>
  Effect.runPromise(
    Effect.either(
      UrlGuard.check(url, {
        allowPrivate,
        field: "callbackUrl",
        resolve: fakeDns({ "hooks.example.com": ["93.184.216.34"], "evil.example.com": ["10.1.2.3"], "mixed.example.com": ["93.184.216.34", "127.0.0.1"], "v6.example.com": ["fd00::1"] })
      })
    )
  )

describe("SSRF guard", () => {
  it("accepts public http(s) targets", async () => {
    expect((await check("https://hooks.example.com/cb"))._tag).toBe("Right")
    expect((await check("http://93.184.216.34:8080/x"))._tag).toBe("Right")
  })
  it.each([
    ["http://169.254.169.254/latest/meta-data", /169\.254\.169\.254/],
    ["http://127.0.0.1:8080/", /127\.0\.0\.1/],
    ["http://localhost/", /internal/],
    ["http://[::1]/", /::1/],
    ["http://[::ffff:10.0.0.1]/", /private/],
    ["http://10.0.0.5/", /10\.0\.0\.5/],
    ["http://192.168.1.1/", /private/],
    ["http://100.64.0.1/", /private/],
    ["http://metadata.google.internal/computeMetadata/v1/", /internal/],
    ["https://evil.example.com/", /^callbackUrl refused: evil\.example\.com resolves to a private, loopback/],
    // A name's blocked address is not said (a caller would learn the gateway's internal DNS answers).
    ["https://mixed.example.com/", /^callbackUrl refused: mixed\.example\.com resolves to a private(?!.*127\.0\.0\.1)/],
    ["https://v6.example.com/", /^callbackUrl refused: v6\.example\.com resolves to a private(?!.*fd00)/],
    ["http://hooks.example.com:0/", /port 0/],
    ["https://nowhere.example.com/", /does not resolve/],
    ["file:///etc/passwd", /scheme file:/],
    ["gopher://hooks.example.com/", /scheme gopher:/],
    ["ftp://hooks.example.com/", /scheme ftp:/],
    ["https://user:pass@hooks.example.com/", /credentials/],
    ["not a url", /not a valid absolute URL/],
    // IPv6 forms of blocked targets (the URL parser writes most of them in hex).
    ["http://[::127.0.0.1]/", /::7f00:1/], // IPv4-compatible
    ["http://[::ffff:127.0.0.1]/", /::ffff:7f00:1/], // IPv4-mapped
    ["http://[::ffff:0:7f00:1]/", /reserved/], // IPv4-translated
    ["http://[::ffff:169.254.169.254]/", /metadata/],
    ["http://[2002:7f00:1::]/", /2002:7f00:1::/], // 6to4 of 127.0.0.1
    ["http://[2002:a9fe:a9fe::1]/", /reserved/], // 6to4 of 169.254.169.254
    ["http://[64:ff9b::10.0.0.1]/", /64:ff9b::a00:1/], // NAT64 of a private address
    ["http://[64:ff9b:1::1]/", /reserved/], // local-use NAT64
    ["http://[100::1]/", /100::1/], // discard prefix
    ["http://[2001::1]/", /2001::1/], // Teredo
    ["http://[2001:db8::1]/", /reserved/],
    ["http://[fc00::1]/", /reserved/],
    ["http://[fe80::1]/", /reserved/],
    ["http://[fec0::1]/", /reserved/],
    ["http://[ff02::1]/", /reserved/],
    ["http://[::]/", /reserved/],
    ["http://0x7f.1/", /127\.0\.0\.1/],
    ["http://2130706433/", /127\.0\.0\.1/],
    ["http://192.88.99.1/", /reserved/]
  ])("refuses %s", async (url, why) => {
    const result = await check(url)
    expect(result._tag).toBe("Left")
    if (result._tag === "Left") {
      expect(result.left._tag).toBe("Unprocessable")
      expect(result.left.message).toMatch(why)
    }
  })
  it.each(["::ffff:8.8.8.8", "64:ff9b::8.8.8.8", "2002:808:808::1", "2606:4700:4700::1111", "2001:4860:4860::8888"])(
    "accepts the public IPv6 address %s",
    (address) => expect(UrlGuard.isBlockedAddress(address)).toBe(false)
  )
  it("tells a host that does not resolve (may pass later) from a refused URL", async () => {
    const inspect = (url: string) => Effect.runPromise(Effect.either(UrlGuard.inspect(url, { allowPrivate: false, field: "callbackUrl", resolve: fakeDns({ "evil.example.com": ["10.1.2.3"] }) })))
    expect(await inspect("https://nowhere.example.com/")).toMatchObject({ _tag: "Left", left: { _tag: "Unresolved", message: "host nowhere.example.com does not resolve" } })
    expect(await inspect("https://evil.example.com/")).toMatchObject({ _tag: "Left", left: { _tag: "Unprocessable" } })
  })
  it("AIGW_ALLOW_PRIVATE_URLS lifts the address rule, not the scheme rule", async () => {
    expect((await check("http://127.0.0.1:9/", true))._tag).toBe("Right")
    expect((await check("file:///etc/passwd", true))._tag).toBe("Left")
  })
})

describe("webhook signatures and retry schedule", () => {
  it("signs the raw body with HMAC-SHA256 and verifies in constant time", () => {
    const body = "{\"jobId\":\"1\"}"
    const header = sign("s3cret", body)
    expect(header).toMatch(/^sha256=[0-9a-f]{64}$/)
    expect(verify("s3cret", body, header)).toBe(true)
    expect(verify("s3cret", body + " ", header)).toBe(false)
    expect(verify("other", body, header)).toBe(false)
    expect(verify("s3cret", body, "sha256=00")).toBe(false)
    expect(verify("s3cret", body, undefined)).toBe(false)
  })
  it("backs off exponentially with +-20% jitter, capped at an hour", () => {
    expect(backoffMs(1, 2000, () => 0.5)).toBe(2000)
    expect(backoffMs(2, 2000, () => 0.5)).toBe(6000)
    expect(backoffMs(3, 2000, () => 0.5)).toBe(18000)
    expect(backoffMs(20, 2000, () => 0.5)).toBe(3_600_000)
    expect(backoffMs(1, 2000, () => 0)).toBe(1600)
    expect(backoffMs(1, 2000, () => 1)).toBe(2400)
  })
})

describe("guardedGetJson (links an upstream reply supplies)", () => {
  it("refuses a redirect instead of following it, bounds the reply, and refuses private addresses", async () => {
    const http = await import("node:http")
    const seen: Array<string> = []
    const server = http.createServer((req, res) => {
      seen.push(req.url!)
      if (req.url === "/redirect") {
        res.writeHead(302, { location: "http://169.254.169.254/latest/meta-data/" })
        return res.end()
      }
      if (req.url === "/huge") return res.end(JSON.stringify({ pad: "x".repeat(10_000) }))
      res.writeHead(200, { "content-type": "application/json" })
      res.end(JSON.stringify({ ok: true }))
    })
    await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve))
    const base = `http://127.0.0.1:${(server.address() as { port: number }).port}`
    const get = (path: string, allowPrivate = true, limit = 1_000) =>
      Effect.runPromise(Effect.either(UrlGuard.guardedGetJson(`${base}${path}`, { allowPrivate, field: "result url", limit })))
    try {
      expect(await get("/ok")).toMatchObject({ _tag: "Right", right: { ok: true } })
      const redirected = await get("/redirect")
      expect(redirected._tag === "Left" && redirected.left.message).toMatch(/result url redirects \(HTTP 302\); redirects are not followed/)
      const huge = await get("/huge")
      expect(huge._tag === "Left" && huge.left.message).toMatch(/result url could not be read/)
      const privateRefused = await get("/ok", false)
      expect(privateRefused._tag === "Left" && privateRefused.left.message).toMatch(/result url refused: 127\.0\.0\.1/)
      expect(seen).toEqual(["/ok", "/redirect", "/huge"])
    } finally {
      await new Promise<void>((resolve) => server.close(() => resolve()))
    }
  })
})
