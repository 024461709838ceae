/**
 * Attacks on the account protections of the real node host: e-mail enumeration through register +
 * profile lookup, password brute force against one account and sprayed over many accounts (with and
 * without a trusted proxy), API keys surviving a password reset, and mail bombing through e-mail
 * changes. Login counters live in the database: two processes on one PostgreSQL share them.
 */
import * as fs from "node:fs"
import * as net from "node:net"
import * as path from "node:path"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { freshPgDatabase, hasPg } from "../../../../packages/core/test/support/databases.ts"
import { signUp, type TestAvatar } from "../support/accounts.ts"
import { LOOP_BLOCKED_MS, underAttack } from "../support/attack.ts"
import { call, type RunningServer, startServer } from "../support/server.ts"

const rand = () => Math.random().toString(36).slice(2, 9)

const login = (server: RunningServer, body: Record<string, string>, forwardedFor?: string) =>
  call(server.url, "POST", "/api/avatar/authenticate", { body, headers: forwardedFor ? { "x-forwarded-for": forwardedFor } : {} })

/** "ok", "invalid" (a counted failure), "429", or another failure's message. */
const outcome = (res: Awaited<ReturnType<typeof call>>) =>
  res.status === 429 ? "429" : res.body.isError === false ? "ok" : res.body.message === "Invalid credentials." ? "invalid" : res.body.message as string

/** The mails the file mailer wrote to `to`, newest first. */
const mailsTo = (server: RunningServer, to: string) => {
  const dir = path.join(server.dataDir, "data", "mail")
  return fs.readdirSync(dir).sort().reverse().map((f) => fs.readFileSync(path.join(dir, f), "utf8")).filter((t) => t.includes(`To: ${to}\n`))
}

