/**
 * A small zip reader for documents that are zip archives (DOCX), which inflates nothing
 * unbounded. The central directory's declared sizes are checked against the limits before
 * anything is inflated; then each entry is inflated (off the event loop) with its declared size
 * as the most zlib may produce, because declared sizes can lie.
 */
import { promisify } from "node:util"
import * as zlib from "node:zlib"

export interface InflateLimits {
  /** Largest total the archive may inflate to (AIGW_MAX_INFLATED_BYTES). */
  readonly maxInflatedBytes: number
  /** Largest inflated/compressed ratio of an entry (AIGW_MAX_INFLATE_RATIO). */
  readonly maxInflateRatio: number
}

/** Entries up to this size are not held to the ratio (small XML parts compress well); the total bound still counts them. */
export const RATIO_FREE_BYTES = 1024 * 1024

/** The archive is malformed or uses a feature this reader does not (encryption, ZIP64, other methods). */
export class BadArchive extends Error {}

/** The archive inflates past a limit; the message names it. */
export class InflateLimitExceeded extends Error {}

interface Entry {
  readonly name: string
  readonly method: number
  readonly compressedSize: number
  readonly size: number
  readonly dataStart: number
}

const EOCD = 0x06054b50
const CENTRAL = 0x02014b50
const LOCAL = 0x04034b50

const inflateRaw = promisify(zlib.inflateRaw) as (data: Buffer, options: zlib.ZlibOptions) => Promise<Buffer>

const entriesOf = (b: Buffer): Map<string, Entry> => {
  const bad = (why: string) => new BadArchive(`not a readable zip archive: ${why}`)
  let eocd = -1
  for (let i = b.length - 22; i >= Math.max(0, b.length - 22 - 0xffff); i--) {
    if (b.readUInt32LE(i) === EOCD) {
      eocd = i
      break
    }
  }
  if (eocd < 0) throw bad("no end of central directory")
  const count = b.readUInt16LE(eocd + 10)
  const offset = b.readUInt32LE(eocd + 16)
  if (count === 0xffff || offset === 0xffffffff) throw bad("ZIP64 is not supported")
  const entries = new Map<string, Entry>()
  let p = offset
  for (let n = 0; n < count; n++) {
    if (p + 46 > b.length || b.readUInt32LE(p) !== CENTRAL) throw bad("broken central directory")
    const flags = b.readUInt16LE(p + 8)
    const method = b.readUInt16LE(p + 10)
    const compressedSize = b.readUInt32LE(p + 20)
    const size = b.readUInt32LE(p + 24)
    const nameLength = b.readUInt16LE(p + 28)
    const local = b.readUInt32LE(p + 42)
    const name = b.toString("utf8", p + 46, p + 46 + nameLength)
    if (compressedSize === 0xffffffff || size === 0xffffffff || local === 0xffffffff) throw bad("ZIP64 is not supported")
    if (flags & 1) throw bad(`${name} is encrypted`)
    if (method !== 0 && method !== 8) throw bad(`${name} uses compression method ${method}`)
    if (method === 0 && compressedSize !== size) throw bad(`${name} is stored with two sizes`)
    if (local + 30 > b.length || b.readUInt32LE(local) !== LOCAL) throw bad(`no local header for ${name}`)
    const dataStart = local + 30 + b.readUInt16LE(local + 26) + b.readUInt16LE(local + 28)
    if (dataStart + compressedSize > b.length) throw bad(`${name} runs past the end`)
    entries.set(name, { name, method, compressedSize, size, dataStart })
    p += 46 + nameLength + b.readUInt16LE(p + 30) + b.readUInt16LE(p + 32)
  }
  return entries
}

/**
 * Opens `bytes` as a zip archive within `limits`: throws BadArchive or InflateLimitExceeded at
 * once when the central directory already says so; `read` inflates one entry.
 */
export const open = (bytes: Buffer, limits: InflateLimits) => {
  const entries = entriesOf(bytes)
  const tooLarge = () => new InflateLimitExceeded(`the archive inflates to more than ${limits.maxInflatedBytes} bytes (AIGW_MAX_INFLATED_BYTES)`)
  let declared = 0
  for (const e of entries.values()) {
    declared += e.size
    if (declared > limits.maxInflatedBytes) throw tooLarge()
    if (e.size > RATIO_FREE_BYTES && e.size > limits.maxInflateRatio * e.compressedSize) {
      throw new InflateLimitExceeded(`${e.name} inflates more than ${limits.maxInflateRatio} times its compressed size (AIGW_MAX_INFLATE_RATIO)`)
    }
  }
  let inflated = 0
  return {
    names: () => [...entries.keys()],
    has: (name: string) => entries.has(name),
    read: async (name: string): Promise<Buffer> => {
      const e = entries.get(name)
      if (!e) throw new BadArchive(`no ${name} in the archive`)
      const data = bytes.subarray(e.dataStart, e.dataStart + e.compressedSize)
      // The declared size (checked above) is the most zlib may produce: a larger entry lied.
      const out = e.method === 0 ? data : await inflateRaw(data, { maxOutputLength: Math.max(1, e.size) }).catch((cause: NodeJS.ErrnoException) => {
        throw cause.code === "ERR_BUFFER_TOO_LARGE"
          ? new InflateLimitExceeded(`${name} inflates past its declared size (limits AIGW_MAX_INFLATED_BYTES, AIGW_MAX_INFLATE_RATIO)`)
          : new BadArchive(`${name} does not inflate: ${cause.message}`)
      })
      if (out.length !== e.size) throw new BadArchive(`${name} does not inflate to its declared size`)
      // The same entry read twice counts twice.
      inflated += out.length
      if (inflated > limits.maxInflatedBytes) throw tooLarge()
      return out
    }
  }
}
