#!/usr/bin/env bash
# Run grit-interop-client --test_case=all (the 20 cases) against a grpcio
# interop server, first over cleartext, then over TLS with a test CA made for
# this run. The server runs with --wiretap (interop_server.py): a front that
# reads the client's HTTP/2 frames, so that expect_compressed is checked and
# the sizes of compressed messages on the wire are logged; this script then
# asserts on them (issue 13). grpcio's own TLS is checked without the front.
#
#   run_interop.sh PATH/TO/grit-interop-client
#
# Installs nothing: it needs /usr/bin/python3 with grpcio and protobuf
# (Debian: python3-grpcio python3-protobuf), protoc with
# /usr/bin/grpc_python_plugin (protobuf-compiler, python3-grpc-tools or
# protobuf-compiler-grpc), openssl and timeout. Without them it exits 77,
# which meson reports as SKIP.
#
# Environment: GRIT_PYTHON (default /usr/bin/python3), GRIT_INTEROP_HOST
# (default 127.0.0.1).
set -euo pipefail

if [[ $# -lt 1 ]]; then
  echo "usage: $0 PATH/TO/grit-interop-client" >&2
  exit 2
fi
client=$1
[[ $client == /* ]] || client=$PWD/$client
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
python=${GRIT_PYTHON:-/usr/bin/python3}
host=${GRIT_INTEROP_HOST:-127.0.0.1}

skip() {
  echo "run_interop.sh: SKIP: $*" >&2
  exit 77
}
die() {
  echo "run_interop.sh: FAIL: $*" >&2
  exit 1
}

[[ -x $client ]] || die "interop client '$client' is not executable"
command -v openssl >/dev/null || skip "openssl not found"
command -v timeout >/dev/null || skip "timeout not found"
"$python" -c 'import grpc, google.protobuf' 2>/dev/null ||
  skip "$python lacks grpcio/protobuf (apt-get install python3-grpcio python3-protobuf)"
if ! "$python" -c 'import grpc_tools' 2>/dev/null; then
  if ! command -v protoc >/dev/null || [[ ! -x /usr/bin/grpc_python_plugin ]]; then
    skip "need grpc_tools, or protoc and /usr/bin/grpc_python_plugin"
  fi
fi

work=$(mktemp -d "${TMPDIR:-/tmp}/grit-interop.XXXXXX")
server_pid=

# Stop the server started last: SIGTERM, then SIGKILL after 5 s.
stop_server() {
  if [[ -n $server_pid ]]; then
    kill "$server_pid" 2>/dev/null || true
    for _ in $(seq 1 50); do
      kill -0 "$server_pid" 2>/dev/null || break
      sleep 0.1
    done
    kill -KILL "$server_pid" 2>/dev/null || true
    wait "$server_pid" 2>/dev/null || true
    server_pid=
  fi
}
cleanup() {
  stop_server
  rm -rf "$work"
}
trap cleanup EXIT

"$here/gen_certs.sh" "$work/certs" || die "gen_certs.sh failed"

# start_server NAME [server flags...]: start it on port 0 and set $port from
# its "PORT <n>" line, waiting at most 20 s.
start_server() {
  local name=$1
  shift
  local out=$work/$name.out err=$work/$name.err
  : >"$out" # before the job starts: its redirection may come after our read
  "$python" "$here/interop_server.py" --port 0 --stub-dir "$work/stubs" "$@" \
    >"$out" 2>"$err" &
  server_pid=$!
  port=
  for _ in $(seq 1 200); do
    port=$(awk '$1 == "PORT" { print $2; exit }' "$out")
    [[ -n $port ]] && return 0
    if ! kill -0 "$server_pid" 2>/dev/null; then
      cat "$err" >&2
      server_pid=
      die "$name server exited before printing its port"
    fi
    sleep 0.1
  done
  cat "$err" >&2
  die "$name server printed no PORT line within 20 s"
}

# run_client NAME [client flags...]
run_client() {
  local name=$1
  shift
  echo "run_interop.sh: $name: $client --server_host=$host --server_port=$port $*"
  local rc=0
  timeout 120 "$client" --server_host="$host" --server_port="$port" \
    --test_case=all "$@" || rc=$?
  if [[ $rc -ne 0 ]]; then
    echo "--- $name server log:" >&2
    cat "$work/$name.err" >&2 || true
    [[ $rc -eq 124 ]] && die "$name: client timed out after 120 s"
    die "$name: client exited with status $rc"
  fi
}

# check_wire NAME: the compressed cases really compressed, seen from the
# server's side of the wire: the 271828-byte zero payload of
# client_compressed_unary (271844 bytes of SimpleRequest) and the 314159-byte
# response of server_compressed_unary (314167) each took under 2000 bytes.
check_wire() {
  local name=$1 log=$work/$1.err
  local req resp
  req=$(awk '/wiretap: request message: 271844 bytes compressed to/ { print $(NF-3) }' "$log" | sort -n | tail -1)
  resp=$(awk '/wiretap: response message: 314167 bytes compressed to/ { print $(NF-3) }' "$log" | sort -n | tail -1)
  [[ -n $req && $req -lt 2000 ]] || die "$name: no compressed 271828-byte request on the wire (got '${req}')"
  [[ -n $resp && $resp -lt 2000 ]] || die "$name: no compressed 314159-byte response on the wire (got '${resp}')"
  echo "run_interop.sh: $name: on the wire: request 271844 -> $req bytes, response 314167 -> $resp bytes"
}

start_server cleartext --wiretap
run_client cleartext
check_wire cleartext
# The flags operators add: a default service config (a retry policy for
# every TestService method) and metadata on every call.
run_client cleartext --test_case=large_unary \
  --service_config_json='{"methodConfig":[{"name":[{"service":"grpc.testing.TestService"}],"retryPolicy":{"maxAttempts":3,"initialBackoff":"0.1s","maxBackoff":"1s","backoffMultiplier":2,"retryableStatusCodes":["UNAVAILABLE"]}}]}' \
  --additional_metadata='x-grit-extra:1;x-grit-bin-bin:AAEC'
stop_server

start_server tls --tls-cert "$work/certs/server.pem" \
  --tls-key "$work/certs/server.key" --wiretap
GRIT_TEST_CA=$work/certs/ca.pem run_client tls --use_tls=true \
  --use_test_ca=true --server_host_override=foo.test.google.fr
check_wire tls
stop_server

# grpcio's own TLS (no front): the cases that need no wiretap.
start_server tls-grpcio --tls-cert "$work/certs/server.pem" \
  --tls-key "$work/certs/server.key"
for c in large_unary server_compressed_unary server_compressed_streaming \
  custom_metadata channel_soak; do
  GRIT_TEST_CA=$work/certs/ca.pem run_client tls-grpcio --use_tls=true \
    --use_test_ca=true --server_host_override=foo.test.google.fr \
    --test_case=$c
done
# Without --ca_file or $GRIT_TEST_CA the built-in gRPC interop test CA is
# trusted, and it did not sign this run's server certificate: the call
# fails certificate verification (exit 1), not for want of a CA (exit 2).
rc=0
timeout 60 "$client" --server_host="$host" --server_port="$port" \
  --test_case=empty_unary --use_tls=true --use_test_ca=true \
  --server_host_override=foo.test.google.fr 2>"$work/builtin-ca.err" || rc=$?
[[ $rc -eq 1 ]] || die "built-in CA: exit $rc, want 1: $(cat "$work/builtin-ca.err")"
grep -qi "certificate verify failed" "$work/builtin-ca.err" ||
  die "built-in CA: no certificate error: $(cat "$work/builtin-ca.err")"
stop_server

echo "run_interop.sh: PASS (cleartext and TLS)"
