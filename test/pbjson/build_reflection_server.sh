#!/usr/bin/env bash
# Build test/pbjson/reflection_server (C++, Debian's libgrpc++ with
# libgrpc++_reflection) into OUTDIR with g++ and pkg-config, as
# bench/cpp/build does; kept out of meson so that only the tests that
# need it need libgrpc++. Exits 77 when g++, protoc, grpc_cpp_plugin or
# the grpc++ packages are missing (apt-get install g++ libgrpc++-dev
# protobuf-compiler-grpc). Rebuilds only when a source changed.
#
#   build_reflection_server.sh OUTDIR
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
out=${1:?usage: build_reflection_server.sh OUTDIR}
for tool in g++ protoc grpc_cpp_plugin pkg-config; do
  command -v "$tool" >/dev/null || { echo "SKIP: $tool not found" >&2; exit 77; }
done
pkg-config --exists grpc++ protobuf || { echo "SKIP: grpc++ not found" >&2; exit 77; }
found=
for d in "$(pkg-config --variable=libdir grpc++)" \
  "/usr/lib/$(gcc -print-multiarch 2>/dev/null)" /usr/lib /usr/local/lib; do
  [[ -e $d/libgrpc++_reflection.so ]] && found=1
done
[[ -n $found ]] || { echo "SKIP: libgrpc++_reflection not found" >&2; exit 77; }
mkdir -p "$out/gen"
proto="$root/interop/proto/grpc/testing"
rpc="$root/pbjson/rpc"
srcs=("$here/reflection_server.cc" "$here/kitchen.proto" "$here/extra.proto"
  "$0" "$rpc")
stamp="$out/.stamp"
if [[ -f $stamp && -x $out/reflection_server ]]; then
  newer=$(find "${srcs[@]}" "$proto" -newer "$stamp" | head -1)
  [[ -z $newer ]] && exit 0
fi
inc=$(pkg-config --variable=includedir protobuf)
protoc -I"$proto" -I"$here" -I"$rpc" -I"$inc" --cpp_out="$out/gen" \
  --grpc_out="$out/gen" --plugin=protoc-gen-grpc="$(command -v grpc_cpp_plugin)" \
  "$proto/empty.proto" "$proto/messages.proto" "$proto/test.proto" \
  "$here/kitchen.proto" "$here/extra.proto" "$rpc/google/rpc/status.proto" \
  "$rpc/google/rpc/error_details.proto"
g++ -O1 -std=c++17 -I"$out/gen" $(pkg-config --cflags grpc++ protobuf) \
  -o "$out/reflection_server.tmp" "$here/reflection_server.cc" \
  "$out"/gen/*.pb.cc "$out"/gen/google/rpc/*.pb.cc \
  -Wl,--no-as-needed -lgrpc++_reflection -Wl,--as-needed \
  $(pkg-config --libs grpc++ protobuf) -lpthread
mv "$out/reflection_server.tmp" "$out/reflection_server"
touch "$stamp"
