import { describe, expect, it } from "vitest"
import * as Metrics from "../src/Metrics.ts"
import { CONTENT_TYPE, Registry } from "../src/Metrics.ts"
import * as RequestId from "../src/RequestId.ts"

/** Sample lines of a Prometheus text exposition: `name{labels} value` -> value. */
const samples = (text: string) => {
  const out = new Map<string, number>()
  for (const line of text.split("\n")) {
    if (line === "" || line.startsWith("#")) continue
    const m = /^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{.*\})? (\S+)$/.exec(line)
    if (!m) throw new Error(`not a sample line: ${line}`)
    out.set(`${m[1]}${m[2] ?? ""}`, Number(m[3] === "+Inf" ? Infinity : m[3]))
  }
  return out
}

describe("Metrics", () => {
  it("counts by label values and renders HELP, TYPE and one sample per series", () => {
    const r = new Registry()
    const c = r.counter("t_requests_total", "Requests.", ["route", "status"])
    c.inc(["/v1/jobs/:id", "200"])
    c.inc(["/v1/jobs/:id", "200"])
    c.inc(["/v1/jobs/:id", "404"], 3)
    const text = r.render()
    expect(text).toContain("# HELP t_requests_total Requests.\n# TYPE t_requests_total counter\n")
    const s = samples(text)
    expect(s.get(`t_requests_total{route="/v1/jobs/:id",status="200"}`)).toBe(2)
    expect(s.get(`t_requests_total{route="/v1/jobs/:id",status="404"}`)).toBe(3)
    expect(c.get(["/v1/jobs/:id", "200"])).toBe(2)
  })

  it("renders an unlabelled counter as 0 before its first increment, and gauges as set", () => {
    const r = new Registry()
    r.counter("t_refusals_total", "Refusals.")
    const g = r.gauge("t_active", "Active.")
    expect(samples(r.render()).get("t_refusals_total")).toBe(0)
    expect(samples(r.render()).has("t_active")).toBe(false)
    g.inc()
    g.inc()
    g.dec()
    expect(samples(r.render()).get("t_active")).toBe(1)
    g.set(7)
    expect(samples(r.render()).get("t_active")).toBe(7)
    g.clear()
    expect(samples(r.render()).has("t_active")).toBe(false)
  })

  it("escapes label values", () => {
    const r = new Registry()
    r.counter("t_x_total", "X.", ["v"]).inc(["a\"b\\c\nd"])
    expect(r.render()).toContain(`t_x_total{v="a\\"b\\\\c\\nd"} 1`)
  })

  it("keeps cumulative histogram buckets with +Inf, sum and count", () => {
    const r = new Registry()
    const h = r.histogram("t_seconds", "Durations.", ["route"], [0.1, 1])
    h.observe(0.05, ["/a"])
    h.observe(0.1, ["/a"])
    h.observe(0.5, ["/a"])
    h.observe(5, ["/a"])
    const s = samples(r.render())
    expect(s.get(`t_seconds_bucket{route="/a",le="0.1"}`)).toBe(2)
    expect(s.get(`t_seconds_bucket{route="/a",le="1"}`)).toBe(3)
    expect(s.get(`t_seconds_bucket{route="/a",le="+Inf"}`)).toBe(4)
    expect(s.get(`t_seconds_count{route="/a"}`)).toBe(4)
    expect(s.get(`t_seconds_sum{route="/a"}`)).toBeCloseTo(5.65)
    expect(h.count(["/a"])).toBe(4)
  })

  it("refuses a metric name registered twice; names the 0.0.4 content type", () => {
    const r = new Registry()
    r.counter("t_dup", "D.")
    expect(() => r.gauge("t_dup", "D.")).toThrow(/twice/)
    expect(CONTENT_TYPE).toBe("text/plain; version=0.0.4; charset=utf-8")
  })

  it("counts a million increments quickly (a map lookup each)", () => {
    const r = new Registry()
    const c = r.counter("t_fast_total", "Fast.", ["route", "method", "status"])
    const labels = ["/openai/v1/chat/completions", "POST", "200"]
    const started = performance.now()
    for (let i = 0; i < 1_000_000; i++) c.inc(labels)
    expect(c.get(labels)).toBe(1_000_000)
    expect(performance.now() - started).toBeLessThan(2000)
  })
})

describe("the HTTP request metrics", () => {
  it("count a method outside the standard ones as other: a method never seen adds no series", () => {
    const series = () => [...samples(Metrics.registry.render()).keys()].filter((k) => k.startsWith("aigw_http_requests_total{"))
    Metrics.recordRequest("unmatched", "POST", 404, 0.001)
    for (let i = 0; i < 100; i++) Metrics.recordRequest("unmatched", `X-METHOD-${i}`, 404, 0.001)
    const counted = samples(Metrics.registry.render())
    expect(counted.get('aigw_http_requests_total{route="unmatched",method="other",status="404"}')).toBeGreaterThanOrEqual(100)
    expect(counted.get('aigw_http_requests_total{route="unmatched",method="POST",status="404"}')).toBeGreaterThanOrEqual(1)
    expect(series().some((k) => k.includes("X-METHOD"))).toBe(false)
  })
})

describe("RequestId", () => {
  it("keeps a valid caller id and replaces an invalid or missing one with a UUIDv7", () => {
    expect(RequestId.fromHeader("abc-123.x:y_z")).toBe("abc-123.x:y_z")
    const v7 = /^[0-9a-f]{8}-[0-9a-f]{4}-7[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/
    for (const bad of [undefined, "", "has space", "x".repeat(129), "semi;colon", ["a", "b"]]) {
      expect(RequestId.fromHeader(bad as any)).toMatch(v7)
    }
    expect(RequestId.fromHeader("x".repeat(128))).toBe("x".repeat(128))
    const a = RequestId.generate()
    const b = RequestId.generate()
    expect(a).not.toBe(b)
    expect(Number.parseInt(a.replace("-", "").slice(0, 12), 16)).toBeLessThanOrEqual(Date.now())
  })
})
