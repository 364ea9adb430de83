#!/usr/bin/env bash
# The leak gate with GoogleTest's own test discovery, as a project would use it: install memtide
# into a temporary prefix, build tests/install/gtest_project against it (memtide_add_leak_gate,
# then gtest_discover_tests) and run its ctest suite. The discovery run (--gtest_list_tests) is
# not gated and prints the program's list alone; each discovered test runs under the gate with
# a JUnit report of its own; exactly the leaking test fails, with its stack, exit status 23 and
# failures="1" in its report. Twice: discovery after the build (POST_BUILD) and when ctest runs
# (PRE_TEST). Then memtide_add_leak_gate after gtest_discover_tests is a configure error.
#   gtest_gate_test.sh BUILD_DIR
set -euo pipefail
shopt -s nullglob
build=$(cd "$1" && pwd)
src=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/gtest_project
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*"; exit 1; }

cmake --install "$build" --prefix "$tmp/prefix" >/dev/null
# Moved after the install: the package finds the tree, and its launcher, relative to itself.
mv "$tmp/prefix" "$tmp/memtide"
prefix=$tmp/memtide
launcher=$(find "$prefix" -name memtide-test-launcher)
[[ -n "$launcher" && -x "$launcher" ]] || fail "memtide-test-launcher is not installed as a program"
[[ -f "$(dirname "$launcher")/MemtideLeakGate.cmake" ]] || fail "memtide-test-launcher is not beside MemtideLeakGate.cmake"