describe("account attacks (SQLite, X-Forwarded-For not trusted)", () => {
  let server: RunningServer
  let owner: TestAvatar
  let attacker: TestAvatar
  let resetter: TestAvatar

  beforeAll(async () => {
    server = await startServer({ AIGW_LOGIN_MAX_FAILURES_PER_ADDRESS: "30" })
    owner = await signUp(server, "owner")
    attacker = await signUp(server, "attacker")
    resetter = await signUp(server, "resetter")
  })
  afterAll(async () => {
    await server?.stop()
  })

  it("register + profile lookup + login cannot tell a taken e-mail from a free one", async () => {
    const probe = async (email: string) => {
      const username = `probe_${rand()}`
      const reg = await call(server.url, "POST", "/api/avatar/register", { body: { username, email, password: "probe password" } })
      const byId = await call(server.url, "GET", `/api/avatar/${reg.body.result.id}`, { token: attacker.token })
      const byUsername = await login(server, { username, password: "probe password" })
      const byEmail = await login(server, { email, password: "probe password" })
      const again = await call(server.url, "POST", "/api/avatar/register", { body: { username, email: `other_${rand()}@example.com`, password: "probe password" } })
      return {
        register: [reg.status, reg.body.isError, reg.body.message, Object.keys(reg.body.result).sort(), reg.body.result.email, reg.body.result.isVerified],
        byId: [byId.status, byId.body.isError, Object.keys(byId.body.result ?? {}).sort()],
        byUsername: [byUsername.status, outcome(byUsername)],
        byEmail: [byEmail.status, outcome(byEmail)],
        usernameAgain: [again.status, again.body.isError, again.body.message]
      }
    }
    const taken = await probe(owner.email)
    const fresh = `fresh_${rand()}@example.com`
    const free = await probe(fresh)
    expect(free.byId[0]).toBe(200)
    expect(taken).toEqual({ ...free, register: free.register.map((v) => (v === fresh ? owner.email : v)) })
    expect(outcome(await login(server, { email: owner.email, password: owner.password }))).toBe("ok")
  })

  it("a password reset revokes the avatar's API keys, and the mail says so", async () => {
    const me = await call(server.url, "GET", `/api/avatar/${resetter.id}`, { apiKey: resetter.apiKey })
    expect(me.status).toBe(200)
    await call(server.url, "POST", "/api/avatar/forgot-password", { body: { email: resetter.email } })
    const token = decodeURIComponent(/reset-password\?token=([A-Za-z0-9_%-]+)/.exec(mailsTo(server, resetter.email)[0]!)![1]!)
    const reset = await call(server.url, "POST", "/api/avatar/reset-password", { body: { token, password: "new password 1", confirmPassword: "new password 1" } })
    expect(reset.body.isError).toBe(false)
    expect((await call(server.url, "GET", `/api/avatar/${resetter.id}`, { apiKey: resetter.apiKey })).status).toBe(401)
    expect((await call(server.url, "GET", `/api/avatar/${resetter.id}`, { token: `${resetter.apiKey}` })).status).toBe(401)
    expect(mailsTo(server, resetter.email)[0]).toMatch(/every API key of your avatar was revoked/)
  })

  it("a key revoked while a request's body is on its way is refused once the body comes (fast lane, Effect routes, /mcp), nothing counted", async () => {
    const used = async () => (await call(server.url, "GET", "/v1/usage", { token: owner.token })).body.result.dailyCallsUsed as number
    const before = await used()
    const { port } = new URL(server.url)
    for (const [route, body] of [
      ["/v1/complete", { messages: [{ role: "user", content: "hi" }], model: "gpt-4o-mini" }],
      ["/v1/audio/speech", { text: "hi", provider: "openai" }],
      // /mcp admitted every tool call of such a body for the revoked key.
      ["/mcp", { jsonrpc: "2.0", id: 1, method: "tools/call", params: { name: "gateway_complete", arguments: { messages: [{ role: "user", content: "hi" }] } } }]
    ] as const) {
      const made = await call(server.url, "POST", "/v1/keys", { token: owner.token, body: { name: "slow" } })
      const { id, key } = made.body.result
      const text = JSON.stringify(body)
      const socket = net.connect(Number(port), "127.0.0.1")
      await new Promise((resolve) => socket.once("connect", resolve))
      let answer = ""
      socket.on("data", (d) => (answer += d))
      const closed = new Promise((resolve) => socket.once("close", resolve))
      socket.write(`POST ${route} HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Api-Key: ${key}\r\nContent-Type: application/json\r\nContent-Length: ${text.length}\r\nConnection: close\r\n\r\n${text.slice(0, 5)}`)
      // The headers are read and the key checked while the body is still on its way; then the key is revoked.
      await new Promise((r) => setTimeout(r, 300))
      expect((await call(server.url, "DELETE", `/v1/keys/${id}`, { token: owner.token })).status).toBe(200)
      socket.end(text.slice(5))
      await closed
      expect([route, answer.split("\r\n")[0]]).toEqual([route, "HTTP/1.1 401 Unauthorized"])
    }
    expect(await used()).toBe(before)
  })

  it("PUT with a victim's e-mail mails it at most 3 times per hour", async () => {
    const victim = `victim_${rand()}@example.com`
    const answers = []
    for (let i = 0; i < 6; i++) {
      const res = await call(server.url, "PUT", `/api/avatar/${attacker.id}`, { token: attacker.token, body: { email: victim } })
      answers.push(res.status)
      if (res.status === 429) expect(Number(res.headers.get("retry-after"))).toBeGreaterThan(0)
    }
    expect(answers).toEqual([200, 200, 200, 429, 429, 429])
    expect(mailsTo(server, victim)).toHaveLength(3)
  })

  it("PUT cannot tell a registered e-mail from a free one, and is limited first", async () => {
    const prober = await signUp(server, "prober")
    const probe = async (email: string) => {
      const res = await call(server.url, "PUT", `/api/avatar/${prober.id}`, { token: prober.token, body: { email } })
      return { status: res.status, isError: res.body.isError, message: res.body.message, pending: res.body.result?.pendingEmail }
    }
    const free = `free_${rand()}@example.com`
    const taken = await probe(owner.email)
    const untaken = await probe(free)
    expect(taken).toEqual({ ...untaken, pending: owner.email })
    expect(taken.isError).toBe(false)
    // The owner gets a notice, never a verification link for the other avatar.
    expect(mailsTo(server, owner.email).filter((m) => m.includes("verify-email?token="))).toHaveLength(1)
    expect(mailsTo(server, owner.email)[0]).toContain("asked to use your e-mail address")
    // The limit answers first: after 3 changes, registered and free addresses both get 429.
    await probe(`other_${rand()}@example.com`)
    expect((await probe(owner.email)).status).toBe(429)
    expect((await probe(`free2_${rand()}@example.com`)).status).toBe(429)
  })

  // Last in this server: it uses up 127.0.0.1's failures.
  it("spraying many accounts from one address stops at the address limit; forged X-Forwarded-For does not help", async () => {
    const answers = []
    for (let i = 0; i < 45; i++) answers.push(outcome(await login(server, { username: `target_${rand()}`, password: "Summer2026!" }, `10.9.${i}.1`)))
    expect(answers.filter((a) => a === "invalid").length).toBeLessThanOrEqual(30)
    expect(answers.slice(-15)).toEqual(Array(15).fill("429"))
    expect(outcome(await login(server, { username: owner.username, password: owner.password }, "10.10.10.10"))).toBe("429")
  })
})

