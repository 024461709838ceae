/**
 * What a wire family or a provider module declares that aigw serves through it, with the code that
 * serves it: the registry (Registry.ts) merges a provider's family with its own module and derives
 * the catalogue's endpoint types from the result, so what /v1/providers lists is what routes run.
 */
import type { Effect } from "effect"
import type { ConfiguredProvider, EndpointType } from "../Catalog/Catalog.ts"
import type { ChatWire, WireRequest } from "./Chat.ts"
import type { DocumentParser } from "./Documents/DocumentParser.ts"
import type { CodeEndpoint } from "./Sandboxes/CodeEndpoint.ts"
import type { EmbeddingWire } from "./Embeddings.ts"
import type { GuardrailsAdapter } from "./Guardrails/GuardrailsAdapter.ts"
import type { ModerationResult } from "./OpenAiMedia.ts"
import type { RerankWire } from "./Rerank.ts"
import type { TranslationAdapter } from "./Translation/TranslationAdapter.ts"
import type { UpstreamError } from "./UpstreamError.ts"
import type { MemoryAdapter } from "./Memory/MemoryAdapter.ts"
import type { VideoAdapter } from "./Video/VideoAdapter.ts"

/** Per-provider differences from the reference OpenAI Chat Completions API. */
export interface Quirks {
  /** Newer OpenAI models reject `max_tokens`. */
  readonly maxTokensField: "max_tokens" | "max_completion_tokens"
  /** Whether `stream_options.include_usage` is understood (some providers reject it, and report usage in the last chunk anyway). */
  readonly streamUsage: boolean
  /** The provider's own name for a standard field, e.g. Mistral's `random_seed` for `seed`. */
  readonly renamed?: Readonly<Record<string, string>>
}

/** A media endpoint in the OpenAI format (OpenAiMedia.ts), with the model used when a request names none. */
export interface OpenAiMediaEndpoint {
  readonly defaultModel: string
}

/** An image generation request as the gateway hands it to a provider's client. */
export interface ImageRequest {
  readonly model: string
  readonly prompt: string
  readonly n: number
  readonly width?: number | undefined
  readonly height?: number | undefined
  /** Further fields of the OpenAI image API (quality, style, response_format, ...), from the OpenAI surface. */
  readonly extra?: Readonly<Record<string, unknown>> | undefined
}

/** One generated image: a URL, or the image itself in base64. */
export interface GeneratedImage {
  readonly url?: string
  readonly b64Json?: string
  readonly revisedPrompt?: string
}

/** The tokens a token-billed image model reports (OpenAI's gpt-image: the prompt's and the images'). */
export interface ImageTokens {
  readonly input: number
  readonly output: number
  /** Of the input, the tokens of images sent with the prompt (edits); the rest is the prompt's text. */
  readonly inputImages: number
}

/** A generation's images, with the tokens its vendor reported, if it reports any. */
export interface GeneratedImages {
  readonly images: ReadonlyArray<GeneratedImage>
  readonly tokens?: ImageTokens
  /**
   * The fields of an OpenAI-format answer the gateway does not model (gpt-image's `background`,
   * `output_format`, `quality`, `size`), as the upstream sent them: both surfaces return them.
   */
  readonly extra?: Readonly<Record<string, unknown>>
}

/**
 * Image generation through a provider: its default model, and its own client when it does not
 * speak the OpenAI format (absent: OpenAiMedia.ts `generateImages`).
 */
export interface ImagesEndpoint extends OpenAiMediaEndpoint {
  /** Generates; asynchronous vendors poll their job every `pollMs` (`AIGW_JOB_POLL_MS`). */
  readonly generate?: (provider: ConfiguredProvider, request: ImageRequest, options: { readonly pollMs: number }) => Effect.Effect<GeneratedImages, UpstreamError>
  /** What the vendor cannot honour in a request, as the refusal naming it (400), or undefined. */
  readonly unsupported?: (request: ImageRequest) => string | undefined
}

/**
 * Text moderation through a provider: its default model, and its own client when it does not
 * speak the OpenAI format (absent: OpenAiMedia.ts `moderate`). A vendor with its own client
 * moderates with the model its account is set up with: a request naming another is refused.
 */
export interface ModerationEndpoint extends OpenAiMediaEndpoint {
  readonly moderate?: (provider: ConfiguredProvider, text: string) => Effect.Effect<ModerationResult, UpstreamError>
}

/** The audio formats of POST /v1/audio/speech (OpenAI's list). */
export type SpeechFormat = "mp3" | "wav" | "opus" | "aac" | "flac" | "pcm"

/** A speech synthesis request as the gateway hands it to a provider's client. */
export interface SpeechRequest {
  readonly model: string
  readonly text: string
  /** The provider's voice id; absent: the provider's default voice. */
  readonly voice?: string | undefined
  readonly format: SpeechFormat
}

/** Synthesised audio: the bytes and their content type. */
export interface SynthesizedSpeech {
  readonly bytes: Uint8Array
  readonly contentType: string
}

/**
 * Speech synthesis through a provider: its default model, and its own client when it does not
 * speak the OpenAI format (absent: OpenAiMedia.ts `synthesize`).
 */
export interface SpeechEndpoint extends OpenAiMediaEndpoint {
  readonly synthesize?: (provider: ConfiguredProvider, request: SpeechRequest) => Effect.Effect<SynthesizedSpeech, UpstreamError>
  /** What the vendor cannot honour in a request, as the refusal naming it (400), or undefined. */
  readonly unsupported?: (request: SpeechRequest) => string | undefined
}

