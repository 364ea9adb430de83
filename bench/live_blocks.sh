#!/usr/bin/env bash
# bench/live_blocks.sh: `memtide report` time per event as the live set grows, under each
# allocator's address layout (glibc, jemalloc, tcmalloc, mimalloc).
#
#   bench/live_blocks.sh [--build-dir DIR] [--runs N] [--sizes "10000 100000 ..."] [--events E]
#
# For each allocator and each live-set size N, records `memtide-bench-live-blocks N E` (N
# 16-byte blocks, then frees of the oldest and new allocations until E events: the live set
# stays at N) with `memtide run -q --no-symbolize` and the allocator in LD_PRELOAD, then times
# `memtide report` on the trace, R runs each (default 3), and prints the median. The time per
# event is (median - fixed) / E, where the fixed cost (start-up, the module table, the output)
# is the median report time of the same program making no allocation. E (default 20 M) is the
# same for every N, so that only the live set differs. Also the report of N blocks never freed
# (E = N; the case a replay whose probe runs grow with the live set makes quadratic). Prints
# markdown tables; a missing allocator library is reported, not an error.
set -euo pipefail

repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
build="$repo/build"
runs=3
sizes="10000 100000 1000000 3000000 10000000"
events=20000000
while [[ $# -gt 0 ]]; do
  case "$1" in
    --build-dir) build=$2; shift 2 ;;
    --runs) runs=$2; shift 2 ;;
    --sizes) sizes=$2; shift 2 ;;
    --events) events=$2; shift 2 ;;
    -h|--help) sed -n '2,16p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "live_blocks: unknown option $1" >&2; exit 2 ;;
  esac
done

memtide="$build/bin/memtide"
prog="$build/bin/memtide-bench-live-blocks"
[[ -x "$memtide" && -x "$prog" ]] || { echo "live_blocks: build first (scripts/build)" >&2; exit 2; }
libdir=/usr/lib/x86_64-linux-gnu
declare -A lib=([glibc]="" [jemalloc]="$libdir/libjemalloc.so.2" [tcmalloc]="$libdir/libtcmalloc_minimal.so.4"
                [mimalloc]="$libdir/libmimalloc.so.2")
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

# Median wall seconds of `memtide report TRACE`, over $runs runs (bash's clock, microseconds).
report_median() {
  local i t0 t1
  for ((i = 0; i < runs; i++)); do
    t0=$EPOCHREALTIME
    "$memtide" report "$1" >/dev/null 2>&1
    t1=$EPOCHREALTIME
    awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.6f\n", b - a }'
  done | sort -g | awk '{ v[NR] = $1 } END { print v[int((NR + 1) / 2)] }'
}

# One row: allocator, N, events.
row() {
  local a=$1 n=$2 e=$3 trace t ns size
  trace="$work/$a.$n.$e.mtide"
  LD_PRELOAD="${lib[$a]}" "$memtide" run -q --no-symbolize -o "$trace" -- "$prog" "$n" "$e" >/dev/null
  t=$(report_median "$trace")
  ns=$(awk -v t="$t" -v b="$fixed" -v e="$e" 'BEGIN { d = t - b; if (d < 0) d = 0; printf "%.1f", d * 1e9 / e }')
  size=$(du -k "$trace" | cut -f1)
  printf '| %s | %s | %s | %s KiB | %.3f s | %s |\n' "$a" "$n" "$e" "$size" "$t" "$ns"
  rm -f "$trace"
}

echo "| allocator | live blocks | events | trace | report (median of $runs) | ns per event |"
echo "|---|---:|---:|---:|---:|---:|"
for a in glibc jemalloc tcmalloc mimalloc; do
  if [[ -n "${lib[$a]}" && ! -e "${lib[$a]}" ]]; then
    echo "| $a | (${lib[$a]} is not installed) | | | | |"
    continue
  fi
  LD_PRELOAD="${lib[$a]}" "$memtide" run -q --no-symbolize -o "$work/$a.0.mtide" -- "$prog" 0 0 >/dev/null
  fixed=$(report_median "$work/$a.0.mtide")
  for n in $sizes; do
    [[ $n -le $events ]] && row "$a" "$n" "$events"
  done
  for n in $sizes; do
    [[ $n -ge 1000000 ]] && row "$a" "$n" "$n"
  done
done
