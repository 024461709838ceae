/**
 * A small Prometheus registry: counters, gauges and histograms with fixed buckets, rendered in the
 * text exposition format 0.0.4 (served at `GET /metrics`, docs/observability.md). Plain and fast:
 * the fast lane counts thousands of requests per second, so an increment is one Map lookup by the
 * label values joined with a separator (no object per request beyond that key). Label values must be
 * of bounded cardinality: route templates (`/v1/jobs/:id`), never raw paths.
 *
 * One process-wide registry (`registry`) with the gateway's metrics below; tests may make their own.
 * Gauges read from storage (job and webhook backlogs) are filled on scrape by `Http/Observability.ts`.
 */

const SEP = "\u0001"

/** A label value escaped for the exposition format (backslash, double quote, newline). */
const escapeLabel = (value: string) => value.replace(/\\/g, "\\\\").replace(/"/g, "\\\"").replace(/\n/g, "\\n")

const formatNumber = (n: number) =>
  Number.isNaN(n) ? "NaN" : n === Infinity ? "+Inf" : n === -Infinity ? "-Inf" : String(n)

const labelText = (names: ReadonlyArray<string>, key: string, extra?: string) => {
  const values = names.length === 0 ? [] : key.split(SEP)
  const parts = names.map((n, i) => `${n}="${escapeLabel(values[i] ?? "")}"`)
  if (extra !== undefined) parts.push(extra)
  return parts.length === 0 ? "" : `{${parts.join(",")}}`
}

interface Metric {
  readonly name: string
  render(): string
}

const header = (name: string, help: string, type: string) => `# HELP ${name} ${help.replace(/\\/g, "\\\\").replace(/\n/g, "\\n")}\n# TYPE ${name} ${type}\n`

export class Counter implements Metric {
  private readonly values = new Map<string, number>()
  constructor(readonly name: string, readonly help: string, readonly labelNames: ReadonlyArray<string> = []) {}
  /** Adds `by` (default 1) to the series of the label values (in the order of `labelNames`). */
  inc(labels: ReadonlyArray<string> = [], by = 1): void {
    const key = labels.length === 1 ? labels[0]! : labels.join(SEP)
    this.values.set(key, (this.values.get(key) ?? 0) + by)
  }
  get(labels: ReadonlyArray<string> = []): number {
    return this.values.get(labels.join(SEP)) ?? 0
  }
  render(): string {
    let out = header(this.name, this.help, "counter")
    if (this.values.size === 0 && this.labelNames.length === 0) return out + `${this.name} 0\n`
    for (const [key, value] of this.values) out += `${this.name}${labelText(this.labelNames, key)} ${formatNumber(value)}\n`
    return out
  }
}

export class Gauge implements Metric {
  private readonly values = new Map<string, number>()
  constructor(readonly name: string, readonly help: string, readonly labelNames: ReadonlyArray<string> = []) {}
  set(value: number, labels: ReadonlyArray<string> = []): void {
    this.values.set(labels.join(SEP), value)
  }
  inc(labels: ReadonlyArray<string> = [], by = 1): void {
    const key = labels.join(SEP)
    this.values.set(key, (this.values.get(key) ?? 0) + by)
  }
  dec(labels: ReadonlyArray<string> = [], by = 1): void {
    this.inc(labels, -by)
  }
  get(labels: ReadonlyArray<string> = []): number {
    return this.values.get(labels.join(SEP)) ?? 0
  }
  /** Forgets every series (a gauge read on scrape that has no value this time). */
  clear(): void {
    this.values.clear()
  }
  render(): string {
    let out = header(this.name, this.help, "gauge")
    if (this.values.size === 0 && this.labelNames.length === 0) return out
    for (const [key, value] of this.values) out += `${this.name}${labelText(this.labelNames, key)} ${formatNumber(value)}\n`
    return out
  }
}

/** Default buckets (seconds) of request durations: 5 ms to 60 s. */
export const DURATION_BUCKETS: ReadonlyArray<number> = [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60]

interface Series {
  /** Non-cumulative counts per bucket; the last slot is +Inf. */
  readonly counts: Array<number>
  sum: number
  count: number
}

