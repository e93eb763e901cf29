#!/bin/bash
# attn_lowp.sh [THREADS] [ROUNDS] — builds bench/attn_lowp.c against build/ (cmake
# --build build first) and libdnnl, runs it with OpenMP's passive wait (as the CLI
# runs) and OpenBLAS's tuning variables dropped, prints its table: the CPU's bfloat16
# Attention and AttentionGrad against the float32 fallback between Casts.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(dirname "$here")
b=$root/build
out=${TMPDIR:-/tmp}/attn_lowp.$$
cc -O2 -std=c11 -fopenmp -I"$root" -I"$root/ir" "$here/attn_lowp.c" -o "$out" \
  -Wl,-rpath,/usr/lib/x86_64-linux-gnu/openblas-openmp "$b/libonnxtrain_lib.a" "$b/onnx/libot_onnx_proto.a" \
  -lprotobuf-c /usr/lib/x86_64-linux-gnu/openblas-openmp/libopenblas.so -ldnnl -lm -ldl \
  $(ls /usr/lib/x86_64-linux-gnu/openmpi/lib/libmpi.so /usr/lib/x86_64-linux-gnu/libglpk.so 2>/dev/null)
trap 'rm -f "$out"' EXIT
env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE OMP_WAIT_POLICY=PASSIVE "$out" "${1:-2}" "${2:-5}"
