#!/usr/bin/env bash
# bench/checkpoints.sh: what checkpoints cost the recording, and what they save a reader of a
# time window.
#
#   bench/checkpoints.sh [--build-dir DIR] [--dir DIR] [--seconds S] [--threads T] [--window W]
#
# 1. Cost: memtide-bench-live-blocks with 1 M live 16-byte blocks and 40 M events, recorded
#    with checkpoints off (MEMTIDE_CHECKPOINT_INTERVAL=0), at the default (10 s or 64 MiB) and
#    every second: wall time, CPU time (user + system, the writer thread's included), peak RSS
#    of the program, trace size, and the size of one checkpoint.
# 2. Windows: the example worker (exact, T threads, S seconds) recorded into DIR; then
#    `memtide report` of a W-second window at its start, middle and end, from the checkpoints
#    and with MEMTIDE_FULL_REPLAY=1, plus `memtide info` (open) and the whole-run report: wall
#    time and peak RSS of each. Prints markdown tables.
set -euo pipefail

repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
build="$repo/build"
dir=${TMPDIR:-/tmp}/memtide-checkpoints
seconds=60
threads=2
window=10
while [[ $# -gt 0 ]]; do
  case "$1" in
    --build-dir) build=$2; shift 2 ;;
    --dir) dir=$2; shift 2 ;;
    --seconds) seconds=$2; shift 2 ;;
    --threads) threads=$2; shift 2 ;;
    --window) window=$2; shift 2 ;;
    -h|--help) sed -n '2,14p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "checkpoints: unknown option $1" >&2; exit 2 ;;
  esac
done
preload="$build/lib/libmemtide.so"
cli="$build/bin/memtide-cli"
live="$build/bin/memtide-bench-live-blocks"
worker="$build/bin/memtide-example-worker"
for f in "$preload" "$cli" "$live" "$worker"; do
  [[ -x $f || -f $f ]] || { echo "checkpoints: $f not built" >&2; exit 2; }
done
mkdir -p "$dir"

# Runs "$@" under /usr/bin/time; prints "wall cpu maxrss_kib".
timed() {
  /usr/bin/time -o "$dir/time.txt" -f '%e %U %S %M' "$@" >/dev/null 2>/dev/null || true
  awk 'END {printf "%.2f %.2f %d\n", $1, $2 + $3, $4}' "$dir/time.txt"
}

# The size of the last checkpoint's data blocks (bytes), from `memtide info --json`.
checkpoint_bytes() {
  "$cli" info --json "$1" | python3 -c '
import json, sys
j = json.load(sys.stdin)
c = j["checkpoints"]
print(len(c), c[-1]["heap_blocks"] if c else 0)'
}

echo "## Cost of checkpoints: 1 M live blocks, 40 M events"
echo
echo "| checkpoints | wall s | CPU s | program RSS MiB | trace MiB | checkpoints | live blocks in the last |"
echo "|---|---:|---:|---:|---:|---:|---:|"
for interval in 0 10 1; do
  trace="$dir/live-$interval.mtide"
  rm -f "$trace"
  read -r wall cpu rss < <(timed env LD_PRELOAD="$preload" MEMTIDE_OUTPUT="$trace" MEMTIDE_CHECKPOINT_INTERVAL=$interval \
    "$live" 1000000 40000000)
  size=$(stat -c %s "$trace")
  read -r n blocks < <(checkpoint_bytes "$trace")
  label=$([[ $interval == 0 ]] && echo "off" || echo "every ${interval} s or 64 MiB")
  printf "| %s | %s | %s | %d | %.0f | %s | %s |\n" "$label" "$wall" "$cpu" $((rss / 1024)) \
    "$(echo "$size / 1048576" | bc -l)" "$n" "$blocks"
done
echo

trace="$dir/worker.mtide"
rm -f "$trace"
echo "## Windows of a ${seconds} s exact trace of the example worker ($threads threads)"
env LD_PRELOAD="$preload" MEMTIDE_OUTPUT="$trace" "$worker" --seconds "$seconds" --threads "$threads" >/dev/null
size=$(stat -c %s "$trace")
printf "\ntrace: %.0f MiB\n\n" "$(echo "$size / 1048576" | bc -l)"
echo "| what | from checkpoints: s | RSS MiB | full replay: s | RSS MiB |"
echo "|---|---:|---:|---:|---:|"
read -r w _ r < <(timed "$cli" info "$trace")
printf "| open (\`info\`) | %s | %d | | |\n" "$w" $((r / 1024))
for at in start middle end; do
  case $at in
    start) from=1 ;;
    middle) from=$((seconds / 2)) ;;
    end) from=$((seconds - window)) ;;
  esac
  to=$((from + window))
  read -r w1 _ r1 < <(timed "$cli" report --from "$from" --to "$to" "$trace")
  read -r w2 _ r2 < <(timed env MEMTIDE_FULL_REPLAY=1 "$cli" report --from "$from" --to "$to" "$trace")
  printf "| report --from %ss --to %ss (%s) | %s | %d | %s | %d |\n" "$from" "$to" "$at" "$w1" $((r1 / 1024)) "$w2" $((r2 / 1024))
done
read -r w _ r < <(timed "$cli" report "$trace")
printf "| report (whole run) | | | %s | %d |\n" "$w" $((r / 1024))
