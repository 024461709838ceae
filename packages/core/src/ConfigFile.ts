/**
 * `AIGW_CONFIG`: a JSON file `{ "NAME": "value" }` holding any configuration variable. The
 * environment wins over the file. Hosts pass the path; core never reads process.env.
 */
import { ConfigProvider, Layer } from "effect"
import * as fs from "node:fs"

export const providerFor = (path: string | undefined): ConfigProvider.ConfigProvider => {
  const env = ConfigProvider.fromEnv()
  if (!path) return env
  let parsed: unknown
  try {
    parsed = JSON.parse(fs.readFileSync(path, "utf8"))
  } catch (e) {
    throw new Error(`AIGW_CONFIG: cannot read ${path}: ${(e as Error).message}`)
  }
  if (typeof parsed !== "object" || parsed === null || Array.isArray(parsed)) {
    throw new Error(`AIGW_CONFIG: ${path} must hold a JSON object of NAME -> value`)
  }
  const entries = Object.entries(parsed).map(([k, v]) => [k, typeof v === "string" ? v : JSON.stringify(v)] as const)
  return ConfigProvider.orElse(env, () => ConfigProvider.fromMap(new Map(entries)))
}

export const layer = (path: string | undefined) => Layer.setConfigProvider(providerFor(path))
