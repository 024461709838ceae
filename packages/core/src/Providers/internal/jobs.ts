/**
 * Polling an upstream's asynchronous job until it ends, once for every adapter that waits on one
 * while the caller waits on its HTTP request (document parsing, image generation): a bounded
 * number of polls, one overall deadline, and a failed job's reason in the error.
 */
import { Effect } from "effect"
import { UpstreamError } from "../UpstreamError.ts"

export type JobState<A> =
  | { readonly status: "running" }
  | { readonly status: "done"; readonly value: A }
  | { readonly status: "failed"; readonly reason: string }

export interface PollLimits {
  /** How long the job may take in all, polls included. */
  readonly deadlineMs: number
  /** The most polls of one job, whatever the poll interval. */
  readonly maxPolls: number
  /** What the job does, for a failure: "parse the document", "generate the images". */
  readonly task: string
  /** What did not happen in time, for a timeout: "finish parsing the document". */
  readonly finish: string
}

/** A job the vendor reports as failed or cancelled, with the vendor's reason. */
export const jobFailed = (provider: string, task: string, reason: string) =>
  new UpstreamError({ provider, kind: "http", message: `${provider} could not ${task}: ${reason}`, retryable: false })

/**
 * Polls `poll` every `pollMs` until the job is done or failed: at most `maxPolls` polls and
 * `deadlineMs` in all, after which it is a timeout (504).
 */
export const pollJob = <A>(provider: string, poll: Effect.Effect<JobState<A>, UpstreamError>, pollMs: number, limits: PollLimits): Effect.Effect<A, UpstreamError> => {
  const polls = Math.max(1, Math.min(limits.maxPolls, Math.ceil(limits.deadlineMs / Math.max(1, pollMs))))
  const timeout = () => new UpstreamError({ provider, kind: "timeout", message: `${provider} did not ${limits.finish} in time`, retryable: false })
  const attempt = (left: number): Effect.Effect<A, UpstreamError> =>
    Effect.flatMap(poll, (state) => {
      switch (state.status) {
        case "done":
          return Effect.succeed(state.value)
        case "failed":
          return Effect.fail(jobFailed(provider, limits.task, state.reason))
        case "running":
          return left <= 1 ? Effect.fail(timeout()) : Effect.zipRight(Effect.sleep(pollMs), attempt(left - 1))
      }
    })
  return attempt(polls).pipe(Effect.timeoutFail({ duration: limits.deadlineMs, onTimeout: timeout }))
}
