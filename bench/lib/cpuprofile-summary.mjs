/**
 * Summarises a V8 .cpuprofile (node --cpu-prof): self time by function, by package/file, and the
 * inclusive time of chosen "stage" functions. node cpuprofile-summary.mjs FILE [topN]
 */
import * as fs from "node:fs"
import { SourceMap } from "node:module"
import { fileURLToPath } from "node:url"

/** Maps bundle positions back to their source files when a linked .map sits next to the script. */
const mapperFor = () => {
  const maps = new Map()
  return (cf) => {
    const u = cf.url || ""
    if (!u.endsWith(".mjs") && !u.endsWith(".js")) return cf
    if (!maps.has(u)) {
      let sm = null
      try {
        const file = u.startsWith("file:") ? fileURLToPath(u) : u
        if (fs.existsSync(file + ".map")) sm = new SourceMap(JSON.parse(fs.readFileSync(file + ".map", "utf8")))
      } catch {}
      maps.set(u, sm)
    }
    const sm = maps.get(u)
    if (!sm) return cf
    const e = sm.findEntry(cf.lineNumber, cf.columnNumber)
    if (!e || !e.originalSource) return cf
    return { ...cf, url: e.originalSource, lineNumber: e.originalLine }
  }
}

export const summarize = (file, top = 40) => {
  const p = JSON.parse(fs.readFileSync(file, "utf8"))
  const map = mapperFor()
  const byId = new Map(p.nodes.map((n) => [n.id, { ...n, callFrame: map(n.callFrame) }]))
  const self = new Map()
  const dt = p.timeDeltas
  for (let i = 0; i < p.samples.length; i++) self.set(p.samples[i], (self.get(p.samples[i]) ?? 0) + (dt[i] ?? 0))
  const total = [...self.values()].reduce((a, b) => a + b, 0)
  const parent = new Map()
  for (const n of p.nodes) for (const c of n.children ?? []) parent.set(c, n.id)
  const where = (cf) => {
    const u = cf.url || ""
    const m = /node_modules\/((?:@[^/]+\/)?[^/]+)/.exec(u)
    if (m) return m[1] === "effect" || m[1].startsWith("@effect/") ? `${m[1]}/${u.split(m[0])[1].replace(/^\/(src|dist\/esm)\//, "")}` : m[1]
    if (u.includes("/packages/core/src/")) return "core:" + u.split("/packages/core/src/")[1]
    if (u.startsWith("node:")) return u
    return u ? u.split("/").slice(-2).join("/") : `(${cf.functionName || "native"})`
  }
  const fnKey = (cf) => `${cf.functionName || "(anonymous)"} ${where(cf)}:${cf.lineNumber + 1}`
  const agg = (keyOf) => {
    const m = new Map()
    for (const [id, t] of self) {
      const k = keyOf(byId.get(id).callFrame)
      m.set(k, (m.get(k) ?? 0) + t)
    }
    return [...m.entries()].sort((a, b) => b[1] - a[1])
  }
  const pct = (t) => ((100 * t) / total).toFixed(1).padStart(5) + "%"
  const lines = []
  lines.push(`total sampled ${(total / 1000).toFixed(0)} ms`)
  lines.push("", "## self time by package / file")
  for (const [k, t] of agg((cf) => where(cf)).slice(0, top)) lines.push(`${pct(t)}  ${k}`)
  lines.push("", "## self time by function")
  for (const [k, t] of agg(fnKey).slice(0, top)) lines.push(`${pct(t)}  ${k}`)
  // inclusive time: a sample counts for a function when the function is on its stack
  const incl = new Map()
  for (const [id, t] of self) {
    const seen = new Set()
    for (let cur = id; cur !== undefined; cur = parent.get(cur)) {
      const k = fnKey(byId.get(cur).callFrame)
      if (!seen.has(k)) {
        seen.add(k)
        incl.set(k, (incl.get(k) ?? 0) + t)
      }
    }
  }
  const sorted = [...incl.entries()].sort((a, b) => b[1] - a[1])
  lines.push("", "## inclusive time by function")
  for (const [k, t] of sorted.slice(0, top)) lines.push(`${pct(t)}  ${k}`)
  lines.push("", "## inclusive time, aigw source only")
  for (const [k, t] of sorted.filter(([k]) => k.includes(" core:") || k.includes("hosts/")).slice(0, top)) lines.push(`${pct(t)}  ${k}`)
  return lines.join("\n")
}

if (process.argv[2]) console.log(summarize(process.argv[2], Number(process.argv[3] ?? 40)))
