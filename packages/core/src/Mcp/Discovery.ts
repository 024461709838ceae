/**
 * Discovery documents for the MCP endpoint (formats documented in docs/mcp.md):
 * - `/.well-known/mcp.json`: an MCP server card, after the draft "MCP Server Cards" proposal
 *   (SEP-1649/SEP-2127): server info, protocol version, transport and endpoint, authentication,
 *   capabilities and the tools;
 * - `/.well-known/agent.json`: an agent card with the A2A AgentCard fields (name, description,
 *   url, version, capabilities, skills, securitySchemes, security), one skill per tool.
 * URLs are built from the configured PUBLIC_URL, never from the request's Host header.
 */
import * as Tool from "@effect/ai/Tool"
import { Context, Option } from "effect"
import type { GatewayOptions } from "../Config.ts"
import { PROTOCOL_VERSION, SERVER_NAME } from "./Server.ts"
import { GatewayToolkit, Metered, RequiresAuth } from "./Tools.ts"

export const MCP_PATH = "/mcp"

const DESCRIPTION =
  "aigw AI gateway: chat completions routed across many AI providers by plan, cost and health, the model and provider catalogues, cost estimates, usage and quota, and in-process task classification and sentiment analysis."

const tools = () =>
  Object.values(GatewayToolkit.tools).map((t) => ({
    name: t.name,
    title: Option.getOrElse(Context.getOption(t.annotations, Tool.Title), () => t.name),
    description: t.description ?? "",
    requiresAuth: Context.get(t.annotations, RequiresAuth),
    metered: Context.get(t.annotations, Metered)
  }))

const bearer = {
  type: "http",
  scheme: "bearer",
  bearerFormat: "JWT",
  description: "Authorization: Bearer <JWT from POST /api/avatar/authenticate>; an API key (aigw_...) is also accepted as the bearer token."
} as const

const apiKey = {
  type: "apiKey",
  in: "header",
  name: "X-Api-Key",
  description: "An API key from POST /v1/keys."
} as const

/** GET /.well-known/mcp.json */
export const serverCard = (config: Pick<GatewayOptions, "publicUrl" | "version">) => {
  const endpoint = `${config.publicUrl}${MCP_PATH}`
  return {
    name: SERVER_NAME,
    title: "aigw AI gateway",
    version: config.version,
    description: DESCRIPTION,
    protocolVersion: PROTOCOL_VERSION,
    serverInfo: { name: SERVER_NAME, title: "aigw AI gateway", version: config.version },
    endpoint,
    transport: { type: "streamable-http", endpoint, methods: ["POST"], sessions: false, serverInitiatedStream: false },
    authentication: {
      required: false,
      note: "Without credentials only gateway_health works; every other tool answers a tool error saying authentication is required. Invalid credentials are refused with HTTP 401.",
      schemes: ["bearer", "apiKey"],
      securitySchemes: { bearer, apiKey }
    },
    capabilities: { tools: { listChanged: false } },
    tools: tools(),
    documentation: `${config.publicUrl}/docs`
  }
}

/** GET /.well-known/agent.json */
export const agentCard = (config: Pick<GatewayOptions, "publicUrl" | "version">) => ({
  name: "aigw",
  description: `${DESCRIPTION} Served as MCP tools (JSON-RPC 2.0 over HTTP POST, MCP protocol ${PROTOCOL_VERSION}) at the url below.`,
  url: `${config.publicUrl}${MCP_PATH}`,
  version: config.version,
  provider: { organization: "aigw", url: config.publicUrl },
  documentationUrl: `${config.publicUrl}/docs`,
  capabilities: { streaming: false, pushNotifications: false, stateTransitionHistory: false },
  securitySchemes: { bearer, apiKey },
  security: [{ bearer: [] }, { apiKey: [] }],
  defaultInputModes: ["application/json"],
  defaultOutputModes: ["application/json", "text/plain"],
  skills: tools().map((t) => ({
    id: t.name,
    name: t.title,
    description: t.description,
    tags: ["mcp-tool", ...(t.metered ? ["metered"] : []), ...(t.requiresAuth ? [] : ["no-auth"])]
  }))
})
