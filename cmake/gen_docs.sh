#!/usr/bin/env bash
# The man pages (memtide.1, memtide-view.1) and the bash and zsh completions, generated at build
# time from the programs' own help: CLI11's --help of memtide-cli, of each of its commands and of
# memtide-view, and the recorder's option table (`memtide-cli options`, from recorder/options.inc).
#   gen_docs.sh BIN_DIR OUT_DIR VERSION
set -euo pipefail
bin=$1 out=$2 version=$3
cli=$bin/memtide-cli view=$bin/memtide-view wrapper=$bin/memtide
mkdir -p "$out"

# The commands, as memtide-cli lists them (less the two memtide run calls by itself), and the
# wrapper's own: run, attach, detach, view.
commands=(run attach detach $("$cli" --help | awk '/^Subcommands:/ {on = 1; next} on && /^  [a-z]/ {print $1}' | grep -vx 'options\|summary') view)
# memtide's own options, before a command.
global_options="--full-names --color --version --help"
# The options of a help text: the long and short names at the start of its option lines.
options_of() { awk '/^  -/ {n = split($1, a, ","); for (i = 1; i <= n; ++i) print a[i]}' | sed 's/=.*//' | sort -u | tr '\n' ' '; }
help_of() {
  case "$1" in
    run) "$wrapper" run --help ;;
    attach | detach) "$wrapper" attach --help ;;
    view) "$view" --help ;;
    *) "$cli" help "$1" ;;
  esac
}
run_options() {  # the recorder's options and memtide run's own (its table prints them as "--name VALUE")
  "$wrapper" run --help | grep -oE '^ +(-[a-z], )?--\[?[a-z-]+\]?[a-z-]*' | sed 's/^ *//; s/^-[a-z], //' |
    sed -E 's/^--\[no-\](.*)/--\1 --no-\1/' | tr ' ' '\n'
  echo -q --check --max-leaked-bytes --max-leaked-blocks --max-mismatched-frees --max-peak-bytes --max-growth --warmup \
    --suppressions --include-reachable \
    --allow-incomplete --junit --error-exitcode --gen-suppressions --keep-traces --no-symbolize | tr ' ' '\n'
}
# The words a command's options complete to, on one line: the bash and the zsh completion list
# the same ones (after `memtide run`, `--` too: the program follows it).
command_options() {
  case "$1" in
    run) echo "$(run_options | sort -u | tr '\n' ' ')--" ;;
    attach) echo "$(help_of attach | grep -oE -- '--[a-z][a-z-]*' | sort -u | tr '\n' ' ')" ;;
    detach) echo "" ;;
    view) help_of view | options_of ;;
    *) echo "$(help_of "$1" | options_of)--full-names --color" ;;
  esac
}

# The values an option takes, where its help lists them (CLI11's "--name TYPE:{a,b,c}"): lines
# "OPTION VALUE..." of one command's help (and of the options every reading command takes).
option_values() {
  case "$1" in
    run | attach | detach) return ;;
  esac
  { help_of "$1"; [[ $1 == view ]] || "$cli" --help | awk '/^Options:/ {on = 1} /^Subcommands:/ {on = 0} on'; } |
    sed -nE 's/^ +(-[a-zA-Z], )?(--[a-z][a-z-]*) [A-Z]+:\{([^}]*)\}.*/\2 \3/p' | tr ',' ' ' | sort -u
}

# "COMMAND:OPTION VALUE..." for every command's options that take listed values.
command_option_values() {
  local c opt values
  for c in "${commands[@]}"; do
    while read -r opt values; do
      [[ -z "$opt" ]] || echo "$c:$opt $values"
    done < <(option_values "$c")
  done
}

# roff: a backslash, a leading dot or quote, and hyphens (so that options copy as typed).
roff() { sed -e 's/\\/\\e/g' -e "s/^\\([.']\\)/\\\\\\&\\1/" -e 's/-/\\-/g'; }

{
  echo ".TH MEMTIDE 1 \"\" \"memtide $version\" \"User Commands\""
  echo ".SH NAME"
  echo "memtide \\- record every allocation and free of a program, and read the traces"
  echo ".SH SYNOPSIS"
  echo ".B memtide run"
  echo "[\\fIoptions\\fR] \\-\\- \\fIPROG\\fR [\\fIARGS\\fR...]"
  echo ".br"
  echo ".B memtide"
  echo "\\fICOMMAND\\fR [\\fIoptions\\fR] \\fIFILE\\fR..."
  echo ".br"
  echo ".B memtide help"
  echo "\\fICOMMAND\\fR"
  echo ".SH DESCRIPTION"
  echo ".nf"
  "$wrapper" help | roff
  echo ".fi"
  echo ".SH OPTIONS OF EVERY READING COMMAND"
  echo ".nf"
  "$cli" --help | awk '/^Options:/ {on = 1} /^Subcommands:/ {on = 0} on' | roff
  echo ".fi"
  echo ".SH COMMANDS"
  for c in "${commands[@]}"; do
    [[ $c == view ]] && continue
    echo ".SS \"memtide $c\""
    echo ".nf"
    help_of "$c" | roff
    echo ".fi"
  done
  echo ".SS \"memtide view\""
  echo "Opens the desktop viewer: see"
  echo ".BR memtide\\-view (1)."
  echo ".SH ENVIRONMENT"
  echo "Every option of \\fBmemtide run\\fR is also a variable (above)."
  echo ".TP"
  echo ".B MEMTIDE_CHECK_OPTIONS"
  echo "options of \\fBmemtide check\\fR (\\fIname\\fR=\\fIvalue\\fR, separated by spaces or colons), read before the"
  echo "command line's, and by a program started with \\fBLD_PRELOAD\\fR=libmemtide.so, which then checks its own trace at exit."
  echo ".TP"
  echo ".B NO_COLOR"
  echo "set and not empty: no colour with \\fB\\-\\-color=auto\\fR."
  echo ".SH EXIT STATUS"
  echo "0 success; 1 a limit of \\fBcheck\\fR broken (or \\fB\\-\\-error\\-exitcode\\fR); 2 a usage or file error."
  echo "\\fBmemtide run\\fR exits with the program's status."
  echo ".SH SEE ALSO"
  echo ".BR memtide\\-view (1)"
} >"$out/memtide.1"

