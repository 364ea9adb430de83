# zsh -f zsh_complete.zsh DIR OUT LINE: types LINE and a TAB into an interactive zsh (on a
# pseudo-terminal, zsh/zpty) whose completion system (compinit) finds its functions in DIR
# first, then writes to OUT the line as the completion left it ("line: ...") and each match the
# completion functions offered ("match: ...", one a line). Exit 1 when nothing came back.
zmodload zsh/zpty || { print -u2 "zsh/zpty is missing"; exit 3 }
dir=$1 out=$2 line=$3
rm -f $out $out.tmp
zpty z zsh -f -i
# compadd is wrapped to record the matches (what the function offered, before the one line is
# chosen); a key bound to a widget of ours writes the line once the TAB's completion is done.
zpty -w z "PROMPT= RPROMPT=; fpath=(${(q)dir} \$fpath); autoload -Uz compinit && compinit -u -D
compadd() {
  if [[ \${@[1,(i)(-|--)]} == *-(O|A|D)\\ * ]]; then builtin compadd \"\$@\"; return; fi
  local -a __m; builtin compadd -A __m \"\$@\"; print -r -l -- 'match: '\${^__m} >> ${(q)out}.tmp
  builtin compadd \"\$@\"
}
show-line() { print -r -- \"line: \$BUFFER\" >> ${(q)out}.tmp; mv ${(q)out}.tmp ${(q)out} }
zle -N show-line; bindkey '^X^L' show-line; bindkey '^I' complete-word; : > ${(q)out}.tmp"
zpty -w -n z "$line"$'\t\C-x\C-l'
for i in {1..400}; do [[ -e $out ]] && break; sleep 0.05; done
zpty -d z
[[ -e $out ]]
