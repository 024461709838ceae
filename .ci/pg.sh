#!/usr/bin/env bash
# Starts a throw-away PostgreSQL on a loopback port under a temp dir and prints its URL.
# Usage: eval "$(bash .ci/pg.sh start)"  -> exports AIGW_TEST_PG_URL and PGDATA_DIR
#        bash .ci/pg.sh stop DIR
set -euo pipefail
cmd=${1:-start}
find_bin() {
  for d in /usr/lib/postgresql/*/bin /usr/local/bin /usr/bin; do
    [ -x "$d/$1" ] && { echo "$d/$1"; return; }
  done
  return 1
}
if [ "$cmd" = stop ]; then
  dir=$2
  su postgres -s /bin/sh -c "$(find_bin pg_ctl) -D '$dir/data' -m fast stop" >/dev/null 2>&1 || \
    "$(find_bin pg_ctl)" -D "$dir/data" -m fast stop >/dev/null 2>&1 || true
  rm -rf "$dir"
  exit 0
fi
if ! find_bin initdb >/dev/null || ! find_bin pg_ctl >/dev/null; then
  echo "installing postgresql" >&2
  (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq postgresql >/dev/null) >&2
fi
initdb=$(find_bin initdb); pg_ctl=$(find_bin pg_ctl)
port=${PGPORT_TEST:-$((20000 + RANDOM % 20000))}
dir=$(mktemp -d /tmp/aigw-pg.XXXXXX)
mkdir -p "$dir/data" "$dir/sock"
run() { if [ "$(id -u)" = 0 ]; then su postgres -s /bin/sh -c "$*"; else sh -c "$*"; fi; }
if [ "$(id -u)" = 0 ]; then
  id postgres >/dev/null 2>&1 || useradd -r -M postgres
  chown -R postgres "$dir"
fi
run "'$initdb' -D '$dir/data' -U postgres -A trust --no-sync -E UTF8" >"$dir/initdb.log" 2>&1
run "'$pg_ctl' -D '$dir/data' -l '$dir/pg.log' -w -o \"-p $port -k $dir/sock -h 127.0.0.1 -c fsync=off -c synchronous_commit=off -c full_page_writes=off -c max_connections=300\" start" >&2
echo "export AIGW_TEST_PG_URL=postgres://postgres@127.0.0.1:$port/postgres"
echo "export AIGW_TEST_PG_DIR=$dir"
