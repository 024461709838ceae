/**
 * A UUIDv7 (RFC 9562): 48 bits of Unix milliseconds, then random bits. Ids of rows written in time
 * order (usage events) then land at the end of their primary-key index instead of on a random page
 * of it, which keeps the pages a write touches few and hot.
 */
export const uuidv7 = (now: number = Date.now()): string => `${uuidv7Floor(now)}-7${crypto.randomUUID().slice(15)}`

/**
 * The time part of the UUIDv7s of millisecond `at`: every one made before `at` sorts below it, every one
 * made at or after it above (fixed-width lower-case hex), so `id < uuidv7Floor(t)` is a range of the
 * primary key's index. A time before 1970 (a retention of a century) is the first id's.
 */
export const uuidv7Floor = (at: number): string => {
  const time = Math.max(0, Math.floor(at)).toString(16).padStart(12, "0")
  // randomUUID's layout: 8-4-4-4-12 hex digits, the version digit at index 14.
  return `${time.slice(0, 8)}-${time.slice(8, 12)}`
}
