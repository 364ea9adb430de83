#!/usr/bin/env bash
# bench/instructions.sh: instructions executed by each workload untraced, with the interposer
# alone (floor: libmemtide-floor.so) and sampled (libmemtide.so, MEMTIDE_SAMPLE=512KiB), in
# LD_PRELOAD, counted by valgrind's callgrind.
#
#   bench/instructions.sh [--build-dir DIR] [--only NAME[,NAME]] [--interval SIZE]
#
# Timings on a shared 2-vCPU machine vary by 20-60% from run to run, more than the few percent
# sampled mode adds; counted instructions do not vary (the seed is fixed: MEMTIDE_SAMPLE_SEED=1).
# They leave out what the instructions wait for (cache misses, the fence of a clock reading),
# so they measure the work added per event, not its time. Workloads (smaller than bench/run's,
# since callgrind runs them about 50 times slower): the churn microbenchmark on 1, 2 and 4
# threads (400,000 iterations), python3 (bench/workloads/dicts.py 20000, and the same with
# PYTHONMALLOC=malloc), sqlite3 (20,000 rows) and cc1plus compiling bench/workloads/
# containers.cpp at -O0. Prints a markdown table: instructions untraced, and the floor's and
# sampled mode's ×untraced and extra instructions per allocation and free (the events: an
# exact recording's allocations plus frees).
set -euo pipefail

repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
build="$repo/build"
only=""
interval=512KiB
while [[ $# -gt 0 ]]; do
  case "$1" in
    --build-dir) build=$2; shift 2 ;;
    --only) only=$2; shift 2 ;;
    --interval) interval=$2; shift 2 ;;
    -h|--help) sed -n '2,17p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "instructions: unknown option $1" >&2; exit 2 ;;
  esac
done
command -v valgrind >/dev/null || { echo "instructions: valgrind is not installed (scripts/setup)" >&2; exit 2; }
preload="$build/lib/libmemtide.so"
floor="$build/lib/libmemtide-floor.so"
cli="$build/bin/memtide-cli"
churn="$build/bin/memtide-bench-churn"
for f in "$preload" "$floor" "$cli" "$churn"; do
  [[ -e "$f" ]] || { echo "instructions: $f is missing: build first (scripts/build)" >&2; exit 2; }
done

work=$(mktemp -d /tmp/memtide-instructions.XXXXXX)
trap 'rm -rf "$work"' EXIT
/usr/bin/python3 "$repo/bench/workloads/gen_sql.py" 20000 >"$work/rows.sql"
cc1plus=()
if command -v g++ >/dev/null; then
  line=$(g++ -std=c++20 -O0 -c "$repo/bench/workloads/containers.cpp" -o "$work/c.o" -### 2>&1 | grep '^ .*cc1plus' | head -1)
  eval "cc1plus=($line)"
  for i in "${!cc1plus[@]}"; do [[ "${cc1plus[$i]}" == -o ]] && cc1plus[$((i + 1))]=/dev/null; done
fi

# name|environment (words)|program;argument;...
workloads=(
  "churn-1t||$churn;--threads;1;--iterations;400000"
  "churn-2t||$churn;--threads;2;--iterations;400000"
  "churn-4t||$churn;--threads;4;--iterations;400000"
  "python3|PYTHONHASHSEED=0|/usr/bin/python3;$repo/bench/workloads/dicts.py;20000"
  "python3-malloc|PYTHONHASHSEED=0 PYTHONMALLOC=malloc|/usr/bin/python3;$repo/bench/workloads/dicts.py;20000"
)
command -v sqlite3 >/dev/null && workloads+=("sqlite3||$(command -v sqlite3);:memory:;.read $work/rows.sql")
if [[ ${#cc1plus[@]} -gt 0 ]]; then
  joined=$(IFS=';'; echo "${cc1plus[*]}")
  workloads+=("gxx||$joined")
fi

# Instructions of one run: callgrind's total for the program's own process.
count() {  # env-words... -- argv...
  local envs=() out="$work/cg.out"
  while [[ $1 != -- ]]; do envs+=("$1"); shift; done
  shift
  rm -f "$out" "$work"/t.mtide*
  env "${envs[@]}" valgrind --tool=callgrind --callgrind-out-file="$out" "$@" >/dev/null 2>"$work/cg.err" ||
    { echo "instructions: $* failed under callgrind: $(tail -2 "$work/cg.err")" >&2; exit 1; }
  sed -n 's/^summary: //p' "$out"
}
# Allocations plus frees, from an exact recording.
events() {
  rm -f "$work"/ev.mtide*
  env "$@" >/dev/null
  "$cli" report --json "$work/ev.mtide" |
    /usr/bin/python3 -c 'import json,sys; d=json.load(sys.stdin); print(d["total_allocations"] + d["total_frees"])'
}

echo "| workload | events | untraced instructions | floor ×untraced | floor, per event | sampled ×untraced | sampled over the floor, per event |"
echo "|---|---|---|---|---|---|---|"
for w in "${workloads[@]}"; do
  IFS='|' read -r name wenv cmd <<<"$w"
  [[ -z "$only" || ",$only," == *",$name,"* ]] || continue
  IFS=';' read -r -a argv <<<"$cmd"
  extra=()
  [[ -n "$wenv" ]] && read -r -a extra <<<"$wenv"
  n=$(events "${extra[@]}" MEMTIDE_OUTPUT="$work/ev.mtide" LD_PRELOAD="$preload" "${argv[@]}")
  u=$(count "${extra[@]}" MEMTIDE_OUTPUT="$work/t.mtide" -- "${argv[@]}")
  f=$(count "${extra[@]}" MEMTIDE_OUTPUT="$work/t.mtide" LD_PRELOAD="$floor" -- "${argv[@]}")
  s=$(count "${extra[@]}" MEMTIDE_OUTPUT="$work/t.mtide" MEMTIDE_SAMPLE="$interval" MEMTIDE_SAMPLE_SEED=1 \
        LD_PRELOAD="$preload" -- "${argv[@]}")
  /usr/bin/python3 - "$name" "$n" "$u" "$f" "$s" <<'EOF'
import sys
name, n, u, f, s = sys.argv[1], *map(int, sys.argv[2:])
print(f"| {name} | {n:,} | {u / 1e6:,.1f} M | {f / u:.3f}x | {(f - u) / n:+.1f} | "
      f"{s / u:.3f}x | {(s - f) / n:+.1f} |")
EOF
done
