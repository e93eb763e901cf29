#!/bin/bash
# conv_bf16.sh [THREADS] [REPS] [BATCH] — builds bench/conv_bf16.c against build/ (cmake
# --build build first), runs it with OpenMP's passive wait (what the CLI sets), prints
# its table: one ResNet-18 conv layer at a time, float32 against bfloat16.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(dirname "$here")
b=$root/build
out=${TMPDIR:-/tmp}/conv_bf16.$$
cc -O2 -std=c11 -fopenmp -I"$root" -I"$root/ir" "$here/conv_bf16.c" -o "$out" \
  -Wl,-rpath,/usr/lib/x86_64-linux-gnu/openblas-openmp "$b/libonnxtrain_lib.a" "$b/onnx/libot_onnx_proto.a" \
  -lprotobuf-c /usr/lib/x86_64-linux-gnu/openblas-openmp/libopenblas.so -ldnnl -lm -ldl \
  $(ls /usr/lib/x86_64-linux-gnu/openmpi/lib/libmpi.so /usr/lib/x86_64-linux-gnu/libglpk.so 2>/dev/null)
trap 'rm -f "$out"' EXIT
env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE OMP_WAIT_POLICY=PASSIVE "$out" "${1:-2}" "${2:-5}" "${3:-8}"
