/**
 * Resolve conditions for the vitest projects: "@aigw/source" first, so tests import
 * @aigw/core's TypeScript sources (packages/core/src) rather than its build (dist).
 */
import { defaultServerConditions } from "vite"

export const sourceConditions = ["@aigw/source", ...defaultServerConditions]

/** The part of a vitest project config that selects the sources. */
export const resolveSources = {
  resolve: { conditions: sourceConditions },
  ssr: { resolve: { conditions: sourceConditions } }
}
