/**
 * Asynchronous video generation upstreams: submit a generation, then poll it until it ends.
 * One small adapter per vendor API (Replicate predictions, Luma Dream Machine, ...).
 */
import type { Effect } from "effect"
import type { ConfiguredProvider } from "../../Catalog/Catalog.ts"
import { UpstreamError } from "../UpstreamError.ts"

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

export interface VideoAdapter {
  /** Starts a generation; returns the upstream's id for it. */
  readonly submit: (provider: ConfiguredProvider, request: VideoRequest) => Effect.Effect<{ readonly upstreamId: string }, UpstreamError>
  readonly poll: (provider: ConfiguredProvider, upstreamId: string) => Effect.Effect<VideoPoll, UpstreamError>
}

/** A request field the vendor cannot honour, refused before anything is sent (the job fails with this message). */
export const refused = (provider: string, field: string, why: string) =>
  new UpstreamError({ provider, kind: "http", status: 400, message: `${field} is not supported by ${provider}: ${why}`, retryable: false })

/** A vendor's allowed durations: the documented choices, or a range of whole seconds. */
export type DurationSpec = ReadonlyArray<number> | { readonly min: number; readonly max: number }

/** Requested seconds to what the vendor allows: the nearest choice, or clamped to the range. */
export const snapSeconds = (spec: DurationSpec, seconds: number): number =>
  Array.isArray(spec)
    ? (spec as ReadonlyArray<number>).reduce((a, b) => (Math.abs(b - seconds) < Math.abs(a - seconds) ? b : a))
    : Math.min(Math.max(Math.round(seconds), (spec as { min: number }).min), (spec as { max: number }).max)
