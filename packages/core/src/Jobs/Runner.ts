/**
 * What a job type must provide: `advance` moves a job one step (submit upstream on the first
 * step, poll afterwards). Steps must be safe to repeat: a crash between a step and its save
 * repeats the step after the lease expires.
 */
import type { Effect } from "effect"
import type { GatewayError } from "../Errors.ts"
import type { AvatarRecord } from "../Storage/AvatarStore.ts"
import { shownUpstreamText, type UpstreamError } from "../Providers/UpstreamError.ts"
import type { JobRecord } from "./JobStore.ts"

export type Step =
  /** Not done: save progress and come back after `afterMs`. */
  /** `provider`: the provider that accepted the job at submit (an `auto` job's fallback), kept for its polls. */
  | {
    readonly _tag: "Wait"
    readonly afterMs: number
    readonly upstreamId?: string
    readonly provider?: string
    readonly state?: unknown
    readonly result?: unknown
  }
  | { readonly _tag: "Done"; readonly result: unknown }
  | { readonly _tag: "Failed"; readonly error: string; readonly result?: unknown }
  /** The upstream cancelled the job (docs/webhooks.md: its own terminal state, not a failure). */
  | { readonly _tag: "Cancelled"; readonly error: string; readonly result?: unknown }

export interface JobRunner {
  /** One step of the job of `owner`, an active avatar (the worker stops the jobs of one deleted). */
  readonly advance: (job: JobRecord, owner: AvatarRecord) => Effect.Effect<Step, UpstreamError | GatewayError>
  /**
   * Asks the upstream to stop the job's work, where its vendor has a way (a Batch API batch, a
   * fine-tuning job): called when the job's avatar was deleted while the job ran there (it has an
   * upstream id), before the job ends cancelled.
   */
  readonly stop?: (job: JobRecord) => Effect.Effect<void, UpstreamError | GatewayError>
  /**
   * After the job ended, called once, by the worker whose `finish` ended it, with the job as its last
   * step saw it and how it ended: what the runner still owes, such as the usage records of the calls the
   * quota counted (a video's, a fine-tune's; a batch's items that no upstream answered).
   */
  readonly ended?: (job: JobRecord, status: "completed" | "failed" | "cancelled") => Effect.Effect<void>
}

export const wait = (afterMs: number, extra: Omit<Extract<Step, { _tag: "Wait" }>, "_tag" | "afterMs"> = {}): Step => ({ _tag: "Wait", afterMs, ...extra })
export const done = (result: unknown): Step => ({ _tag: "Done", result })
/**
 * A job that failed, saying why. The reason often quotes a vendor (a failure reason, a batch's
 * errors): it is shown as upstream text is (`shownUpstreamText`: cut at 1,000 characters, credentials
 * redacted), since it is stored, logged, answered on every status poll and sent in the webhook.
 */
export const failed = (error: string, result?: unknown): Step => ({ _tag: "Failed", error: shownUpstreamText(error), ...(result !== undefined ? { result } : {}) })
/** A job its upstream cancelled, saying so (shown as `failed`'s reason is). */
export const cancelled = (error: string, result?: unknown): Step => ({ _tag: "Cancelled", error: shownUpstreamText(error), ...(result !== undefined ? { result } : {}) })