export class Histogram implements Metric {
  private readonly series = new Map<string, Series>()
  constructor(
    readonly name: string,
    readonly help: string,
    readonly labelNames: ReadonlyArray<string> = [],
    readonly buckets: ReadonlyArray<number> = DURATION_BUCKETS
  ) {}
  observe(value: number, labels: ReadonlyArray<string> = []): void {
    const key = labels.join(SEP)
    let s = this.series.get(key)
    if (s === undefined) {
      s = { counts: new Array<number>(this.buckets.length + 1).fill(0), sum: 0, count: 0 }
      this.series.set(key, s)
    }
    let i = 0
    while (i < this.buckets.length && value > this.buckets[i]!) i++
    s.counts[i]!++
    s.sum += value
    s.count++
  }
  /** The observation count of a series (tests). */
  count(labels: ReadonlyArray<string> = []): number {
    return this.series.get(labels.join(SEP))?.count ?? 0
  }
  render(): string {
    let out = header(this.name, this.help, "histogram")
    for (const [key, s] of this.series) {
      let cumulative = 0
      for (let i = 0; i <= this.buckets.length; i++) {
        cumulative += s.counts[i]!
        const le = i === this.buckets.length ? "+Inf" : formatNumber(this.buckets[i]!)
        out += `${this.name}_bucket${labelText(this.labelNames, key, `le="${le}"`)} ${cumulative}\n`
      }
      out += `${this.name}_sum${labelText(this.labelNames, key)} ${formatNumber(s.sum)}\n`
      out += `${this.name}_count${labelText(this.labelNames, key)} ${s.count}\n`
    }
    return out
  }
}

export class Registry {
  private readonly metrics: Array<Metric> = []
  private register<M extends Metric>(metric: M): M {
    if (this.metrics.some((m) => m.name === metric.name)) throw new Error(`metric ${metric.name} registered twice`)
    this.metrics.push(metric)
    return metric
  }
  counter(name: string, help: string, labelNames: ReadonlyArray<string> = []) {
    return this.register(new Counter(name, help, labelNames))
  }
  gauge(name: string, help: string, labelNames: ReadonlyArray<string> = []) {
    return this.register(new Gauge(name, help, labelNames))
  }
  histogram(name: string, help: string, labelNames: ReadonlyArray<string> = [], buckets?: ReadonlyArray<number>) {
    return this.register(new Histogram(name, help, labelNames, buckets))
  }
  /** Every metric in the text exposition format 0.0.4. */
  render(): string {
    let out = ""
    for (const m of this.metrics) out += m.render()
    return out
  }
}

/** The content type of `Registry.render`'s text. */
export const CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"

/** The process-wide registry served at /metrics. */
export const registry = new Registry()

export const httpRequests = registry.counter("aigw_http_requests_total", "HTTP requests answered, by route template, method and status.", ["route", "method", "status"])
export const httpDuration = registry.histogram("aigw_http_request_duration_seconds", "Time to answer an HTTP request (to the end of the response for the fast lane; to the response head for the Effect routes), in seconds.", ["route", "method"])
export const upstreamCalls = registry.counter("aigw_upstream_calls_total", "Upstream call attempts (chat, embeddings, rerank), by provider and outcome (ok, error, cancelled); a stream's when it ends.", ["provider", "outcome"])
export const upstreamErrors = registry.counter("aigw_upstream_errors_total", "Failed upstream call attempts, by provider and error kind.", ["provider", "kind"])
export const tokens = registry.counter("aigw_tokens_total", "Tokens of recorded chat calls, by provider and direction (prompt, completion).", ["provider", "direction"])
export const costUsd = registry.counter("aigw_cost_usd_total", "Cost in USD of recorded chat calls (catalogue prices), by provider.", ["provider"])
export const quotaRefusals = registry.counter("aigw_quota_refusals_total", "Requests refused because the daily quota was used up.")
export const usageRecordsPruned = registry.counter("aigw_usage_records_pruned_total", "Per-call usage records this process deleted past their retention (AIGW_USAGE_RETENTION_DAYS).")
export const sandboxRunsActive = registry.gauge("aigw_sandbox_runs_active", "Sandbox runs in progress in this process.")
export const sandboxRefusals = registry.counter("aigw_sandbox_refusals_total", "Sandbox runs refused, by reason (busy, per_avatar).", ["reason"])
export const jobsBacklog = registry.gauge("aigw_jobs_backlog", "Jobs not finished yet (queued or running), read from storage on scrape.")
export const webhooksBacklog = registry.gauge("aigw_webhooks_backlog", "Webhook deliveries still pending, read from storage on scrape.")

/** The methods counted by name; any other is counted as "other". */
const NAMED_METHODS = new Set(["GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"])

/**
 * Records one answered HTTP request (`route` is the template). A method outside NAMED_METHODS is "other": a
 * Lambda event may carry any token as its method, and each would be a series of its own, kept for the process's life.
 */
export const recordRequest = (route: string, method: string, status: number, seconds: number) => {
  const counted = NAMED_METHODS.has(method) ? method : "other"
  httpRequests.inc([route, counted, statusText(status)])
  httpDuration.observe(seconds, [route, counted])
}

const statusTexts = new Map<number, string>()
const statusText = (status: number) => {
  let text = statusTexts.get(status)
  if (text === undefined) statusTexts.set(status, (text = String(status)))
  return text
}
