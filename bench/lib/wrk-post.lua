-- wrk script: one fixed POST (body and headers from files), JSON summary line in done().
--   BENCH_BODY     file with the request body
--   BENCH_HEADERS  optional file with one "Name: value" per line
-- The request is built once (no request() callback), which keeps wrk on its fast path.
local f = assert(io.open(os.getenv("BENCH_BODY"), "rb"))
wrk.method = "POST"
wrk.body = f:read("*a")
f:close()
wrk.headers["Content-Type"] = "application/json"
local hf = os.getenv("BENCH_HEADERS")
if hf and hf ~= "" then
  for line in io.lines(hf) do
    local name, value = line:match("^%s*([^:]+):%s*(.-)%s*$")
    if name then wrk.headers[name] = value end
  end
end

function done(s, latency, requests)
  local e = s.errors
  io.write(string.format(
    'WRKJSON {"requests":%d,"duration_us":%d,"bytes":%d,"connect":%d,"read":%d,"write":%d,"status":%d,"timeout":%d,' ..
    '"mean_us":%.1f,"max_us":%d,"p50_us":%d,"p90_us":%d,"p99_us":%d,"p999_us":%d}\n',
    s.requests, s.duration, s.bytes, e.connect, e.read, e.write, e.status, e.timeout,
    latency.mean, latency.max, latency:percentile(50), latency:percentile(90), latency:percentile(99), latency:percentile(99.9)))
end
