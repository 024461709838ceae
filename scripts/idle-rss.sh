#!/usr/bin/env bash
# Idle memory of `npm start`: starts it in a scratch data directory on a free port, waits for
# /v1/health, waits 5 s more, then prints the RSS of every process in its tree and the total.
# Usage: bash scripts/idle-rss.sh   (from the repository root)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
data=$(mktemp -d)
port=${PORT:-$(node -e 'const s=require("net").createServer().listen(0,"127.0.0.1",()=>{console.log(s.address().port);s.close()})')}
cd "$data"
setsid env PORT="$port" AIGW_DATA_DIR="$data/data" DATABASE_URL="sqlite:$data/data/aigw.sqlite" \
  npm --prefix "$root" start >"$data/out.log" 2>&1 &
leader=$!
cleanup() { kill -TERM -- -"$leader" 2>/dev/null || true; sleep 1; kill -KILL -- -"$leader" 2>/dev/null || true; rm -rf "$data"; }
trap cleanup EXIT
for _ in $(seq 1 600); do
  curl -fsS "http://127.0.0.1:$port/v1/health" >/dev/null 2>&1 && break
  sleep 0.5
done
curl -fsS "http://127.0.0.1:$port/v1/health" >/dev/null || { cat "$data/out.log"; exit 1; }
sleep 5
# every process in the session started above
ps -o pid=,rss=,args= -s "$leader" | awk '{ total += $2; printf "%8d KiB  %s\n", $2, substr($0, index($0,$3)) } END { printf "%8d KiB  total (%.0f MB)\n", total, total/1024 }'
