/** Random secrets and their stored form: 32 random bytes, kept only as SHA-256 hashes. */
import * as crypto from "node:crypto"

export const randomToken = (): string => crypto.randomBytes(32).toString("base64url")
export const sha256 = (value: string): string => crypto.createHash("sha256").update(value).digest("hex")
