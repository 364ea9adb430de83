#!/usr/bin/env bash
# bench/keep.sh: what a kept trace (--keep) costs a long-running worker, and the disk it takes.
#
#   bench/keep.sh [--build-dir DIR] [--dir DIR] [--seconds S] [--threads T] [--rate R] [--keep SIZE]
#
# The example worker (T threads, R requests a second, S seconds) untraced, recorded exactly into
# one file, recorded exactly with --keep SIZE, and sampled (512KiB) with --keep SIZE. For each:
# the program's CPU time (user + system, the writer thread's included), its peak RSS, the trace's
# bytes on disk at the end, the most seen on disk while it ran (the trace's files, sampled every
# 0.2 s), and the segments written. Prints a markdown table.
set -euo pipefail

repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
build="$repo/build"
dir=${TMPDIR:-/tmp}/memtide-keep
seconds=120
threads=2
rate=20000
keep=64MiB
while [[ $# -gt 0 ]]; do
  case "$1" in
    --build-dir) build=$2; shift 2 ;;
    --dir) dir=$2; shift 2 ;;
    --seconds) seconds=$2; shift 2 ;;
    --threads) threads=$2; shift 2 ;;
    --rate) rate=$2; shift 2 ;;
    --keep) keep=$2; shift 2 ;;
    -h|--help) sed -n '2,10p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "keep: unknown option $1" >&2; exit 2 ;;
  esac
done
preload="$build/lib/libmemtide.so"
worker="$build/bin/memtide-example-worker"
for f in "$preload" "$worker"; do
  [[ -f $f ]] || { echo "keep: $f not built" >&2; exit 2; }
done
mkdir -p "$dir"
rm -f "$dir"/*.mtide

# The bytes of the files of trace NAME (NAME.mtide and its segments).
trace_bytes() { { stat -c %s "$1".mtide "$1".[0-9][0-9][0-9][0-9]*.mtide 2>/dev/null || true; } | awk '{s += $1} END {print s + 0}'; }

# Runs the worker with the environment "$@"; prints "cpu_s maxrss_kib end_bytes most_bytes segments".
run() {
  local name=$1; shift
  rm -f "$dir/$name".mtide "$dir/$name".[0-9][0-9][0-9][0-9]*.mtide
  /usr/bin/time -o "$dir/time.txt" -f '%U %S %M' env "$@" MEMTIDE_OUTPUT="$dir/$name.mtide" \
    "$worker" --seconds "$seconds" --threads "$threads" --rate "$rate" >/dev/null 2>&1 &
  local pid=$! most=0 b
  while kill -0 "$pid" 2>/dev/null; do
    b=$(trace_bytes "$dir/$name")
    if (( b > most )); then most=$b; fi
    sleep 0.2
  done
  wait "$pid" || true
  b=$(trace_bytes "$dir/$name")
  if (( b > most )); then most=$b; fi
  local last
  last=$(ls "$dir/$name".[0-9][0-9][0-9][0-9]*.mtide 2>/dev/null | sed 's/.*\.\([0-9]*\)\.mtide$/\1/' | sort -n | tail -1 || true)
  awk -v e="$b" -v m="$most" -v s="${last:-1}" '{printf "%.2f %d %d %d %d\n", $1 + $2, $3, e, m, s}' "$dir/time.txt"
}

echo "## The example worker, ${seconds} s, $threads threads, $rate requests/s, --keep $keep"
echo
echo "| recording | CPU s | peak RSS MiB | trace at the end MiB | most on disk MiB | segments written |"
echo "|---|---:|---:|---:|---:|---:|"
row() {
  read -r cpu rss end most segs < <(run "$@")
  printf "| %s | %s | %d | %.1f | %.1f | %s |\n" "$label" "$cpu" $((rss / 1024)) \
    "$(echo "$end / 1048576" | bc -l)" "$(echo "$most / 1048576" | bc -l)" "$segs"
}
label="untraced"; read -r cpu rss < <(/usr/bin/time -f '%U %S %M' -o "$dir/time.txt" "$worker" --seconds "$seconds" \
  --threads "$threads" --rate "$rate" >/dev/null 2>&1; awk 'END {printf "%.2f %d\n", $1 + $2, $3}' "$dir/time.txt")
printf "| %s | %s | %d | | | |\n" "$label" "$cpu" $((rss / 1024))
label="exact, one file"; row plain LD_PRELOAD="$preload"
label="exact, checkpoints every 10 s"; row ckpt LD_PRELOAD="$preload" MEMTIDE_CHECKPOINT_INTERVAL=10
label="exact, --keep $keep"; row kept LD_PRELOAD="$preload" MEMTIDE_KEEP="$keep"
label="sampled 512KiB, --keep $keep"; row sampled LD_PRELOAD="$preload" MEMTIDE_KEEP="$keep" MEMTIDE_SAMPLE=512KiB
