#!/usr/bin/env bash
# The reference load harness (ANCHOR_DIR, default ../shared/bench-anchor: mock upstream, bare proxy,
# Portkey) with aigw plugged in as one more target, started the way users start it: `npm start` on
# SQLite, called on POST /openai/v1/chat/completions with an API key. It cross-checks `npm run bench`
# with a harness this repository does not own (docs/performance.md, "The reference harness").
#
#   bash bench/anchor.sh                         # the harness's defaults: 3 rounds, 10 s after 5 s of warm-up
#   ROUNDS=3 DURATION=7 WARMUP=5 bash bench/anchor.sh
#
# Every other variable of the harness's run.sh passes through (TARGETS, CONNS, SSE_CONNS, ...).
# The harness is copied to a scratch directory (it writes its results inside its own directory);
# the report lands in bench/results/anchor-<time>/ unless RESULTS_DIR says otherwise. The caller
# (an avatar and its API key) is made through aigw's API on a scratch data directory before the run.
# `gpt-4o-mini-paced-<N>ms`, the harness's paced stream model, is an alias of openai/ that model.
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
ANCHOR_DIR=${ANCHOR_DIR:-$ROOT/../shared/bench-anchor}
[ -x "$ANCHOR_DIR/run.sh" ] || { echo "bench/anchor.sh: no harness at $ANCHOR_DIR (set ANCHOR_DIR to the bench-anchor directory)" >&2; exit 1; }

WORK=$(mktemp -d)
ACCOUNT_PGID=""
cleanup() {
  [ -n "$ACCOUNT_PGID" ] && kill -- "-$ACCOUNT_PGID" 2>/dev/null || true
  rm -rf "$WORK"
}
trap cleanup EXIT

# The harness, with Portkey from bench/ (the same version and pins) when it has no node_modules of its own.
cp -r "$ANCHOR_DIR/." "$WORK/harness"
if [ ! -d "$WORK/harness/node_modules" ]; then
  [ -d "$ROOT/bench/node_modules/@portkey-ai/gateway" ] || npm install --prefix "$ROOT/bench" --no-audit --no-fund >&2
  ln -s "$ROOT/bench/node_modules" "$WORK/harness/node_modules"
fi

# npm start builds when the bundle is out of date; build now so the harness does not wait for it.
(cd "$ROOT" && node scripts/build.mjs >&2)

DATA="$WORK/data"
mkdir -p "$DATA"
PACED_MS=${PACED_MS:-5}
ALIASES="{\"gpt-4o-mini-paced-${PACED_MS}ms\":\"openai/gpt-4o-mini-paced-${PACED_MS}ms\"}"
PORT=$(node -e 'const s=require("net").createServer();s.listen(0,"127.0.0.1",()=>{process.stdout.write(String(s.address().port));s.close()})')

# The caller: register, verify (file mailer), authenticate, create a key, through the API of a
# short-lived aigw on the data directory the measured one then uses. `exec setsid`: npm becomes the
# leader of its own process group, so the group (npm and the server) is stopped as one.
(cd "$ROOT" && PORT=$PORT AIGW_DATA_DIR="$DATA" exec setsid npm start >"$WORK/account.log" 2>&1 </dev/null) &
ACCOUNT_PGID=$!
for _ in $(seq 300); do curl -s -o /dev/null "http://127.0.0.1:$PORT/health" && break; sleep 0.2; done
KEY=$(node --input-type=module -e '
  const { createApiKey } = await import(process.argv[1])
  process.stdout.write((await createApiKey(process.argv[2], process.argv[3])).apiKey)
' "$ROOT/bench/lib/aigw-account.mjs" "http://127.0.0.1:$PORT" "$DATA") || { cat "$WORK/account.log" >&2; exit 1; }
kill -- "-$ACCOUNT_PGID" 2>/dev/null || true
while kill -0 "$ACCOUNT_PGID" 2>/dev/null; do sleep 0.1; done
ACCOUNT_PGID=""

RESULTS_DIR=${RESULTS_DIR:-$ROOT/bench/results/anchor-$(date +%Y%m%d-%H%M%S)}
mkdir -p "$RESULTS_DIR"
# Absolute: the harness runs from its scratch copy, where a relative directory would not exist.
RESULTS_DIR=$(cd "$RESULTS_DIR" && pwd)
export RESULTS_DIR PACED_MS
export TARGET_NAME=${TARGET_NAME:-aigw} TARGET_CWD="$ROOT"
export TARGET_URL='http://127.0.0.1:{PORT}/openai/v1/chat/completions'
export TARGET_HEADERS="Authorization: Bearer $KEY"
export TARGET_CMD="AIGW_DATA_DIR='$DATA' AIGW_PLAN_LIMITS='{\"Free\":100000000}' OPENAI_API_KEY=sk-bench OPENAI_BASE_URL={UPSTREAM_BASE} AIGW_MODEL_ALIASES='$ALIASES' PORT={PORT} exec npm start"
export TARGETS=${TARGETS:-"direct proxy portkey"}
bash "$WORK/harness/run.sh"
