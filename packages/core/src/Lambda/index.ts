/** The AWS Lambda adapter: event mapping, response streaming and the per-container host. */
export * from "./Events.ts"
export * from "./Host.ts"
export * from "./Streaming.ts"
