/**
 * The provider registry: what aigw serves through each catalogued provider, from one declaration
 * per wire family (OpenAiCompatible.ts, Anthropic.ts, Gemini.ts) and per bespoke provider (Voyage.ts,
 * Video/Luma.ts, Video/Replicate.ts), plus the OpenAI-compatible providers' data entries. The
 * catalogue's endpoint types (/v1/providers, routing) are derived here: what the upstream offers
 * (providers.data.ts) and aigw has code to serve. Adding a provider or a capability: see
 * docs/architecture.md.
 */
import { Option, Redacted } from "effect"
import type { ConfiguredProvider, EndpointType, ProviderData } from "../Catalog/Catalog.ts"
import type { WireRequest } from "./Chat.ts"
import type { Cancel } from "./internal/cancel.ts"
import * as Anthropic from "./Anthropic.ts"
import * as Cohere from "./Cohere.ts"
import * as EmbeddingVendors from "./EmbeddingVendors.ts"
import * as Bedrock from "./Bedrock.ts"
import * as Gemini from "./Gemini.ts"
import * as Lakera from "./Guardrails/Lakera.ts"
import * as Patronus from "./Guardrails/Patronus.ts"
import * as Hive from "./Moderation/Hive.ts"
import * as DeepL from "./Translation/DeepL.ts"
import * as Fal from "./Images/Fal.ts"
import * as Leonardo from "./Images/Leonardo.ts"
import * as Recraft from "./Images/Recraft.ts"
import * as Stability from "./Images/Stability.ts"
import * as Letta from "./Memory/Letta.ts"
import * as Mem0 from "./Memory/Mem0.ts"
import * as Supermemory from "./Memory/Supermemory.ts"
import * as Zep from "./Memory/Zep.ts"
import * as LandingAi from "./Documents/LandingAi.ts"
import * as LlamaParse from "./Documents/LlamaParse.ts"
import * as Reducto from "./Documents/Reducto.ts"
import * as Unstructured from "./Documents/Unstructured.ts"
import * as NlpCloud from "./NlpCloud.ts"
import * as OpenAiCompatible from "./OpenAiCompatible.ts"
import * as PageExtractors from "./PageExtractors.ts"
import * as Pinecone from "./Pinecone.ts"
import * as BraintrustExport from "../Observability/Braintrust.ts"
import * as LangfuseExport from "../Observability/Langfuse.ts"
import * as PromptLayerExport from "../Observability/PromptLayer.ts"
import * as Daytona from "./Sandboxes/Daytona.ts"
import * as E2b from "./Sandboxes/E2b.ts"
import * as Riza from "./Sandboxes/Riza.ts"
import { endpointTypesOf, type Served } from "./Served.ts"
import * as CartesiaSpeech from "./Speech/Cartesia.ts"
import * as DeepgramSpeech from "./Speech/Deepgram.ts"
import * as ElevenLabsSpeech from "./Speech/ElevenLabs.ts"
import * as LmntSpeech from "./Speech/Lmnt.ts"
import * as AssemblyAiStt from "./Transcription/AssemblyAi.ts"
import * as CartesiaStt from "./Transcription/Cartesia.ts"
import * as DeepgramStt from "./Transcription/Deepgram.ts"
import * as ElevenLabsStt from "./Transcription/ElevenLabs.ts"
import * as RevAiStt from "./Transcription/RevAi.ts"
import * as SpeechmaticsStt from "./Transcription/Speechmatics.ts"
import * as HeyGen from "./Video/HeyGen.ts"
import * as Kling from "./Video/Kling.ts"
import * as Luma from "./Video/Luma.ts"
import * as Replicate from "./Video/Replicate.ts"
import * as Runway from "./Video/Runway.ts"
import * as Vertex from "./Vertex.ts"
import * as Voyage from "./Voyage.ts"
import * as Watsonx from "./Watsonx.ts"

/** Wire families by the catalogue's `adapter`; "bespoke" serves nothing by itself. */
const families: Readonly<Record<ProviderData["adapter"], Served>> = {
  openai: OpenAiCompatible.family,
  anthropic: Anthropic.family,
  gemini: Gemini.family,
  cohere: Cohere.family,
  bespoke: {}
}

