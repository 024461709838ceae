/** The MCP server: the gateway toolkit, its handlers, transports and discovery documents. */
export * from "./Discovery.ts"
export { layerHandlers } from "./Handlers.ts"
export * from "./Server.ts"
export * from "./Tools.ts"
