#!/usr/bin/env bash
# The man pages and shell completions `cmake --install` installs: generated from the programs'
# help, so they hold every option (the recorder's from recorder/options.inc, check's newest),
# render without a groff warning, and bash completes commands and options with them. zsh's file
# is checked for syntax when zsh is present.
#   docs_test.sh BUILD_DIR
set -euo pipefail
build=$(cd "$1" && pwd)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*"; exit 1; }
cmake --install "$build" --prefix "$tmp/p" >/dev/null
p=$tmp/p
for f in share/man/man1/memtide.1 share/man/man1/memtide-view.1 share/bash-completion/completions/memtide \
         share/bash-completion/completions/memtide-view share/zsh/site-functions/_memtide; do
  [[ -s "$p/$f" ]] || fail "$f not installed"
done
for page in memtide memtide-view; do
  warnings=$(groff -man -Tutf8 -ww -z "$p/share/man/man1/$page.1" 2>&1) || fail "groff failed on $page.1"
  [[ -z "$warnings" ]] || fail "$page.1: $warnings"
done
text=$(MANWIDTH=120 man -l "$p/share/man/man1/memtide.1" 2>/dev/null | col -b)
# Every option of check and of run, as the programs list them, is on the page.
for opt in $("$p/bin/memtide-cli" help check | awk '/^  -/ {print $1}' | tr ',' '\n') --max-depth --sample --leak-scan; do
  grep -qF -- "$opt" <<<"$text" || fail "memtide.1 lacks $opt"
done
grep -q "memtide-view $("$p/bin/memtide-cli" --version | awk '{print $2}')" <<<"$("$p/bin/memtide-view" --version)" ||
  fail "memtide-view --version"
view_text=$(MANWIDTH=120 man -l "$p/share/man/man1/memtide-view.1" 2>/dev/null | col -b)
grep -qF -- "--screenshot" <<<"$view_text" || fail "memtide-view.1 lacks --screenshot"

# bash: as bash-completion calls the function.
complete_words() {
  bash -c 'source "$1"; shift; COMP_WORDS=("$@"); COMP_CWORD=$((${#COMP_WORDS[@]} - 1));
           if [[ ${COMP_WORDS[0]} == memtide-view ]]; then _memtide_view; else _memtide; fi; printf "%s\n" "${COMPREPLY[@]}"' \
    _ "$p/share/bash-completion/completions/memtide" "$@"
}
[[ "$(complete_words memtide fla)" == flamegraph ]] || fail "command completion: $(complete_words memtide fla)"
[[ "$(complete_words memtide check --gen)" == --gen-suppressions ]] || fail "check option: $(complete_words memtide check --gen)"
[[ "$(complete_words memtide run --max-d)" == --max-depth ]] || fail "run option: $(complete_words memtide run --max-d)"
grep -qx bash <<<"$(complete_words memtide run --check -- bas)" || fail "the program after memtide run --"
[[ "$(complete_words memtide help rep)" == report ]] || fail "help completion"
[[ "$(complete_words memtide-view --scr)" == --screenshot ]] || fail "memtide-view option"
# Every command, in the completion, the man page and memtide --help; the values of the options
# that take one of a list.
for c in attach detach export; do
  [[ "$(complete_words memtide "${c:0:3}")" == "$c" ]] || fail "command completion of $c: $(complete_words memtide "${c:0:3}")"
  grep -q "^ *memtide $c" <<<"$text" || fail "memtide.1 has no section for memtide $c"
  grep -q "^  $c " <<<"$("$p/bin/memtide" --help)" || fail "memtide --help lists no $c"
done
[[ "$(complete_words memtide attach --dur)" == --duration ]] || fail "attach option"
[[ "$(complete_words memtide flamegraph --metric pe)" == peak ]] || fail "--metric values: $(complete_words memtide flamegraph --metric pe)"
[[ "$(complete_words memtide report --color al)" == always ]] || fail "--color values"
[[ "$(complete_words memtide export --format spe)" == speedscope ]] || fail "--format values"
[[ "$(complete_words memtide-view --view fla)" == flamegraph ]] || fail "--view values"
[[ "$(complete_words memtide view --view lea)" == leaks ]] || fail "memtide view --view values"
if command -v zsh >/dev/null; then
  zsh -n "$p/share/zsh/site-functions/_memtide" || fail "_memtide: zsh syntax"
fi
echo "docs test passed"