/** Provider modules by provider id: bespoke providers, and the OpenAI-compatible data entries. */
const modules: Readonly<Record<string, Served>> = {
  ...OpenAiCompatible.providers,
  voyage: Voyage.served,
  jina: EmbeddingVendors.jina,
  mixedbread: EmbeddingVendors.mixedbread,
  nomic: EmbeddingVendors.nomic,
  pinecone: Pinecone.served,
  "nlp-cloud": NlpCloud.served,
  tavily: PageExtractors.tavily,
  exa: PageExtractors.exa,
  firecrawl: PageExtractors.firecrawl,
  bedrock: Bedrock.served,
  luma: Luma.served,
  replicate: Replicate.served,
  runway: Runway.served,
  kling: Kling.served,
  heygen: HeyGen.served,
  vertex: Vertex.served,
  watsonx: Watsonx.served,
  unstructured: Unstructured.served,
  llamaparse: LlamaParse.served,
  reducto: Reducto.served,
  landingai: LandingAi.served,
  riza: Riza.served,
  daytona: Daytona.served,
  e2b: E2b.served,
  mem0: Mem0.served,
  zep: Zep.served,
  letta: Letta.served,
  supermemory: Supermemory.served,
  stability: Stability.served,
  fal: Fal.served,
  recraft: Recraft.served,
  leonardo: Leonardo.served,
  lakera: Lakera.served,
  patronus: Patronus.served,
  hive: Hive.served,
  deepl: DeepL.served,
  // Speech-to-text vendors (Transcription/*) and text-to-speech vendors (Speech/*): one entry per vendor with both.
  deepgram: { transcription: DeepgramStt.transcription, speech: DeepgramSpeech.speech },
  assemblyai: { transcription: AssemblyAiStt.transcription },
  speechmatics: { transcription: SpeechmaticsStt.transcription },
  "rev-ai": { transcription: RevAiStt.transcription },
  elevenlabs: { transcription: ElevenLabsStt.transcription, speech: ElevenLabsSpeech.speech },
  cartesia: { transcription: CartesiaStt.transcription, speech: CartesiaSpeech.speech },
  lmnt: { speech: LmntSpeech.speech },
  // Observability vendors: usage exporters, not endpoints (Observability/Exporters.ts).
  langfuse: LangfuseExport.served,
  promptlayer: PromptLayerExport.served,
  braintrust: BraintrustExport.served
}

/** The provider ids that have a module of their own (for the registry's consistency test). */
export const moduleIds = (): ReadonlyArray<string> => Object.keys(modules)

const cache = new Map<string, Served>()

/** What aigw serves through a provider: its family's declaration with its own module over it. */
export const servedBy = (p: Pick<ProviderData, "id" | "adapter">): Served => {
  let served = cache.get(p.id)
  if (served === undefined) cache.set(p.id, (served = { ...families[p.adapter], ...modules[p.id] }))
  return served
}

/** The endpoint types aigw serves through a provider: declared served, and offered by the upstream. */
export const endpointTypes = (p: Pick<ProviderData, "id" | "adapter" | "offers">): ReadonlyArray<EndpointType> =>
  endpointTypesOf(servedBy(p)).filter((t) => p.offers.includes(t))

/**
 * A request with the credentials its provider adds beyond a key header (signatures, access tokens:
 * `Served.authorize`); the authorizer's AbortSignal follows `cancel` (made only for providers that have one).
 */
export const authorize = (provider: ConfiguredProvider, request: WireRequest, cancel: Cancel): Promise<WireRequest> | WireRequest => {
  const authorizer = servedBy(provider).authorize
  if (authorizer === undefined) return request
  const apiKey = Option.isSome(provider.apiKey) ? Redacted.value(provider.apiKey.value) : undefined
  return authorizer({ id: provider.id, apiKey, settings: provider.settings }, request, cancel.signal())
}

const familyNames: Readonly<Record<ProviderData["adapter"], string>> = {
  openai: "the OpenAI-compatible family",
  anthropic: "the Anthropic family",
  gemini: "the Gemini family",
  cohere: "the Cohere family",
  bespoke: "its own API"
}

/**
 * The endpoint types the upstream offers that aigw does not serve through it, each with the
 * reason (what /v1/providers and docs/providers.md say instead of listing them as served).
 */
export const notServed = (p: Pick<ProviderData, "id" | "name" | "adapter" | "offers">): ReadonlyArray<{ readonly type: EndpointType; readonly reason: string }> => {
  const served = new Set(endpointTypesOf(servedBy(p)))
  return p.offers.filter((t) => !served.has(t)).map((type) => ({
    type,
    reason: servedBy(p).notServed?.[type] ??
      `aigw has no adapter for ${p.name}'s ${type} API (${familyNames[p.adapter]}) yet; the upstream offers it`
  }))
}
