#!/usr/bin/env bash
# bench/exit_scan.sh: what the leak scan at exit (--leak-scan, --check) costs, by resident heap
# and by threads stopped.
#
#   bench/exit_scan.sh [--build-dir DIR] [--runs N]
#
# memtide-bench-exit-scan holds MB of written heap (4 KiB blocks chained from a global) with T
# threads waiting; recorded with --leak-scan, the trace's Scan Done record gives the scan's
# duration (the stop of the other threads included). Each point's median of N runs (default 5),
# with the program's resident memory at exit. Prints a markdown table.
set -euo pipefail

repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
build="$repo/build"
runs=5
while [[ $# -gt 0 ]]; do
  case "$1" in
    --build-dir) build=$2; shift 2 ;;
    --runs) runs=$2; shift 2 ;;
    -h|--help) sed -n '2,10p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "exit_scan: unknown option $1" >&2; exit 2 ;;
  esac
done
prog="$build/bin/memtide-bench-exit-scan"
[[ -x $prog ]] || { echo "exit_scan: $prog not built" >&2; exit 2; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# One point: prints "median_ms rss_mb" of the scan of MB with T threads.
point() {
  local mb=$1 t=$2 i ms=() rss=()
  for ((i = 0; i < runs; ++i)); do
    rm -f "$tmp/t.mtide"
    "$build/bin/memtide" run -q --no-symbolize --leak-scan -o "$tmp/t.mtide" -- "$prog" "$mb" "$t" >/dev/null
    read -r d r < <("$build/bin/memtide-cli" report --json "$tmp/t.mtide" | python3 -c '
import json, sys
j = json.load(sys.stdin)
print(j["leak_scan"]["duration_ns"] / 1e6, j.get("peak_rss_bytes", 0) / 2**20)')
    ms+=("$d")
    rss+=("$r")
  done
  printf '%s\n' "${ms[@]}" | sort -g | awk -v n="$runs" '{a[NR] = $1} END {printf "%.1f", a[int((n + 1) / 2)]}'
  printf ' '
  printf '%s\n' "${rss[@]}" | sort -g | awk -v n="$runs" '{a[NR] = $1} END {printf "%.0f\n", a[int((n + 1) / 2)]}'
}

echo "load before: $(cut -d' ' -f1-3 /proc/loadavg); $(nproc) cores; memtide $(git -C "$repo" rev-parse --short HEAD 2>/dev/null || echo '?')"
echo
echo "| heap held | threads waiting | scan, median ms | peak RSS, MiB | ms per 100 MiB of RSS |"
echo "|---|---|---|---|---|"
for mb in 10 100 500 1000; do
  read -r ms rss < <(point "$mb" 0)
  echo "| $mb MiB | 0 | $ms | $rss | $(awk -v m="$ms" -v r="$rss" 'BEGIN {printf "%.1f", (r > 0 ? m / r * 100 : 0)}') |"
done
for t in 8 64 256; do
  read -r ms rss < <(point 10 "$t")
  echo "| 10 MiB | $t | $ms | $rss | |"
done
