#!/usr/bin/env bash
# bench/report_vs_heaptrack.sh: time of the full report, memtide vs heaptrack, on traces of the
# same program (bench/workloads/churn.cpp, built as memtide-bench-churn).
#
#   bench/report_vs_heaptrack.sh [--build-dir DIR] [--runs N] [--iterations M] [--threads T]
#
# Records the workload once with memtide (LD_PRELOAD) and once with heaptrack, then runs
# `memtide-cli report TRACE` and `heaptrack_print FILE` alternately (A B A B ...), N times each
# (default 5) after one warm-up round, output to /dev/null. Prints each tool's median wall time
# and max RSS (GNU time), the events in each trace, and the speed ratio. The goal: memtide at
# least 3x faster. Needs heaptrack and GNU time (/usr/bin/time); the build must have
# memtide-cli, libmemtide.so and memtide-bench-churn.
set -euo pipefail

repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
build="$repo/build"
runs=5
iterations=1000000
threads=1
while [[ $# -gt 0 ]]; do
  case "$1" in
    --build-dir) build=$2; shift 2 ;;
    --runs) runs=$2; shift 2 ;;
    --iterations) iterations=$2; shift 2 ;;
    --threads) threads=$2; shift 2 ;;
    -h|--help) sed -n '2,13p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "report_vs_heaptrack: unknown option $1" >&2; exit 2 ;;
  esac
done

cli="$build/bin/memtide-cli"
preload="$build/lib/libmemtide.so"
prog="$build/bin/memtide-bench-churn"
for f in "$cli" "$preload" "$prog"; do
  [[ -e "$f" ]] || { echo "report_vs_heaptrack: missing $f (build the tree first)" >&2; exit 2; }
done
for t in heaptrack heaptrack_print /usr/bin/time; do
  command -v "$t" >/dev/null || { echo "report_vs_heaptrack: $t is not installed (scripts/setup)" >&2; exit 2; }
done

work=$(mktemp -d "${TMPDIR:-/tmp}/memtide-report-bench.XXXXXX")
trap 'rm -rf "$work"' EXIT
args=(--threads "$threads" --iterations "$iterations")

echo "workload: memtide-bench-churn ${args[*]}" >&2
echo "recording with memtide..." >&2
LD_PRELOAD="$preload" MEMTIDE_OUTPUT="$work/trace.mtide" "$prog" "${args[@]}" >/dev/null
echo "recording with heaptrack..." >&2
heaptrack -o "$work/heaptrack" "$prog" "${args[@]}" >/dev/null 2>&1
shopt -s nullglob
files=("$work"/heaptrack*.zst "$work"/heaptrack*.gz)
shopt -u nullglob
((${#files[@]})) || { echo "report_vs_heaptrack: heaptrack wrote no file" >&2; exit 1; }
ht=${files[0]}

# One run: prints "seconds max_rss_kib".
measure() {
  /usr/bin/time -f "%e %M" -o "$work/time" "$@" >/dev/null 2>"$work/stderr" || {
    echo "report_vs_heaptrack: failed: $*" >&2
    cat "$work/stderr" >&2
    exit 1
  }
  cat "$work/time"
}

median() { sort -g | awk '{a[NR]=$1} END {print (NR % 2) ? a[(NR+1)/2] : (a[NR/2] + a[NR/2+1]) / 2}'; }

: >"$work/m.times"; : >"$work/m.rss"; : >"$work/h.times"; : >"$work/h.rss"
for ((i = 0; i <= runs; i++)); do
  read -r mt mr < <(measure "$cli" report "$work/trace.mtide")
  read -r htm hr < <(measure heaptrack_print "$ht")
  if ((i > 0)); then  # round 0 warms the page cache
    echo "$mt" >>"$work/m.times"; echo "$mr" >>"$work/m.rss"
    echo "$htm" >>"$work/h.times"; echo "$hr" >>"$work/h.rss"
  fi
  echo "  round $i: memtide ${mt}s, heaptrack_print ${htm}s" >&2
done

m_t=$(median <"$work/m.times"); h_t=$(median <"$work/h.times")
m_r=$(median <"$work/m.rss"); h_r=$(median <"$work/h.rss")
events=$("$cli" info --json "$work/trace.mtide" | sed -n 's/.*"events": \([0-9]*\).*/\1/p' | head -n1 || true)
ht_calls=$(heaptrack_print "$ht" 2>/dev/null | sed -n 's/^calls to allocation functions: \([0-9]\+\).*/\1/p' | head -n1 || true)

printf '\n| | memtide report | heaptrack_print |\n|---|---|---|\n'
printf '| trace | %s (%s bytes, %s events) | %s (%s bytes, %s allocation calls) |\n' \
  "$(basename "$work/trace.mtide")" "$(stat -c %s "$work/trace.mtide")" "${events:-?}" \
  "$(basename "$ht")" "$(stat -c %s "$ht")" "${ht_calls:-?}"
printf '| median wall time (%d runs) | %.3f s | %.3f s |\n' "$runs" "$m_t" "$h_t"
printf '| median max RSS | %.1f MiB | %.1f MiB |\n' "$(echo "$m_r / 1024" | bc -l)" "$(echo "$h_r / 1024" | bc -l)"
ratio=$(echo "$h_t / $m_t" | bc -l)
printf '\nmemtide report is %.1fx faster than heaptrack_print (goal: >= 3x)\n' "$ratio"
