#!/bin/sh
# precision_plan.sh — builds bench/precision_plan.c against the library in $BUILD
# (default build/) and runs it: planned kept + transient bytes in fp32 and bf16.
# Usage: BUILD=build bench/precision_plan.sh MODEL.onnx BATCH [REMAT]
set -e
ROOT=$(cd "$(dirname "$0")/.." && pwd)
. "$ROOT/bench/plan_5000_libs.sh"
BUILD=${BUILD:-$ROOT/build}
case "$BUILD" in /*) ;; *) BUILD=$ROOT/$BUILD ;; esac
OUT=$(mktemp -d)
trap 'rm -rf "$OUT"' EXIT
cc -std=c11 -O2 -D_POSIX_C_SOURCE=200809L -D_DEFAULT_SOURCE -I"$ROOT" -I"$ROOT/ir" -o "$OUT/precision_plan" \
  "$ROOT/bench/precision_plan.c" "$BUILD/libonnxtrain_lib.a" "$BUILD/onnx/libot_onnx_proto.a" \
  -lprotobuf-c -fopenmp -lm $(plan_5000_libs "$BUILD") \
  $(sed -n 's/^MPI_mpi_LIBRARY:FILEPATH=\(\/.*\)$/\1/p' "$BUILD/CMakeCache.txt") # a build with MPI (train/dist.c)
"$OUT/precision_plan" "$@"
