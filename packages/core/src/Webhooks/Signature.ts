/** `X-GATEWAY-Signature: sha256=<hex HMAC-SHA256 of the raw body>` and its constant-time check. */
import * as crypto from "node:crypto"

export const sign = (secret: string, body: string | Uint8Array): string =>
  `sha256=${crypto.createHmac("sha256", secret).update(body).digest("hex")}`

export const verify = (secret: string, body: string | Uint8Array, header: string | null | undefined): boolean => {
  if (!header) return false
  const expected = Buffer.from(sign(secret, body))
  const given = Buffer.from(header)
  return given.length === expected.length && crypto.timingSafeEqual(given, expected)
}