{
  echo ".TH MEMTIDE-VIEW 1 \"\" \"memtide $version\" \"User Commands\""
  echo ".SH NAME"
  echo "memtide\\-view \\- the memtide trace viewer"
  echo ".SH SYNOPSIS"
  echo ".B memtide\\-view"
  echo "[\\fIoptions\\fR] [\\fIFILE\\fR]"
  echo ".SH OPTIONS"
  echo ".nf"
  "$view" --help | roff
  echo ".fi"
  echo ".SH SEE ALSO"
  echo ".BR memtide (1)"
} >"$out/memtide-view.1"

# bash: the commands, then each command's options (after `memtide run ... --`, the program).
{
  echo "# bash completion for memtide and memtide-view (generated from their help by gen_docs.sh)"
  echo "_memtide() {"
  echo '  local cur=${COMP_WORDS[COMP_CWORD]} cmd=${COMP_WORDS[1]:-} opts="" i'
  echo "  if ((COMP_CWORD == 1)); then"
  echo "    COMPREPLY=(\$(compgen -W \"${commands[*]} help $global_options\" -- \"\$cur\"))"
  echo "    return"
  echo "  fi"
  echo '  for ((i = 2; i < COMP_CWORD; ++i)); do'
  echo '    if [[ $cmd == run && ${COMP_WORDS[i]} == -- ]]; then'
  echo '      ((i + 1 == COMP_CWORD)) && COMPREPLY=($(compgen -c -- "$cur")) || COMPREPLY=($(compgen -f -- "$cur"))'
  echo '      return'
  echo '    fi'
  echo '  done'
  echo '  case "$cmd:${COMP_WORDS[COMP_CWORD - 1]}" in'
  while read -r pattern values; do
    echo "    $pattern) COMPREPLY=(\$(compgen -W \"$values\" -- \"\$cur\")); return ;;"
  done < <(command_option_values)
  echo '  esac'
  echo '  case $cmd in'
  echo "    help) COMPREPLY=(\$(compgen -W \"${commands[*]}\" -- \"\$cur\")); return ;;"
  for c in "${commands[@]}"; do echo "    $c) opts=\"$(command_options "$c")\" ;;"; done
  echo '  esac'
  echo '  if [[ $cur == -* ]]; then COMPREPLY=($(compgen -W "$opts" -- "$cur")); else COMPREPLY=($(compgen -f -- "$cur")); fi'
  echo "}"
  echo "_memtide_view() {"
  echo '  local cur=${COMP_WORDS[COMP_CWORD]}'
  echo '  case ${COMP_WORDS[COMP_CWORD - 1]} in'
  while read -r opt values; do
    [[ -n "$opt" ]] && echo "    $opt) COMPREPLY=(\$(compgen -W \"$values\" -- \"\$cur\")); return ;;"
  done < <(option_values view)
  echo '  esac'
  echo "  if [[ \$cur == -* ]]; then COMPREPLY=(\$(compgen -W \"$(command_options view)\" -- \"\$cur\")); else COMPREPLY=(\$(compgen -f -- \"\$cur\")); fi"
  echo "}"
  echo "complete -o filenames -F _memtide memtide"
  echo "complete -o filenames -F _memtide_view memtide-view"
} >"$out/memtide.bash"

# zsh: the same lists.
{
  echo "#compdef memtide memtide-view"
  echo "# zsh completion for memtide and memtide-view (generated from their help by gen_docs.sh)"
  echo "if [[ \$service == memtide-view ]]; then"
  echo "  case \$words[CURRENT-1] in"
  while read -r opt values; do
    [[ -n "$opt" ]] && echo "    $opt) compadd -- $values; return ;;"
  done < <(option_values view)
  echo "  esac"
  echo "  if [[ \$PREFIX == -* ]]; then compadd -- $(command_options view); else _files; fi"
  echo "  return"
  echo "fi"
  echo "local -a opts"
  echo "if (( CURRENT == 2 )); then"
  echo "  if [[ \$PREFIX == -* ]]; then compadd -- $global_options; else compadd -- ${commands[*]} help; fi"
  echo "  return"
  echo "fi"
  echo "case \"\$words[2]:\$words[CURRENT-1]\" in"
  while read -r pattern values; do
    echo "  $pattern) compadd -- $values; return ;;"
  done < <(command_option_values)
  echo "esac"
  echo "local dashes=\${words[(I)--]}"
  echo "if [[ \$words[2] == run ]] && (( dashes > 2 && dashes < CURRENT )); then"
  echo "  shift dashes words; (( CURRENT -= dashes )); _normal; return"
  echo "fi"
  echo "case \$words[2] in"
  echo "  help) compadd -- ${commands[*]}; return ;;"
  for c in "${commands[@]}"; do echo "  $c) opts=($(command_options "$c")) ;;"; done
  echo "esac"
  echo "if [[ \$PREFIX == -* ]]; then compadd -- \$opts; else _files; fi"
} >"$out/_memtide"
