#!/usr/bin/env bash
# bench/keep_heap.sh: what --keep costs a program with a large live heap, whose checkpoints are
# large: memtide-bench-live-blocks (BLOCKS live blocks, EVENTS allocations and frees all over
# them) untraced, recorded exactly into one file, and recorded exactly with --keep SIZE for each
# SIZE given; with --against LIB, also with --keep under another build's libmemtide.so. The
# variants run alternately, RUNS rounds; prints a markdown table of medians: CPU seconds (user +
# system, the writer thread's included), wall seconds, checkpoints written, segments written and
# the kept range's share of the run ("-": the set holds no checkpoint).
#
#   bench/keep_heap.sh [--build-dir DIR] [--dir DIR] [--blocks N] [--events E] [--keep "64MiB 128MiB"]
#                      [--runs R] [--against LIB]
set -euo pipefail

repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
build="$repo/build"
dir=${TMPDIR:-/tmp}/memtide-keep-heap
blocks=2000000
events=20000000
keeps="64MiB 128MiB"
runs=3
against=""
while [[ $# -gt 0 ]]; do
  case "$1" in
    --build-dir) build=$2; shift 2 ;;
    --dir) dir=$2; shift 2 ;;
    --blocks) blocks=$2; shift 2 ;;
    --events) events=$2; shift 2 ;;
    --keep) keeps=$2; shift 2 ;;
    --runs) runs=$2; shift 2 ;;
    --against) against=$2; shift 2 ;;
    -h|--help) sed -n '2,12p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "keep_heap: unknown option $1" >&2; exit 2 ;;
  esac
done
preload="$build/lib/libmemtide.so"
prog="$build/bin/memtide-bench-live-blocks"
cli="$build/bin/memtide-cli"
for f in "$preload" "$prog" "$cli" ${against:+"$against"}; do
  [[ -f $f ]] || { echo "keep_heap: $f not built" >&2; exit 2; }
done
mkdir -p "$dir"
out="$dir/results.txt"
: >"$out"

# run NAME LIB KEEP: one recording (LIB empty: untraced; KEEP empty: one file); appends
# "NAME cpu wall checkpoints segments kept_share" to the results.
run() {
  local name=$1 lib=$2 keep=$3
  rm -f "$dir"/t.mtide "$dir"/t.[0-9][0-9][0-9][0-9]*.mtide
  local env=()
  if [[ -n $lib ]]; then env+=(LD_PRELOAD="$lib" MEMTIDE_OUTPUT="$dir/t.mtide"); fi
  if [[ -n $keep ]]; then env+=(MEMTIDE_KEEP="$keep"); fi
  /usr/bin/time -o "$dir/time.txt" -f '%U %S %e' env "${env[@]}" "$prog" "$blocks" "$events" --random >/dev/null 2>"$dir/stderr.txt"
  local ck=- segs=- share=-
  if [[ -n $keep ]]; then
    local info
    info=$("$cli" info "$dir/t.mtide" 2>/dev/null || true)
    segs=$(ls "$dir"/t.[0-9][0-9][0-9][0-9]*.mtide | sed 's/.*\.\([0-9]*\)\.mtide$/\1/' | sort -n | tail -1 | sed 's/^0*//')
    # "checkpoints  2 (of 5 written), at ..." or "checkpoints  2, at ...": the last one's number.
    ck=$(sed -n 's/^checkpoints *\([0-9]*\)\( (of \([0-9]*\) written)\)\{0,1\},.*/\1 \3/p' <<<"$info" | awk '{print ($2 != "" ? $2 : $1)}')
    ck=${ck:-0}
    # "kept         segments 0009-0014 of t.mtide, 2.8 s - 4.4 s" against the duration.
    share=$(awk 'function s(v, u) { return u == "ms" ? v / 1e3 : u == "us" ? v / 1e6 : u == "ns" ? v / 1e9 : u == "min" ? v * 60 : u == "h" ? v * 3600 : v }
                 /^kept/ && !/no checkpoint/ {a = s($(NF-4), $(NF-3)); b = s($(NF-1), $NF); k = 1} /^duration/ {d = s($2, $3)}
                 END {if (d > 0 && k) printf "%.2f", (b - a) / d; else print "-"}' <<<"$info")
  fi
  awk -v n="$name" -v c="$ck" -v s="$segs" -v k="$share" '{printf "%s %.2f %.2f %s %s %s\n", n, $1 + $2, $3, c, s, k}' "$dir/time.txt" >>"$out"
}

for ((r = 1; r <= runs; ++r)); do
  run untraced "" ""
  run exact "$preload" ""
  for k in $keeps; do
    run "keep-$k" "$preload" "$k"
    if [[ -n $against ]]; then run "keep-$k-against" "$against" "$k"; fi
  done
done

echo "memtide-bench-live-blocks $blocks $events --random, $runs rounds, medians"
echo
echo "| recording | CPU s | wall s | checkpoints | segments | kept share of the run |"
echo "|---|---|---|---|---|---|"
awk '{print $1}' "$out" | awk '!seen[$0]++' | while read -r name; do
  grep "^$name " "$out" | python3 -c '
import sys, statistics
rows = [l.split() for l in sys.stdin]
med = lambda i: statistics.median(float(r[i]) for r in rows)
cell = lambda i: "-" if rows[0][i] == "-" else ("%.0f" % med(i) if i in (3, 4) else "%.2f" % med(i))
print("| %s | %.2f | %.2f | %s | %s | %s |" % (rows[0][0], med(1), med(2), cell(3), cell(4), cell(5)))'
done
