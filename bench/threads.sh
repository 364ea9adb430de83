#!/usr/bin/env bash
# bench/threads.sh: exact recording's CPU per event on 1, 2 and 4 threads and on one worker
# thread whose main thread waits (the churn microbenchmark), with libmemtide.so in LD_PRELOAD
# (no wrapper, no follower: the recorder's own cost, its writer thread included).
#
#   bench/threads.sh [--build-dir DIR] [--against DIR] [--runs N] [--iterations N]
#
# Each round runs every workload untraced, with the build's library and, with --against DIR,
# with DIR's library (another build, e.g. one made with -DMEMTIDE_UNORDERED_TSC_FOR_BENCH),
# in turn. CPU is user + sys of the process. The CPU per event is (median CPU - median
# untraced CPU) / events, where the events (allocations plus frees) come from one exact
# recording's report; also from the smallest CPU of each, which other work on the machine
# inflates least. Prints a markdown table with each figure's ratio to the build's 1-thread one.
set -euo pipefail

repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
build="$repo/build"
against=""
runs=7
iterations=2000000
while [[ $# -gt 0 ]]; do
  case "$1" in
    --build-dir) build=$2; shift 2 ;;
    --against) against=$2; shift 2 ;;
    --runs) runs=$2; shift 2 ;;
    --iterations) iterations=$2; shift 2 ;;
    -h|--help) sed -n '2,13p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "threads: unknown option $1" >&2; exit 2 ;;
  esac
done
churn="$build/bin/memtide-bench-churn"
cli="$build/bin/memtide-cli"
libs=("$build/lib/libmemtide.so")
[[ -n "$against" ]] && libs+=("$against/lib/libmemtide.so")
for f in "$churn" "$cli" "${libs[@]}"; do
  [[ -e "$f" ]] || { echo "threads: $f is missing: build first (scripts/build)" >&2; exit 2; }
done

work=$(mktemp -d /tmp/memtide-threads.XXXXXX)
trap 'rm -rf "$work"' EXIT
workloads=("1t:--threads 1" "pool:--threads 1 --pool" "2t:--threads 2" "4t:--threads 4")

# CPU seconds (user + sys) of one run; appends "workload tool cpu" to $work/times.
timed() {  # workload tool env-words... -- argv...
  local w=$1 tool=$2
  shift 2
  local envs=()
  while [[ $1 != -- ]]; do envs+=("$1"); shift; done
  shift
  rm -f "$work"/t.mtide*
  /usr/bin/time -f "%U %S" -o "$work/time" env "${envs[@]}" "$@" >/dev/null
  read -r u s <"$work/time"
  echo "$w $tool $(/usr/bin/python3 -c "print($u + $s)")" >>"$work/times"
}

for spec in "${workloads[@]}"; do
  w=${spec%%:*}
  read -r -a args <<<"${spec#*:}"
  rm -f "$work"/ev.mtide*
  MEMTIDE_OUTPUT="$work/ev.mtide" LD_PRELOAD="${libs[0]}" "$churn" "${args[@]}" --iterations "$iterations" >/dev/null
  "$cli" report --json "$work/ev.mtide" | /usr/bin/python3 -c \
    "import json,sys; d=json.load(sys.stdin); print('$w', d['total_allocations'] + d['total_frees'])" >>"$work/events"
done
for ((r = 1; r <= runs; r++)); do
  for spec in "${workloads[@]}"; do
    w=${spec%%:*}
    read -r -a args <<<"${spec#*:}"
    timed "$w" untraced -- "$churn" "${args[@]}" --iterations "$iterations"
    for i in "${!libs[@]}"; do
      timed "$w" "lib$i" MEMTIDE_OUTPUT="$work/t.mtide" LD_PRELOAD="${libs[$i]}" -- "$churn" "${args[@]}" --iterations "$iterations"
    done
  done
  echo "threads: round $r of $runs done" >&2
done

/usr/bin/python3 - "$work/times" "$work/events" "${libs[@]}" <<'EOF'
import collections, statistics, sys
times, events_file, libs = sys.argv[1], sys.argv[2], sys.argv[3:]
cpu = collections.defaultdict(list)
for line in open(times):
    w, tool, c = line.split()
    cpu[(w, tool)].append(float(c))
events = {w: int(n) for w, n in (l.split() for l in open(events_file))}
def per_event(w, tool, f):
    return (f(cpu[(w, tool)]) - f(cpu[(w, "untraced")])) / events[w] * 1e9
base_med = per_event("1t", "lib0", statistics.median)
base_min = per_event("1t", "lib0", min)
print("| workload | library | events | untraced CPU s (median) | CPU s (median) | ns per event, median "
      "(× the build's 1 thread) | ns per event, smallest runs (×) |")
print("|---|---|---|---|---|---|---|")
for w in ("1t", "pool", "2t", "4t"):
    for i, lib in enumerate(libs):
        med, low = per_event(w, f"lib{i}", statistics.median), per_event(w, f"lib{i}", min)
        print(f"| {w} | {lib} | {events[w] / 1e6:.2f} M | {statistics.median(cpu[(w, 'untraced')]):.2f} | "
              f"{statistics.median(cpu[(w, f'lib{i}')]):.2f} | {med:.1f} ({med / base_med:.2f}x) | "
              f"{low:.1f} ({low / base_min:.2f}x) |")
EOF
