/** Field rules of the avatar API, shared by the HTTP payloads and the service. */
import { Effect, Schema } from "effect"
import { BadRequest } from "../Errors.ts"

export const Username = Schema.String.pipe(
  Schema.pattern(/^[A-Za-z0-9_]{3,32}$/, {
    message: () => "username must be 3 to 32 characters of letters, digits and underscores"
  })
)

// Characters of a dot-atom (RFC 5322 atext), letters and digits of any script included (RFC 6531).
const atom = "[A-Za-z0-9!#$%&'*+/=?^_`{|}~\\p{L}\\p{M}\\p{N}-]+"
// A domain label: letters and digits, hyphens only inside.
const label = "[\\p{L}\\p{M}\\p{N}](?:[\\p{L}\\p{M}\\p{N}-]*[\\p{L}\\p{M}\\p{N}])?"
/**
 * A mailbox as mail servers deliver it: a dot-atom local part (no leading, trailing or double dots,
 * no quotes, brackets or angle brackets) and a domain of at least two labels whose last is not all
 * digits (no address literals such as `[127.0.0.1]`).
 */
const MAILBOX = new RegExp(`^${atom}(?:\\.${atom})*@(?:${label}\\.)+(?=[\\p{L}\\p{M}\\p{N}-]*[\\p{L}\\p{M}])${label}$`, "u")

export const Email = Schema.Trim.pipe(
  Schema.maxLength(254, { message: () => "email must be at most 254 characters" }),
  Schema.pattern(MAILBOX, { message: () => "email must be a valid e-mail address" }),
  // RFC 5321's limit: mail servers refuse a longer local part, so its links would never arrive.
  Schema.filter((e) => e.lastIndexOf("@") <= 64, { message: () => "email's part before the @ must be at most 64 characters" })
)

/** A text's length in characters (code points): "😀" is one, not the two UTF-16 units `length` counts. */
const charactersIn = (text: string) => {
  let n = 0
  for (const _ of text) n++
  return n
}

/** What is wrong with a secret field's value, told by its type and length only. */
const secretProblem = (field: string, value: unknown, minLength: number, maxLength: number) =>
  typeof value !== "string"
    ? `${field} must be a string`
    : charactersIn(value) < minLength
    ? `${field} must be at least ${minLength} characters`
    : `${field} must be at most ${maxLength} characters`

/**
 * A secret field (a password, a token): a string of `minLength` to `maxLength` characters whose
 * problems name the field and the rule only. The schema library's own messages quote the value sent
 * (`actual "…"`), whatever its type, so one message overrides every one of them.
 */
export const secretString = (field: string, minLength: number, maxLength: number) =>
  Schema.String.pipe(Schema.filter((s) => {
    // The UTF-16 length bounds the count first: a huge text is not walked.
    if (s.length > maxLength * 2) return false
    const n = charactersIn(s)
    return n >= minLength && n <= maxLength
  })).annotations({
    message: (issue) => ({ message: secretProblem(field, issue.actual, minLength, maxLength), override: true })
  })

/** A new password (register, reset). */
export const Password = secretString("password", 8, 1024)

/** ISO 8601 `YYYY-MM-DD` that names a day of the calendar (no February 30th). */
const isCalendarDate = (s: string) => {
  const [year, month, day] = s.slice(0, 10).split("-").map(Number) as [number, number, number]
  const date = new Date(0)
  date.setUTCFullYear(year, month - 1, day)
  return date.getUTCFullYear() === year && date.getUTCMonth() === month - 1 && date.getUTCDate() === day
}

/** ISO 8601 calendar date (`YYYY-MM-DD`, optionally with a time part). */
/** The earliest year a date of birth may name. */
const EARLIEST_BIRTH_YEAR = 1850

/** Whether a date's day (its first ten characters) is one a living person was born on: from 1850 to today (UTC, a day's grace for time zones). */
const isBirthDay = (s: string) => {
  const day = s.slice(0, 10)
  const tomorrow = new Date(Date.now() + 86_400_000).toISOString().slice(0, 10)
  return Number(day.slice(0, 4)) >= EARLIEST_BIRTH_YEAR && day <= tomorrow
}

export const IsoDate = Schema.String.pipe(
  Schema.filter(
    (s) => /^\d{4}-\d{2}-\d{2}([T ][\d:.]+(Z|[+-]\d{2}:?\d{2})?)?$/.test(s) && isCalendarDate(s) && !Number.isNaN(Date.parse(s)) && isBirthDay(s),
    { message: () => `dob must be an ISO 8601 date of birth such as 1990-04-23, from ${EARLIEST_BIRTH_YEAR} to today` }
  )
)

/**
 * Whether a profile image is what the spec says it is, a URL or a base64 image: an http(s) URL, a
 * `data:image/…;base64,` URL, base64 text, a relative URL, or "" (none). What other avatars' clients
 * would run or show as markup is refused: another scheme (`javascript:`, `vbscript:`, `data:text/html`),
 * angle brackets, quotes and control characters.
 */
const isImage = (s: string) => {
  // Read as a browser reads a URL: tabs and line breaks anywhere are taken out (base64 may wrap its lines).
  const url = s.replace(/[\t\r\n]/g, "")
  if (url === "") return true
  if (/[\s<>"'`\\\u0000-\u001f\u007f]/.test(url)) return false
  const scheme = /^([a-z][a-z0-9+.-]*):/i.exec(url)?.[1]?.toLowerCase()
  // No scheme: a relative URL or base64 text, with no colon before its first slash (that would be read as a
  // scheme) and no character reference (`javascript&colon;…` is a scheme once markup decodes it).
  if (scheme === undefined) return !/^[^/]*:/.test(url) && !url.includes("&")
  if (scheme === "http" || scheme === "https") return URL.canParse(url) && /^https?:\/\/[^/?#]/i.test(url)
  // Raster images only: an SVG is a document that can carry script.
  return /^data:image\/(png|jpeg|jpg|gif|webp|avif|bmp|x-icon|vnd\.microsoft\.icon);base64,[A-Za-z0-9+/]*={0,2}$/i.test(url)
}

export const ImageField = Schema.String.pipe(
  Schema.maxLength(2_000_000),
  Schema.filter(isImage, { message: () => "image must be an http(s) URL, a relative URL, a data:image/…;base64, URL or base64 text" })
)

export const AvatarTypeSchema = Schema.Literal("User", "Admin")

const Uuid = Schema.UUID.annotations({ message: () => "id must be a UUID" })

/**
 * An id as it is stored (avatars, API keys, jobs: UUIDs in lower case), for an id a client sent: a UUID's hex
 * digits name the same id in either case (RFC 9562), so every lookup and comparison of a sent id goes through here.
 */
export const storedId = (id: string) => id.toLowerCase()

/**
 * A path's `:id` (an avatar, an API key): a UUID, else 400 before anything is looked up; as stored (`storedId`).
 */
export const idParam = (id: string | undefined) =>
  Schema.decodeUnknown(Uuid)(id).pipe(
    Effect.map(storedId),
    Effect.mapError(() => new BadRequest({ message: "Path parameter id must be a UUID." }))
  )
