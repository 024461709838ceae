/**
 * The MCP registration in process (no transport): decode errors, authentication, quota and
 * error rendering per call, the input schemas clients see, and the discovery documents.
 */
import * as McpServer from "@effect/ai/McpServer"
import { assert, describe, it, layer } from "@effect/vitest"
import { Effect, Layer, Option } from "effect"
import * as GatewayConfig from "../../src/Config.ts"
import { Busy, TooManyRequests, Unauthorized, UpstreamFailed } from "../../src/Errors.ts"
import * as Layers from "../../src/Layers.ts"
import * as Mailer from "../../src/Mail/Mailer.ts"
import * as Mcp from "../../src/Mcp/index.ts"
import { defaultPlanLimits } from "../../src/Plans.ts"
import { type AvatarRecord, AvatarStore } from "../../src/Storage/AvatarStore.ts"

const avatarRecord = (id: string, username: string): AvatarRecord => ({
  id,
  username,
  email: `${username}@example.com`,
  passwordHash: "x",
  title: "Dr",
  description: "",
  image: "",
  dob: null,
  karmaTotal: 0,
  avatarType: "User",
  providerType: "Default",
  plan: "Free",
  emailVerified: true,
  pendingEmail: null,
  isActive: true,
  createdAt: 0,
  updatedAt: 0,
  deletedAt: null,
  tokensValidAfter: 0
})

const TestLayer = Mcp.layerTools.pipe(
  Layer.provideMerge(McpServer.McpServer.layer),
  Layer.provideMerge(Layers.layerMemory),
  Layer.provideMerge(Mailer.layerMemory),
  Layer.provideMerge(GatewayConfig.layer({ planLimits: { ...defaultPlanLimits, Free: 2 }, publicUrl: "https://gw.example.test" }))
)

const call = (name: string, args: Record<string, unknown>, caller?: AvatarRecord | Mcp.McpCaller["Type"]) =>
  Effect.gen(function*() {
    const server = yield* McpServer.McpServer
    const run = server.callTool({ name, arguments: args })
    const provided = caller === undefined
      ? run
      : Effect.provideService(run, Mcp.McpCaller, "resolve" in caller ? caller : { resolve: Effect.succeed(Option.some(caller)) })
    return yield* provided
  })

const text = (r: { readonly content: ReadonlyArray<unknown> }) => (r.content[0] as { text: string }).text

