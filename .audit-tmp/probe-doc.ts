import { Effect } from "effect"
import { parseLocal } from "/work/main/packages/core/src/Capabilities/Documents.ts"
const mode = process.argv[2]!
const sizes = (process.argv[3] ?? "1000000,3000000,10000000").split(",").map(Number)
for (const n of sizes) {
  let s = "", name = "x.txt"
  if (mode === "csv") { s = ",".repeat(n); name = "x.csv" }
  if (mode === "csvrows") { s = "\n".repeat(n); name = "x.csv" }
  if (mode === "json") { s = "[" + "0,".repeat(n / 2 - 1) + "0]"; name = "x.json" }
  if (mode === "jsonobj") { s = "[" + "{},".repeat(n / 3 - 1) + "{}]"; name = "x.json" }
  if (mode === "txt") { s = "a ".repeat(n / 2); name = "x.txt" }
  if (mode === "html") { s = "<".repeat(n); name = "x.html" }
  const file = new File([s], name)
  const t0 = performance.now()
  const r = await Effect.runPromise(parseLocal(file, "a") as any)
  const t1 = performance.now()
  const out = JSON.stringify({ success: true, result: r })
  const t2 = performance.now()
  console.log(`${mode} n=${s.length}: parse ${(t1 - t0).toFixed(0)} ms, response JSON ${(t2 - t1).toFixed(0)} ms (${(out.length / 1e6).toFixed(1)} MB)`)
}
