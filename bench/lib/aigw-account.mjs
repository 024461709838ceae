/**
 * Creates the benchmark's caller on a running aigw through its public API, as a user would:
 * register -> verification mail (file mailer: <AIGW_DATA_DIR>/mail/*.eml) -> verify-email ->
 * authenticate (JWT) -> POST /v1/keys. Returns the API key (aigw_...) and the JWT.
 */
import * as fs from "node:fs"
import * as path from "node:path"

const call = async (base, method, route, { body, token } = {}) => {
  const headers = { accept: "application/json" }
  if (body !== undefined) headers["content-type"] = "application/json"
  if (token) headers.authorization = `Bearer ${token}`
  const res = await fetch(base + route, { method, headers, body: body === undefined ? undefined : JSON.stringify(body) })
  const text = await res.text()
  let json
  try {
    json = JSON.parse(text)
  } catch {
    json = undefined
  }
  if (!res.ok || json?.isError) throw new Error(`${method} ${route} -> ${res.status} ${text.slice(0, 300)}`)
  return json
}

const verificationToken = async (dataDir, email) => {
  const dir = path.join(dataDir, "mail")
  for (let i = 0; i < 100; i++) {
    const files = fs.existsSync(dir) ? fs.readdirSync(dir).sort().reverse() : []
    for (const f of files) {
      const text = fs.readFileSync(path.join(dir, f), "utf8")
      const m = text.includes(`To: ${email}`) && /verify-email\?token=([A-Za-z0-9_%-]+)/.exec(text)
      if (m) return decodeURIComponent(m[1])
    }
    await new Promise((r) => setTimeout(r, 50))
  }
  throw new Error(`no verification mail for ${email} under ${dir}`)
}

export const createApiKey = async (base, dataDir) => {
  const username = `bench_${Math.random().toString(36).slice(2, 9)}`
  const email = `${username}@example.com`
  const password = "bench password 1"
  await call(base, "POST", "/api/avatar/register", { body: { username, email, password } })
  const token = await verificationToken(dataDir, email)
  await call(base, "GET", `/api/avatar/verify-email?token=${encodeURIComponent(token)}`)
  const auth = await call(base, "POST", "/api/avatar/authenticate", { body: { username, password } })
  const key = await call(base, "POST", "/v1/keys", { token: auth.result.jwtToken, body: { name: "bench" } })
  return { username, avatarId: auth.result.id, apiKey: key.result.key, jwt: auth.result.jwtToken }
}
