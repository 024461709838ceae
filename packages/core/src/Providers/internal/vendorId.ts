/**
 * The ids a vendor gives (a job, a file, a prediction, a task, a fine-tuned model's name) as the gateway
 * keeps them and puts them in later request paths: a vendor's answer is untrusted input. An id is at most
 * MAX_VENDOR_ID characters (real ones are UUIDs, `batch_…`, `ft:gpt-4o-mini:org::abc`: tens of
 * characters), holds no control characters, and is not `.` or `..`, which `encodeURIComponent` leaves as
 * they are and a URL reads as "this" or "the parent" path segment. Anything else is escaped where it is used.
 */
import { Effect } from "effect"
import { protocolError, type UpstreamError } from "../UpstreamError.ts"

export const MAX_VENDOR_ID = 256

const CONTROL = /[\u0000-\u001f\u007f]/

/** Whether `v` can be kept and used as a vendor's id. */
export const isVendorId = (v: unknown): v is string =>
  typeof v === "string" && v.length > 0 && v.length <= MAX_VENDOR_ID && v !== "." && v !== ".." && !CONTROL.test(v)

/**
 * The vendor's id `v`, or the protocol error: `missing` when there is none ("the created task has no id"),
 * else one saying that `what` ("the created task's id") is no usable id.
 */
export const vendorId = (provider: string, v: unknown, missing: string, what: string): Effect.Effect<string, UpstreamError> =>
  isVendorId(v)
    ? Effect.succeed(v)
    : Effect.fail(protocolError(
      provider,
      typeof v !== "string" || v.length === 0
        ? missing
        : `${what} is not a usable id (at most ${MAX_VENDOR_ID} characters, no control characters, not "." or "..")`
    ))
