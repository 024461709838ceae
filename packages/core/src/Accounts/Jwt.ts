/**
 * JWTs with `jose`: HS256 with `JWT_SECRET`, EdDSA with an Ed25519 `JWT_PRIVATE_KEY` (PEM),
 * or, when neither is set, an HS256 secret generated once and kept under the data directory.
 * Verification accepts only the configured algorithm (no `none`, no algorithm confusion).
 */
import { Context, Effect, Layer, Option, Redacted } from "effect"
import * as jose from "jose"
import * as crypto from "node:crypto"
import * as fs from "node:fs"
import * as path from "node:path"
import { GatewayConfig } from "../Config.ts"
import { StartupError, startupError } from "../StartupError.ts"
import { makeDirectory } from "../Directories.ts"

export const ISSUER = "aigw"
export const AUDIENCE = "aigw-api"
export const LIFETIME_SECONDS = 7 * 24 * 60 * 60
/** Verified tokens kept per process (a few hundred bytes each). */
const VERIFIED_MAX = 1024

export interface JwtClaims {
  readonly sub: string
  /** Issue instant in milliseconds, compared with an avatar's tokensValidAfter (iat has only seconds). */
  readonly aat: number
  /**
   * The avatar's tokensValidAfter as read together with the password hash the login checked (its
   * token generation); absent from tokens made before this claim existed.
   */
  readonly tva?: number | undefined
  readonly iat: number
  readonly exp: number
  readonly jti: string
}

export interface JwtService {
  /** `generation`: the avatar's tokensValidAfter read with the credentials this token is issued for. */
  readonly sign: (avatarId: string, generation: number) => Effect.Effect<{ readonly token: string; readonly expiresAt: number }>
  /** None for anything that is not a valid, unexpired token of ours. */
  readonly verify: (token: string) => Effect.Effect<Option.Option<JwtClaims>>
  /** The same as a promise: the claims, or undefined (the fast lane's form, and `verify`'s). */
  readonly claimsOf: (token: string) => Promise<JwtClaims | undefined>
}

export class Jwt extends Context.Tag("aigw/Jwt")<Jwt, JwtService>() {}

interface KeyMaterial {
  readonly alg: "HS256" | "EdDSA"
  readonly signKey: Uint8Array | crypto.KeyObject
  readonly verifyKey: Uint8Array | crypto.KeyObject
}

/**
 * Reads the generated secret under `dataDir`, creating it (mode 0600) on first use. It is written whole
 * under another name and linked into place, which fails if the file exists: a crash mid-write, or another
 * process sharing the directory (the MCP stdio host), never finds it empty or cut short.
 */
const generatedSecret = (dataDir: string): Uint8Array => {
  const file = path.join(dataDir, "jwt-secret")
  makeDirectory(dataDir)
  if (!fs.existsSync(file)) {
    const written = `${file}.${process.pid}.${crypto.randomBytes(6).toString("hex")}.tmp`
    fs.writeFileSync(written, crypto.randomBytes(48).toString("base64url"), { flag: "wx", mode: 0o600 })
    try {
      fs.linkSync(written, file)
    } catch (e) {
      if ((e as NodeJS.ErrnoException).code !== "EEXIST") throw e
    } finally {
      fs.rmSync(written, { force: true })
    }
  }
  const secret = new TextEncoder().encode(fs.readFileSync(file, "utf8").trim())
  if (secret.length < 32) {
    throw startupError(
      `${file} holds ${secret.length} bytes, not the generated secret of 64 (a secret needs at least 32)`,
      `delete it to have a new one generated (tokens signed with the old one stop working), or set JWT_SECRET`
    )
  }
  return secret
}

