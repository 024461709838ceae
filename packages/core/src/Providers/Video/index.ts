/**
 * The asynchronous video upstreams, keyed by provider id (the catalogue's `replicate`, `luma`).
 */
import { luma } from "./Luma.ts"
import { replicate } from "./Replicate.ts"
import type { VideoAdapter } from "./VideoAdapter.ts"

export type { VideoAdapter, VideoPoll, VideoRequest } from "./VideoAdapter.ts"

export const videoAdapters: Record<string, VideoAdapter> = {
  replicate,
  luma
}
