#!/bin/sh
# Run an xds test program (issue 27): skip (77) when node or npm is
# missing; install @grpc/grpc-js, @grpc/proto-loader and @grpc/grpc-js-xds
# (whose deps/ hold envoy's .proto files) once into BUILD/xds-cp, under a
# lock so tests running at once share one install.
# usage: run.sh BUILD_DIR SOURCE_DIR PROGRAM [ARGS...]
build=$1; src=$2; shift 2
command -v node >/dev/null 2>&1 || { echo "node not found: skip"; exit 77; }
command -v npm >/dev/null 2>&1 || { echo "npm not found: skip"; exit 77; }
prefix="$build/xds-cp"
mkdir -p "$prefix"
(
  flock 9
  if [ ! -f "$prefix/node_modules/@grpc/grpc-js-xds/package.json" ]; then
    npm install --no-audit --no-fund --prefix "$prefix" \
      @grpc/grpc-js @grpc/proto-loader @grpc/grpc-js-xds >"$prefix/npm.log" 2>&1 \
      || { cat "$prefix/npm.log"; exit 1; }
  fi
) 9>"$prefix/.lock" || exit 1
NODE_PATH="$prefix/node_modules" XDS_CP_DIR="$src/test/xds" \
  XDS_SCENARIOS="$src/test/xds" exec "$@"