const keyMaterial = (
  secret: Option.Option<Redacted.Redacted>,
  privateKey: Option.Option<Redacted.Redacted>,
  dataDir: string
): KeyMaterial => {
  if (Option.isSome(privateKey)) {
    let signKey: crypto.KeyObject
    try {
      signKey = crypto.createPrivateKey(Redacted.value(privateKey.value).replace(/\\n/g, "\n"))
    } catch {
      // OpenSSL's own words ("DECODER routines::unsupported") do not say which value or what is expected.
      throw startupError("JWT_PRIVATE_KEY is not a private key in PEM (-----BEGIN PRIVATE KEY-----)", "check JWT_PRIVATE_KEY")
    }
    if (signKey.asymmetricKeyType !== "ed25519") throw startupError("JWT_PRIVATE_KEY must be an Ed25519 private key (PEM)", "check JWT_PRIVATE_KEY")
    return { alg: "EdDSA", signKey, verifyKey: crypto.createPublicKey(signKey) }
  }
  const bytes = Option.isSome(secret)
    ? new TextEncoder().encode(Redacted.value(secret.value))
    : generatedSecret(dataDir)
  if (bytes.length < 32) throw startupError("JWT_SECRET must be at least 32 bytes", "check JWT_SECRET")
  return { alg: "HS256", signKey: bytes, verifyKey: bytes }
}

export const make = Effect.gen(function*() {
  const config = yield* GatewayConfig
  const keys = yield* Effect.try({
    try: () => keyMaterial(config.jwtSecret, config.jwtPrivateKey, config.dataDir),
    catch: (e) => e instanceof StartupError ? e : new Error(`JWT key setup failed: ${(e as Error).message}`)
  }).pipe(Effect.orDie)
  // Tokens already verified, by their full text (signature included): a token's claims never change,
  // so its next presentation skips the signature check, the larger part of a JWT call's CPU
  // (docs/performance.md). Expiry is checked on every use; revocation (the avatar's
  // tokensValidAfter) is Auth's check on every call. Bounded; the oldest entry goes first.
  const verified = new Map<string, JwtClaims>()
  const claimsOf = (token: string): Promise<JwtClaims | undefined> => {
    const known = verified.get(token)
    if (known !== undefined) {
      // jose's rule: expired once `exp` is not after the current second.
      if (known.exp > Math.floor(Date.now() / 1000)) return Promise.resolve(known)
      verified.delete(token)
      return Promise.resolve(undefined)
    }
    return jose
      .jwtVerify(token, keys.verifyKey, { algorithms: [keys.alg], issuer: ISSUER, audience: AUDIENCE })
      .then(({ payload }) => {
        if (typeof payload.sub !== "string" || typeof payload.aat !== "number" || typeof payload.exp !== "number") return undefined
        if (payload.tva !== undefined && typeof payload.tva !== "number") return undefined
        const claims: JwtClaims = { sub: payload.sub, aat: payload.aat, tva: payload.tva, iat: payload.iat ?? 0, exp: payload.exp, jti: String(payload.jti ?? "") }
        if (verified.size >= VERIFIED_MAX) verified.delete(verified.keys().next().value!)
        verified.set(token, claims)
        return claims
      })
      .catch(() => undefined)
  }
  return Jwt.of({
    sign: (avatarId, generation) =>
      Effect.promise(async () => {
        const now = Math.floor(Date.now() / 1000)
        const token = await new jose.SignJWT({ aat: Date.now(), tva: generation })
          .setProtectedHeader({ alg: keys.alg, typ: "JWT" })
          .setSubject(avatarId)
          .setIssuer(ISSUER)
          .setAudience(AUDIENCE)
          .setIssuedAt(now)
          .setExpirationTime(now + LIFETIME_SECONDS)
          .setJti(crypto.randomUUID())
          .sign(keys.signKey)
        return { token, expiresAt: now + LIFETIME_SECONDS }
      }),
    verify: (token) => Effect.map(Effect.promise(() => claimsOf(token)), Option.fromNullable),
    claimsOf
  })
})

export const layer = Layer.effect(Jwt, make)