describe("registration flood (SQLite)", () => {
  it("registrations are limited per client address (429 with Retry-After), nothing stored or mailed past it", async () => {
    const server = await startServer({ AIGW_REGISTER_MAX_PER_ADDRESS: "3" })
    try {
      const statuses: Array<number> = []
      for (let i = 0; i < 5; i++) {
        const u = `flood_${rand()}`
        const res = await call(server.url, "POST", "/api/avatar/register", { body: { username: u, email: `${u}@example.com`, password: "password 123" } })
        statuses.push(res.status)
        if (res.status === 429) expect(Number(res.headers.get("retry-after"))).toBeGreaterThan(0)
      }
      expect(statuses).toEqual([200, 200, 200, 429, 429])
      expect(fs.readdirSync(path.join(server.dataDir, "data", "mail"))).toHaveLength(3)
    } finally {
      await server.stop()
    }
  })
})

describe("login brute force (SQLite, one trusted proxy)", () => {
  let server: RunningServer
  let victim: TestAvatar
  let mine: TestAvatar

  beforeAll(async () => {
    server = await startServer({ AIGW_TRUST_PROXY: "1", AIGW_LOGIN_MAX_FAILURES_PER_ADDRESS: "30" })
    victim = await signUp(server, "victim")
    mine = await signUp(server, "mine")
  })
  afterAll(async () => {
    await server?.stop()
  })

  it("400 wrong passwords for one account: 10 are checked, the rest get 429 + Retry-After, the right one too, health stays fast", async () => {
    const { figures, value } = await underAttack(server, async () => {
      const answers: Array<Awaited<ReturnType<typeof call>>> = []
      // From many client addresses, so only the per-account limit can stop it.
      for (let i = 0; i < 400; i++) answers.push(await login(server, { username: victim.username, password: `guess ${i}` }, `198.51.100.${i % 200}`))
      return answers
    })
    expect(value.slice(0, 10).map(outcome)).toEqual(Array(10).fill("invalid"))
    expect(value.slice(10).every((r) => r.status === 429 && r.body.isError === true)).toBe(true)
    const retryAfter = Number(value[10]!.headers.get("retry-after"))
    expect(retryAfter).toBeGreaterThan(800)
    expect(retryAfter).toBeLessThanOrEqual(900)
    expect(outcome(await login(server, { email: victim.email, password: victim.password }, "192.0.2.1"))).toBe("429")
    expect(figures.maxHealthMs).toBeLessThan(LOOP_BLOCKED_MS)
  }, 120_000)

  it("an unknown login locks exactly like an existing one", async () => {
    const nobody = `nobody_${rand()}`
    const fixed = []
    for (let i = 0; i < 11; i++) fixed.push(outcome(await login(server, { username: nobody, password: "guess" }, `192.0.2.${60 + i}`)))
    expect(fixed).toEqual([...Array(10).fill("invalid"), "429"])
  })

  it("per client address: interleaving one's own successful logins does not reset the failures; other clients are unaffected", async () => {
    const answers = []
    for (let i = 0; i < 20; i++) {
      answers.push(outcome(await login(server, { username: `target_${rand()}`, password: "Winter2026!" }, "203.0.113.9")))
      answers.push(outcome(await login(server, { username: mine.username, password: mine.password }, "203.0.113.9")))
    }
    // 30 failures allowed per address: 20 guesses went through, with 20 successes in between.
    expect(answers.filter((a) => a === "invalid")).toHaveLength(20)
    for (let i = 0; i < 12; i++) answers.push(outcome(await login(server, { username: `target_${rand()}`, password: "Winter2026!" }, "203.0.113.9")))
    expect(answers.filter((a) => a === "invalid")).toHaveLength(30)
    expect(answers.slice(-2)).toEqual(["429", "429"])
    expect(outcome(await login(server, { username: mine.username, password: mine.password }, "203.0.113.9"))).toBe("429")
    // A forged left entry does not make a new client: the proxy's own entry (rightmost) counts.
    expect(outcome(await login(server, { username: mine.username, password: mine.password }, "1.2.3.4, 203.0.113.9"))).toBe("429")
    expect(outcome(await login(server, { username: mine.username, password: mine.password }, "203.0.113.10"))).toBe("ok")
  })
})

describe.skipIf(!hasPg)("login counters across two processes on one PostgreSQL", () => {
  it("admits exactly 10 failed logins for one account in total", async () => {
    const env = { DATABASE_URL: await freshPgDatabase(), JWT_SECRET: "shared-secret-shared-secret-shared-secret" }
    const servers = [await startServer(env), await startServer(env)]
    try {
      const target = await signUp(servers[0]!, "pgvictim")
      const answers = await Promise.all(
        Array.from({ length: 24 }, (_, i) => login(servers[i % 2]!, { username: target.username, password: `guess ${i}` }))
      )
      expect(answers.filter((a) => outcome(a) === "invalid")).toHaveLength(10)
      expect(answers.filter((a) => a.status === 429)).toHaveLength(14)
    } finally {
      await Promise.all(servers.map((s) => s.stop()))
    }
  }, 180_000)
})
