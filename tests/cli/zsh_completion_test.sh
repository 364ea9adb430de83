#!/usr/bin/env bash
# The zsh completion that cmake/gen_docs.sh generates (_memtide), run by a real zsh: compinit
# loads it from the build's share/ directory and a TAB completes commands, each command's
# options, memtide-view's, and the program after `memtide run ... --` (zsh's own completion).
#   zsh_completion_test.sh GEN_DIR
set -euo pipefail
gen=$(cd "$1" && pwd)
here=$(cd "$(dirname "$0")" && pwd)
command -v zsh >/dev/null || { echo "FAIL: zsh is missing (scripts/setup --dev installs it)"; exit 1; }
[[ -s $gen/_memtide ]] || { echo "FAIL: $gen/_memtide was not generated"; exit 1; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
failed=0
# complete LINE: the line after LINE<TAB> (its matches in $tmp/out).
complete() {
  if ! timeout 60 zsh -f "$here/zsh_complete.zsh" "$gen" "$tmp/out" "$1" >"$tmp/log" 2>&1; then
    echo "FAIL: no completion of '$1': $(cat "$tmp/log")"
    failed=1
    return
  fi
  sed -n 's/^line: //p' "$tmp/out"
}
expect_line() {  # LINE EXPECTED: LINE<TAB> leaves EXPECTED
  local got
  got=$(complete "$1")
  [[ $got == "$2" ]] || { echo "FAIL: '$1<TAB>' gave '$got', expected '$2'"; failed=1; }
}
expect_match() {  # LINE WORD: WORD is among the matches offered for LINE<TAB>
  complete "$1" >/dev/null
  grep -qx "match: $2" "$tmp/out" 2>/dev/null || { echo "FAIL: '$1<TAB>' did not offer '$2': $(cat "$tmp/out" 2>/dev/null)"; failed=1; }
}
expect_no_match() {  # LINE WORD: WORD is not offered
  complete "$1" >/dev/null
  ! grep -qx "match: $2" "$tmp/out" 2>/dev/null || { echo "FAIL: '$1<TAB>' offered '$2'"; failed=1; }
}

expect_line "memtide rep" "memtide report "
expect_line "memtide --ver" "memtide --version "
expect_no_match "memtide r" "--color"
expect_line "memtide report --hist" "memtide report --histogram "
expect_line "memtide check --gen-s" "memtide check --gen-suppressions "
expect_match "memtide report --" "--growth"
expect_match "memtide report --" "--suppressions"
expect_line "memtide-view --supp" "memtide-view --suppressions "
expect_match "memtide report --" "--full-names"
expect_line "memtide run --max-d" "memtide run --max-depth "
expect_line "memtide help fla" "memtide help flamegraph "
expect_line "memtide-view --scr" "memtide-view --screenshot "
# After `memtide run ... --`: the program, then its own arguments, not memtide's options.
expect_match "memtide run --check -- zs" "zsh"
expect_no_match "memtide run -- zsh --max-d" "--max-depth"
# A file name where a command takes one.
touch "$tmp/trace-for-completion.mtide"
expect_line "memtide report $tmp/trace-for-com" "memtide report $tmp/trace-for-completion.mtide "
((failed == 0)) && echo "zsh completion test passed"
exit $failed