layer(TestLayer)("MCP tool calls", (it) => {
  const alice = avatarRecord("00000000-0000-4000-8000-00000000000a", "alice")
  const bob = avatarRecord("00000000-0000-4000-8000-00000000000b", "bob")

  it.effect("registers exactly the gateway's tools, none of capabilities that do not exist", () =>
    Effect.gen(function*() {
      const server = yield* McpServer.McpServer
      const names = server.tools.map((t) => t.name).sort()
      assert.deepStrictEqual(names, [...Mcp.toolNames].sort())
      assert.strictEqual(names.length, 41)
      assert.includeMembers(names, ["gateway_memory_external_search", "gateway_memory_external_add", "gateway_memory_external_list_providers"])
    }))

  it.effect("answers health without a caller, and 'authentication required' for the rest", () =>
    Effect.gen(function*() {
      const health = yield* call("gateway_health", {})
      assert.isFalse(health.isError)
      assert.strictEqual((health.structuredContent as any).status, "ok")
      for (const name of Mcp.toolNames.filter((n) => n !== "gateway_health")) {
        const r = yield* call(name, name === "gateway_get_model" ? { modelId: "gpt-4o-mini" } : name.startsWith("gateway_ml") ? { text: "hi" } : name === "gateway_estimate_cost" ? { provider: "openai", model: "gpt-4o-mini", promptTokens: 1 } : name === "gateway_complete" ? { messages: [{ role: "user", content: "hi" }] } : {})
        assert.isTrue(r.isError, name)
        assert.match(text(r), /^Authentication required/, name)
        assert.strictEqual((r.structuredContent as any).error.kind, "Unauthorized")
      }
    }))

  it.effect("runs a tool for the caller of that call", () =>
    Effect.gen(function*() {
      const store = yield* AvatarStore
      yield* store.insert(alice)
      yield* store.insert(bob)
      const [a, b] = yield* Effect.all([call("gateway_get_avatar_context", {}, alice), call("gateway_get_avatar_context", {}, bob)], {
        concurrency: 2
      })
      assert.strictEqual((a.structuredContent as any).username, "alice")
      assert.strictEqual((b.structuredContent as any).username, "bob")
      assert.match((a.structuredContent as any).contextBlock, /username alice, title "Dr"; karma 0/)
      assert.strictEqual((a.structuredContent as any).dailyCallLimit, 2)
    }))

  it.effect("turns a decode failure into a tool error naming its first problem", () =>
    Effect.gen(function*() {
      const missing = yield* call("gateway_estimate_cost", { provider: "openai" }, alice)
      assert.isTrue(missing.isError)
      assert.strictEqual(text(missing), "Invalid arguments for gateway_estimate_cost: model: is missing")
      const bounds = yield* call("gateway_complete", { messages: [], temperature: 3 }, alice)
      assert.match(text(bounds), /messages: messages must hold at least one message$/)
      const temperature = yield* call("gateway_complete", { messages: [{ role: "user", content: "hi" }], temperature: 3 }, alice)
      assert.match(text(temperature), /temperature: temperature must be between 0 and 2$/)
      const excess = yield* call("gateway_health", { verbose: true })
      assert.strictEqual(text(excess), "Invalid arguments for gateway_health: this tool takes no arguments (got verbose)")
      const role = yield* call("gateway_complete", { messages: [{ role: "tool", content: "x" }] }, alice)
      assert.match(text(role), /messages\.0\.role: role must be one of system, user, assistant/)
      // The HTTP route's own fields (a twins review: MCP refused an empty provider and routing.useOpenServ, which /v1/complete takes).
      const asHttp = yield* call("gateway_complete", { messages: [{ role: "user", content: "hi" }], provider: "", routing: { useOpenServ: true } }, alice)
      assert.notMatch(text(asHttp), /^Invalid arguments/)
      const preference = yield* call("gateway_complete", { messages: [{ role: "user", content: "hi" }], routing: { preference: "fast" } }, alice)
      assert.match(text(preference), /routing\.preference: routing\.preference must be one of cost, balanced, quality$/)
    }))

  it.effect("admits metered tools against the daily quota and says when it resets", () =>
    Effect.gen(function*() {
      const carol = avatarRecord("00000000-0000-4000-8000-00000000000c", "carol")
      yield* Effect.flatMap(AvatarStore, (s) => s.insert(carol))
      assert.isFalse((yield* call("gateway_ml_sentiment", { text: "great" }, carol)).isError)
      assert.isFalse((yield* call("gateway_ml_classify_task", { text: "write a python script" }, carol)).isError)
      const refused = yield* call("gateway_ml_sentiment", { text: "great" }, carol)
      assert.isTrue(refused.isError)
      assert.match(text(refused), /Daily quota of 2 calls for plan Free is used up; it resets at the next UTC midnight \(\d{4}-\d\d-\d\dT00:00:00\.000Z\)/)
      const error = (refused.structuredContent as any).error
      assert.strictEqual(error.kind, "QuotaExceeded")
      assert.isAbove(error.retryAfterSeconds, 0)
      assert.match(error.resetsAt, /^\d{4}-\d\d-\d\dT00:00:00\.000Z$/)
      // Unmetered tools keep working, and a decode failure costs nothing.
      assert.isFalse((yield* call("gateway_list_models", {}, carol)).isError)
      const usage = yield* call("gateway_get_usage", {}, carol)
      assert.strictEqual((usage.structuredContent as any).dailyCallsUsed, 2)
    }))

  it.effect("renders typed failures of the caller's credentials and hides defects", () =>
    Effect.gen(function*() {
      const invalid = yield* call("gateway_get_usage", {}, { resolve: Effect.fail(new Unauthorized({ message: "Invalid or expired credentials." })) })
      assert.strictEqual(text(invalid), "Invalid or expired credentials.")
      const defect = yield* call("gateway_get_usage", {}, { resolve: Effect.die(new Error("secret detail")) })
      assert.isTrue(defect.isError)
      assert.strictEqual(text(defect), "Internal server error.")
      // As HTTP's 503 with Retry-After (Edge.refusalOfDefect): a database another process kept locked was "Internal".
      const locked = yield* call("gateway_get_usage", {}, { resolve: Effect.die(Object.assign(new Error("database is locked"), { code: "SQLITE_BUSY" })) })
      assert.deepStrictEqual(locked.structuredContent, {
        error: { kind: "Busy", message: "The database is locked by another process; retry shortly.", retryAfterSeconds: 1 }
      })
      const notFound = yield* call("gateway_get_model", { modelId: "no-such-model" }, alice)
      assert.deepStrictEqual(notFound.structuredContent, { error: { kind: "NotFound", message: "Unknown model no-such-model. See GET /v1/models." } })
    }))

  it.effect("answers an unknown tool with a protocol error", () =>
    Effect.gen(function*() {
      const r = yield* Effect.flip(call("gateway_no_such_tool", {}, alice))
      assert.strictEqual(r._tag, "InvalidParams")
    }))
})