tests="PoolTest.Evict PoolTest.Grow PoolTest.Reuse "
for mode in POST_BUILD PRE_TEST; do
  b=$tmp/build-$mode
  cmake -S "$src" -B "$b" -DCMAKE_PREFIX_PATH="$prefix" -DCMAKE_GTEST_DISCOVER_TESTS_DISCOVERY_MODE=$mode \
    >"$tmp/configure.log" 2>&1 || { cat "$tmp/configure.log"; fail "$mode: configure"; }
  cmake --build "$b" >"$tmp/build.log" 2>&1 || { cat "$tmp/build.log"; fail "$mode: build"; }
  # The discovery run is not gated: no verdict in the build's output.
  if grep -q "memtide check" "$tmp/build.log"; then cat "$tmp/build.log"; fail "$mode: the discovery run was gated"; fi

  status=0
  (cd "$b" && ctest --output-on-failure) >"$tmp/ctest.log" 2>&1 || status=$?
  [[ $status -ne 0 ]] || { cat "$tmp/ctest.log"; fail "$mode: ctest passed with a leaking test"; }
  found=$(cd "$b" && ctest -N | sed -n 's/^ *Test *#[0-9]*: //p' | sort | tr '\n' ' ')
  [[ "$found" == "$tests" ]] || { cat "$tmp/ctest.log"; fail "$mode: tests discovered: '$found'"; }
  failed=$(sed -n '/The following tests FAILED/,$p' "$tmp/ctest.log" | grep -oE '[A-Za-z_]+\.[A-Za-z_]+ \(Failed\)' |
    sort | tr '\n' ' ')
  [[ "$failed" == "PoolTest.Evict (Failed) " ]] || { cat "$tmp/ctest.log"; fail "$mode: failed tests: '$failed'"; }
  grep -q "67% tests passed, 1 tests failed out of 3" "$tmp/ctest.log" || { cat "$tmp/ctest.log"; fail "$mode: counts"; }
  # The leak's stack in ctest's output: the leaking function, its file and line.
  grep -qE "#[0-9]+ +.*pool_evict.* \(pool_test\.cpp:[0-9]+\)" "$tmp/ctest.log" ||
    { cat "$tmp/ctest.log"; fail "$mode: no stack"; }

  # One JUnit report per discovered test, none for the discovery run (junit/pool_test.xml).
  reports=("$b"/junit/*)
  reports=("${reports[@]##*/}")
  [[ "${reports[*]}" == "pool_test.PoolTest.Evict.xml pool_test.PoolTest.Grow.xml pool_test.PoolTest.Reuse.xml" ]] ||
    fail "$mode: JUnit reports: '${reports[*]}'"
  for t in Grow Reuse; do
    grep -q '<testsuites name="memtide" tests="1" failures="0"' "$b/junit/pool_test.PoolTest.$t.xml" ||
      { cat "$b/junit/pool_test.PoolTest.$t.xml"; fail "$mode: PoolTest.$t's report is not failures=\"0\""; }
  done
  evict=$b/junit/pool_test.PoolTest.Evict.xml
  grep -q '<testsuites name="memtide" tests="1" failures="1"' "$evict" ||
    { cat "$evict"; fail "$mode: PoolTest.Evict's report is not failures=\"1\""; }
  grep -q "pool_evict" "$evict" || fail "$mode: PoolTest.Evict's report without the stack"

  # The gate's own status for the leaking test, not a test's failure.
  cmd=$(cd "$b" && ctest -N -V -R 'PoolTest\.Evict' | sed -n 's/^[0-9]*: Test command: //p')
  [[ "$cmd" == *memtide-test-launcher* ]] || fail "$mode: PoolTest.Evict does not run under the launcher: $cmd"
  st=0
  (cd "$b" && eval "$cmd") >/dev/null 2>&1 || st=$?
  [[ $st -eq 23 ]] || fail "$mode: the leaking test exited $st, not 23 ($cmd)"
  # Traces kept only on failure: the leaking test's (twice now), none of the others'.
  kept=("$b"/memtide.*.mtide)
  kept=("${kept[@]##*/}")
  [[ ${#kept[@]} -eq 2 && ${kept[0]} == memtide.pool_test.*.mtide && ${kept[1]} == memtide.pool_test.*.mtide ]] ||
    fail "$mode: traces kept: '${kept[*]}'"

  # The discovery run through the test's launcher: the program's own stdout byte for byte,
  # nothing on stderr, status 0, no report, no trace.
  cmd=$(cd "$b" && ctest -N -V -R 'PoolTest\.Reuse' | sed -n 's/^[0-9]*: Test command: //p')
  list_cmd=${cmd/'"--gtest_filter=PoolTest.Reuse" "--gtest_also_run_disabled_tests"'/'"--gtest_list_tests"'}
  [[ "$list_cmd" != "$cmd" ]] || fail "$mode: unexpected test command: $cmd"
  (cd "$b" && ./pool_test --gtest_list_tests) >"$tmp/list.want"
  st=0
  (cd "$b" && eval "$list_cmd") >"$tmp/list.got" 2>"$tmp/list.err" || st=$?
  [[ $st -eq 0 ]] || fail "$mode: the listing run exited $st"
  cmp -s "$tmp/list.want" "$tmp/list.got" || { diff "$tmp/list.want" "$tmp/list.got" || true; fail "$mode: listing's stdout"; }
  [[ ! -s "$tmp/list.err" ]] || { cat "$tmp/list.err"; fail "$mode: the listing run wrote to stderr"; }
  after=("$b"/junit/* "$b"/memtide.*.mtide)
  [[ ${#after[@]} -eq 5 ]] || fail "$mode: the listing run left a report or a trace: ${after[*]##*/}"
done

# memtide_add_leak_gate after gtest_discover_tests: a configure error that says to call it before.
status=0
cmake -S "$src" -B "$tmp/build-after" -DCMAKE_PREFIX_PATH="$prefix" -DGATE_ORDER=AFTER >"$tmp/configure.log" 2>&1 ||
  status=$?
[[ $status -ne 0 ]] || { cat "$tmp/configure.log"; fail "memtide_add_leak_gate after gtest_discover_tests configured"; }
message=$(tr -s ' \n' '  ' <"$tmp/configure.log")
[[ "$message" == *"gtest_discover_tests(pool_test) was called before it"*"Call memtide_add_leak_gate(TARGETS pool_test ...) before gtest_discover_tests(pool_test)."* ]] ||
  { cat "$tmp/configure.log"; fail "the configure error does not say to call memtide_add_leak_gate before"; }
echo "gtest gate test passed"
