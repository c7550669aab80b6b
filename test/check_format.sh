#!/usr/bin/env bash
# Every C source and header is as .clang-format lays it out (STYLE 2).
# Skipped (exit 77) when clang-format is not installed.
# Usage: check_format.sh SOURCE_ROOT
set -euo pipefail
cd "${1:-.}"
command -v clang-format >/dev/null || exit 77
dirs=(include util xds credentials intercept channel runtime resolver service_config lb retry hedging callsm throttle compress
  observe transport tools interop test bench codegen pbjson examples h2server)
bad=$(find "${dirs[@]}" \( -name '*.c' -o -name '*.h' \) \
  -not -path '*/proto/*' -print0 | sort -z |
  xargs -0 clang-format --dry-run 2>&1 | grep -o '^[^:]*:[0-9]*' |
  cut -d: -f1 | sort -u || true)
if [ -n "$bad" ]; then
  printf '%s\n' "$bad"
  echo "check_format: run clang-format -i on the files above"
  exit 1
fi
echo "check_format: clean"
