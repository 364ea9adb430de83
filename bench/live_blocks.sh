#!/usr/bin/env bash
# bench/live_blocks.sh: `memtide report` time per event as the live set grows, under each
# allocator's address layout (glibc, jemalloc, tcmalloc, mimalloc).
#
#   bench/live_blocks.sh [--build-dir DIR] [--against DIR] [--runs N] [--sizes "10000 ..."] [--events E] [--random]
#
# For each allocator and each live-set size N, records `memtide-bench-live-blocks N E` (N
# 16-byte blocks, then frees of the oldest and new allocations until E events: the live set
# stays at N) with `memtide run -q --no-symbolize` and the allocator in LD_PRELOAD, then times
# `memtide report` on the trace, R runs each (default 3), and prints the median. The time per
# event is (median - fixed) / E, where the fixed cost (start-up, the module table, the output)
# is the median report time of the same program making no allocation. E (default 20 M) is the
# same for every N, so that only the live set differs. Also the report of N blocks never freed
# (E = N; the case a replay whose probe runs grow with the live set makes quadratic). Prints
# markdown tables; a missing allocator library is reported, not an error. --against DIR: also
# times DIR's `memtide report` (another build) on the same traces, its runs alternating with
# the first build's, in two more columns. --random: the program frees blocks picked at random
# (of 16 to 255 bytes) instead of the oldest (`memtide-bench-live-blocks --random`).
set -euo pipefail

repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
build="$repo/build"
runs=3
sizes="10000 100000 1000000 3000000 10000000"
events=20000000
against=""
pattern=()
while [[ $# -gt 0 ]]; do
  case "$1" in
    --build-dir) build=$2; shift 2 ;;
    --against) against=$2; shift 2 ;;
    --runs) runs=$2; shift 2 ;;
    --sizes) sizes=$2; shift 2 ;;
    --events) events=$2; shift 2 ;;
    --random) pattern=(--random); shift ;;
    -h|--help) sed -n '2,21p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "live_blocks: unknown option $1" >&2; exit 2 ;;
  esac
done

memtide="$build/bin/memtide"
prog="$build/bin/memtide-bench-live-blocks"
[[ -x "$memtide" && -x "$prog" ]] || { echo "live_blocks: build first (scripts/build)" >&2; exit 2; }
[[ -z "$against" || -x "$against/bin/memtide" ]] || { echo "live_blocks: no $against/bin/memtide" >&2; exit 2; }
libdir=/usr/lib/x86_64-linux-gnu
declare -A lib=([glibc]="" [jemalloc]="$libdir/libjemalloc.so.2" [tcmalloc]="$libdir/libtcmalloc_minimal.so.4"
                [mimalloc]="$libdir/libmimalloc.so.2")
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

# Median wall seconds of `memtide report TRACE` for each build (the first, then --against's),
# over $runs runs each, the builds' runs alternating (bash's clock, microseconds).
report_medians() {
  local i t0 t1 m
  local -a builds=("$memtide")
  [[ -n "$against" ]] && builds+=("$against/bin/memtide")
  for ((i = 0; i < runs; i++)); do
    for m in "${!builds[@]}"; do
      t0=$EPOCHREALTIME
      "${builds[$m]}" report "$1" >/dev/null 2>&1
      t1=$EPOCHREALTIME
      awk -v m="$m" -v a="$t0" -v b="$t1" 'BEGIN { printf "%d %.6f\n", m, b - a }'
    done
  done | sort -k1,1n -k2,2g | awk '{ v[$1, ++n[$1]] = $2 } END {
    for (m = 0; m in n; m++) printf "%s%s", (m ? " " : ""), v[m, int((n[m] + 1) / 2)]; print "" }'
}

# One row: allocator, N, events.
row() {
  local a=$1 n=$2 e=$3 trace t size m cols=""
  trace="$work/$a.$n.$e.mtide"
  LD_PRELOAD="${lib[$a]}" "$memtide" run -q --no-symbolize -o "$trace" -- "$prog" "$n" "$e" "${pattern[@]}" >/dev/null
  read -r -a t <<<"$(report_medians "$trace")"
  for m in "${!t[@]}"; do
    cols+=$(awk -v t="${t[$m]}" -v b="${fixed[$m]}" -v e="$e" \
      'BEGIN { d = t - b; if (d < 0) d = 0; printf " %.3f s | %.1f |", t, d * 1e9 / e }')
  done
  size=$(du -k "$trace" | cut -f1)
  printf '| %s | %s | %s | %s KiB |%s\n' "$a" "$n" "$e" "$size" "$cols"
  rm -f "$trace"
}

if [[ -n "$against" ]]; then
  echo "| allocator | live blocks | events | trace | report (median of $runs) | ns per event | $against: report | ns per event |"
  echo "|---|---:|---:|---:|---:|---:|---:|---:|"
else
  echo "| allocator | live blocks | events | trace | report (median of $runs) | ns per event |"
  echo "|---|---:|---:|---:|---:|---:|"
fi
for a in glibc jemalloc tcmalloc mimalloc; do
  if [[ -n "${lib[$a]}" && ! -e "${lib[$a]}" ]]; then
    echo "| $a | (${lib[$a]} is not installed) | | | | |"
    continue
  fi
  LD_PRELOAD="${lib[$a]}" "$memtide" run -q --no-symbolize -o "$work/$a.0.mtide" -- "$prog" 0 0 >/dev/null
  read -r -a fixed <<<"$(report_medians "$work/$a.0.mtide")"
  for n in $sizes; do
    [[ $n -le $events ]] && row "$a" "$n" "$events"
  done
  for n in $sizes; do
    [[ $n -ge 1000000 ]] && row "$a" "$n" "$n"
  done
done
