#!/usr/bin/env bash
# `cmake --install` gives a working, relocatable tool: install into a temporary prefix, move
# the tree, and record a program from another directory with the moved copy.
#   install_test.sh BUILD_DIR
set -euo pipefail
build=$1
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

cmake --install "$build" --prefix "$tmp/prefix" >/dev/null
mv "$tmp/prefix" "$tmp/moved"
p="$tmp/moved"
for f in bin/memtide bin/memtide-cli bin/memtide-view include/memtide.h; do
  [[ -e "$p/$f" ]] || { echo "FAIL: $f not installed"; exit 1; }
done
lib=$(find "$p" -name libmemtide.so | head -n1)
[[ -n "$lib" ]] || { echo "FAIL: libmemtide.so not installed"; exit 1; }

mkdir "$tmp/work" && cd "$tmp/work"
"$p/bin/memtide" run --quiet -o run.mtide -- "$p/bin/memtide-example-worker" --seconds 1 --threads 2 >/dev/null
[[ -s run.mtide ]] || { echo "FAIL: no trace written"; exit 1; }
"$p/bin/memtide" info run.mtide >info.txt || { echo "FAIL: memtide info failed"; cat info.txt; exit 1; }
grep -q "complete" info.txt || { echo "FAIL: trace not complete"; cat info.txt; exit 1; }

# A program built against the installed header runs with and without the recorder.
cat >uses_api.c <<'C'
#include <memtide.h>
#include <stdlib.h>
int main(void) {
  memtide_mark("hello");
  void* p = malloc(10);
  memtide_alloc(p, 10);
  memtide_free(p);
  free(p);
  return 0;
}
C
cc -I"$p/include" uses_api.c -o uses_api
./uses_api
"$p/bin/memtide" run --quiet -o api.mtide -- ./uses_api
"$p/bin/memtide-cli" info --json api.mtide | grep -q '"marker": 1' || { echo "FAIL: marker not recorded"; exit 1; }
echo "install test passed"
