#!/usr/bin/env bash
# The installed CMake package and memtide.pc, used as a project would: install memtide into a
# temporary prefix, build tests/install/gate_project against it, and run its ctest suite, whose
# every test runs under `memtide run --check`. Exactly the leaking test fails, with its stack;
# the gate's exit status (23) tells the leak from a test's own failure; only its trace is kept.
# Twice: through memtide_add_leak_gate, and through MEMTIDE_TEST_LAUNCHER.
#   gate_test.sh BUILD_DIR
set -euo pipefail
build=$(cd "$1" && pwd)
src=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/gate_project
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*"; exit 1; }

cmake --install "$build" --prefix "$tmp/prefix" >/dev/null
# Moved after the install: the package and the .pc find the tree relative to themselves.
mv "$tmp/prefix" "$tmp/memtide"
prefix=$tmp/memtide

# pkg-config: the header's flags, and where the interposer and the command are.
export PKG_CONFIG_PATH=$(dirname "$(find "$prefix" -name memtide.pc)")
cflags=$(pkg-config --cflags memtide)
[[ -f "$(pkg-config --variable=preload memtide)" ]] || fail "pkg-config's preload names no file"
[[ -x "$(pkg-config --variable=memtide memtide)" ]] || fail "pkg-config's memtide names no program"
[[ "$(pkg-config --modversion memtide)" == "$("$prefix/bin/memtide-cli" --version | awk '{print $2}')" ]] ||
  fail "memtide.pc's version is not memtide's"
# shellcheck disable=SC2086
cc $cflags "$src/list_test.c" -o "$tmp/list_pc" || fail "cannot build with pkg-config's flags"
"$tmp/list_pc"

for route in function launcher; do
  b=$tmp/build-$route
  opt=OFF
  [[ $route == launcher ]] && opt=ON
  cmake -S "$src" -B "$b" -DCMAKE_PREFIX_PATH="$prefix" -DGATE_WITH_LAUNCHER=$opt >"$tmp/configure.log" 2>&1 ||
    { cat "$tmp/configure.log"; fail "$route: configure"; }
  cmake --build "$b" >"$tmp/build.log" 2>&1 || { cat "$tmp/build.log"; fail "$route: build"; }
  status=0
  (cd "$b" && ctest --output-on-failure) >"$tmp/ctest.log" 2>&1 || status=$?
  [[ $status -ne 0 ]] || { cat "$tmp/ctest.log"; fail "$route: ctest passed with a leaking test"; }
  failed=$(sed -n '/The following tests FAILED/,$p' "$tmp/ctest.log" | grep -oE '[a-z_]+_test \(Failed\)' | sort | tr '\n' ' ')
  [[ "$failed" == "cache_test (Failed) " ]] || { cat "$tmp/ctest.log"; fail "$route: failed tests: '$failed'"; }
  grep -q "67% tests passed, 1 tests failed out of 3" "$tmp/ctest.log" || { cat "$tmp/ctest.log"; fail "$route: counts"; }
  # Its stack in ctest's output: the leaking function, its file and line.
  grep -qE "#[0-9]+ +cache_insert .*cache_test\.c:[0-9]+" "$tmp/ctest.log" || { cat "$tmp/ctest.log"; fail "$route: no stack"; }
  grep -q "memtide check: FAILED" "$tmp/ctest.log" || fail "$route: no verdict"
  # The gate's own status, not a test's failure.
  cmd=$(cd "$b" && ctest -N -V -R cache_test | sed -n 's/^[0-9]*: Test command: //p')
  st=0
  (cd "$b" && eval "$cmd") >/dev/null 2>&1 || st=$?
  [[ $st -eq 23 ]] || fail "$route: the leaking test exited $st, not 23 ($cmd)"
  # Traces kept only on failure: the leaking test's (twice now), none of the others'.
  kept=$(cd "$b" && ls memtide.*.mtide | sed 's/\.[0-9]*\.mtide$//' | sort -u | tr '\n' ' ')
  [[ "$kept" == "memtide.cache_test " ]] || fail "$route: traces kept: '$kept'"
  if [[ $route == function ]]; then
    for t in parse_test list_test; do
      grep -q "failures=\"0\"" "$b/junit/$t.xml" || fail "$t's JUnit report has a failure"
    done
    grep -q '<testcase classname="memtide.check" name="cache_test"' "$b/junit/cache_test.xml" || fail "JUnit test case name"
    grep -q "cache_insert" "$b/junit/cache_test.xml" || fail "JUnit report without the stack"
  fi
done
echo "gate test passed"
