/**
 * The node host's entry: serves in this process (server.ts), or with AIGW_WORKERS above 1 supervises
 * that many serving processes (workers.ts). The server's modules load only where they serve
 * (a dynamic import, which the bundle keeps lazy), so the supervisor stays small.
 */
import { superviseWorkers } from "./workers.ts"

if (!superviseWorkers()) await import("./server.ts")
