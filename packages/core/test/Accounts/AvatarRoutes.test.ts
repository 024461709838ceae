/**
 * The avatar API and API-key routes over HTTP, in process (the web handler the hosts serve, on memory
 * stores): what reaches the client — messages that never quote a secret, envelopes, path limits,
 * the routes that need a signed-in session rather than an API key.
 */
import { Layer, Option, Redacted } from "effect"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import * as GatewayConfig from "../../src/Config.ts"
import { makeWebHandler } from "../../src/Embed.ts"
import * as Layers from "../../src/Layers.ts"
import * as Mailer from "../../src/Mail/Mailer.ts"

const gateway = makeWebHandler(
  Layers.layerMemory.pipe(
    Layer.provideMerge(Mailer.layerMemory),
    Layer.provideMerge(GatewayConfig.layer({ publicUrl: "https://gw.example.test", jwtSecret: Option.some(Redacted.make("s".repeat(40))) }))
  )
)
afterAll(() => gateway.dispose())

interface Answer {
  readonly status: number
  readonly body: any
  readonly headers: Headers
}

const call = async (method: string, path: string, options: { body?: unknown; raw?: string; headers?: Record<string, string> } = {}): Promise<Answer> => {
  const body = options.raw ?? (options.body === undefined ? undefined : JSON.stringify(options.body))
  const response = await gateway.handler(
    new Request(`http://localhost${path}`, {
      method,
      headers: { ...(body !== undefined ? { "content-type": "application/json" } : {}), ...options.headers },
      ...(body !== undefined ? { body } : {})
    })
  )
  const text = await response.text()
  return { status: response.status, body: text.startsWith("{") ? JSON.parse(text) : text, headers: response.headers }
}

const bearer = (token: string) => ({ authorization: `Bearer ${token}` })
const unique = () => Math.random().toString(36).slice(2, 9)

/** The link of the newest mail to `to` whose subject matches, as a path on this handler. */
const linkIn = async (to: string, subject: RegExp) => {
  const { sent } = await gateway.run(Mailer.MemoryMailbox)
  const mail = [...sent].reverse().find((m) => m.to === to && subject.test(m.subject))!
  const url = new URL(/https:\/\/gw\.example\.test\S+/.exec(mail.text)![0])
  return `${url.pathname}${url.search}`
}

interface Account {
  readonly id: string
  readonly username: string
  readonly email: string
  readonly password: string
  readonly jwt: string
  readonly apiKey: string
}

/** Registers, verifies by the mailed link, signs in and makes an API key with the session. */
const signUp = async (): Promise<Account> => {
  const u = `r_${unique()}`
  const input = { username: u, email: `${u}@example.com`, password: "correct horse 1" }
  const registered = await call("POST", "/api/avatar/register", { body: input })
  expect(registered.status).toBe(200)
  expect((await call("GET", await linkIn(input.email, /verify/i))).body.isError).toBe(false)
  const jwt = (await call("POST", "/api/avatar/authenticate", { body: { username: u, password: input.password } })).body.result.jwtToken
  const key = await call("POST", "/v1/keys", { body: { name: "ci" }, headers: bearer(jwt) })
  expect(key.status).toBe(200)
  return { ...input, id: registered.body.result.id, jwt, apiKey: key.body.result.key }
}

