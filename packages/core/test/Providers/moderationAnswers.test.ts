/** An OpenAI-format moderation answer's scores are probabilities: anything else is the upstream's protocol error. */
import { Effect, Either, Option, Redacted } from "effect"
import * as http from "node:http"
import type { AddressInfo } from "node:net"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { type ConfiguredProvider, data } from "../../src/Catalog/Catalog.ts"
import { moderate } from "../../src/Providers/OpenAiMedia.ts"

describe("OpenAI-format moderation scores", () => {
  let answer = ""
  let server: http.Server
  let provider: ConfiguredProvider
  beforeAll(async () => {
    server = http.createServer((_req, res) => void res.writeHead(200, { "content-type": "application/json" }).end(answer))
    await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve))
    const entry = data.providers.find((p) => p.id === "openai")!
    provider = { ...entry, endpoint: `http://127.0.0.1:${(server.address() as AddressInfo).port}`, apiKey: Option.some(Redacted.make("k")), configured: true, settings: {}, missing: undefined }
  })
  afterAll(() => void server.close())

  const scored = async (scores: string) => {
    answer = `{"results":[{"flagged":false,"categories":{"violence":false},"category_scores":${scores}}]}`
    return Effect.runPromise(Effect.either(moderate(provider, "omni-moderation-latest", "x")))
  }

  it("are numbers from 0 to 1; 1e400 (Infinity, which reached clients as null) or a negative score is a protocol error", async () => {
    const ok = await scored(`{"violence":0.25}`)
    expect(Either.isRight(ok) && ok.right.categoryScores).toEqual({ violence: 0.25 })
    for (const bad of [`{"violence":1e400}`, `{"violence":-0.5}`, `{"violence":"0.5"}`, `{"violence":null}`]) {
      const failed = await scored(bad)
      expect(Either.isLeft(failed) && failed.left.message, bad).toBe("openai sent an unexpected answer: the score of category violence is not a number from 0 to 1")
    }
  })
})
