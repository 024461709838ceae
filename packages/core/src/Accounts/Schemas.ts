/** Field rules of the avatar API, shared by the HTTP payloads and the service. */
import { Schema } from "effect"

export const Username = Schema.String.pipe(
  Schema.pattern(/^[A-Za-z0-9_]{3,32}$/, {
    message: () => "username must be 3 to 32 characters of letters, digits and underscores"
  })
)

// A pragmatic address check: one @, no spaces, a dot in the domain, at most 254 characters.
export const Email = Schema.Trim.pipe(
  Schema.maxLength(254, { message: () => "email must be at most 254 characters" }),
  Schema.pattern(/^[^\s@]+@[^\s@]+\.[^\s@]+$/, { message: () => "email must be a valid e-mail address" })
)

export const Password = Schema.String.pipe(
  Schema.minLength(8, { message: () => "password must be at least 8 characters" }),
  Schema.maxLength(1024, { message: () => "password must be at most 1024 characters" })
)

/** ISO 8601 calendar date (`YYYY-MM-DD`, optionally with a time part). */
export const IsoDate = Schema.String.pipe(
  Schema.filter((s) => /^\d{4}-\d{2}-\d{2}([T ][\d:.]+(Z|[+-]\d{2}:?\d{2})?)?$/.test(s) && !Number.isNaN(Date.parse(s)), {
    message: () => "dob must be an ISO 8601 date such as 1990-04-23"
  })
)

export const AvatarTypeSchema = Schema.Literal("User", "Admin")
