/**
 * Markdown report of a results directory written by bench/run.mjs: medians over rounds (peak RSS:
 * the maximum), ratios against the bare proxy and Portkey, the issue's targets (all of the chat scenario),
 * the scenarios side by side (chat, jwt, embeddings, translate) with before -> after when "-before" targets ran, per-stage costs.
 * Also writes summary.json.   node bench/lib/summarize.mjs bench/results/<run>
 */
import * as fs from "node:fs"
import * as path from "node:path"
import { fileURLToPath } from "node:url"

const median = (xs) => {
  const s = xs.filter((x) => typeof x === "number" && Number.isFinite(x)).sort((a, b) => a - b)
  if (!s.length) return null
  const m = s.length >> 1
  return s.length % 2 ? s[m] : (s[m - 1] + s[m]) / 2
}
const max = (xs) => {
  const s = xs.filter((x) => typeof x === "number" && Number.isFinite(x))
  return s.length ? Math.max(...s) : null
}
const fx = (x, d = 2) => (x == null ? "n/a" : Number(x).toFixed(d))
const fi = (x) => (x == null ? "n/a" : Math.round(x).toLocaleString("en-US"))
const ratio = (a, b) => (a == null || b == null || b === 0 ? null : a / b)

export const report = (dir) => {
  // rows of runs before scenarios existed are the chat scenario
  const rows = fs.readFileSync(path.join(dir, "raw.jsonl"), "utf8").split("\n").filter(Boolean).map((l) => ({ scenario: "chat", ...JSON.parse(l) }))
  const meta = JSON.parse(fs.readFileSync(path.join(dir, "meta.json"), "utf8"))
  const targets = meta.targets
  const loads = rows.filter((r) => r.kind === "load")
  const configs = [...new Set(loads.map((r) => `${r.mode}:${r.conns}`))]
  const scenarios = meta.scenarios ?? ["chat"]
  const stat = (t, cfg, scenario = "chat") => {
    const [mode, c] = cfg.split(":")
    const rs = loads.filter((r) => r.target === t && r.scenario === scenario && r.mode === mode && String(r.conns) === c)
    if (!rs.length) return null
    return {
      target: t, scenario, mode, conns: Number(c), runs: rs.length,
      rps: median(rs.map((r) => r.rps)), p50: median(rs.map((r) => r.p50_ms)), p90: median(rs.map((r) => r.p90_ms)),
      p99: median(rs.map((r) => r.p99_ms)), cpu: median(rs.map((r) => r.cpu_us_per_req)), db: median(rs.map((r) => r.db_cpu_us_per_req)),
      peak: max(rs.map((r) => r.peak_rss_kb)), errors: rs.reduce((s, r) => s + r.errors, 0), non2xx: rs.reduce((s, r) => s + r.non2xx, 0),
      rounds: rs.map((r) => Math.round(r.rps))
    }
  }
  const streams = rows.filter((r) => r.kind === "stream")
  const sstat = (t, variant, scenario = "chat") => {
    const rs = streams.filter((r) => r.target === t && r.scenario === scenario && r.variant === variant)
    if (!rs.length) return null
    return {
      headers: median(rs.map((r) => r.headers_p50_ms)), ttfb: median(rs.map((r) => r.ttfb_p50_ms)), ttfb90: median(rs.map((r) => r.ttfb_p90_ms)),
      ttft: median(rs.map((r) => r.ttft_p50_ms)), total: median(rs.map((r) => r.total_p50_ms)), failed: rs.reduce((s, r) => s + (r.failed ?? 0), 0)
    }
  }
  const peakOf = (t) => max(loads.filter((r) => r.target === t).map((r) => r.peak_rss_kb))
  const cpuCell = (s) => (s == null ? "n/a" : s.db != null ? `${fx(s.cpu, 0)} + ${fx(s.db, 0)} db` : fx(s.cpu, 0))
  const summary = { meta, load: [], stream: [], ratios: [], targets: [], stages: rows.filter((r) => r.kind === "stages"), usage: rows.filter((r) => r.kind === "usage") }
  const out = []
  const v = meta.versions
  out.push(`### Run of ${meta.date.slice(0, 16).replace("T", " ")} UTC`)
  out.push("")
  out.push(`- Machine: ${meta.machine.ncpu} vCPU (${meta.machine.cpu}), ${meta.machine.memory_gb} GB, Linux ${meta.machine.kernel}; load average at start ${meta.loadavg_start.split(" ").slice(0, 3).join(" ")}, at end ${(meta.loadavg_end ?? "?").split(" ").slice(0, 3).join(" ")}.`)
  out.push(`- Versions: Node ${meta.node}; aigw ${v.aigw} (${v.aigw_commit}, ${v.aigw_worktree}; ${v.aigw_runner === "bundle" ? "esbuild bundle of hosts/node-http" : v.aigw_runner === "tsx" ? "run through tsx" : v.aigw_runner}) on Effect ${v.effect}, @effect/platform-node ${v["@effect/platform-node"]}; @portkey-ai/gateway ${v["@portkey-ai/gateway"]} (hono ${v.hono}, @hono/node-server ${v["@hono/node-server"]}); PostgreSQL ${v.postgresql ?? "n/a"}; wrk ${v.wrk}.`)
  out.push(`- Load: wrk, 1 thread, closed loop, keep-alive; ${meta.config.rounds} interleaved rounds of ${meta.config.duration} s per run after ${meta.config.warmup} s of warm-up${meta.config.restart ? ", a fresh process of each aigw target per round (RESTART=1)" : ""}. Pinning: ${meta.pinning ? `client on CPU ${meta.pinning.client}; mock upstream and gateways on CPU ${meta.pinning.servers}; PostgreSQL on CPU ${meta.pinning.pg ?? meta.pinning.servers}` : "off"}.`)
  out.push(`- Command: \`${meta.command}\``)
  if (meta.config.nodeFlags) out.push(`- aigw's node options: ${meta.config.nodeFlags.length ? `\`${meta.config.nodeFlags.join(" ")}\`` : "none"}${/AIGW_BEFORE_NODE_FLAGS=/.test(meta.command) ? " (the -before targets: see the command)" : ""}.`)
  out.push("")
  out.push("Medians over rounds; peak RSS is the maximum over all runs (VmHWM, reset before each run). CPU/req is the target process's CPU per request " +
    "(for `direct` the mock's own; for aigw-pg plus the PostgreSQL backends' CPU, shown as `+ db`). TTFB: sequential streamed requests, time to the first `data:` line; " +
    "TTFT: to the first line with content (paced: the upstream waits 5 ms between events, so a gateway that folds the empty role chunk into the first content chunk shows one pause more in TTFB).")
  out.push("")
  if (scenarios.length > 1 || scenarios[0] !== "chat") out.push("This table, the ratios and the targets are of the chat scenario (API key, `POST /openai/v1/chat/completions`); the scenarios side by side follow them.", "")
  const col = (cfg) => configs.includes(cfg)
  const head = ["target"]
  if (col("json:1")) head.push("json c=1 RPS / p50 ms")
  if (col("json:16")) head.push("json c=16 RPS / p50 / p99 ms")
  if (col("json:64")) head.push("json c=64 RPS / p50 / p99 ms")
  for (const c of configs.filter((c) => c.startsWith("sse:"))) head.push(`stream c=${c.split(":")[1]} RPS / p50 / p99 ms`)
  head.push("CPU µs/req (json c=16)", "peak RSS MB", "stream TTFB p50 ms", "paced TTFT / total ms")
  out.push(`| ${head.join(" | ")} |`)
  out.push(`|${head.map((_, i) => (i === 0 ? "---" : "---:")).join("|")}|`)
  for (const t of targets) {
    const cells = [t]
    for (const cfg of configs) {
      const s = stat(t, cfg)
      if (s) summary.load.push(s)
      if (!s) cells.push("n/a")
      else if (cfg === "json:1") cells.push(`${fi(s.rps)} / ${fx(s.p50)}`)
      else cells.push(`${fi(s.rps)} / ${fx(s.p50)} / ${fx(s.p99)}`)
    }
    const b = sstat(t, "burst")
    const p = sstat(t, "paced")
    summary.stream.push({ target: t, burst: b, paced: p })
    cells.push(cpuCell(stat(t, "json:16")), fx(peakOf(t) == null ? null : peakOf(t) / 1024, 0), fx(b?.ttfb, 3), p ? `${fx(p.ttft ?? p.ttfb, 2)} / ${fx(p.total, 1)}` : "n/a")
    out.push(`| ${cells.join(" | ")} |`)
  }
  out.push("")

  // the floor against the proxy: what the least work of a metered gateway leaves of the proxy's throughput
  if (targets.includes("floor") && targets.includes("proxy")) {
    summary.floor = configs.map((cfg) => ({ load: cfg, vs_proxy_rps: ratio(stat("floor", cfg)?.rps, stat("proxy", cfg)?.rps) }))
    const parts = summary.floor.filter((r) => r.vs_proxy_rps != null).map((r) => `${r.load.replace(":", " c=")} ${fx(r.vs_proxy_rps * 100, 0)}%`)
    out.push(`The floor (\`bench/lib/floor.mjs\`: parse, one admission, the exchange, the answer re-serialised in the gateway's name, one record) reaches this share of the proxy's RPS: ${parts.join(", ")}.`, "")
  }

  // ratios of every aigw target against the proxy and Portkey
  const ours = targets.filter((t) => t.startsWith("aigw"))
  if (ours.length) {
    out.push("Ratios (RPS: ours / theirs, higher is better; p99: ours / theirs, lower is better):")
    out.push("")
    const rh = ["load", ...ours.flatMap((t) => [`${t} / proxy RPS`, `${t} / portkey RPS`, `${t} / proxy p99`])]
    out.push(`| ${rh.join(" | ")} |`)
    out.push(`|${rh.map((_, i) => (i === 0 ? "---" : "---:")).join("|")}|`)
    for (const cfg of configs) {
      const cells = [cfg.replace(":", " c=")]
      for (const t of ours) {
        const a = stat(t, cfg)
        const pr = stat("proxy", cfg)
        const pk = stat("portkey", cfg)
        const r = { load: cfg, target: t, vs_proxy_rps: ratio(a?.rps, pr?.rps), vs_portkey_rps: ratio(a?.rps, pk?.rps), vs_proxy_p99: ratio(a?.p99, pr?.p99) }
        summary.ratios.push(r)
        cells.push(fx(r.vs_proxy_rps), fx(r.vs_portkey_rps, 1), fx(r.vs_proxy_p99, 1))
      }
      out.push(`| ${cells.join(" | ")} |`)
    }
    out.push("")

    // the issue's targets
    out.push("Targets of issue 9 (benchmark figures, not test assertions):")
    out.push("")
    out.push(`| target | ${ours.join(" | ")} |`)
    out.push(`|---|${ours.map(() => "---").join("|")}|`)
    const mark = (ok, text) => (ok == null ? "n/a" : `${ok ? "met" : "**missed**"}: ${text}`)
    const checks = [
      ["≥ 5× Portkey's RPS at c=16 and c=64", (t) => {
        const r = ["json:16", "json:64"].map((c) => ratio(stat(t, c)?.rps, stat("portkey", c)?.rps))
        return r.some((x) => x == null) ? mark(null) : mark(r.every((x) => x >= 5), r.map((x) => `${fx(x, 1)}×`).join(", "))
      }],
      ["≥ 50% of the proxy's RPS at c=16 and c=64", (t) => {
        const r = ["json:16", "json:64"].map((c) => ratio(stat(t, c)?.rps, stat("proxy", c)?.rps))
        return r.some((x) => x == null) ? mark(null) : mark(r.every((x) => x >= 0.5), r.map((x) => `${fx(x * 100, 0)}%`).join(", "))
      }],
      ["p99 at c=64 ≤ 2× the proxy's", (t) => {
        const r = ratio(stat(t, "json:64")?.p99, stat("proxy", "json:64")?.p99)
        return r == null ? mark(null) : mark(r <= 2, `${fx(stat(t, "json:64")?.p99)} ms = ${fx(r, 1)}×`)
      }],
      ["added p50 at c=1 ≤ 0.5 ms (vs direct; vs proxy)", (t) => {
        const a = stat(t, "json:1")?.p50
        const d = a == null || stat("direct", "json:1") == null ? null : a - stat("direct", "json:1").p50
        const p = a == null || stat("proxy", "json:1") == null ? null : a - stat("proxy", "json:1").p50
        return d == null ? mark(null) : mark(d <= 0.5, `+${fx(d)} ms; +${fx(p)} ms`)
      }],
      ["added stream TTFB ≤ 0.5 ms (vs direct; vs proxy)", (t) => {
        const a = sstat(t, "burst")?.ttfb
        const d = a == null || !sstat("direct", "burst") ? null : a - sstat("direct", "burst").ttfb
        const p = a == null || !sstat("proxy", "burst") ? null : a - sstat("proxy", "burst").ttfb
        return d == null ? mark(null) : mark(d <= 0.5, `+${fx(d, 3)} ms; +${fx(p, 3)} ms`)
      }],
      ["peak RSS ≤ 150 MB", (t) => {
        const p = peakOf(t)
        return p == null ? mark(null) : mark(p / 1024 <= 150, `${fx(p / 1024, 0)} MB`)
      }]
    ]
    for (const [name, f] of checks) {
      const cells = ours.map((t) => f(t))
      summary.targets.push({ target: name, results: Object.fromEntries(ours.map((t, i) => [t, cells[i]])) })
      out.push(`| ${name} | ${cells.join(" | ")} |`)
    }
    out.push("")
  }

  // the scenarios side by side, and before -> after for every "-before" target
  const others = scenarios.filter((s) => s !== "chat")
  if (ours.length && others.length) {
    const scenarioName = { chat: "chat (API key)", jwt: "chat (JWT)", embeddings: "embeddings (API key)", translate: "translate (API key)", rerank: "rerank (API key, BM25)", guardrails: "guardrails (API key, local)", moderation: "moderation (API key, openai)" }
    const jsonCfgs = configs.filter((c) => c.startsWith("json:"))
    const sseCfgs = configs.filter((c) => c.startsWith("sse:"))
    out.push("Scenarios: chat = `POST /openai/v1/chat/completions` with the API key (as above); jwt = the same call with the avatar's JWT; " +
      "embeddings = `POST /v1/embeddings` (`bench/bodies/embeddings.json`: one text, `text-embedding-3-small`; the mock answers one 1,536-number vector) with the API key; translate = `POST /v1/translate` (`bench/bodies/translate.json`: one sentence into German; the mock answers the task's JSON) with the API key; " +
      "rerank = `POST /v1/rerank` (`bench/bodies/rerank.json`: five short documents, top 3; BM25 in-process, as no rerank provider is configured) with the API key; " +
      "guardrails = `POST /v1/guardrails/check` (`bench/bodies/guardrails.json`: an e-mail address, a phone number and a prompt injection; the in-process rules) with the API key; " +
      "moderation = `POST /v1/moderation` (`bench/bodies/moderation.json`: one sentence, provider openai; the mock answers OpenAI's moderation result) with the API key. RPS / p50 / p99 ms, medians over rounds:")
    out.push("")
    const sh = ["target", "scenario", ...jsonCfgs.map((c) => `json c=${c.split(":")[1]}`), ...sseCfgs.map((c) => `stream c=${c.split(":")[1]}`), "CPU µs/req (json c=16)", "stream TTFB p50 ms"]
    out.push(`| ${sh.join(" | ")} |`)
    out.push(`|${sh.map((_, i) => (i < 2 ? "---" : "---:")).join("|")}|`)
    for (const t of ours) for (const sc of scenarios) {
      const cells = [t, scenarioName[sc] ?? sc]
      for (const cfg of [...jsonCfgs, ...sseCfgs]) {
        const s = stat(t, cfg, sc)
        if (s && sc !== "chat") summary.load.push(s)
        cells.push(s ? `${fi(s.rps)} / ${fx(s.p50)} / ${fx(s.p99)}` : "n/a")
      }
      cells.push(cpuCell(stat(t, "json:16", sc)), fx(sstat(t, "burst", sc)?.ttfb, 3))
      out.push(`| ${cells.join(" | ")} |`)
    }
    out.push("")
  }
  const pairs = ours.filter((t) => t.endsWith("-before") && ours.includes(t.replace(/-before$/, ""))).map((b) => [b, b.replace(/-before$/, "")])
  if (pairs.length) {
    out.push("Before → after (the `-before` target is AIGW_BEFORE_BUNDLE, interleaved with the current build; RPS ratio after / before, > 1 is a gain; p99 and CPU lower is better):")
    out.push("")
    out.push("| database | scenario | load | RPS before → after | × | p50 ms before → after | p99 ms before → after | CPU µs/req before → after |")
    out.push("|---|---|---|---:|---:|---:|---:|---:|")
    summary.before_after = []
    for (const [b, a] of pairs) for (const sc of scenarios) for (const cfg of configs) {
      const sb = stat(b, cfg, sc)
      const sa = stat(a, cfg, sc)
      if (!sb || !sa) continue
      const x = ratio(sa.rps, sb.rps)
      summary.before_after.push({ before: b, after: a, scenario: sc, load: cfg, rps: [sb.rps, sa.rps], p50: [sb.p50, sa.p50], p99: [sb.p99, sa.p99], cpu: [sb.cpu, sa.cpu], ratio: x })
      const cpu = (s) => (s.db != null ? `${fx(s.cpu, 0)}+${fx(s.db, 0)}db` : fx(s.cpu, 0))
      out.push(`| ${a.replace(/^aigw-/, "")} | ${sc} | ${cfg.replace(":", " c=")} | ${fi(sb.rps)} → ${fi(sa.rps)} | ${fx(x)} | ${fx(sb.p50)} → ${fx(sa.p50)} | ${fx(sb.p99)} → ${fx(sa.p99)} | ${cpu(sb)} → ${cpu(sa)} |`)
    }
    out.push("")
  }

  // stage costs
  if (summary.stages.length) {
    out.push(`Stage costs, in-process through the real services (\`bench/lib/stages.ts\`, ${summary.stages[0].n} calls per stage, ${summary.stages[0].c} in flight, pinned with the servers):`)
    out.push("")
    const names = summary.stages[0].stages.map((s) => s.stage)
    out.push(`| stage | ${summary.stages.map((s) => `${s.target} CPU µs / wall µs`).join(" | ")} |`)
    out.push(`|---|${summary.stages.map(() => "---:").join("|")}|`)
    for (const n of names) out.push(`| ${n} | ${summary.stages.map((s) => { const x = s.stages.find((y) => y.stage === n); return x ? `${fx(x.cpu_us, 0)} / ${fx(x.wall_us, 0)}` : "n/a" }).join(" | ")} |`)
    out.push("")
  }
  for (const u of summary.usage) {
    out.push(`- ${u.target}: quota counted ${fi(u.daily_calls_used)} calls today (the measured runs alone sent ${fi(u.measured_requests)}; warm-ups, streams and validation add the rest) and ${fi(u.daily_tokens_used)} tokens.`)
  }
  if (summary.usage.length) out.push("")

  // details per load
  out.push("<details><summary>Per load: all figures, RPS of every round</summary>")
  out.push("")
  out.push("| load | target | RPS | p50 ms | p90 ms | p99 ms | CPU µs/req | peak RSS MB | errors / non-2xx | RPS per round |")
  out.push("|---|---|---:|---:|---:|---:|---:|---:|---:|---|")
  for (const sc of scenarios) for (const cfg of configs) for (const t of targets) {
    const s = stat(t, cfg, sc)
    if (s) out.push(`| ${cfg.replace(":", " c=")} | ${sc === "chat" ? t : `${t} ${sc}`} | ${fi(s.rps)} | ${fx(s.p50)} | ${fx(s.p90)} | ${fx(s.p99)} | ${cpuCell(s)} | ${fx(s.peak / 1024, 0)} | ${s.errors} / ${s.non2xx} | ${s.rounds.join(", ")} |`)
  }
  out.push("")
  out.push("| target | stream headers p50 ms | TTFB p50 ms | TTFB p90 ms | TTFT p50 ms | total p50 ms | paced TTFB p50 ms | paced TTFT p50 ms | paced total p50 ms | failed |")
  out.push("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
  for (const sc of scenarios) for (const t of targets) {
    const b = sstat(t, "burst", sc)
    const p = sstat(t, "paced", sc)
    if (!b && !p) continue
    out.push(`| ${sc === "chat" ? t : `${t} ${sc}`} | ${fx(b?.headers, 3)} | ${fx(b?.ttfb, 3)} | ${fx(b?.ttfb90, 3)} | ${fx(b?.ttft, 3)} | ${fx(b?.total, 3)} | ${fx(p?.ttfb, 2)} | ${fx(p?.ttft, 2)} | ${fx(p?.total, 1)} | ${(b?.failed ?? 0) + (p?.failed ?? 0)} |`)
  }
  out.push("")
  out.push("</details>")
  const bad = summary.load.filter((s) => s.errors || s.non2xx)
  if (bad.length) out.push("", `**Warning**: errors or non-2xx answers in ${bad.map((s) => `${s.target}${s.scenario === "chat" ? "" : ` ${s.scenario}`} ${s.mode} c=${s.conns}`).join(", ")}: their RPS is not comparable.`)
  fs.writeFileSync(path.join(dir, "summary.json"), JSON.stringify(summary, null, 2))
  return out.join("\n") + "\n"
}

if (process.argv[1] && path.resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  if (!process.argv[2]) {
    console.error("usage: node bench/lib/summarize.mjs bench/results/<run>")
    process.exit(2)
  }
  process.stdout.write(report(process.argv[2]))
}
