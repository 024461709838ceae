/**
 * A mail server that refuses for a while loses no mail: the real node host, a real SMTP server that
 * answers 451 until told otherwise, the mail kept in the database's outbox and sent when the server
 * takes it again, also by the next process after a restart.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { adminEnv, adminToken } from "./support/accounts.ts"
import { call, type RunningServer, startServer } from "./support/server.ts"
import { type MailCatcher, startSmtp } from "./support/smtp.ts"

describe("mail outbox", () => {
  let smtp: MailCatcher
  let server: RunningServer
  const u = Math.random().toString(36).slice(2, 8)
  const env = () => ({ ...adminEnv, SMTP_URL: smtp.url, MAIL_FROM: "aigw test <no-reply@aigw.test>", AIGW_WORKER_INTERVAL_MS: "100" })
  const register = async (name: string) => {
    const person = { username: `${name}_${u}`, email: `${name}_${u}@example.com`, password: "correct horse 1" }
    const res = await call(server.url, "POST", "/api/avatar/register", { body: person })
    // The mail server refused: the registration is still answered as done, its mail on its way.
    expect([res.status, res.body.isError]).toEqual([200, false])
    return person
  }
  const refusedAtLeast = async (n: number) => {
    const deadline = Date.now() + 10_000
    while (smtp.refused() < n && Date.now() < deadline) await new Promise((r) => setTimeout(r, 50))
    expect(smtp.refused()).toBeGreaterThanOrEqual(n)
  }

  beforeAll(async () => {
    smtp = await startSmtp()
    server = await startServer(env())
  })
  afterAll(async () => {
    await server?.stop()
    await smtp?.close()
  })

  it("keeps a verification mail the mail server refused and sends it when it takes mail again; its link works", async () => {
    smtp.refusing = true
    const alice = await register("alice")
    await refusedAtLeast(1)
    expect(smtp.mails.filter((m) => m.to === alice.email)).toEqual([])
    expect(server.output()).toMatch(/mail to alice_\w+@example\.com \(.*\) not taken by the mail server: .*451.*kept in the outbox and retried/)
    smtp.refusing = false
    const mail = await smtp.waitFor(alice.email, /verify/i, 1, 20_000)
    const verified = await call(server.url, "GET", new URL(smtp.linkIn(mail)).pathname + new URL(smtp.linkIn(mail)).search)
    expect(verified.body.isError).toBe(false)
    const signIn = await call(server.url, "POST", "/api/avatar/authenticate", { body: { username: alice.username, password: alice.password } })
    expect(signIn.body.isError).toBe(false)
  }, 40_000)

  it("drops the kept mails of an avatar deleted meanwhile (their links died with it); others still go", async () => {
    smtp.refusing = true
    const before = smtp.refused()
    const carol = await register("carol")
    const dave = await register("dave")
    await refusedAtLeast(before + 2)
    const admin = await adminToken(server)
    const listed = await call(server.url, "GET", "/api/avatar", { token: admin })
    const id = (listed.body.result as Array<{ id: string; username: string }>).find((a) => a.username === carol.username)!.id
    expect((await call(server.url, "DELETE", `/api/avatar/${id}`, { token: admin })).body.isError).toBe(false)
    expect(server.output()).toMatch(new RegExp(`1 mail\\(s\\) to ${carol.email} dropped from the outbox: their avatar was deleted`))
    smtp.refusing = false
    await smtp.waitFor(dave.email, /verify/i, 1, 20_000)
    await new Promise((r) => setTimeout(r, 500))
    expect(smtp.mails.filter((m) => m.to === carol.email)).toEqual([])
  }, 40_000)

  it("a mail kept when the process stopped is sent by the next one, once", async () => {
    smtp.refusing = true
    const before = smtp.refused()
    const bob = await register("bob")
    await refusedAtLeast(before + 1)
    await server.stop()
    smtp.refusing = false
    server = await startServer(env(), { dataDir: server.dataDir, port: server.port })
    await smtp.waitFor(bob.email, /verify/i, 1, 20_000)
    // Sent and removed from the outbox: not sent again by a later round.
    await new Promise((r) => setTimeout(r, 1_000))
    expect(smtp.mails.filter((m) => m.to === bob.email).length).toBe(1)
  }, 60_000)
})
