# bash completion for runnel (installed as bash-completion/completions/runnel).
_runnel() {
  local cur prev words cword
  _init_completion 2>/dev/null || { cur=${COMP_WORDS[COMP_CWORD]}; prev=${COMP_WORDS[COMP_CWORD-1]}; cword=$COMP_CWORD; words=("${COMP_WORDS[@]}"); }
  local commands="serve backup restore version help create append read tail head close rm publish bootstrap"
  local common="--url --cacert --json --bucket --quiet --help"
  local cmd="" i
  for ((i = 1; i < cword; i++)); do
    case " $commands " in *" ${words[i]} "*) cmd=${words[i]}; break ;; esac
  done
  case $prev in
    --file|-f|--state|--out|--config|--data-dir|--cacert) COMPREPLY=($(compgen -f -- "$cur")); return ;;
    --url|--type|-t|--ttl|--expires-at|--offset|-o|--producer|-p|--epoch|--window|--batch-bytes|\
    --seq|--if-incarnation|--fork-of|--fork-offset|--fork-sub-offset|--max-bytes|--timeout-ms|\
    --reconnect-for-ms|--retry-for-ms|--part-bytes) return ;;
  esac
  local opts
  case $cmd in
    "") COMPREPLY=($(compgen -W "$commands $common" -- "$cur")); return ;;
    serve) opts=$(runnel serve --help 2>/dev/null | awk '/^  --/{print $1}') ;;
    backup) opts="--url" ;;
    restore) opts="--from --name $(runnel serve --help 2>/dev/null | awk '/^  --/{print $1}')" ;;
    create) opts="--type --ttl --expires-at --closed --file --fork-of --fork-offset --fork-sub-offset --if-incarnation" ;;
    append) opts="--type --file --close --seq --if-incarnation --producer --epoch --state --window --batch-bytes --retry-for-ms --no-incarnation" ;;
    read) opts="--offset --max-bytes --if-incarnation" ;;
    tail) opts="-f --follow --offset --long-poll --timeout-ms --reconnect-for-ms --if-incarnation" ;;
    publish) opts="--offset --type --file --parts --part-bytes --retry-for-ms --if-incarnation" ;;
    bootstrap) opts="--out --if-incarnation" ;;
    close|rm) opts="--if-incarnation" ;;
  esac
  [[ $cur == -* ]] && COMPREPLY=($(compgen -W "$opts $common" -- "$cur"))
}
complete -F _runnel runnel
