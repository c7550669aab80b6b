#!/usr/bin/env bash
# SPEC AP-07: public headers, generated ones included, compile as C99 with
# -Wall -Wextra -Wpedantic -Werror under gcc and clang. Each header gets a
# translation unit of its own that includes it first and alone.
#
#   check_c99.sh -I DIR [-I DIR...] HEADER...
#
# HEADER is what a program writes between the brackets of #include
# (grit/grit.h) or a path to a generated header. Exits 1 on the first
# header that fails, printing the compiler's words; 77 (meson: SKIP) when
# no compiler of the two is installed.
set -euo pipefail

incs=()
while [[ $# -gt 0 && $1 == -I ]]; do
  incs+=("-I$2")
  shift 2
done
(($# > 0)) || { echo "usage: $0 -I DIR... HEADER..." >&2; exit 2; }

work=$(mktemp -d "${TMPDIR:-/tmp}/grit-c99.XXXXXX")
trap 'rm -rf "$work"' EXIT

compilers=()
for c in gcc clang; do
  command -v "$c" >/dev/null && compilers+=("$c")
done
((${#compilers[@]})) || { echo "check_c99.sh: SKIP: no gcc or clang"; exit 77; }

n=0
for h in "$@"; do
  n=$((n + 1))
  tu=$work/tu_$n.c
  if [[ $h == /* ]]; then
    printf '#include "%s"\n' "$h" >"$tu"
  else
    printf '#include <%s>\n' "$h" >"$tu"
  fi
  # Something after the include, so the TU is not empty (-Wpedantic).
  printf 'int check_c99_tu_%d(void);\nint check_c99_tu_%d(void) { return 0; }\n' \
    "$n" "$n" >>"$tu"
  for c in "${compilers[@]}"; do
    if ! "$c" -std=c99 -Wall -Wextra -Wpedantic -Werror "${incs[@]}" \
      -c "$tu" -o "$work/tu_$n.o" 2>"$work/err"; then
      echo "check_c99.sh: FAIL: $h under $c -std=c99 -Wpedantic -Werror:" >&2
      cat "$work/err" >&2
      exit 1
    fi
  done
  echo "check_c99.sh: $h: clean under ${compilers[*]} -std=c99"
done
if ((${#compilers[@]} < 2)); then
  echo "check_c99.sh: SKIP: only ${compilers[*]} installed"
  exit 77
fi
echo "check_c99.sh: PASS"
