/**
 * A prompt's tokens as routing checks them against context windows: the characters while they cannot
 * reach the smallest chat window, else the tokenizer's count. The characters would refuse prose that
 * fits (4 to 5 characters a token); a third of them, the old bound, refused prose that fits and let
 * Chinese that does not (about 2 characters a token) through.
 */
import { Effect, Layer, Option, Redacted } from "effect"
import { describe, expect, it } from "vitest"
import * as Catalog from "../../src/Catalog/Catalog.ts"
import * as GatewayConfig from "../../src/Config.ts"
import * as ProviderHealth from "../../src/Providers/ProviderHealth.ts"
import type { ChatMessage, Target } from "../../src/Providers/Chat.ts"
import * as Routing from "../../src/Routing.ts"
import { countMessages, promptCharacters } from "../../src/Tokens.ts"

const { catalog, routing } = Effect.runSync(
  Effect.provide(
    Effect.all({ routing: Routing.Routing, catalog: Catalog.Catalog }),
    Routing.layer.pipe(
      Layer.provideMerge(Layer.merge(Catalog.layer, ProviderHealth.layer)),
      Layer.provide(GatewayConfig.layer({
        providerEnv: (id) =>
          id === "openai"
            ? { apiKey: Option.some(Redacted.make("key-openai")), baseUrl: Option.some("https://openai.example/v1") }
            : { apiKey: Option.none(), baseUrl: Option.none() }
      }))
    )
  )
)

const window = catalog.models.find((m) => m.id === "gpt-4o-mini")!.contextWindow
const smallest = Math.min(...catalog.models.filter((m) => m.kind === "chat").map((m) => m.contextWindow))
const user = (content: string): ReadonlyArray<ChatMessage> => [{ role: "user", content }]
const repeated = (sentence: string, characters: number) => sentence.repeat(Math.ceil(characters / sentence.length)).slice(0, characters)
const prose = (characters: number) => repeated("The quick brown fox jumps over the lazy dog near the river bank today. ", characters)
const routedTo = (messages: ReadonlyArray<ChatMessage>, model: string) =>
  Effect.runPromise(Effect.map(routing.promptTokens(messages), (tokens) => routing.targets({ provider: "auto", model, plan: "Free", needsTools: false, contextTokens: tokens })))

describe("a prompt's tokens for the context window", () => {
  it("are its characters, without the tokenizer, while they cannot reach the smallest chat window", () => {
    const short = user(prose(1_000))
    expect(routing.promptTokensNow(short)).toBe(promptCharacters(short))
    expect(promptCharacters(user(prose(smallest - 4)))).toBe(smallest)
    expect(routing.promptTokensNow(user(prose(smallest - 4)))).toBe(smallest)
  })

  it("route prose of more characters than the window whose tokens fit it, and refuse one whose tokens do not, naming the count", async () => {
    // 1.4 characters a window's worth: about 0.3 of it in tokens.
    const fits = user(prose(Math.round(window * 1.4)))
    const tokens = await Effect.runPromise(countMessages(fits))
    expect(tokens).toBeLessThan(window / 2)
    expect(await Effect.runPromise(routing.promptTokens(fits))).toBe(tokens)
    // Loaded now: the lane's synchronous count is the same.
    expect(routing.promptTokensNow(fits)).toBe(tokens)
    const routed = await routedTo(fits, "gpt-4o-mini")
    expect((routed as ReadonlyArray<Target>).map((t) => t.model.id)).toEqual(["gpt-4o-mini"])
    const tooLong = user(prose(window * 7))
    const refused = await routedTo(tooLong, "gpt-4o-mini") as Routing.RoutingError
    const counted = await Effect.runPromise(countMessages(tooLong))
    expect(counted).toBeGreaterThan(window)
    expect(refused.message).toBe(`The request needs about ${counted} tokens; gpt-4o-mini has a context window of ${window}.`)
  })

  it("count Chinese, of about two characters a token, which a third of its characters let through", async () => {
    const chinese = user(repeated("我们的服务今天调用三个模型提供商。", Math.round(window * 2.4)))
    expect(promptCharacters(chinese) / 3).toBeLessThan(window)
    const counted = await Effect.runPromise(routing.promptTokens(chinese))
    expect(counted).toBeGreaterThan(window)
    expect(((await routedTo(chinese, "gpt-4o-mini")) as Routing.RoutingError).message).toMatch(/context window/)
  })
})
