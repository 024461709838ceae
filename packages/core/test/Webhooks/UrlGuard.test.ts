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
    ["https://evil.example.com/", /resolves to 10\.1\.2\.3/],
    ["https://mixed.example.com/", /127\.0\.0\.1/],
    ["https://v6.example.com/", /fd00::1/],
    ["https://nowhere.example.com/", /does not resolve/],
    ["file:///etc/passwd", /scheme file:/],
    ["gopher://hooks.example.com/", /scheme gopher:/],
    ["ftp://hooks.example.com/", /scheme ftp:/],
    ["https://user:pass@hooks.example.com/", /credentials/],
    ["not a url", /not a valid absolute URL/]
  ])("refuses %s", async (url, why) => {
    const result = await check(url)
    expect(result._tag).toBe("Left")
    if (result._tag === "Left") {
      expect(result.left._tag).toBe("Unprocessable")
      expect(result.left.message).toMatch(why)
    }
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
