/**
 * Asynchronous video generation upstreams: submit a generation, then poll it until it ends.
 * One small adapter per vendor API (Replicate predictions, Luma Dream Machine, ...).
 */
import type { Effect } from "effect"
import type { ConfiguredProvider } from "../../Catalog/Catalog.ts"
import type { UpstreamError } from "../UpstreamError.ts"

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
