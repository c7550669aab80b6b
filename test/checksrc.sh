#!/usr/bin/env bash
# Banned calls in the library (STYLE 3.1): raw allocation, unsafe string
# functions, rand, wall-clock time for durations, printf, abort outside the
# assertion hook. Usage: checksrc.sh SOURCE_ROOT
set -euo pipefail
root=${1:-.}
cd "$root"
dirs=(util xds credentials intercept channel runtime resolver service_config lb retry hedging callsm throttle transport compress
  observe dedup xdsclient)
pat='(^|[^_a-zA-Z0-9.>])(malloc|calloc|realloc|free|strdup|strndup|sprintf|vsprintf|strcpy|strcat|strtok|atoi|atol|rand|srand|time|gettimeofday|printf|abort)[[:space:]]*\('
bad=0
while IFS= read -r f; do
  case $f in
    util/mem.c) continue ;; # the allocator wrappers themselves
  esac
  hits=$(grep -nE "$pat" "$f" | grep -vE '^\s*[0-9]+:\s*(/\*|\*)' || true)
  if [ "$f" = util/error.c ]; then
    hits=$(printf '%s\n' "$hits" | grep -v 'abort();' || true)
  fi
  if [ -n "$hits" ]; then
    printf '%s\n' "$hits" | sed "s|^|$f:|"
    bad=1
  fi
done < <(find "${dirs[@]}" -name '*.c' -o -name '*.h' | sort)
if [ $bad -ne 0 ]; then
  echo "checksrc: banned calls found (use the grit_ wrappers, snprintf, the trace hook)"
  exit 1
fi
echo "checksrc: clean"