describe("tool errors", () => {
  // An attack review: MCP kept its own copy of HTTP's refusal headers and dropped the waits it did not list.
  it("say when to retry wherever HTTP's Retry-After would: a busy gateway, an upstream's own wait", () => {
    const structured = (e: Parameters<typeof Mcp.gatewayErrorResult>[0]) => Mcp.gatewayErrorResult(e).structuredContent
    assert.deepStrictEqual(structured(new Busy({ message: "The gateway is shutting down.", retryAfterSeconds: 1 })), {
      error: { kind: "Busy", message: "The gateway is shutting down.", retryAfterSeconds: 1 }
    })
    assert.deepStrictEqual(structured(new UpstreamFailed({ message: "openai answered HTTP 429", provider: "openai", status: 429, retryAfterSeconds: 20 })), {
      error: { kind: "UpstreamFailed", message: "openai answered HTTP 429", retryAfterSeconds: 20, provider: "openai" }
    })
    assert.deepStrictEqual(structured(new UpstreamFailed({ message: "openai answered HTTP 500", provider: "openai", status: 500 })), {
      error: { kind: "UpstreamFailed", message: "openai answered HTTP 500", provider: "openai" }
    })
    const limited = structured(new TooManyRequests({ message: "slow down", retryAfterSeconds: 30 })) as any
    assert.strictEqual(limited.error.retryAfterSeconds, 30)
    assert.match(limited.error.resetsAt, /^\d{4}-\d\d-\d\dT/)
  })
})

describe("input schemas and discovery", () => {
  it("every tool takes a closed object without refinement titles", () => {
    for (const tool of Object.values(Mcp.GatewayToolkit.tools)) {
      const schema = Mcp.inputSchemaOf(tool) as any
      assert.strictEqual(schema.type, "object", tool.name)
      assert.strictEqual(schema.additionalProperties, false, tool.name)
      assert.notMatch(JSON.stringify(schema), /"title":"[A-Za-z]+\(/, tool.name)
      assert.isAbove(tool.description?.length ?? 0, 40, tool.name)
    }
  })

  it("describes the HTTP endpoint from PUBLIC_URL with every tool", () => {
    const config = { publicUrl: "https://gw.example.test", version: "9.9.9" }
    const card = Mcp.serverCard(config)
    assert.strictEqual(card.endpoint, "https://gw.example.test/mcp")
    assert.strictEqual(card.transport.type, "streamable-http")
    assert.deepStrictEqual(card.tools.map((t) => t.name), [...Mcp.toolNames])
    assert.deepStrictEqual(card.tools.filter((t) => t.metered).map((t) => t.name).sort(), [
      "gateway_complete",
      "gateway_embed",
      "gateway_fahrn_dispatch",
      "gateway_fahrn_evolve_agent_skill",
      "gateway_fahrn_solve",
      "gateway_generate_image",
      "gateway_memory_external_add",
      "gateway_memory_external_search",
      "gateway_memory_propagate",
      "gateway_memory_propagate_up",
      "gateway_memory_record",
      "gateway_ml_classify_task",
      "gateway_ml_sentiment",
      "gateway_orchestrate_conversation",
      "gateway_orchestrate_crew",
      "gateway_orchestrate_graph_node",
      "gateway_orchestrator_invoke",
      "gateway_rerank"
    ])
    assert.deepStrictEqual(card.tools.filter((t) => !t.requiresAuth).map((t) => t.name), ["gateway_health"])
    const agent = Mcp.agentCard(config)
    assert.strictEqual(agent.url, "https://gw.example.test/mcp")
    assert.strictEqual(agent.version, "9.9.9")
    assert.deepStrictEqual(agent.skills.map((s) => s.id), [...Mcp.toolNames])
    assert.deepStrictEqual(Object.keys(agent.securitySchemes).sort(), ["apiKey", "bearer"])
  })
})
