#!/usr/bin/env bash
# bench/windows.sh: time windows of a long exact trace, read from its checkpoints up to the
# window's end, against a full replay and against heaptrack on the same program.
#
#   bench/windows.sh [--build-dir DIR] [--dir DIR] [--seconds S] [--threads T] [--window W]
#                    [--no-heaptrack] [--no-full-windows] [--reuse]
#
# Records the example worker (exact, T threads, S seconds, MEMTIDE_CHECKPOINT_INTERVAL=10) and,
# unless --no-heaptrack, the same worker for the same time under heaptrack. Then, with wall time
# and peak RSS (GNU time) of each: `memtide info` (open), `memtide report --from --to` of a
# W-second window at the start, middle and end of the run, from the checkpoints and with
# MEMTIDE_FULL_REPLAY=1, the whole-run report, memtide-bench-timeline (the viewer's whole-run
# timeline) and heaptrack_print of the heaptrack run (it has no time window: heaptrack_gui's
# time range re-reads the file up to the range's end). --no-full-windows leaves out the windows'
# full replays (the whole-run report still gives one), for traces too large to replay four
# times. --reuse keeps traces already in DIR.
# Prints a markdown table.
set -euo pipefail

repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
build="$repo/build"
dir=${TMPDIR:-/tmp}/memtide-windows
seconds=300
threads=2
window=60
heaptrack=1
full_windows=1
reuse=0
while [[ $# -gt 0 ]]; do
  case "$1" in
    --build-dir) build=$2; shift 2 ;;
    --dir) dir=$2; shift 2 ;;
    --seconds) seconds=$2; shift 2 ;;
    --threads) threads=$2; shift 2 ;;
    --window) window=$2; shift 2 ;;
    --no-heaptrack) heaptrack=0; shift ;;
    --no-full-windows) full_windows=0; shift ;;
    --reuse) reuse=1; shift ;;
    -h|--help) sed -n '2,17p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "windows: unknown option $1" >&2; exit 2 ;;
  esac
done
preload="$build/lib/libmemtide.so"
cli="$build/bin/memtide-cli"
worker="$build/bin/memtide-example-worker"
timeline="$build/bin/memtide-bench-timeline"
for f in "$preload" "$cli" "$worker" /usr/bin/time; do
  [[ -e $f ]] || { echo "windows: $f is missing (build the tree; GNU time)" >&2; exit 2; }
done
if [[ $heaptrack == 1 ]] && ! command -v heaptrack >/dev/null; then
  echo "windows: heaptrack is not installed (scripts/setup), or pass --no-heaptrack" >&2
  exit 2
fi
mkdir -p "$dir"

# Runs "$@" under GNU time; prints "wall maxrss_kib".
timed() {
  /usr/bin/time -o "$dir/time.txt" -f '%e %M' "$@" >/dev/null 2>/dev/null || true
  awk 'END {printf "%.2f %d\n", $1, $2}' "$dir/time.txt"
}
mib() { echo $(( ($1 + 524288) / 1048576 )); }

trace="$dir/worker.mtide"
if [[ $reuse == 0 || ! -s $trace ]]; then
  rm -f "$trace"
  read -r rec _ < <(timed env LD_PRELOAD="$preload" MEMTIDE_OUTPUT="$trace" MEMTIDE_CHECKPOINT_INTERVAL=10 \
    "$worker" --seconds "$seconds" --threads "$threads")
  echo "recorded $(mib "$(stat -c %s "$trace")") MiB in $rec s"
fi
hfile=$(ls "$dir"/worker.heaptrack.* 2>/dev/null | head -1 || true)
if [[ $heaptrack == 1 && ( $reuse == 0 || -z $hfile ) ]]; then
  rm -f "$dir"/worker.heaptrack.*
  heaptrack -o "$dir/worker.heaptrack" "$worker" --seconds "$seconds" --threads "$threads" >/dev/null 2>&1 || true
  hfile=$(ls "$dir"/worker.heaptrack.* 2>/dev/null | head -1 || true)
fi

size=$(stat -c %s "$trace")
# The run's length and checkpoints, from `memtide info --json`.
read -r run n < <("$cli" info --json "$trace" | python3 -c '
import json, sys
j = json.load(sys.stdin)
print(int(j.get("duration_ns", 0) / 1e9), len(j.get("checkpoints", [])))')
(( window * 3 > run )) && window=10  # (windows of a shorter run: 10 s)
echo
echo "trace: $(mib "$size") MiB, ${run} s, $n checkpoints; windows of ${window} s"
echo
echo "| what | from checkpoints: s | RSS MiB | full replay: s | RSS MiB |"
echo "|---|---:|---:|---:|---:|"
read -r w r < <(timed "$cli" info "$trace")
printf "| open (\`info\`) | %s | %d | | |\n" "$w" $((r / 1024))
for at in start middle end; do
  case $at in
    start) from=1 ;;
    middle) from=$(( run / 2 )) ;;
    end) from=$(( run - window - 1 )) ;;
  esac
  to=$(( from + window ))
  read -r w1 r1 < <(timed "$cli" report --from "$from" --to "$to" "$trace")
  if [[ $full_windows == 1 ]]; then
    read -r w2 r2 < <(timed env MEMTIDE_FULL_REPLAY=1 "$cli" report --from "$from" --to "$to" "$trace")
    r2=$((r2 / 1024))
  else
    w2="" r2=""
  fi
  printf "| report --from %ss --to %ss (%s) | %s | %d | %s | %s |\n" "$from" "$to" "$at" "$w1" $((r1 / 1024)) "$w2" "$r2"
done
read -r w r < <(timed "$cli" report "$trace")
printf "| report (whole run) | | | %s | %d |\n" "$w" $((r / 1024))
if [[ -x $timeline ]]; then
  read -r w r < <(timed "$timeline" "$trace")
  printf "| viewer's whole-run timeline (heap, RSS, mapped, marks) | %s | %d | | |\n" "$w" $((r / 1024))
fi
if [[ -n $hfile ]]; then
  read -r w r < <(timed heaptrack_print "$hfile")
  printf "| heaptrack_print, whole run (%s MiB file) | | | %s | %d |\n" "$(mib "$(stat -c %s "$hfile")")" "$w" $((r / 1024))
fi
