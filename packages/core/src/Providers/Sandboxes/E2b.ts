/**
 * E2B: sandboxes are created through its REST API, but code runs through a process API inside each
 * sandbox, on a host of its own (`https://{port}-{sandboxID}.e2b.app`), spoken by E2B's SDKs
 * (Connect RPC for processes, a streaming code-interpreter endpoint); aigw does not call it.
 */
import type { Served } from "../Served.ts"

/** What aigw serves through E2B: nothing yet, and why. */
export const served: Served = {
  notServed: {
    code: "E2B runs code through a process API inside each sandbox, on the sandbox's own host (https://{port}-{sandboxID}.e2b.app, Connect RPC), not through its REST API; aigw does not speak it yet: name provider riza or daytona for remote code execution"
  }
}
