/**
 * The avatar API end to end: the real node host, a real SMTP server receiving the mails, the
 * test following the links; on SQLite and on PostgreSQL.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { freshPgDatabase, hasPg } from "../../../packages/core/test/support/databases.ts"
import { call, type RunningServer, startServer } from "./support/server.ts"
import { type MailCatcher, startSmtp } from "./support/smtp.ts"

const backends = [["sqlite", false], ["postgres", true]] as const

for (const [name, usePg] of backends) {
  describe.skipIf(usePg && !hasPg)(`avatar API on ${name}`, () => {
    let server: RunningServer
    let smtp: MailCatcher
    const u = Math.random().toString(36).slice(2, 8)
    const alice = { username: `alice_${u}`, email: `alice_${u}@example.com`, password: "correct horse 1" }
    const admin = { username: `root_${u}`, email: `root_${u}@example.com`, password: "admin password 1" }
    let aliceId = ""
    let aliceToken = ""
    let adminToken = ""
    const api = (method: string, path: string, options: Parameters<typeof call>[3] = {}) =>
      call(server.url, method, `/api${path}`, options)

    beforeAll(async () => {
      smtp = await startSmtp()
      const env: Record<string, string> = {
        SMTP_URL: smtp.url,
        MAIL_FROM: "aigw test <no-reply@aigw.test>",
        PUBLIC_URL: "http://public.example:9999",
        AIGW_ADMIN_USERNAME: admin.username,
        AIGW_ADMIN_EMAIL: admin.email,
        AIGW_ADMIN_PASSWORD: admin.password,
        AIGW_MAX_BODY_BYTES: "65536"
      }
      if (usePg) env.DATABASE_URL = await freshPgDatabase()
      server = await startServer(env)
    })
    afterAll(async () => {
      await server?.stop()
      await smtp?.close()
    })

    /** Follows a mailed link against the test server (PUBLIC_URL is not reachable). */
    const follow = (link: string, accept = "application/json") => {
      const url = new URL(link)
      expect(url.origin).toBe("http://public.example:9999")
      return fetch(`${server.url}${url.pathname}${url.search}`, { headers: { accept } })
    }

    it("registers and sends a verification mail with a PUBLIC_URL link", async () => {
      const res = await api("POST", "/avatar/register", { body: { ...alice, title: "Alice" } })
      expect(res.status).toBe(200)
      expect(res.body).toMatchObject({ isError: false, isWarning: false, result: { username: alice.username, isVerified: false } })
      expect(typeof res.body.detailedMessage).toBe("string")
      expect(JSON.stringify(res.body)).not.toMatch(/password|argon2/i)
      aliceId = res.body.result.id
      const mail = await smtp.waitFor(alice.email, /verify/i)
      expect(smtp.linkIn(mail)).toMatch(/^http:\/\/public\.example:9999\/api\/avatar\/verify-email\?token=/)
    })

    it("refuses login while unverified, with a pending-verification message", async () => {
      const res = await api("POST", "/avatar/authenticate", { body: { username: alice.username, password: alice.password } })
      expect(res.body.isError).toBe(true)
      expect(res.body.message).toMatch(/not verified/i)
      const wrong = await api("POST", "/avatar/authenticate", { body: { username: alice.username, password: "wrong password" } })
      expect(wrong.body).toMatchObject({ isError: true, message: "Invalid credentials." })
    })

    it("verifies with the mailed link once", async () => {
      const link = smtp.linkIn(await smtp.waitFor(alice.email, /verify/i))
      const first = await follow(link)
      expect(await first.json()).toMatchObject({ isError: false, result: { isVerified: true } })
      const again = await (await follow(link)).json()
      expect(again.isError).toBe(true)
      const page = await follow(link, "text/html,application/xhtml+xml")
      expect(page.headers.get("content-type")).toMatch(/text\/html/)
    })

    it("authenticates by username or e-mail and returns a 7-day JWT", async () => {
      const byName = await api("POST", "/avatar/authenticate", { body: { username: alice.username.toUpperCase(), password: alice.password } })
      expect(byName.body).toMatchObject({ isError: false, result: { id: aliceId, username: alice.username, email: alice.email, karmaTotal: 0 } })
      const byMail = await api("POST", "/avatar/authenticate", { body: { email: alice.email, password: alice.password } })
      aliceToken = byMail.body.result.jwtToken
      const payload = JSON.parse(Buffer.from(aliceToken.split(".")[1]!, "base64url").toString())
      expect(payload.exp - payload.iat).toBe(7 * 24 * 3600)
      expect(payload).toMatchObject({ sub: aliceId, iss: "aigw", aud: "aigw-api" })
      expect(typeof payload.jti).toBe("string")
      const crossed = await api("POST", "/avatar/authenticate", { body: { email: alice.username, password: alice.password } })
      expect(crossed.body.isError).toBe(false)
    })

    it("rejects forged and alg=none tokens", async () => {
      const [h, p] = aliceToken.split(".")
      const none = `${Buffer.from(JSON.stringify({ alg: "none", typ: "JWT" })).toString("base64url")}.${p}.`
      expect((await api("GET", `/avatar/${aliceId}`, { token: none })).status).toBe(401)
      expect((await api("GET", `/avatar/${aliceId}`, { token: `${h}.${p}.AAAA` })).status).toBe(401)
      expect((await api("GET", `/avatar/${aliceId}`)).status).toBe(401)
    })

    it("reads the own profile without secrets; bad ids are 400, unknown 404", async () => {
      const res = await api("GET", `/avatar/${aliceId}`, { token: aliceToken })
      expect(res.body).toMatchObject({ isError: false, result: { id: aliceId, title: "Alice", AvatarType: "User" } })
      expect(JSON.stringify(res.body)).not.toMatch(/passwordHash|argon2|hash/i)
      expect(res.headers.get("x-ratelimit-limit")).toBe("100")
      expect((await api("GET", "/avatar/not-a-uuid", { token: aliceToken })).status).toBe(400)
      expect((await api("GET", `/avatar/${crypto.randomUUID()}`, { token: aliceToken })).status).toBe(404)
    })

    it("answers a taken e-mail like a success and mails the owner; a taken username is an error", async () => {
      const sameMail = await api("POST", "/avatar/register", { body: { username: `other_${u}`, email: alice.email.toUpperCase(), password: "another pass" } })
      expect(sameMail.status).toBe(200)
      expect(sameMail.body.isError).toBe(false)
      expect(sameMail.body.message).toBe("Avatar registered. Check your e-mail and follow the link to verify your address.")
      await smtp.waitFor(alice.email, /already have an account/i)
      const sameName = await api("POST", "/avatar/register", { body: { username: alice.username.toUpperCase(), email: `x_${u}@example.com`, password: "another pass" } })
      expect(sameName.body.isError).toBe(true)
      expect(sameName.body.message).toMatch(/username/i)
    })

    it("rejects hostile input with clear 400/413 envelopes and writes nothing", async () => {
      const cases: Array<[unknown, RegExp]> = [
        [{ username: "ab", email: "a@b.co", password: "12345678" }, /username/],
        [{ username: "bad name!", email: "a@b.co", password: "12345678" }, /username/],
        [{ username: `ok_${u}x`, email: "not-an-email", password: "12345678" }, /email/],
        [{ username: `ok_${u}x`, email: "a@b.co", password: "short" }, /password/],
        [{ username: 42, email: "a@b.co", password: "12345678" }, /username/],
        [{ email: "a@b.co", password: "12345678" }, /username/],
        [[1, 2, 3], /Invalid request body/]
      ]
      for (const [body, pattern] of cases) {
        const res = await api("POST", "/avatar/register", { body })
        expect(res.status, JSON.stringify(body)).toBe(400)
        expect(res.body.isError).toBe(true)
        expect(res.body.message).toMatch(pattern)
      }
      const malformed = await api("POST", "/avatar/register", { raw: "{\"username\": " })
      expect(malformed.status).toBe(400)
      expect(malformed.body).toMatchObject({ isError: true, isWarning: false, result: null })
      const huge = await api("POST", "/avatar/register", { raw: JSON.stringify({ username: "x".repeat(70_000) }) })
      expect(huge.status).toBe(413)
      expect(huge.body.isError).toBe(true)
      const login = await api("POST", "/avatar/authenticate", { body: { username: `ok_${u}x`, password: "12345678" } })
      expect(login.body.isError).toBe(true)
    })

    it("lets the owner update, forbids others and admin-only fields", async () => {
      const ok = await api("PUT", `/avatar/${aliceId}`, { token: aliceToken, body: { title: "Dr Alice", description: "hi", dob: "1990-04-23" } })
      expect(ok.body).toMatchObject({ isError: false, result: { title: "Dr Alice", dob: "1990-04-23" } })
      const karma = await api("PUT", `/avatar/${aliceId}`, { token: aliceToken, body: { karmaTotal: 1000 } })
      expect(karma.status).toBe(403)
      const type = await api("PUT", `/avatar/${aliceId}`, { token: aliceToken, body: { AvatarType: "Admin" } })
      expect(type.status).toBe(403)
      const badDob = await api("PUT", `/avatar/${aliceId}`, { token: aliceToken, body: { dob: "yesterday" } })
      expect(badDob.status).toBe(400)
    })

    it("bootstraps the Admin, who lists avatars; others may not", async () => {
      const login = await api("POST", "/avatar/authenticate", { body: { username: admin.username, password: admin.password } })
      expect(login.body.result.AvatarType).toBe("Admin")
      adminToken = login.body.result.jwtToken
      const list = await api("GET", "/avatar", { token: adminToken })
      expect(list.body.isError).toBe(false)
      expect(list.body.result.map((a: any) => a.id)).toContain(aliceId)
      // One page at a time, in the list's order (oldest first); the query's values are checked.
      const ids = list.body.result.map((a: any) => a.id)
      const page = (query: string) => api("GET", `/avatar?${query}`, { token: adminToken })
      expect((await page("limit=1")).body.result.map((a: any) => a.id)).toEqual(ids.slice(0, 1))
      expect((await page("limit=1&offset=1")).body.result.map((a: any) => a.id)).toEqual(ids.slice(1, 2))
      expect((await page(`limit=1000&offset=${ids.length}`)).body.result).toEqual([])
      for (const bad of ["offset=1", "limit=0", "limit=1001", "limit=0x10", "limit=1&offset=-1"]) {
        const refused = await page(bad)
        expect([bad, refused.status, refused.body.isError]).toEqual([bad, 400, true])
      }
      expect((await api("GET", "/avatar", { token: aliceToken })).status).toBe(403)
      const other = await api("PUT", `/avatar/${list.body.result.find((a: any) => a.AvatarType === "Admin").id}`, { token: aliceToken, body: { title: "x" } })
      expect(other.status).toBe(403)
      const byAdmin = await api("PUT", `/avatar/${aliceId}`, { token: adminToken, body: { karmaTotal: 250 } })
      expect(byAdmin.body.result.karmaTotal).toBe(250)
    })

    it("changes e-mail only after the new address confirms", async () => {
      const newMail = `alice2_${u}@example.com`
      const res = await api("PUT", `/avatar/${aliceId}`, { token: aliceToken, body: { email: newMail } })
      expect(res.body.result).toMatchObject({ email: alice.email, pendingEmail: newMail })
      const mail = await smtp.waitFor(newMail, /verify/i)
      const stillOld = await api("POST", "/avatar/authenticate", { body: { email: alice.email, password: alice.password } })
      expect(stillOld.body.isError).toBe(false)
      const confirmed = await (await follow(smtp.linkIn(mail))).json()
      expect(confirmed.result).toMatchObject({ email: newMail, pendingEmail: null, isVerified: true })
      alice.email = newMail
    })

    it("resets the password: old tokens revoked, notice mailed, link single-use", async () => {
      const forgot = await api("POST", "/avatar/forgot-password", { body: { email: alice.email } })
      expect(forgot.body.isError).toBe(false)
      const unknown = await api("POST", "/avatar/forgot-password", { body: { email: `nobody_${u}@example.com` } })
      expect(unknown.body).toEqual({ ...forgot.body })
      const link = smtp.linkIn(await smtp.waitFor(alice.email, /reset your password/i))
      const token = new URL(link).searchParams.get("token")!
      const mismatch = await api("POST", "/avatar/reset-password", { body: { token, password: "new password 1", confirmPassword: "other" } })
      expect(mismatch.body.isError).toBe(true)
      const reset = await api("POST", "/avatar/reset-password", { body: { token, password: "new password 1", confirmPassword: "new password 1" } })
      expect(reset.body.isError).toBe(false)
      await smtp.waitFor(alice.email, /password was changed/i)
      expect((await api("GET", `/avatar/${aliceId}`, { token: aliceToken })).status).toBe(401)
      const again = await api("POST", "/avatar/reset-password", { body: { token, password: "new password 2", confirmPassword: "new password 2" } })
      expect(again.body.isError).toBe(true)
      const old = await api("POST", "/avatar/authenticate", { body: { email: alice.email, password: alice.password } })
      expect(old.body.isError).toBe(true)
      const fresh = await api("POST", "/avatar/authenticate", { body: { email: alice.email, password: "new password 1" } })
      expect(fresh.body.isError).toBe(false)
      aliceToken = fresh.body.result.jwtToken
      alice.password = "new password 1"
    })

    it("limits verification resends to 3 per hour per address", async () => {
      const bob = { username: `bob_${u}`, email: `bob_${u}@example.com`, password: "bob password" }
      await api("POST", "/avatar/register", { body: bob })
      for (let i = 0; i < 3; i++) {
        const res = await api("POST", `/avatar/resend-verification-email/${encodeURIComponent(bob.email)}`)
        expect(res.body.isError, `resend ${i + 1}`).toBe(false)
      }
      await smtp.waitFor(bob.email, /verify/i, 4)
      const fourth = await api("POST", `/avatar/resend-verification-email/${encodeURIComponent(bob.email)}`)
      expect(fourth.body.isError).toBe(true)
      expect(fourth.body.message).toMatch(/3 per hour/)
      expect(fourth.status).toBe(429)
      expect((await api("POST", "/avatar/resend-verification-email/not-an-email")).status).toBe(400)
    })

    it("soft-deletes (Admin only): record kept, login and tokens refused", async () => {
      expect((await api("DELETE", `/avatar/${aliceId}`, { token: aliceToken })).status).toBe(403)
      const del = await api("DELETE", `/avatar/${aliceId}`, { token: adminToken })
      expect(del.body).toMatchObject({ isError: false, result: { id: aliceId, isActive: false } })
      expect((await api("GET", `/avatar/${aliceId}`, { token: aliceToken })).status).toBe(401)
      const login = await api("POST", "/avatar/authenticate", { body: { email: alice.email, password: alice.password } })
      expect(login.body).toMatchObject({ isError: true, message: "Invalid credentials." })
      const kept = await api("GET", `/avatar/${aliceId}`, { token: adminToken })
      expect(kept.body.result).toMatchObject({ id: aliceId, isActive: false })
      expect(kept.body.result.deletedDate).toBeTruthy()
    })

    it("unknown routes and methods answer with the envelope", async () => {
      const res = await api("GET", "/nothing-here")
      expect(res.status).toBe(404)
      expect(res.body).toMatchObject({ isError: true, isWarning: false })
      const gw = await call(server.url, "POST", "/v1/nothing", { body: {} })
      expect(gw.status).toBe(404)
      expect(gw.body).toEqual({ isError: true, message: "No route for POST /v1/nothing.", result: null })
    })
  })
}

