#!/usr/bin/env bash
# What `memtide attach` costs a running program (bench/README.md, "memtide attach"):
#   - how long the attach holds the process: the longest wait between two 1 ms wakes of a
#     ticker thread of the program (memtide-bench-attach-probe), against the same figure
#     untraced;
#   - the recording's cost once attached, against `memtide run`'s on the same program: requests
#     handled per second, over the same windows of each run (from 4 s, after the attach, to
#     1 s before the end).
#
#   bench/attach.sh [--build-dir DIR] [--runs N] [--seconds S] [--threads T]
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
build=$root/build
runs=3
seconds=12
threads=2
while [[ $# -gt 0 ]]; do
  case "$1" in
    --build-dir) build=$2; shift 2 ;;
    --runs) runs=$2; shift 2 ;;
    --seconds) seconds=$2; shift 2 ;;
    --threads) threads=$2; shift 2 ;;
    *) echo "usage: bench/attach.sh [--build-dir DIR] [--runs N] [--seconds S] [--threads T]" >&2; exit 2 ;;
  esac
done
probe=$build/bin/memtide-bench-attach-probe
memtide=$build/bin/memtide
[[ -x "$probe" && -x "$memtide" ]] || { echo "build memtide-bench-attach-probe, memtide and memtide-cli first" >&2; exit 2; }
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
from_ms=4000
to_ms=$(( (seconds - 1) * 1000 ))

# Mean requests/s, and CPU ns per request, of the windows ending in (from_ms, to_ms].
rate() { awk -v a="$from_ms" -v b="$to_ms" '$1 == "rate" && $2 > a && $2 <= b { s += $3; n++ } END { printf "%.0f", s / n }' "$1"; }
cpu() { awk -v a="$from_ms" -v b="$to_ms" '$1 == "rate" && $2 > a && $2 <= b { s += $3 / 4; c += $3 / 4 * $4 } END { printf "%.0f", c / s }' "$1"; }
gap() { awk '$1 == "max_gap_ms" { print $2 }' "$1"; }

probe_args=(--threads "$threads" --seconds "$seconds")
for i in $(seq "$runs"); do
  "$probe" "${probe_args[@]}" >"$work/untraced.$i"
  "$memtide" run -q --no-symbolize -o "$work/run.$i.mtide" -- "$probe" "${probe_args[@]}" >"$work/run.$i"
  rm -f "$work/ready"
  "$probe" "${probe_args[@]}" --ready "$work/ready" >"$work/attached.$i" &
  pid=$!
  while [[ ! -s "$work/ready" ]]; do sleep 0.01; done
  sleep 0.5
  "$memtide" attach "$pid" --no-symbolize -o "$work/attached.$i.mtide" 2>"$work/attach.$i.log" &
  attach=$!
  wait "$pid"
  wait "$attach" || { cat "$work/attach.$i.log" >&2; exit 1; }
  held=$(sed -n 's/.* in \([0-9]*\) ms;.*/\1/p' "$work/attach.$i.log")
  # The same attach through gdb (MEMTIDE_ATTACH_INJECTOR=gdb), which holds every thread.
  rm -f "$work/ready"
  "$probe" "${probe_args[@]}" --ready "$work/ready" >"$work/gdb.$i" &
  pid=$!
  while [[ ! -s "$work/ready" ]]; do sleep 0.01; done
  sleep 0.5
  MEMTIDE_ATTACH_INJECTOR=gdb "$memtide" attach "$pid" --no-symbolize -o "$work/gdb.$i.mtide" 2>"$work/gdb.$i.log" &
  attach=$!
  wait "$pid"
  wait "$attach" || { cat "$work/gdb.$i.log" >&2; exit 1; }
  held_gdb=$(sed -n 's/.* in \([0-9]*\) ms;.*/\1/p' "$work/gdb.$i.log")
  printf 'run %d: CPU ns per request untraced %s, memtide run %s, attached %s; requests/s %s, %s, %s; longest wait untraced %s ms, attached %s ms (one thread held %s ms), attached by gdb %s ms (gdb held the process %s ms)\n' \
    "$i" "$(cpu "$work/untraced.$i")" "$(cpu "$work/run.$i")" "$(cpu "$work/attached.$i")" \
    "$(rate "$work/untraced.$i")" "$(rate "$work/run.$i")" "$(rate "$work/attached.$i")" \
    "$(gap "$work/untraced.$i")" "$(gap "$work/attached.$i")" "$held" "$(gap "$work/gdb.$i")" "$held_gdb"
  rm -f "$work"/*.mtide
done
