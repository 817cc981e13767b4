#!/usr/bin/env bash
# The include rules of src/ (docs/ARCHITECTURE.md, "Layers"): each folder
# includes only itself and the folders its rule below names; a quoted
# include must name its folder ("engine/engine.h", never "../" or a bare
# name of another folder's header). A folder or an included folder missing
# from the rules is a finding too, so a new folder gets its rule written
# down. tests/, fuzz/ and bench/ may include anything. Prints each broken
# edge as "FILE:LINE: error layering: ..." (the form scripts/lint.sh
# counts), then "N passed, M failed" (files without / with a broken edge).
# Usage: scripts/check_layers.sh [ROOT]   (ROOT: a source tree, default the
# repository this script is in)
set -uo pipefail
root=${1:-"$(dirname "$0")/.."}
cd "$root" || exit 2

# folder: what it may include besides itself. A "folder/file.h" entry
# allows that one header, not its folder.
rules='
util:
net:       util
transport: util
tiers:     util net
log:       util
engine:    util tiers log
live:      util transport engine
protocol:  util transport engine
surface:   util transport engine tiers live protocol
subs:      util net transport engine protocol
consensus: util transport
cluster:   util net transport engine tiers protocol consensus ops/config.h
gateway:   util net transport protocol
ops:       util net transport tiers log engine live protocol surface subs consensus cluster gateway client
client:    util runnel
'

declare -A allowed
while read -r folder deps; do
  [ -n "$folder" ] && allowed[${folder%:}]=" $deps "
done <<<"$rules"

mapfile -t files < <(find src -name '*.[ch]' | sort)
[ "${#files[@]}" -gt 0 ] || { echo "check_layers: no sources under $root/src"; exit 2; }
declare -A broken=()
for f in "${files[@]}"; do
  from=${f#src/}
  from=${from%%/*}
  if [ -z "${allowed[$from]+set}" ]; then
    echo "$f:1: error layering: folder $from/ has no rule in scripts/check_layers.sh"
    broken[$f]=1
  fi
done
# every quoted include, as FILE:LINE:TEXT
while IFS=: read -r f line text; do
  inc=${text#*\"}
  inc=${inc%%\"*}
  from=${f#src/}
  from=${from%%/*}
  to=${inc%%/*}
  why=
  if [[ $inc == *..* ]]; then
    why="\"$inc\" climbs out of its folder"
  elif [[ $inc != */* ]]; then
    [ -f "${f%/*}/$inc" ] || why="\"$inc\" does not name its folder"
  elif [ "$to" = "$from" ] || [ -z "${allowed[$from]+set}" ]; then
    :
  elif [ -z "${allowed[$to]+set}" ] && [ "$to" != runnel ]; then
    why="\"$inc\": folder $to/ has no rule in scripts/check_layers.sh"
  elif [[ ${allowed[$from]} != *" $to "* && ${allowed[$from]} != *" $inc "* ]]; then
    why="$from/ may not include $inc (allowed:${allowed[$from]})"
  fi
  if [ -n "$why" ]; then
    echo "$f:$line: error layering: $why"
    broken[$f]=1
  fi
done < <(grep -HnE '^[[:space:]]*#[[:space:]]*include[[:space:]]*"' "${files[@]}")
echo "$((${#files[@]} - ${#broken[@]})) passed, ${#broken[@]} failed"
[ "${#broken[@]}" -eq 0 ]
