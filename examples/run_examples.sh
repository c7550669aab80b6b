#!/usr/bin/env bash
# Run each example program against grpcio's interop server (Debian's
# python3-grpcio under /usr/bin/python3), on a loopback port the kernel
# picks. Exits 77 (SKIP) without grpcio. With GRIT_EXAMPLES_VALGRIND=1
# each program runs under valgrind memcheck (errors and definite leaks
# fail it; 77 without valgrind). With GRIT_EXAMPLES_CPP=DIR the server is
# instead the gRPC C++ server test/pbjson builds (Debian's libgrpc++;
# build_reflection_server.sh into DIR; 77 without g++ or libgrpc++-dev).
#   run_examples.sh PROGRAM...
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
python=${GRIT_PYTHON:-/usr/bin/python3}
cpp=${GRIT_EXAMPLES_CPP:-}
if [[ -n $cpp ]]; then
  rc=0
  "$here/../test/pbjson/build_reflection_server.sh" "$cpp" || rc=$?
  [[ $rc -eq 0 ]] || exit $rc
else
  "$python" -c 'import grpc, google.protobuf' 2>/dev/null || {
    echo "run_examples.sh: SKIP: $python lacks grpcio" >&2
    exit 77
  }
fi
wrap=()
if [[ ${GRIT_EXAMPLES_VALGRIND:-0} == 1 ]]; then
  command -v valgrind >/dev/null || {
    echo "run_examples.sh: SKIP: no valgrind" >&2
    exit 77
  }
  wrap=(valgrind -q --error-exitcode=99 --leak-check=full
    --errors-for-leak-kinds=definite,indirect)
fi
work=$(mktemp -d "${TMPDIR:-/tmp}/grit-examples.XXXXXX")
pid=
cleanup() {
  if [[ -n $pid ]]; then
    kill "$pid" 2>/dev/null || true
    wait "$pid" 2>/dev/null || true
  fi
  rm -rf "$work"
}
trap cleanup EXIT
if [[ -n $cpp ]]; then
  "$cpp/reflection_server" --port 0 >"$work/out" 2>"$work/err" &
else
  "$python" "$here/../test/peers/interop_server.py" --port 0 \
    --stub-dir "$work" >"$work/out" 2>"$work/err" &
fi
pid=$!
port=
for _ in $(seq 1 200); do
  port=$(awk '$1 == "PORT" { print $2; exit }' "$work/out")
  [[ -n $port ]] && break
  kill -0 "$pid" 2>/dev/null || break
  sleep 0.1
done
if [[ -z $port ]]; then
  cat "$work/err" >&2
  echo "run_examples.sh: FAIL: the server printed no port" >&2
  exit 1
fi
rc=0
for prog in "$@"; do
  echo "== $(basename "$prog") ipv4:127.0.0.1:$port"
  timeout 120 "${wrap[@]}" "$prog" "ipv4:127.0.0.1:$port" || {
    echo "run_examples.sh: FAIL: $(basename "$prog") exited $?" >&2
    rc=1
  }
done
exit $rc
