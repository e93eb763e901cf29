#!/bin/sh
# plan_5000.sh — builds bench/plan_5000.c against the library in $BUILD (default
# build/) and runs it: the time remat and the planner take on a 5,000-node training
# graph. Usage: BUILD=build-remat bench/plan_5000.sh [blocks [auto [budget]]]
# ("auto": only analyse, none and auto, at budget or the full run's; for profiling)
set -e
ROOT=$(cd "$(dirname "$0")/.." && pwd)
. "$ROOT/bench/plan_5000_libs.sh"
BUILD=${BUILD:-$ROOT/build}
case "$BUILD" in /*) ;; *) BUILD=$ROOT/$BUILD ;; esac
OUT=$(mktemp -d)
trap 'rm -rf "$OUT"' EXIT
cc -std=c11 -O2 -D_POSIX_C_SOURCE=200809L -D_DEFAULT_SOURCE -I"$ROOT" -I"$ROOT/ir" -o "$OUT/plan_5000" \
  "$ROOT/bench/plan_5000.c" "$BUILD/libonnxtrain_lib.a" "$BUILD/onnx/libot_onnx_proto.a" \
  -lprotobuf-c -fopenmp -lm $(plan_5000_libs "$BUILD")
[ $# -gt 0 ] || set -- 556
"$OUT/plan_5000" "$@"
