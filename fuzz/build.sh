#!/usr/bin/env bash
# Builds the libFuzzer harnesses (fuzz/fuzz_*.c) into build-fuzz/ with clang:
# -fsanitize=fuzzer,address,undefined, UBSan non-recoverable. The project
# sources are compiled directly (the runnel_core list is read from the main
# CMakeLists.txt, so this follows whatever the main build compiles), llhttp
# from /usr/share/llhttp, and the libraries the main build takes from
# pkg-config (libuv, ...) likewise. The main (gcc) build is
# not touched. Objects are rebuilt only when a source or a header it includes
# changed. Usage: fuzz/build.sh [harness...]   (default: every fuzz/fuzz_*.c)
set -euo pipefail
cd "$(dirname "$0")/.."

CC=${CC:-$(command -v clang || command -v clang-14 || echo clang)}
OUT=${FUZZ_BUILD_DIR:-build-fuzz}
LLHTTP_DIR=/usr/share/llhttp
LLHTTP_INCLUDE=/usr/share/include/llhttp

command -v "$CC" >/dev/null || { echo "fuzz/build: clang not found (apt-get install clang-14)" >&2; exit 1; }
if ! "$CC" -print-file-name=libclang_rt.fuzzer-x86_64.a | grep -q /; then
  echo "fuzz/build: libFuzzer runtime missing (apt-get install libclang-rt-14-dev)" >&2
  exit 1
fi

# The libraries the main build finds with pkg_check_modules (libuv, ...).
pkg_modules=$(sed -nE 's/^pkg_check_modules\([A-Za-z0-9_]+ REQUIRED IMPORTED_TARGET ([^ )]+)\).*/\1/p' CMakeLists.txt)
[ -n "$pkg_modules" ] || { echo "fuzz/build: no pkg_check_modules in CMakeLists.txt" >&2; exit 1; }

SAN=(-fsanitize=fuzzer-no-link,address,undefined -fno-sanitize-recover=undefined
     -fno-omit-frame-pointer)
# llhttp in strict mode, as the main build compiles it (CMakeLists.txt).
BASE=(-std=gnu17 -O1 -g "${SAN[@]}" -Isrc -I"$LLHTTP_INCLUDE" -DLLHTTP_STRICT_MODE=1
      $(pkg-config --cflags $pkg_modules))
# Project sources get the project's warnings but not -Werror: clang warns about
# things gcc does not, and that must not break fuzzing of someone else's code.
SRC_FLAGS=("${BASE[@]}" -Wall -Wextra -Wshadow -Wstrict-prototypes -Wno-unused-parameter)
HARNESS_FLAGS=("${BASE[@]}" -Wall -Wextra -Werror -Wshadow -Wstrict-prototypes)
LIBS=($(pkg-config --libs $pkg_modules) -lpthread)

mkdir -p "$OUT/obj"

# up_to_date OBJ: the object exists and is newer than every file its .d lists.
up_to_date() {
  local obj=$1 dep=${1%.o}.d f
  [ -f "$obj" ] && [ -f "$dep" ] || return 1
  for f in $(sed -e 's/^[^:]*://' -e 's/\\$//' "$dep"); do
    [ "$f" -nt "$obj" ] && return 1
  done
  return 0
}

# compile SRC OBJ FLAGS...: compiles when out of date.
compile() {
  local src=$1 obj=$2
  shift 2
  up_to_date "$obj" && return 0
  echo "fuzz/build: cc $src"
  "$CC" "$@" -MMD -MF "${obj%.o}.d" -c "$src" -o "$obj"
}

core_sources=$(sed -n '/add_library(runnel_core/,/)/p' CMakeLists.txt | grep -oE 'src/[A-Za-z0-9_/]+\.c')
[ -n "$core_sources" ] || { echo "fuzz/build: no runnel_core sources in CMakeLists.txt" >&2; exit 1; }
core_objs=()
for src in $core_sources; do
  obj="$OUT/obj/$(echo "${src%.c}" | tr / _).o"
  compile "$src" "$obj" "${SRC_FLAGS[@]}"
  core_objs+=("$obj")
done
for src in "$LLHTTP_DIR"/api.c "$LLHTTP_DIR"/http.c "$LLHTTP_DIR"/llhttp.c; do
  obj="$OUT/obj/llhttp_strict_$(basename "${src%.c}").o" # named for its mode: older objects were not
  compile "$src" "$obj" "${BASE[@]}" -w
  core_objs+=("$obj")
done
# json_text.c once more without SIMD (the portable path), for fuzz_json.
compile fuzz/json_text_portable.c "$OUT/obj/json_text_portable.o" "${SRC_FLAGS[@]}"

# Newer objects than the archive (or a changed object list) rebuild it.
lib="$OUT/libcore.a"
if [ ! -f "$lib" ] || [ "$(printf '%s\n' "${core_objs[@]}" | sort)" != "$(cat "$lib.list" 2>/dev/null)" ] ||
   [ -n "$(find "${core_objs[@]}" -newer "$lib" 2>/dev/null)" ]; then
  rm -f "$lib"
  ar rcs "$lib" "${core_objs[@]}"
  printf '%s\n' "${core_objs[@]}" | sort >"$lib.list"
fi

if [ $# -eq 0 ]; then
  set -- $(ls fuzz/fuzz_*.c | xargs -n1 basename | sed 's/\.c$//')
fi
for h in "$@"; do
  obj="$OUT/obj/$h.o"
  compile "fuzz/$h.c" "$obj" "${HARNESS_FLAGS[@]}"
  extra=()
  [ "$h" = fuzz_json ] && extra=("$OUT/obj/json_text_portable.o")
  if [ ! -x "$OUT/$h" ] || [ -n "$(find "$obj" "${extra[@]}" "$lib" -newer "$OUT/$h")" ]; then
    echo "fuzz/build: link $h"
    "$CC" -fsanitize=fuzzer,address,undefined "$obj" "${extra[@]}" "$lib" "${LIBS[@]}" -o "$OUT/$h"
  fi
done
echo "fuzz/build: ok ($OUT)"