describe("avatar routes", () => {
  let alice: Account
  beforeAll(async () => {
    alice = await signUp()
  }, 30_000)

  it("never quote a password, its confirmation or a token in a 400, whatever its type or length", async () => {
    const secret = "MySecretPassw0rd"
    const cases: Array<[string, string, unknown, RegExp]> = [
      ["POST", "/api/avatar/authenticate", { username: alice.username, password: `${secret}-${"x".repeat(1100)}` }, /password must be at most 1024 characters/],
      ["POST", "/api/avatar/authenticate", { username: alice.username, password: [secret] }, /password must be a string/],
      ["POST", "/api/avatar/authenticate", { username: alice.username, password: { p: secret } }, /password must be a string/],
      ["POST", "/api/avatar/register", { username: `n_${unique()}`, email: `n_${unique()}@example.com`, password: { p: secret } }, /password must be a string/],
      ["POST", "/api/avatar/register", { username: `n_${unique()}`, email: `n_${unique()}@example.com`, password: [secret] }, /password must be a string/],
      ["POST", "/api/avatar/register", { username: `n_${unique()}`, email: `n_${unique()}@example.com`, password: `${secret}-${"x".repeat(1100)}` }, /password must be at most 1024/],
      ["POST", "/api/avatar/reset-password", { token: "t", password: "long enough 1", confirmPassword: [secret] }, /confirmPassword must be a string/],
      ["POST", "/api/avatar/reset-password", { token: "t", password: "long enough 1", confirmPassword: `${secret}${"x".repeat(1100)}` }, /confirmPassword must be at most/],
      ["POST", "/api/avatar/reset-password", { token: secret.repeat(20), password: "long enough 1", confirmPassword: "long enough 1" }, /token must be at most 200/],
      ["POST", "/api/avatar/reset-password", { token: { t: secret }, password: "long enough 1", confirmPassword: "long enough 1" }, /token must be a string/]
    ]
    for (const [method, path, body, rule] of cases) {
      const res = await call(method, path, { body })
      expect([res.status, res.body.isError], JSON.stringify(body).slice(0, 80)).toEqual([400, true])
      expect(res.body.message).toMatch(rule)
      expect(JSON.stringify(res.body)).not.toContain(secret)
    }
    for (const path of ["/api/avatar/reset-password", "/api/avatar/verify-email"]) {
      const res = await call("GET", `${path}?token=${secret.repeat(20)}`)
      expect([res.status, res.body.message]).toEqual([400, "Invalid query: token: token must be at most 200 characters"])
    }
  })

  it("resend accepts every address registration accepts, up to 254 characters", async () => {
    const long = `${"a".repeat(64)}@${"b".repeat(63)}.${"c".repeat(63)}.${"d".repeat(57)}.com`
    expect(long.length).toBe(254)
    for (const email of [`${"x".repeat(56)}_${unique()}@example.com`, long]) {
      const registered = await call("POST", "/api/avatar/register", { body: { username: `l_${unique()}`, email, password: "correct horse 1" } })
      expect(registered.status).toBe(200)
      const resend = await call("POST", `/api/avatar/resend-verification-email/${encodeURIComponent(email)}`)
      expect([resend.status, resend.body.isError]).toEqual([200, false])
    }
    expect((await call("POST", `/api/avatar/resend-verification-email/${"y".repeat(300)}%40example.com`)).status).toBe(400)
    // A local part over RFC 5321's 64 characters: mail servers refuse it, so its link would never arrive.
    const tooLong = await call("POST", "/api/avatar/register", { body: { username: `l_${unique()}`, email: `${"x".repeat(65)}@example.com`, password: "correct horse 1" } })
    expect([tooLong.status, tooLong.body.message]).toEqual([400, "Invalid request body: email: email's part before the @ must be at most 64 characters"])
    expect((await call("POST", "/api/avatar/resend-verification-email/not-an-email")).status).toBe(400)
  })

  it("refuse a reset form whose escapes are not UTF-8 (they became U+FFFD, and two passwords one)", async () => {
    for (const bad of ["abc%ED%A0%80defgh", "abc%FF%FFdefgh", "abc%E2%82defgh"]) {
      const res = await call("POST", "/api/avatar/reset-password-form", {
        raw: `token=t&password=${bad}&confirmPassword=${bad}`,
        headers: { "content-type": "application/x-www-form-urlencoded", accept: "text/html" }
      })
      expect([res.status, String(res.body)], bad).toEqual([400, expect.stringContaining("The form is not valid UTF-8.")])
    }
    // A valid escape is read as its character: the form goes on to the token, which is unknown here.
    const fine = await call("POST", "/api/avatar/reset-password-form", {
      raw: "token=t&password=caf%C3%A9+au+lait&confirmPassword=caf%C3%A9+au+lait",
      headers: { "content-type": "application/x-www-form-urlencoded", accept: "text/html" }
    })
    expect(String(fine.body)).not.toContain("not valid UTF-8")
  })

  it("answer what is refused before a reset page with the avatar envelope", async () => {
    const json = await call("POST", "/api/avatar/reset-password-form", { body: { token: "t", password: "p", confirmPassword: "p" } })
    expect(json.status).toBe(400)
    expect(json.body).toEqual({ isError: true, isWarning: false, message: expect.stringContaining("x-www-form-urlencoded"), detailedMessage: "", result: null })
    const noToken = await call("GET", "/api/avatar/reset-password")
    expect(noToken.status).toBe(400)
    expect(noToken.body).toMatchObject({ isError: true, isWarning: false, detailedMessage: "", result: null })
  })

  it("sign in by e-mail when the username sent is empty", async () => {
    for (const username of ["", "  "]) {
      const res = await call("POST", "/api/avatar/authenticate", { body: { username, email: alice.email, password: alice.password } })
      expect([res.status, res.body.isError, res.body.result?.id]).toEqual([200, false, alice.id])
    }
    expect((await call("POST", "/api/avatar/authenticate", { body: { username: "", email: "", password: "x" } })).body.message).toBe("username or email is required.")
  })

  it("keep a JWT, a profile and a new key out of every cache", async () => {
    const signIn = await call("POST", "/api/avatar/authenticate", { body: { username: alice.username, password: alice.password } })
    const profile = await call("GET", `/api/avatar/${alice.id}`, { headers: bearer(alice.jwt) })
    const key = await call("POST", "/v1/keys", { body: { name: "cached?" }, headers: bearer(alice.jwt) })
    for (const answer of [signIn, profile, key]) expect([answer.status, answer.headers.get("cache-control")]).toEqual([200, "no-store"])
    // Refusals too: a wrong password's isError 200 and a 400.
    const wrong = await call("POST", "/api/avatar/authenticate", { body: { username: alice.username, password: "wrong password" } })
    const bad = await call("POST", "/api/avatar/authenticate", { body: { username: alice.username } })
    for (const answer of [wrong, bad]) expect([answer.body.isError, answer.headers.get("cache-control")]).toEqual([true, "no-store"])
    // The account pages (links with one-time tokens) may not be framed by another site, cached or sent on as a Referer.
    const pageHeaders = (page: Awaited<ReturnType<typeof call>>) =>
      ["x-frame-options", "content-security-policy", "cache-control", "referrer-policy"].map((h) => page.headers.get(h))
    const reset = await call("GET", "/api/avatar/reset-password?token=abc", { headers: { accept: "text/html" } })
    const verify = await call("GET", "/api/avatar/verify-email?token=abc", { headers: { accept: "text/html" } })
    const u = `p_${unique()}`
    expect((await call("POST", "/api/avatar/register", { body: { username: u, email: `${u}@example.com`, password: "correct horse 1" } })).status).toBe(200)
    const verified = await call("GET", await linkIn(`${u}@example.com`, /verify/i), { headers: { accept: "text/html" } })
    for (const [page, status] of [[reset, 422], [verify, 400], [verified, 200]] as const) {
      expect([page.status, ...pageHeaders(page)]).toEqual([status, "DENY", "frame-ancestors 'none'", "no-store", "no-referrer"])
    }
  })

  it("the reset page says a link is dead before its form is filled in, and following it uses nothing", async () => {
    const bob = await signUp()
    expect((await call("POST", "/api/avatar/forgot-password", { body: { email: bob.email } })).body.isError).toBe(false)
    const link = await linkIn(bob.email, /reset/i)
    const token = new URL(`http://x${link}`).searchParams.get("token")!
    // Opening the page (a mail scanner, a second tab) leaves the link usable.
    for (let i = 0; i < 2; i++) {
      const form = await call("GET", link, { headers: { accept: "text/html" } })
      expect([form.status, form.body.includes(`<form id="reset"`)]).toEqual([200, true])
    }
    const reset = await call("POST", "/api/avatar/reset-password", { body: { token, password: "new password 12", confirmPassword: "new password 12" } })
    expect(reset.body.isError).toBe(false)
    // Used, unknown, or superseded by a newer link: the page says so, with no form (it used to show one that could only fail).
    expect((await call("POST", "/api/avatar/forgot-password", { body: { email: bob.email } })).body.isError).toBe(false)
    const first = await linkIn(bob.email, /reset/i)
    expect((await call("POST", "/api/avatar/forgot-password", { body: { email: bob.email } })).body.isError).toBe(false)
    for (const dead of [link, "/api/avatar/reset-password?token=never-issued", first]) {
      const page = await call("GET", dead, { headers: { accept: "text/html" } })
      expect([page.status, page.body.includes("<form"), page.body.includes("This password-reset link is invalid, expired or already used")], dead).toEqual([422, false, true])
    }
    const fresh = await call("GET", await linkIn(bob.email, /reset/i), { headers: { accept: "text/html" } })
    expect(fresh.status).toBe(200)
  })

  it("refuse a JSON body another site's page posted as a form (CSRF), and take it from API clients in any content type", async () => {
    const person = () => {
      const u = `x_${unique()}`
      return JSON.stringify({ username: u, email: `${u}@example.com`, password: "correct horse 1" })
    }
    // A page's form or a fetch without preflight: text/plain, urlencoded, multipart or none, marked cross-site by the browser.
    for (const [site, type] of [["cross-site", "text/plain"], ["same-site", "application/x-www-form-urlencoded"], ["cross-site", "multipart/form-data; boundary=x"]] as const) {
      const res = await call("POST", "/api/avatar/register", { raw: person(), headers: { "sec-fetch-site": site, ...(type ? { "content-type": type } : {}) } })
      expect([res.status, res.body.isError, res.body.message], `${site} ${type}`).toEqual([400, true, expect.stringMatching(/^A page of another site posted this request as a form .*: this route takes application\/json\.$/)])
    }
    // The same text from curl (no Sec-Fetch-Site) or posted as JSON is taken.
    expect((await call("POST", "/api/avatar/register", { raw: person(), headers: { "content-type": "text/plain" } })).body.isError).toBe(false)
    expect((await call("POST", "/api/avatar/register", { raw: person(), headers: { "content-type": "application/json", "sec-fetch-site": "cross-site" } })).body.isError).toBe(false)
  })

  it("count a password's characters, not its UTF-16 units", async () => {
    // Four emoji are four characters (eight units): they used to pass the 8-character minimum.
    for (const password of ["😀😀😀😀", "abcdef😀"]) {
      const res = await call("POST", "/api/avatar/register", { body: { username: `p_${unique()}`, email: `p_${unique()}@example.com`, password } })
      expect([res.status, res.body.message], password).toEqual([400, "Invalid request body: password: password must be at least 8 characters"])
    }
    const ok = await call("POST", "/api/avatar/register", { body: { username: `p_${unique()}`, email: `p_${unique()}@example.com`, password: "abcdefg😀" } })
    expect(ok.status).toBe(200)
  })

  it("sign in with both fields only when they name the same avatar", async () => {
    const both = await call("POST", "/api/avatar/authenticate", { body: { username: alice.username, email: alice.email, password: alice.password } })
    expect([both.status, both.body.result?.id]).toEqual([200, alice.id])
    // A wrong e-mail beside the right username used to be ignored.
    const bob = await signUp()
    for (const body of [{ username: alice.username, email: bob.email }, { username: alice.username, email: "nobody@example.com" }, { username: bob.username, email: alice.username }]) {
      const res = await call("POST", "/api/avatar/authenticate", { body: { ...body, password: alice.password } })
      expect([res.body.isError, res.body.message], JSON.stringify(body)).toEqual([true, "Invalid credentials."])
    }
  })

  it("the POST bodies refuse a field they do not take by name, and check a registration's confirmPassword", async () => {
    const u = `f_${unique()}`
    const fresh = { username: u, email: `${u}@example.com`, password: "correct horse 1" }
    for (const [path, body, field] of [
      ["/api/avatar/register", { ...fresh, description: "d" }, "description"],
      ["/api/avatar/register", { ...fresh, bogusField: 1 }, "bogusField"],
      ["/api/avatar/authenticate", { username: alice.username, password: alice.password, rememberMe: true }, "rememberMe"],
      ["/api/avatar/forgot-password", { email: alice.email, username: alice.username }, "username"],
      ["/api/avatar/reset-password", { token: "t", password: "long enough 1", confirmPassword: "long enough 1", email: alice.email }, "email"]
    ] as const) {
      const res = await call("POST", path, { body })
      expect([res.status, res.body.isError, res.body.message], path).toEqual([400, true, expect.stringMatching(new RegExp(`^Invalid request body: ${field}: is unexpected, expected: "`))])
    }
    const admin = await call("POST", "/api/avatar/register", { body: { ...fresh, AvatarType: "Admin" } })
    expect([admin.status, admin.body.message]).toEqual([400, "Invalid request body: AvatarType: a registration makes a User; an Admin makes Admins with PUT /api/avatar/{id}"])
    const mismatch = await call("POST", "/api/avatar/register", { body: { ...fresh, confirmPassword: "correct horse 2" } })
    expect([mismatch.status, mismatch.body.message]).toEqual([400, "password and confirmPassword do not match."])
    // Nothing above registered the name; the fields it takes do.
    const ok = await call("POST", "/api/avatar/register", { body: { ...fresh, confirmPassword: fresh.password, AvatarType: "User", title: "T" } })
    expect([ok.status, ok.body.isError, ok.body.result.AvatarType, ok.body.result.title]).toEqual([200, false, "User", "T"])
    // An empty providerType is no override: the default, never "".
    for (const providerType of ["", "  "]) {
      const v = `pt_${unique()}`
      const blank = await call("POST", "/api/avatar/register", { body: { username: v, email: `${v}@example.com`, password: "correct horse 1", providerType } })
      expect([blank.status, blank.body.result.providerType]).toEqual([200, "Default"])
    }
  })

  it("refuse addresses mail servers do not deliver to, and impossible dates of birth", async () => {
    for (const email of ["<a@x.com>", "a..b@x.com", ".a@x.com", "a.@x.com", "a@x..com", "a@[127.0.0.1]", "a@127.0.0.1", "\"a b\"@x.com"]) {
      const res = await call("POST", "/api/avatar/register", { body: { username: `e_${unique()}`, email, password: "correct horse 1" } })
      expect([email, res.status, res.body.message]).toEqual([email, 400, "Invalid request body: email: email must be a valid e-mail address"])
    }
    const future = new Date(Date.now() + 3 * 86_400_000).toISOString().slice(0, 10)
    for (const [dob, status] of [["2000-02-30", 400], ["2001-02-29", 400], ["1990-13-01", 400], ["2000-02-29", 200], [future, 400], ["2999-01-01", 400], ["0000-01-01", 400], ["1849-12-31", 400], ["1850-01-01", 200]] as const) {
      expect([dob, (await call("PUT", `/api/avatar/${alice.id}`, { body: { dob }, headers: bearer(alice.jwt) })).status]).toEqual([dob, status])
    }
  })

  it("take an image as the spec says, a URL or a base64 image, and refuse what a client would run or show as markup", async () => {
    const put = (image: string) => call("PUT", `/api/avatar/${alice.id}`, { body: { image }, headers: bearer(alice.jwt) })
    for (const image of ["https://cdn.example.com/a.png", "http://example.com/x.jpg?s=64", "data:image/png;base64,iVBORw0KGgo=", "iVBORw0KGgoAAAANSUhEUg==", "iVBORw0K\nGgo=", "avatar.png", "/img/me.jpg", "https://x.example/a.png?w=64&h=64", "./me.png", ""]) {
      expect([image, (await put(image)).status]).toEqual([image, 200])
    }
    for (const image of ["javascript:alert(1)", " JavaScript:alert(1)".trim(), "<img src=x onerror=alert(1)>", "data:text/html;base64,PHNjcmlwdD4=", "https://", "vbscript:msgbox", "x\" onerror=\"alert(1)", "a\u0001b",
      // As a browser reads them: tabs and line breaks taken out, leading spaces trimmed, an entity left as it is.
      "java\nscript:alert(1)", " javascript:alert(1)", "\r\njavascript:alert(document.cookie)", "javascript\n:alert(1)", "data\n:text/html;base64,PHNjcmlwdD4=",
      "java\tscript:alert(1)", "&#106;avascript:alert(1)", "http:\\\\evil.example",
      // A character reference is a colon once markup decodes it; an SVG is a document that can carry script.
      "javascript&colon;alert(1)", "javascript&#58;alert(1)", "javascript&#x3a;alert(1)", "javascript&#0000058alert(1)", "data:image/svg+xml;base64,PHN2Zz4="]) {
      const res = await put(image)
      expect([image, res.status, res.body.message]).toEqual([image, 400, "Invalid request body: image: image must be an http(s) URL, a relative URL, a data:image/…;base64, URL or base64 text"])
    }
  })

  it("a PUT says a link was sent only when it asked for a change; the current address cancels it", async () => {
    const a = await signUp()
    const put = (body: unknown) => call("PUT", `/api/avatar/${a.id}`, { body, headers: bearer(a.jwt) })
    const next = `next_${unique()}@example.com`
    const changed = await put({ email: next })
    expect([changed.body.message, changed.body.result.pendingEmail]).toEqual(["Avatar updated. Confirm the new e-mail address with the link we sent to it.", next])
    const dob = await put({ dob: "1990-04-23" })
    expect([dob.body.message, dob.body.result.pendingEmail]).toEqual(["Avatar updated.", next])
    const cancelled = await put({ email: a.email })
    expect([cancelled.body.message, cancelled.body.result.pendingEmail]).toEqual(["Avatar updated.", null])
  })

  it("a PUT refuses a password and fields it does not know, by name; profile fields sent back unchanged are taken, changed refused", async () => {
    const a = await signUp()
    const put = (body: unknown) => call("PUT", `/api/avatar/${a.id}`, { body, headers: bearer(a.jwt) })
    const password = await put({ title: "t", password: "another password 1" })
    expect([password.status, password.body.message]).toEqual([400, expect.stringContaining("password: a password is not changed with PUT: use POST /api/avatar/forgot-password")])
    expect(JSON.stringify(password.body)).not.toContain("another password 1")
    const misspelt = await put({ titel: "t" })
    expect([misspelt.status, misspelt.body.message]).toEqual([400, expect.stringMatching(/titel: is unexpected/)])
    // A GET's body edited and sent back: the fields a PUT cannot change are taken as they are.
    const profile = (await call("GET", `/api/avatar/${a.id}`, { headers: bearer(a.jwt) })).body.result
    const roundTrip = await put({ ...profile, title: "round trip" })
    expect([roundTrip.status, roundTrip.body.result.title]).toEqual([200, "round trip"])
    // The same body again, its modifiedDate now stale, and its id in upper case: still the same profile.
    expect((await put({ ...profile, id: profile.id.toUpperCase(), title: "round trip" })).status).toBe(200)
    for (const changed of [{ id: crypto.randomUUID() }, { isVerified: false }, { createdDate: "2001-01-01T00:00:00.000Z" }, { providerType: "Other" }]) {
      const refused = await put({ title: "x", ...changed })
      expect([refused.status, refused.body.message]).toEqual([400, expect.stringMatching(new RegExp(`^Invalid request body: ${Object.keys(changed)[0]}: is read-only`))])
    }
    // Only an Admin changes AvatarType, karmaTotal and plan; an owner may send them back unchanged.
    expect((await put({ karmaTotal: profile.karmaTotal + 1 })).status).toBe(403)
    expect((await put({ AvatarType: "Admin" })).status).toBe(403)
    expect((await call("GET", `/api/avatar/${a.id}`, { headers: bearer(a.jwt) })).body.result.title).toBe("round trip")
    // A UUID's hex digits name the same id in either case.
    expect((await call("GET", `/api/avatar/${a.id.toUpperCase()}`, { headers: bearer(a.jwt) })).body.result.id).toBe(a.id)
  })

  it("an API key may change the profile but not the e-mail address or username, nor make keys (403)", async () => {
    const a = await signUp()
    for (const headers of [{ "x-api-key": a.apiKey }, bearer(a.apiKey)]) {
      const email = await call("PUT", `/api/avatar/${a.id}`, { body: { email: `thief_${unique()}@example.com` }, headers })
      expect([email.status, email.body.isError]).toEqual([403, true])
      expect(email.body.message).toMatch(/needs a signed-in session \(JWT\)/)
      expect((await call("PUT", `/api/avatar/${a.id}`, { body: { username: `x_${unique()}` }, headers })).status).toBe(403)
      expect((await call("PUT", `/api/avatar/${a.id}`, { body: { title: "by key" }, headers })).body.result.title).toBe("by key")
      const key = await call("POST", "/v1/keys", { body: { name: "more" }, headers })
      expect([key.status, key.body.message]).toEqual([403, expect.stringMatching(/^Creating an API key needs a signed-in session/)])
    }
    expect((await call("GET", "/v1/keys", { headers: bearer(a.jwt) })).body.result).toHaveLength(1)
  })

  it("revoking a key by a malformed id is 400, like every other id in a path; an unknown one 404", async () => {
    const bad = await call("DELETE", "/v1/keys/not-a-uuid", { headers: bearer(alice.jwt) })
    expect([bad.status, bad.body.message]).toEqual([400, "Path parameter id must be a UUID."])
    expect((await call("DELETE", `/v1/keys/${crypto.randomUUID()}`, { headers: bearer(alice.jwt) })).status).toBe(404)
  })
})
