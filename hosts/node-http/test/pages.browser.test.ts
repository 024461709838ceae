/**
 * The two HTML pages people reach from e-mail links, opened in a real browser (Debian's
 * Chromium driven by playwright-core): the verification link and the password-reset form.
 * PUBLIC_URL is the server's own URL, so the mailed links open as they are.
 */
import * as fs from "node:fs"
import * as path from "node:path"
import { type Browser, chromium, type Page } from "playwright-core"
import { scratchDir } from "../../../packages/core/test/support/scratch.ts"
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from "vitest"
import { call, freePort, type RunningServer, startServer } from "./support/server.ts"
import { type MailCatcher, startSmtp } from "./support/smtp.ts"

const chromiumPath = "/usr/bin/chromium"
const hasChromium = fs.existsSync(chromiumPath)
const inCi = !!process.env.CI && process.env.CI !== "false" && process.env.CI !== "0"

if (!hasChromium && !inCi) {
  console.warn(`pages.browser.test.ts: skipped, no Chromium at ${chromiumPath} (in CI this test fails instead).`)
}

describe.skipIf(!hasChromium && !inCi)("e-mail link pages in a browser", () => {
  let server: RunningServer
  let smtp: MailCatcher
  let browser: Browser
  let page: Page
  let pageErrors: Array<string> = []
  const shots = scratchDir("aigw-pages-")
  const u = Math.random().toString(36).slice(2, 8)
  const carol = { username: `carol_${u}`, email: `carol_${u}@example.com`, password: "old password 1" }
  const newPassword = "new password 1"
  const api = (method: string, path: string, options: Parameters<typeof call>[3] = {}) =>
    call(server.url, method, `/api${path}`, options)
  const screenshot = async (name: string) => {
    const file = path.join(shots, `${name}.png`)
    await page.screenshot({ path: file, fullPage: true })
    console.log(`screenshot: ${file}`)
  }

  beforeAll(async () => {
    if (!hasChromium) throw new Error(`CI is set but there is no Chromium at ${chromiumPath}; the browser test cannot run.`)
    smtp = await startSmtp()
    const port = await freePort()
    server = await startServer(
      { PUBLIC_URL: `http://127.0.0.1:${port}`, SMTP_URL: smtp.url, MAIL_FROM: "aigw test <no-reply@aigw.test>" },
      { port }
    )
    browser = await chromium.launch({
      executablePath: chromiumPath,
      headless: true,
      args: ["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run", "--disable-background-networking", "--disable-component-update", "--disable-sync"]
    })
  })
  afterAll(async () => {
    await browser?.close()
    await server?.stop()
    await smtp?.close()
  })
  beforeEach(async () => {
    pageErrors = []
    page = await browser.newPage()
    page.on("pageerror", (e) => pageErrors.push(`pageerror: ${e.message}`))
    page.on("console", (m) => {
      // Chromium asks for /favicon.ico on its own; the gateway has none (404), which is fine
      if (m.type() === "error" && !m.location().url.endsWith("/favicon.ico")) pageErrors.push(`console: ${m.text()} (${m.location().url})`)
    })
  })
  afterEach(async () => {
    await page?.close()
  })

  it("the verification link shows that the address is verified", async () => {
    const res = await api("POST", "/avatar/register", { body: carol })
    expect(res.body.isError).toBe(false)
    const link = smtp.linkIn(await smtp.waitFor(carol.email, /verify/i))
    expect(link.startsWith(`${server.url}/api/avatar/verify-email?token=`)).toBe(true)

    const response = await page.goto(link)
    expect(response?.status()).toBe(200)
    expect(response?.headers()["content-type"]).toMatch(/text\/html/)
    await expect(page.title()).resolves.toBe("E-mail verified · aigw")
    const outcome = page.locator("#outcome")
    expect(await outcome.getAttribute("class")).toBe("ok")
    expect(await outcome.innerText()).toBe("Your e-mail address is verified.")
    expect(await page.locator("#message").innerText()).toContain(carol.email)
    await screenshot("verify-ok")
    expect(pageErrors).toEqual([])

    const login = await api("POST", "/avatar/authenticate", { body: { username: carol.username, password: carol.password } })
    expect(login.body.isError).toBe(false)
  })

  it("a used or bad verification link shows that verification failed", async () => {
    const link = smtp.linkIn(await smtp.waitFor(carol.email, /verify/i))
    const used = await page.goto(link)
    expect(used?.status()).toBe(400)
    expect(await page.locator("#outcome").getAttribute("class")).toBe("err")
    expect(await page.locator("#outcome").innerText()).toBe("Verification failed.")
    expect((await page.locator("#message").innerText()).length).toBeGreaterThan(0)
    await screenshot("verify-used")

    const bogus = await page.goto(`${server.url}/api/avatar/verify-email?token=${encodeURIComponent("<b>bogus</b>")}`)
    expect(bogus?.status()).toBe(400)
    expect(await page.locator("#outcome").getAttribute("class")).toBe("err")
    expect(await page.locator("#outcome").innerText()).toBe("Verification failed.")
    expect(await page.locator("b").count()).toBe(0)
    await screenshot("verify-bogus")
    // Chromium logs the 400 document as a failed resource load; nothing else may fail
    expect(pageErrors.filter((e) => !/status of 400 .*\/api\/avatar\/verify-email\?token=/.test(e))).toEqual([])
  })

  it("the reset link opens a form that rejects mismatched passwords, then resets", async () => {
    const forgot = await api("POST", "/avatar/forgot-password", { body: { email: carol.email } })
    expect(forgot.body.isError).toBe(false)
    const link = smtp.linkIn(await smtp.waitFor(carol.email, /reset your password/i))
    expect(link.startsWith(`${server.url}/api/avatar/reset-password?token=`)).toBe(true)

    const response = await page.goto(link)
    expect(response?.status()).toBe(200)
    expect(response?.headers()["content-type"]).toMatch(/text\/html/)
    await expect(page.locator("h1").innerText()).resolves.toBe("Choose a new password")
    await screenshot("reset-form")

    // mismatched: the server refuses, the page shows its message, the form stays
    await page.fill("#password", newPassword)
    await page.fill("#confirmPassword", "something else 1")
    const [mismatchPost] = await Promise.all([
      page.waitForResponse((r) => r.request().method() === "POST" && r.url() === `${server.url}/api/avatar/reset-password`),
      page.click("#submit")
    ])
    expect(mismatchPost.status()).toBe(400)
    await page.waitForSelector("#outcome.err")
    expect(await page.locator("#outcome").innerText()).toMatch(/do not match/)
    expect(await page.locator("#reset").count()).toBe(1)
    await screenshot("reset-mismatch")

    // matching: success, the form goes away
    await page.fill("#confirmPassword", newPassword)
    const [okPost] = await Promise.all([
      page.waitForResponse((r) => r.request().method() === "POST" && r.url() === `${server.url}/api/avatar/reset-password`),
      page.click("#submit")
    ])
    expect(okPost.status()).toBe(200)
    await page.waitForSelector("#outcome.ok")
    expect(await page.locator("#outcome").innerText()).toBe("Your password was changed. You can sign in now.")
    expect(await page.locator("#reset").count()).toBe(0)
    await screenshot("reset-ok")
    // only the refused mismatch POST (400) may be logged
    expect(pageErrors.filter((e) => !/status of 400 .*\/api\/avatar\/reset-password\)$/.test(e))).toEqual([])

    await smtp.waitFor(carol.email, /password was changed/i)
    const fresh = await api("POST", "/avatar/authenticate", { body: { username: carol.username, password: newPassword } })
    expect(fresh.body).toMatchObject({ isError: false, result: { username: carol.username } })
    const old = await api("POST", "/avatar/authenticate", { body: { username: carol.username, password: carol.password } })
    expect(old.body).toMatchObject({ isError: true, message: "Invalid credentials." })
  })

  it("a used reset link opens on why, without a form; a form left open shows the error when posted", async () => {
    const used = smtp.linkIn(await smtp.waitFor(carol.email, /reset your password/i))
    const opened = await page.goto(used)
    expect(opened?.status()).toBe(422)
    expect(await page.locator("#outcome").innerText()).toBe("Your password was not changed.")
    expect(await page.locator("#message").innerText()).toMatch(/invalid, expired or already used/)
    expect(await page.locator("#reset").count()).toBe(0)
    // A form opened while its link was good, and the link used meanwhile (another tab): posting it says why.
    expect((await api("POST", "/avatar/forgot-password", { body: { email: carol.email } })).body.isError).toBe(false)
    const link = smtp.linkIn(await smtp.waitFor(carol.email, /reset your password/i, 2))
    await page.goto(link)
    expect(await page.locator("#reset").count()).toBe(1)
    const token = new URL(link).searchParams.get("token")
    expect((await api("POST", "/avatar/reset-password", { body: { token, password: newPassword, confirmPassword: newPassword } })).body.isError).toBe(false)
    await page.fill("#password", "another password 2")
    await page.fill("#confirmPassword", "another password 2")
    await page.click("#submit")
    await page.waitForSelector("#outcome.err")
    expect(await page.locator("#outcome").innerText()).toMatch(/invalid, expired or already used/)
    expect(await page.locator("#reset").count()).toBe(1)
    const login = await api("POST", "/avatar/authenticate", { body: { username: carol.username, password: newPassword } })
    expect(login.body.isError).toBe(false)
  })

  it("without JavaScript the form is posted (urlencoded), the password never in a URL, and the reset works", async () => {
    const dave = { username: `dave_${u}`, email: `dave_${u}@example.com`, password: "old password 1" }
    const davesNew = "dave's new password 1"
    expect((await api("POST", "/avatar/register", { body: dave })).body.isError).toBe(false)
    expect((await api("POST", "/avatar/forgot-password", { body: { email: dave.email } })).body.isError).toBe(false)
    const link = smtp.linkIn(await smtp.waitFor(dave.email, /reset your password/i))

    const context = await browser.newContext({ javaScriptEnabled: false })
    try {
      const noJs = await context.newPage()
      const requests: Array<{ method: string; url: string; postData: string | null }> = []
      noJs.on("request", (r) => requests.push({ method: r.method(), url: r.url(), postData: r.postData() }))
      const formPost = (r: { request: () => { method: () => string }; url: () => string }) =>
        r.request().method() === "POST" && r.url() === `${server.url}/api/avatar/reset-password-form`
      expect((await noJs.goto(link))?.status()).toBe(200)
      expect(await noJs.locator("#reset").getAttribute("method")).toBe("post")

      // mismatched: the server answers the form again, with the problem
      await noJs.fill("#password", davesNew)
      await noJs.fill("#confirmPassword", "something else 1")
      const [refused] = await Promise.all([noJs.waitForResponse(formPost), noJs.click("#submit")])
      expect(refused.status()).toBe(400)
      expect(refused.headers()["content-type"]).toMatch(/text\/html/)
      await noJs.waitForLoadState()
      expect(await noJs.locator("#outcome").getAttribute("class")).toBe("err")
      expect(await noJs.locator("#outcome").innerText()).toMatch(/do not match/)
      expect(await noJs.locator("#reset").count()).toBe(1)
      await noJs.screenshot({ path: path.join(shots, "reset-nojs-mismatch.png"), fullPage: true })

      // matching: the password is changed, the page says so
      await noJs.fill("#password", davesNew)
      await noJs.fill("#confirmPassword", davesNew)
      const [done] = await Promise.all([noJs.waitForResponse(formPost), noJs.click("#submit")])
      expect(done.status()).toBe(200)
      expect(done.headers()["cache-control"]).toBe("no-store")
      await noJs.waitForLoadState()
      expect(noJs.url()).toBe(`${server.url}/api/avatar/reset-password-form`)
      await expect(noJs.title()).resolves.toBe("Password changed · aigw")
      expect(await noJs.locator("#outcome").getAttribute("class")).toBe("ok")
      expect(await noJs.locator("#outcome").innerText()).toBe("Your password was changed. You can sign in now.")
      expect(await noJs.locator("#reset").count()).toBe(0)
      await noJs.screenshot({ path: path.join(shots, "reset-nojs-ok.png"), fullPage: true })

      // the passwords went in urlencoded POST bodies, never in a URL
      const posts = requests.filter((r) => r.method === "POST")
      expect(posts).toHaveLength(2)
      expect(posts.every((r) => r.postData?.includes("password=") && r.postData.includes("confirmPassword="))).toBe(true)
      for (const r of requests) {
        expect(r.url).not.toContain(encodeURIComponent(davesNew))
        expect(r.url).not.toContain(davesNew)
        expect(new URL(r.url).searchParams.has("password")).toBe(false)
      }

      // the link is used up: opening it again explains why, without a form to fill in for nothing
      const again = await noJs.goto(link)
      expect(again?.status()).toBe(422)
      expect(await noJs.locator("#outcome").innerText()).toBe("Your password was not changed.")
      expect(await noJs.locator("#message").innerText()).toMatch(/invalid, expired or already used/)
      expect(await noJs.locator("form").count()).toBe(0)
    } finally {
      await context.close()
    }

    await smtp.waitFor(dave.email, /password was changed/i)
    const fresh = await api("POST", "/avatar/authenticate", { body: { username: dave.username, password: davesNew } })
    expect(fresh.body).toMatchObject({ isError: false, result: { username: dave.username } })
    const old = await api("POST", "/avatar/authenticate", { body: { username: dave.username, password: dave.password } })
    expect(old.body).toMatchObject({ isError: true, message: "Invalid credentials." })
  })

  it("the form endpoint answers an incomplete form with a page, other content types with the 400 envelope", async () => {
    const json = await fetch(`${server.url}/api/avatar/reset-password-form`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ token: "t", password: "p", confirmPassword: "p" })
    })
    // an API client gets the envelope of a body it cannot read
    expect(json.status).toBe(400)
    expect(await json.json()).toMatchObject({ isError: true, result: null, message: expect.stringContaining("x-www-form-urlencoded") })
    const missing = await fetch(`${server.url}/api/avatar/reset-password-form`, {
      method: "POST",
      headers: { "content-type": "application/x-www-form-urlencoded" },
      body: "password=long+enough+1&confirmPassword=long+enough+1"
    })
    expect(missing.status).toBe(400)
    expect(await missing.text()).toContain("Your password was not changed.")
  })
})
