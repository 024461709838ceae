#!/bin/sh
# The gateway's `node`: runs `node "$@"` in place of this shell (exec: the same process, its
# signals and exit code), with V8's --single-threaded-gc added when the process may use one CPU at
# most. V8 otherwise runs parts of its garbage collector in helper threads; on a single CPU those
# threads take turns with the main thread, and the pauses that wait for them stretch the tail
# latency (docs/performance.md, "One CPU: the garbage collector's helper threads").
#
# One CPU means: the CPUs this process may run on (its affinity, as `nproc` counts them: taskset,
# cpusets) is one, or its cgroup's CPU quota (cgroup v2 cpu.max, v1 cpu.cfs_quota_us) is one CPU
# or less. AIGW_SINGLE_THREADED_GC=true or false decides instead of the count.
set -eu

# The cgroup directory of this process for a cgroup v1 controller ("cpu"), or for cgroup v2 (""), as
# /proc/self/cgroup names it, or nothing.
cgroup_dir() {
  [ -r /proc/self/cgroup ] || return 0
  while IFS=: read -r _ controllers path; do
    if [ -z "$1" ] && [ -z "$controllers" ]; then printf '/sys/fs/cgroup%s' "$path"; return 0; fi
    if [ -n "$1" ]; then
      case ",$controllers," in *",$1,"*) printf '/sys/fs/cgroup/%s%s' "$controllers" "$path"; return 0 ;; esac
    fi
  done </proc/self/cgroup
}

# A CPU quota of at most one CPU on this process's cgroup: v2 cpu.max, else v1's CFS quota. Each is
# looked for in the group /proc/self/cgroup names, then at the hierarchy's root: a container without
# its own cgroup namespace sees the host's path there, but has its own group mounted at the root.
quota_at_most_one_cpu() {
  quota=
  period=
  for dir in "$(cgroup_dir "")" /sys/fs/cgroup; do
    if [ -n "$dir" ] && [ -r "$dir/cpu.max" ]; then
      read -r quota period <"$dir/cpu.max"
      break
    fi
  done
  if [ -z "$quota" ]; then
    for dir in "$(cgroup_dir cpu)" /sys/fs/cgroup/cpu /sys/fs/cgroup/cpu,cpuacct; do
      if [ -n "$dir" ] && [ -r "$dir/cpu.cfs_quota_us" ] && [ -r "$dir/cpu.cfs_period_us" ]; then
        quota=$(cat "$dir/cpu.cfs_quota_us")
        period=$(cat "$dir/cpu.cfs_period_us")
        break
      fi
    done
  fi
  case "$quota" in '' | max | -*) return 1 ;; esac
  [ "$quota" -le "$period" ]
}

one_cpu() {
  # nproc counts the CPUs of the affinity mask, but also obeys OMP_NUM_THREADS: not ours to follow here.
  cpus=$(env -u OMP_NUM_THREADS -u OMP_THREAD_LIMIT nproc 2>/dev/null) || cpus=
  if [ -n "$cpus" ] && [ "$cpus" -le 1 ]; then return 0; fi
  quota_at_most_one_cpu
}

case "${AIGW_SINGLE_THREADED_GC:-auto}" in
  true) set -- --single-threaded-gc "$@" ;;
  false) ;;
  auto) if one_cpu; then set -- --single-threaded-gc "$@"; fi ;;
  *)
    echo "aigw: AIGW_SINGLE_THREADED_GC must be auto, true or false, not \"$AIGW_SINGLE_THREADED_GC\"" >&2
    exit 1
    ;;
esac
exec node "$@"
