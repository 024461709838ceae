/**
 * Asynchronous video generation upstreams: submit a generation, then poll it until it ends.
 * One small adapter per vendor API (Replicate predictions, Luma Dream Machine, ...).
 */
import { Effect } from "effect"
import type { ConfiguredProvider } from "../../Catalog/Catalog.ts"
import { UpstreamError } from "../UpstreamError.ts"
import { vendorId } from "../internal/vendorId.ts"

export interface VideoRequest {
  readonly prompt: string
  /** Seed image for image-to-video (already checked against SSRF). */
  readonly imageUrl?: string | undefined
  readonly durationSeconds?: number | undefined
  /** `W:H`, e.g. `16:9`. */
  readonly aspectRatio?: string | undefined
  /** Vendor model id; the adapter has a default. */
  readonly model?: string | undefined
}

export type VideoPoll =
  | { readonly status: "pending" | "running" }
  | { readonly status: "succeeded"; readonly videoUrl: string; readonly details: Record<string, unknown> }
  | { readonly status: "failed"; readonly error: string }
  /** Cancelled at the vendor (by its console or API): the job ends `cancelled`, not `failed`. */
  | { readonly status: "cancelled"; readonly error: string }

export interface VideoAdapter {
  /** Starts a generation; returns the upstream's id for it. */
  readonly submit: (provider: ConfiguredProvider, request: VideoRequest) => Effect.Effect<{ readonly upstreamId: string }, UpstreamError>
  readonly poll: (provider: ConfiguredProvider, upstreamId: string) => Effect.Effect<VideoPoll, UpstreamError>
  /** Asks the vendor to stop a job, where its API has a way (the job of a deleted avatar: Jobs/Worker.ts). */
  readonly cancel?: (provider: ConfiguredProvider, upstreamId: string) => Effect.Effect<void, UpstreamError>
  /** The request field the vendor cannot honour, as a refusal naming it (the route answers 400 before any job), or undefined. */
  readonly unsupported?: (provider: ConfiguredProvider, request: VideoRequest) => string | undefined
}

/** The refusal of a request field a vendor cannot honour, naming it and why. */
export const refusal = (provider: string, field: string, why: string) => `${field} is not supported by ${provider}: ${why}`

/** `unsupported`'s refusal at submit time (a job stored before the check): the step fails, nothing is sent. */
const refused = (provider: string, message: string) => new UpstreamError({ provider, kind: "http", status: 400, message, retryable: false })

/** The id a vendor answered a submit with (a usable one: internal/vendorId.ts), or the protocol error naming what is missing (`missing`). */
export const submittedId = (provider: string, id: unknown, missing: string): Effect.Effect<string, UpstreamError> =>
  vendorId(provider, id, missing, "the id of the created job")

/** A vendor's allowed durations: the documented choices, or a range of whole seconds. */
export type DurationSpec = ReadonlyArray<number> | { readonly min: number; readonly max: number }

/** Requested seconds to what the vendor allows: the nearest choice, or clamped to the range. */
export const snapSeconds = (spec: DurationSpec, seconds: number): number =>
  Array.isArray(spec)
    ? (spec as ReadonlyArray<number>).reduce((a, b) => (Math.abs(b - seconds) < Math.abs(a - seconds) ? b : a))
    : Math.min(Math.max(Math.round(seconds), (spec as { min: number }).min), (spec as { max: number }).max)

/** Succeeds when `unsupported` accepts the request, else fails the step with its refusal. */
export const checked = (
  provider: ConfiguredProvider,
  request: VideoRequest,
  unsupported: NonNullable<VideoAdapter["unsupported"]>
): Effect.Effect<void, UpstreamError> => {
  const message = unsupported(provider, request)
  return message === undefined ? Effect.void : Effect.fail(refused(provider.id, message))
}