/** A transcription request as the gateway hands it to a provider's client. */
export interface TranscriptionRequest {
  readonly model: string
  readonly file: File
  /** ISO 639-1; absent: the vendor detects the language (or uses its default, as its module says). */
  readonly language?: string | undefined
}

/** A transcript, with the language the vendor reports (detected or the one asked for) when it reports one. */
export interface TranscriptionResult {
  readonly text: string
  readonly language?: string | undefined
}

/**
 * Speech to text through a provider: its default model, and its own client when it does not
 * speak the OpenAI format (absent: OpenAiMedia.ts `transcribe`).
 */
export interface TranscriptionEndpoint extends OpenAiMediaEndpoint {
  /** Transcribes; asynchronous vendors poll their job every `pollMs` (`AIGW_JOB_POLL_MS`). */
  readonly transcribe?: (provider: ConfiguredProvider, request: TranscriptionRequest, options: { readonly pollMs: number }) => Effect.Effect<TranscriptionResult, UpstreamError>
  /** What the vendor cannot honour in a request, as the refusal naming it (400), or undefined. */
  readonly unsupported?: (request: TranscriptionRequest) => string | undefined
}

/** A configuration variable a provider reads beyond `<ID>_API_KEY` and `<ID>_BASE_URL`. */
export interface ProviderSetting {
  /** The variable's full name, e.g. `AWS_REGION`. */
  readonly name: string
  readonly description: string
  /** Hidden in logs and answers (credentials). */
  readonly secret?: boolean
}

/** What a provider's credential check sees: its key and the settings that are set. */
export interface CredentialsView {
  readonly hasApiKey: boolean
  readonly settings: Readonly<Record<string, string>>
}

/** What the engine needs to authorize a request: the provider's key and settings. */
export interface AuthorizeView {
  readonly id: string
  readonly apiKey: string | undefined
  readonly settings: Readonly<Record<string, string>>
}

export interface Served {
  readonly chat?: ChatWire
  readonly embeddings?: EmbeddingWire
  /** Reranking documents against a query (Rerank.ts). */
  readonly rerank?: RerankWire
  readonly images?: ImagesEndpoint
  readonly moderation?: ModerationEndpoint
  readonly speech?: SpeechEndpoint
  readonly transcription?: TranscriptionEndpoint
  /** Asynchronous video generation (submit, then poll). */
  readonly video?: VideoAdapter
  /** An external memory vendor: add texts and search them per user (Memory/MemoryAdapter.ts). */
  readonly memory?: MemoryAdapter
  /** Guardrail checks through the vendor's API (Guardrails/GuardrailsAdapter.ts); `local` runs in-process. */
  readonly guardrails?: GuardrailsAdapter
  /** Translation through the vendor's API (Translation/TranslationAdapter.ts); without it, translation runs on a routed chat model. */
  readonly translate?: TranslationAdapter
  /** Document parsing through the vendor's API (Documents/DocumentParser.ts). */
  readonly documents?: DocumentParser
  /** Running code in the vendor's remote sandbox (Sandboxes/CodeEndpoint.ts), only when a caller names it. */
  readonly code?: CodeEndpoint
  /** The upstream batch API batches are submitted to (otherwise batches run item by item through routing). */
  readonly batchApi?: "openai"
  /** The upstream fine-tuning API (OpenAiJobs.ts). */
  readonly fineTuning?: "openai"
  readonly quirks?: Partial<Quirks>
  /** Variables the provider reads besides its key and base URL (listed in docs/configuration.md, accepted in AIGW_CONFIG). */
  readonly settings?: ReadonlyArray<ProviderSetting>
  /**
   * What is missing before the provider can be called, as the message that says what to set, or
   * undefined. Without it the provider needs `<ID>_API_KEY`; local servers declare none.
   */
  readonly credentials?: (view: CredentialsView, envPrefix: string) => string | undefined
  /**
   * Completes an upstream request's credentials when a key in a header is not enough: signs it
   * (AWS SigV4) or adds an access token fetched and cached from the key (Vertex AI, IBM watsonx).
   */
  readonly authorize?: (provider: AuthorizeView, request: WireRequest, signal: AbortSignal) => Promise<WireRequest>
  /** Why an endpoint type the upstream offers is not served, when there is more to say than "no adapter yet". */
  readonly notServed?: Partial<Record<EndpointType, string>>
}

/** The endpoint types a declaration serves. Batches also run over any chat provider, item by item. */
export const endpointTypesOf = (s: Served): ReadonlyArray<EndpointType> => {
  const types: Array<EndpointType> = []
  if (s.chat) types.push("chat")
  if (s.embeddings) types.push("embeddings")
  if (s.rerank) types.push("rerank")
  if (s.images) types.push("images")
  if (s.video) types.push("video")
  if (s.speech) types.push("speech")
  if (s.transcription) types.push("transcription")
  if (s.moderation) types.push("moderation")
  if (s.translate) types.push("translate")
  if (s.guardrails) types.push("guardrails")
  if (s.memory) types.push("memory")
  if (s.documents) types.push("documents")
  if (s.code) types.push("code")
  if (s.chat || s.batchApi) types.push("batch")
  if (s.fineTuning) types.push("finetune")
  return types
}
