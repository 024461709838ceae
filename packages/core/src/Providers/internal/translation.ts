/**
 * What the wires that are not OpenAI-compatible (Anthropic, Gemini) share when they translate the
 * neutral request: reading image URLs, the answer schema, and the checks every such wire makes
 * before it refuses a request (docs/providers.md, "Translation across wire formats").
 */
import type { ChatMessage, ChatRequest, ContentPart, ResponseFormat } from "../Chat.ts"
import { argumentsObject, extraFieldOf } from "../Chat.ts"

/** A `data:<type>;base64,<data>` URL's media type and data, or undefined for any other URL. */
export const dataUrlOf = (url: string): { readonly mediaType: string; readonly data: string } | undefined => {
  const m = /^data:([^;,]+);base64,(.*)$/s.exec(url)
  return m ? { mediaType: m[1]!.toLowerCase(), data: m[2]! } : undefined
}

const imageTypes: Readonly<Record<string, string>> = {
  png: "image/png",
  jpg: "image/jpeg",
  jpeg: "image/jpeg",
  webp: "image/webp",
  gif: "image/gif",
  heic: "image/heic",
  heif: "image/heif"
}

/** The image type an http(s) URL's file extension names (`.png` -> image/png), or undefined. */
export const imageTypeOfUrl = (url: string): string | undefined => {
  try {
    const ext = /\.([A-Za-z0-9]+)$/.exec(new URL(url).pathname)?.[1]?.toLowerCase()
    return ext === undefined ? undefined : imageTypes[ext]
  } catch {
    return undefined
  }
}

/** A json_schema format's schema, with the format's description as the schema's when it has none (wires that take only a schema). */
export const answerSchemaOf = (f: ResponseFormat & { type: "json_schema" }): Readonly<Record<string, unknown>> =>
  f.description !== undefined && f.schema.description === undefined ? { ...f.schema, description: f.description } : f.schema

export const hasTools = (r: ChatRequest) => (r.tools?.length ?? 0) > 0

/**
 * Whether the tool choice has to reach the upstream: without tools, "auto" and "none" (and
 * parallel_tool_calls) are honoured by sending nothing; "required" and a named tool are sent so
 * the upstream answers that there is no tool to call.
 */
export const toolChoiceMatters = (r: ChatRequest) => hasTools(r) || (r.toolChoice !== undefined && r.toolChoice !== "auto" && r.toolChoice !== "none")

/** The image parts of a message. */
const imagesOf = (m: ChatMessage) => (m.parts ?? []).filter((p): p is ContentPart & { type: "image" } => p.type === "image")

/**
 * The first thing of a request that a non-OpenAI wire family cannot carry, as the field's name:
 * unmapped OpenAI fields and parts, penalties (0 is their default and is honoured), images where
 * the family takes none (`imageRoles` are the roles that may hold images), data: URLs that are not
 * base64, image `detail` values outside `details`, and a history's tool call whose arguments are no
 * JSON object (these wires send them as an object: `{}` in their place would change the conversation).
 */
export const commonRefusal = (
  r: ChatRequest,
  options: { readonly seed: boolean; readonly penalties: boolean; readonly imageRoles: ReadonlySet<ChatMessage["role"]>; readonly details: ReadonlySet<string> }
): string | undefined => {
  const extra = extraFieldOf(r)
  if (extra !== undefined) return extra
  if (!options.seed && r.seed !== undefined) return "seed"
  if (!options.penalties && r.frequencyPenalty !== undefined && r.frequencyPenalty !== 0) return "frequency_penalty"
  if (!options.penalties && r.presencePenalty !== undefined && r.presencePenalty !== 0) return "presence_penalty"
  for (const m of r.messages) {
    for (const c of m.toolCalls ?? []) {
      if (argumentsObject(c.arguments) === undefined) return `a tool call (${c.id}) whose arguments are not a JSON object`
    }
    for (const image of imagesOf(m)) {
      if (!options.imageRoles.has(m.role)) return `image_url parts in ${m.role} messages`
      if (image.url.startsWith("data:") && dataUrlOf(image.url) === undefined) return "image_url with a data: URL that is not base64"
      if (image.detail !== undefined && !options.details.has(image.detail)) return `image_url.detail "${image.detail}"`
    }
  }
  return undefined
}

/** Every image part of a request. */
export const imagesOfRequest = (r: ChatRequest) => r.messages.flatMap(imagesOf)

/** A tool call's arguments as the object wires that take one send (`commonRefusal` refused arguments that are no JSON object). */
export const toolArgumentsOf = (args: string): Record<string, unknown> => argumentsObject(args) ?? {}

/**
 * Appends blocks to a conversation as a turn of `role`, joining the last turn when it has the same
 * role: wires that alternate user and assistant turns put consecutive tool results in one user turn.
 */
export const pushTurn = <R extends string, B>(turns: Array<{ role: R; content: Array<B> }>, role: R, blocks: ReadonlyArray<B>) => {
  const last = turns[turns.length - 1]
  // One by one: a spread of a message's many blocks would overflow the stack.
  if (last !== undefined && last.role === role) for (const block of blocks) last.content.push(block)
  else turns.push({ role, content: [...blocks] })
}
