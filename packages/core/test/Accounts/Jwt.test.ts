/** JWT verification, including the cache of verified tokens: it never accepts what jose would refuse. */
import { Effect, Layer, Option, Redacted } from "effect"
import * as jose from "jose"
import { afterEach, describe, expect, it, vi } from "vitest"
import * as Jwt from "../../src/Accounts/Jwt.ts"
import { layer as configLayer } from "../../src/Config.ts"

const SECRET = "a test secret that is long enough for HS256 use"
const jwtLayer = (secret = SECRET) => Jwt.layer.pipe(Layer.provide(configLayer({ jwtSecret: Option.some(Redacted.make(secret)) })))
const withJwt = <A>(f: (jwt: Jwt.JwtService) => Effect.Effect<A>, secret?: string) =>
  Effect.runPromise(Effect.flatMap(Jwt.Jwt, f).pipe(Effect.provide(jwtLayer(secret))))

describe("Jwt.verify", () => {
  afterEach(() => {
    vi.useRealTimers()
  })

  it("accepts its own token again and again, and refuses a changed signature after the original was accepted", async () => {
    await withJwt((jwt) =>
      Effect.gen(function*() {
        const { token } = yield* jwt.sign("avatar-1", 42)
        const first = yield* jwt.verify(token)
        const again = yield* jwt.verify(token)
        expect(Option.getOrThrow(first).sub).toBe("avatar-1")
        expect(Option.getOrThrow(first).tva, "the token generation it was signed for").toBe(42)
        expect(again).toEqual(first)
        const [header, payload, signature] = token.split(".")
        const flipped = signature!.slice(0, -2) + (signature!.slice(-2) === "AA" ? "BB" : "AA")
        expect(yield* jwt.verify(`${header}.${payload}.${flipped}`)).toEqual(Option.none())
        // the same claims under another key, and an unsigned token
        const foreign = yield* Effect.promise(() =>
          new jose.SignJWT({ aat: Date.now() }).setProtectedHeader({ alg: "HS256" }).setSubject("avatar-1").setIssuer(Jwt.ISSUER)
            .setAudience(Jwt.AUDIENCE).setIssuedAt().setExpirationTime("1h").sign(new TextEncoder().encode("another secret that is long enough, too"))
        )
        expect(yield* jwt.verify(foreign)).toEqual(Option.none())
        const unsigned = new jose.UnsecuredJWT({ aat: Date.now() }).setSubject("avatar-1").setIssuer(Jwt.ISSUER).setAudience(Jwt.AUDIENCE).setExpirationTime("1h").encode()
        expect(yield* jwt.verify(unsigned)).toEqual(Option.none())
        // the payload of another subject with the original signature
        const otherPayload = Buffer.from(JSON.stringify({ ...jose.decodeJwt(token), sub: "avatar-2" })).toString("base64url")
        expect(yield* jwt.verify(`${header}.${otherPayload}.${signature}`)).toEqual(Option.none())
      })
    )
  })

  it("refuses a verified token once it expires, like a token it never saw", async () => {
    const { token, expiresAt } = await withJwt((jwt) =>
      Effect.gen(function*() {
        const signed = yield* jwt.sign("avatar-1", 0)
        expect(Option.isSome(yield* jwt.verify(signed.token))).toBe(true)
        vi.useFakeTimers({ toFake: ["Date"] })
        vi.setSystemTime((signed.expiresAt - 1) * 1000)
        expect(Option.isSome(yield* jwt.verify(signed.token)), "one second before exp").toBe(true)
        vi.setSystemTime(signed.expiresAt * 1000)
        expect(yield* jwt.verify(signed.token), "at exp (cached)").toEqual(Option.none())
        expect(yield* jwt.verify(signed.token), "again").toEqual(Option.none())
        return signed
      })
    )
    // a fresh verifier (no cache) agrees at the same instant
    vi.useFakeTimers({ toFake: ["Date"] })
    vi.setSystemTime(expiresAt * 1000)
    expect(await withJwt((jwt) => jwt.verify(token))).toEqual(Option.none())
  })

  it("keeps accepting the newest tokens when more than its cache holds were verified", async () => {
    await withJwt((jwt) =>
      Effect.gen(function*() {
        const tokens: Array<string> = []
        for (let i = 0; i < 1100; i++) tokens.push((yield* jwt.sign(`avatar-${i}`, 0)).token)
        for (const t of tokens) expect(Option.isSome(yield* jwt.verify(t))).toBe(true)
        for (const t of [tokens[0]!, tokens[1099]!]) expect(Option.getOrThrow(yield* jwt.verify(t)).sub).toBe(jose.decodeJwt(t).sub)
      })
    )
  })
})
