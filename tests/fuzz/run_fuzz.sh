#!/bin/sh
# run_fuzz.sh FUZZER WORKDIR SEED_CORPUS SECONDS
# Runs a libFuzzer target for a bounded time on a scratch copy of the corpus (libFuzzer adds
# new inputs to its first corpus directory; the committed seeds stay untouched).
set -eu
fuzzer=$1 work=$2 seeds=$3 secs=$4
rm -rf "$work"
mkdir -p "$work/corpus" "$work/artifacts"
exec "$fuzzer" -max_total_time="$secs" -max_len=16384 -rss_limit_mb=2048 -timeout=10 \
  -print_final_stats=1 -artifact_prefix="$work/artifacts/" "$work/corpus" "$seeds"
