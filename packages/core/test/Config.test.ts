/** `GatewayConfig.layer` / `defaults` as JavaScript embedders call them: plain strings for the optional options. */
import { ConfigProvider, Effect, Logger, Option, Redacted } from "effect"
import { describe, expect, it } from "vitest"
import * as GatewayConfig from "../src/Config.ts"

describe("GatewayConfig.defaults", () => {
  it("takes a secret given as a plain string or a Redacted, as the option set to it (a string used to be no secret at all)", () => {
    const secret = "s".repeat(32)
    const plain = GatewayConfig.defaults({ jwtSecret: secret, webhookSecret: Redacted.make("hook"), models: "[]" } as any)
    expect(Option.map(plain.jwtSecret, Redacted.value)).toEqual(Option.some(secret))
    expect(Option.map(plain.webhookSecret, Redacted.value)).toEqual(Option.some("hook"))
    expect(plain.models).toEqual(Option.some("[]"))
    // The typed form is unchanged, and an empty string is unset, as an empty variable is.
    const typed = GatewayConfig.defaults({ jwtSecret: Option.some(Redacted.make(secret)) })
    expect(Option.map(typed.jwtSecret, Redacted.value)).toEqual(Option.some(secret))
    expect(GatewayConfig.defaults({ jwtSecret: "" } as any).jwtSecret).toEqual(Option.none())
  })
})

describe("PUBLIC_URL when it is not set", () => {
  const withEnv = (env: Record<string, string>) => ConfigProvider.fromMap(new Map(Object.entries(env)))
  const publicUrlOf = (env: Record<string, string>) =>
    Effect.runSync(Effect.withConfigProvider(Effect.map(GatewayConfig.fromEnv, (o) => o.publicUrl), withEnv(env)))
  const warnings = (env: Record<string, string>, listens: boolean) => {
    const lines: Array<string> = []
    const logger = Logger.make(({ message }) => lines.push(String(Array.isArray(message) ? message.join(" ") : message)))
    Effect.runSync(GatewayConfig.warnWithoutPublicUrl(listens).pipe(Effect.withConfigProvider(withEnv(env)), Effect.provide(Logger.replace(Logger.defaultLogger, logger))))
    return lines
  }

  // An attack on the configuration's own claims: `http://HOST:PORT` with HOST=::1 was `http://::1:8787`, which
  // no URL parser takes and PUBLIC_URL itself refuses; HOST=0.0.0.0 (the image's) put links to 0.0.0.0 in every mail.
  it("is the listen address as a URL: an IPv6 address in brackets, every interface as localhost", () => {
    expect(publicUrlOf({})).toBe("http://127.0.0.1:8787")
    expect(publicUrlOf({ HOST: "::1", PORT: "9000" })).toBe("http://[::1]:9000")
    expect(publicUrlOf({ HOST: "0.0.0.0" })).toBe("http://localhost:8787")
    expect(publicUrlOf({ HOST: "::" })).toBe("http://localhost:8787")
    expect(publicUrlOf({ HOST: "gw.internal", PUBLIC_URL: "https://gw.example.com/" })).toBe("https://gw.example.com")
    for (const host of ["::1", "::", "0.0.0.0", "fd00::1"]) expect(() => new URL(publicUrlOf({ HOST: host }))).not.toThrow()
    // The node host's "Listening on" line writes its address the same way.
    expect(["::1", "[::1]", "127.0.0.1", "gw.internal"].map(GatewayConfig.urlHost)).toEqual(["[::1]", "[::1]", "127.0.0.1", "gw.internal"])
  })

  it("is warned of where it is no address clients elsewhere reach: a host beyond loopback, and always on Lambda", () => {
    expect(warnings({}, true)).toEqual([])
    expect(warnings({ HOST: "::1" }, true)).toEqual([])
    expect(warnings({ HOST: "0.0.0.0", PORT: "8080" }, true)).toEqual([
      "PUBLIC_URL is not set: links in e-mails and the MCP discovery documents point at http://localhost:8080; set PUBLIC_URL to the address clients use"
    ])
    expect(warnings({}, false)).toHaveLength(1)
    expect(warnings({ HOST: "0.0.0.0", PUBLIC_URL: "https://gw.example.com" }, true)).toEqual([])
    // PORT=0: the port is the system's choice at listen time, after the default was made, on loopback too.
    expect(warnings({ PORT: "0" }, true)).toEqual([
      "PUBLIC_URL is not set: links in e-mails and the MCP discovery documents point at http://127.0.0.1:0 (PORT=0: the port is the one the server listens on, not known before); set PUBLIC_URL to the address clients use"
    ])
    expect(warnings({ PORT: "0", PUBLIC_URL: "http://127.0.0.1:9999" }, true)).toEqual([])
  })
})
