/** `GatewayConfig.layer` / `defaults` as JavaScript embedders call them: plain strings for the optional options. */
import { Option, Redacted } from "effect"
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
