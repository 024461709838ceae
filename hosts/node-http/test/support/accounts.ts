/** Creates verified avatars through the real API (mail read from the file mailer's folder). */
import * as fs from "node:fs"
import * as path from "node:path"
import { call, type RunningServer } from "./server.ts"

export interface TestAvatar {
  readonly id: string
  readonly username: string
  readonly email: string
  readonly password: string
  readonly token: string
  readonly apiKey: string
  /** The id of `apiKey` (for `DELETE /v1/keys/{id}`). */
  readonly apiKeyId: string
}

/** The token of the latest mail to `email` holding a link to `page` (verify-email, reset-password). */
export const mailedToken = (dataDir: string, email: string, page: "verify-email" | "reset-password" = "verify-email"): string => {
  const dir = path.join(dataDir, "data", "mail")
  const files = fs.readdirSync(dir).sort().reverse()
  const link = new RegExp(`${page}\\?token=([A-Za-z0-9_%-]+)`)
  for (const f of files) {
    const text = fs.readFileSync(path.join(dir, f), "utf8")
    if (text.includes(`To: ${email}`)) {
      const m = link.exec(text)
      if (m) return decodeURIComponent(m[1]!)
    }
  }
  throw new Error(`no ${page} mail for ${email}`)
}

export const signUp = async (server: RunningServer, prefix = "user"): Promise<TestAvatar> => {
  const u = `${prefix}_${Math.random().toString(36).slice(2, 9)}`
  const email = `${u}@example.com`
  const password = "password 123"
  const reg = await call(server.url, "POST", "/api/avatar/register", { body: { username: u, email, password } })
  if (reg.body.isError) throw new Error(`register failed: ${reg.body.message}`)
  await call(server.url, "GET", `/api/avatar/verify-email?token=${encodeURIComponent(mailedToken(server.dataDir, email))}`)
  const auth = await call(server.url, "POST", "/api/avatar/authenticate", { body: { username: u, password } })
  if (auth.body.isError) throw new Error(`authenticate failed: ${auth.body.message}`)
  const key = await call(server.url, "POST", "/v1/keys", { token: auth.body.result.jwtToken, body: { name: "test" } })
  return { id: auth.body.result.id, username: u, email, password, token: auth.body.result.jwtToken, apiKey: key.body.result.key, apiKeyId: key.body.result.id }
}

/** Revokes the key `avatar` signed up with, in its signed-in session (with its jobs when `stopJobs`). */
export const revokeSignUpKey = async (base: string, avatar: TestAvatar, stopJobs = false) => {
  const res = await call(base, "DELETE", `/v1/keys/${avatar.apiKeyId}${stopJobs ? "?stopJobs=true" : ""}`, { token: avatar.token })
  if (res.status !== 200) throw new Error(`revoking the key failed: ${res.status} ${JSON.stringify(res.body)}`)
}

/** Logs in as the bootstrapped admin (server started with adminEnv). */
export const adminEnv = { AIGW_ADMIN_USERNAME: "root_admin", AIGW_ADMIN_EMAIL: "root@example.com", AIGW_ADMIN_PASSWORD: "root password 1" }
export const adminToken = async (server: RunningServer) => {
  const auth = await call(server.url, "POST", "/api/avatar/authenticate", { body: { username: adminEnv.AIGW_ADMIN_USERNAME, password: adminEnv.AIGW_ADMIN_PASSWORD } })
  return auth.body.result.jwtToken as string
}
