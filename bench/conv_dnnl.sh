#!/bin/bash
# conv_dnnl.sh [THREADS] [REPS] — builds bench/conv_dnnl.c against build/ (cmake --build
# build first) and libdnnl (Debian libdnnl-dev), runs it with OpenMP's passive wait
# (what the CLI sets) and OpenBLAS's own kernels for this CPU, prints its table.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(dirname "$here")
b=$root/build
out=${TMPDIR:-/tmp}/conv_dnnl.$$
cc -O2 -std=c11 -fopenmp -I"$root" -I"$root/ir" "$here/conv_dnnl.c" -o "$out" \
  -Wl,-rpath,/usr/lib/x86_64-linux-gnu/openblas-openmp "$b/libonnxtrain_lib.a" "$b/onnx/libot_onnx_proto.a" \
  -lprotobuf-c /usr/lib/x86_64-linux-gnu/openblas-openmp/libopenblas.so -ldnnl -lm -ldl \
  $(ls /usr/lib/x86_64-linux-gnu/openmpi/lib/libmpi.so /usr/lib/x86_64-linux-gnu/libglpk.so 2>/dev/null)
trap 'rm -f "$out"' EXIT
env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE OMP_WAIT_POLICY=PASSIVE "$out" "${1:-2}" "${2:-20}"
