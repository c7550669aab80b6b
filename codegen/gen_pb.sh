#!/bin/sh
# Generate protobuf-c code for descriptor.proto and compiler/plugin.proto
# (from libprotobuf-dev and libprotoc-dev) into OUTDIR, flat, as meson
# outputs must be: the google/protobuf/ include paths are rewritten.
#   gen_pb.sh PROTOC_C OUTDIR INCLUDE_DIR
set -eu
protoc_c=$1
out=$2
inc=$3
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
"$protoc_c" --c_out="$tmp" -I"$inc" google/protobuf/descriptor.proto \
  google/protobuf/compiler/plugin.proto
for f in google/protobuf/descriptor google/protobuf/compiler/plugin; do
  for ext in c h; do
    sed -e 's|"google/protobuf/compiler/plugin.pb-c.h"|"plugin.pb-c.h"|' \
      -e 's|"google/protobuf/descriptor.pb-c.h"|"descriptor.pb-c.h"|' \
      "$tmp/$f.pb-c.$ext" >"$out/$(basename "$f").pb-c.$ext"
  done
done