describe.skipIf(!hasPg)("resend limit across two processes on one PostgreSQL", () => {
  it("admits exactly 3 resends per hour per address in total", async () => {
    const smtp = await startSmtp()
    const env = { DATABASE_URL: await freshPgDatabase(), SMTP_URL: smtp.url, JWT_SECRET: "shared-secret-shared-secret-shared-secret" }
    const servers = [await startServer(env), await startServer(env)]
    try {
      const email = `twin_${Math.random().toString(36).slice(2, 8)}@example.com`
      await call(servers[0]!.url, "POST", "/api/avatar/register", { body: { username: `twin_${Math.random().toString(36).slice(2, 8)}`, email, password: "password 123" } })
      const answers = await Promise.all(
        Array.from({ length: 12 }, (_, i) =>
          call(servers[i % 2]!.url, "POST", `/api/avatar/resend-verification-email/${encodeURIComponent(email)}`))
      )
      expect(answers.filter((a) => a.body.isError === false).length).toBe(3)
      expect(answers.filter((a) => a.status === 429 && a.body.isError === true).length).toBe(9)
      await smtp.waitFor(email, /verify/i, 4)
    } finally {
      await Promise.all(servers.map((s) => s.stop()))
      await smtp.close()
    }
  })
})

describe("forgot-password and resend with a slow mail server", () => {
  let server: RunningServer
  let smtp: MailCatcher
  const u = Math.random().toString(36).slice(2, 8)
  const admin = { username: `root_${u}`, email: `root_${u}@example.com`, password: "admin password 1" }
  beforeAll(async () => {
    smtp = await startSmtp({ delayMs: 2_000 })
    server = await startServer({ SMTP_URL: smtp.url, AIGW_ADMIN_USERNAME: admin.username, AIGW_ADMIN_EMAIL: admin.email, AIGW_ADMIN_PASSWORD: admin.password })
  })
  afterAll(async () => {
    await server?.stop()
    await smtp?.close()
  })

  /** How long an answer took, in ms, and its body. */
  const timed = async (path: string, body?: unknown) => {
    const started = performance.now()
    const res = await call(server.url, "POST", `/api/avatar${path}`, body === undefined ? {} : { body })
    return { ms: performance.now() - started, body: res.body }
  }

  it("take as long whether or not the address has an account, the mail sent within the request", async () => {
    const known = await timed("/forgot-password", { email: admin.email })
    // The mail is there when the answer is.
    expect(smtp.mails.some((m) => m.to === admin.email && /reset your password/i.test(m.subject))).toBe(true)
    const unknown = await timed("/forgot-password", { email: `nobody_${u}@example.com` })
    expect(known.body).toEqual(unknown.body)
    // The mail server takes 2 s to accept a mail: an address without an account waits about as long.
    expect(known.ms).toBeGreaterThan(1_500)
    expect(Math.abs(known.ms - unknown.ms)).toBeLessThan(700)
    const fresh = { username: `fresh_${u}`, email: `fresh_${u}@example.com`, password: "correct horse 1" }
    expect((await timed("/register", fresh)).body.isError).toBe(false)
    const resent = await timed(`/resend-verification-email/${fresh.email}`)
    const nobody = await timed(`/resend-verification-email/nobody2_${u}@example.com`)
    expect(resent.body).toEqual(nobody.body)
    expect(Math.abs(resent.ms - nobody.ms)).toBeLessThan(700)
    await smtp.waitFor(fresh.email, /verify/i, 2)
  })

  it("registration takes as long when the address has an account and nothing is mailed (a deleted owner)", async () => {
    const gone = { username: `gone_${u}`, email: `gone_${u}@example.com`, password: "correct horse 2" }
    const first = await timed("/register", gone)
    expect(first.body.isError).toBe(false)
    expect(first.ms).toBeGreaterThan(1_500)
    const login = await call(server.url, "POST", "/api/avatar/authenticate", { body: { username: admin.username, password: admin.password } })
    const deleted = await call(server.url, "DELETE", `/api/avatar/${first.body.result.id}`, { token: login.body.result.jwtToken })
    expect(deleted.body.isError).toBe(false)
    const mailsBefore = smtp.mails.length
    // The deleted owner is told nothing, so nothing is mailed: the answer still waits as a mailing one.
    const again = await timed("/register", { ...gone, username: `gone2_${u}` })
    expect(again.body.isError).toBe(false)
    expect(smtp.mails.length).toBe(mailsBefore)
    expect(again.ms).toBeGreaterThan(1_300)
    const free = await timed("/register", { username: `free_${u}`, email: `free_${u}@example.com`, password: "correct horse 3" })
    expect(Math.abs(free.ms - again.ms)).toBeLessThan(700)
  })

})

