#!/usr/bin/env bash
# check.sh — everything a machine with an NVIDIA GPU checks, in one run (< 8 minutes):
#   1. the GPU tests: build/tests/test_cuda (every op and every sample model, CUDA vs CPU;
#      test_lowp: bfloat16 and float16 Gemm, MatMul and Conv on tensor cores against the
#      CPU's low-precision kernels; test_lowp_elementwise_norm: the element-wise, Dropout,
#      Sum, Softmax, LayerNorm and BatchNorm kernels (forward and gradient) in bfloat16 /
#      float16 against the CPU's float32 kernels on the same values, rounded; issue 27)
#   1b. the low-precision paths end to end (tests/gpu/check_lowp_gpu.py): the fp16 /
#      bf16-exported fixtures' gradients against PyTorch's, the samples' --precision
#      bf16 / fp16 gradients against float32, `verify` bitwise; a failure names the
#      model, the precision and the gradient
#   2. a benchmark: GPT-2-small- and ResNet-50-sized models (exported by
#      tests/gpu/export_bench.py while the tests run) trained a few steps with
#      --remat none / every:K (one kept value per block) / selective / auto (at a
#      budget) against PyTorch eager with and without torch.utils.checkpoint per
#      block; then the tensor-core step times: --tf32 against PyTorch with TF32, and
#      --precision bf16 and fp16 against torch.autocast; the table (step time,
#      samples/s, peak memory) is printed last.
#
# usage: tests/gpu/check.sh [BUILD_DIR]          (default BUILD_DIR: build-gpu)
#        tests/gpu/check.sh --bundle BUILD_DIR   (on the build machine, see below)
#
# The build. If BUILD_DIR has no onnxtrain binary, the script configures and builds it
# (cmake -DOT_WERROR=ON; needs protobuf-c, OpenBLAS, cmocka, the CUDA Toolkit and
# cuDNN). A GPU machine without those libraries runs a build carried from one that has
# them:
#     cmake -S . -B build-gpu -DOT_WERROR=ON && cmake --build build-gpu -j
#     tests/gpu/check.sh --bundle build-gpu    # copies the non-CUDA shared libraries
#                                              # the binaries need into build-gpu/gpu-libs
#     ... copy the source tree plus build-gpu/onnxtrain, build-gpu/libonnxtrain_cuda.so
#     (the CUDA backend: a module the binaries load with dlopen on --device cuda, found
#     next to onnxtrain and one folder above tests/test_cuda), build-gpu/tests/test_cuda
#     and build-gpu/gpu-libs (about 45 MB; the rest of the build folder is not needed)
#     to the GPU machine, then there:
#     tests/gpu/check.sh build-gpu
# The GPU machine provides the driver, the CUDA runtime, cuBLAS and cuDNN (the CUDA
# Toolkit, or the nvidia-* wheels next to PyTorch, which the script finds).
#
# Python: $OT_PYTHON, else the first of `python3` on PATH and /usr/bin/python3 that
# imports torch. (On the GPU machines PyTorch lives in the python3 on PATH, a venv,
# while /usr/bin/python3 has none: without torch there is no export, no PyTorch
# column, and none of the nvidia-* wheels whose cuBLAS and cuDNN the module needs.)
#
# The tests run with ONNXTRAIN_CUDA_SYNC=1: the backend synchronises after every
# node, so a kernel fault is reported with the node that caused it, in one run.
#
# Exit status: 0 all passed; 1 a test or benchmark failed; 2 no GPU or no usable build.
set -u
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
START=$(date +%s)
LIMIT=${OT_CHECK_SECONDS:-470} # the whole script stays under 8 minutes
if [ -n "${OT_PYTHON:-}" ]; then
  PY=$OT_PYTHON
else
  PY=
  for cand in python3 /usr/bin/python3; do
    if command -v "$cand" >/dev/null 2>&1 && "$cand" -c "import torch" >/dev/null 2>&1; then PY=$cand; break; fi
  done
  [ -n "$PY" ] || PY=python3
fi

die() { echo "check.sh: $*" >&2; exit 2; }
left() { echo $((LIMIT - ($(date +%s) - START))); }

if [ "${1:-}" = "--bundle" ]; then
  B=${2:?usage: check.sh --bundle BUILD_DIR}
  [ -x "$B/onnxtrain" ] && [ -x "$B/tests/test_cuda" ] || die "$B has no onnxtrain and tests/test_cuda: build it first"
  [ -f "$B/libonnxtrain_cuda.so" ] || die "$B has no libonnxtrain_cuda.so (the CUDA backend module): was it configured with the CUDA Toolkit and cuDNN?"
  mkdir -p "$B/gpu-libs"
  # everything the binaries and the module load except the C library, the compiler
  # runtime and CUDA
  ldd "$B/onnxtrain" "$B/tests/test_cuda" "$B/libonnxtrain_cuda.so" | awk '/=> \// {print $3}' | sort -u | while read -r lib; do
    case "$(basename "$lib")" in
      libc.so*|libm.so*|libpthread*|libdl.so*|librt.so*|ld-linux*|libgcc_s*|libstdc++*|libcuda.so*|libcudart*|libcublas*|libcudnn*|libnvrtc*|libnvJitLink*|libz.so*) ;;
      *) cp -L "$lib" "$B/gpu-libs/" ;;
    esac
  done
  echo "check.sh: bundled into $B/gpu-libs:"; ls "$B/gpu-libs"
  exit 0
fi

B=${1:-build-gpu}
case "$B" in /*) ;; *) B="$ROOT/$B" ;; esac

# ---- a GPU? ----
if nvidia-smi -L >/dev/null 2>&1; then
  nvidia-smi -L
elif "$PY" -c "import sys, torch; sys.exit(0 if torch.cuda.is_available() else 1)" >/dev/null 2>&1; then
  echo "check.sh: GPU found by PyTorch (no nvidia-smi)"
else
  die "no NVIDIA GPU found (nvidia-smi and torch.cuda both say none): nothing to check here; run it on a GPU machine"
fi

# ---- the build ----
if [ ! -x "$B/onnxtrain" ]; then
  echo "check.sh: no build in $B: configuring and building (needs protobuf-c, OpenBLAS, cmocka, CUDA, cuDNN)"
  cmake -S "$ROOT" -B "$B" -DOT_WERROR=ON >"$B.cmake.log" 2>&1 || die "cmake failed (see $B.cmake.log); or carry a build, see the header of this script"
  grep -q "CUDA backend ON" "$B.cmake.log" || die "cmake did not find the CUDA Toolkit and cuDNN (see $B.cmake.log)"
  cmake --build "$B" -j "$(nproc)" >"$B.build.log" 2>&1 || die "build failed (see $B.build.log)"
fi
[ -x "$B/tests/test_cuda" ] || die "$B/tests/test_cuda is missing: the build has no CUDA backend"
[ -f "$B/libonnxtrain_cuda.so" ] || die "$B/libonnxtrain_cuda.so (the CUDA backend module) is missing: carry it with the build"

# libraries: the carried bundle, then CUDA from the toolkit and from PyTorch's wheels
LIBS="$B/gpu-libs"
for d in /usr/local/cuda/lib64 /usr/local/cuda/targets/x86_64-linux/lib; do [ -d "$d" ] && LIBS="$LIBS:$d"; done
WHEELS=$("$PY" - <<'PYEOF' 2>/dev/null
import glob, os, sys
dirs = set()
for p in sys.path:
    for lib in glob.glob(os.path.join(p, "nvidia", "*", "lib")):
        dirs.add(lib)
print(":".join(sorted(dirs)))
PYEOF
)
[ -n "$WHEELS" ] && LIBS="$LIBS:$WHEELS"
export LD_LIBRARY_PATH="$LIBS${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
# the module is loaded with dlopen, so its libraries (CUDA's among them) are checked here
if ldd "$B/tests/test_cuda" "$B/libonnxtrain_cuda.so" | grep -q "not found"; then
  ldd "$B/tests/test_cuda" "$B/libonnxtrain_cuda.so" | grep "not found" >&2
  die "shared libraries missing (above): bundle them with --bundle on the build machine, or install the CUDA runtime, cuBLAS and cuDNN"
fi

FAIL=0
echo "check.sh: python $PY ($("$PY" -c 'import sys, torch; print(sys.version.split()[0], "torch", torch.__version__)' 2>&1 | tail -1))"

# The benchmark models are exported on the CPU while the GPU tests run (the tests'
# CPU references use 4 threads; the export takes the rest).
BENCH="${OT_BENCH_DIR:-$B/gpu-bench}"
EXPORT_PID=
if [ ! -f "$BENCH/gpt2_small.onnx" ] || [ ! -f "$BENCH/resnet50.onnx" ]; then
  mkdir -p "$BENCH"
  timeout 200 "$PY" "$ROOT/tests/gpu/export_bench.py" "$BENCH" >"$B/export_bench.log" 2>&1 &
  EXPORT_PID=$!
fi

# ---- 1. GPU tests ----
echo "== GPU tests: $B/tests/test_cuda"
( cd "$B/tests" && OT_SOURCE_DIR="$ROOT" OMP_NUM_THREADS=4 ONNXTRAIN_CUDA_SYNC=1 timeout 180 ./test_cuda ) 2>&1 | tee "$B/test_cuda.log"
rc=${PIPESTATUS[0]}
if [ "$rc" -ne 0 ]; then echo "check.sh: GPU tests FAILED (exit $rc)"; FAIL=1; fi
if grep -q "no CUDA GPU found" "$B/test_cuda.log"; then echo "check.sh: test_cuda found no GPU although nvidia-smi does"; FAIL=1; fi
if grep -q "CUDA backend module does not load" "$B/test_cuda.log"; then echo "check.sh: the CUDA backend module does not load (see above)"; FAIL=1; fi

# ---- 1b. low precision end to end ----
echo "== low precision end to end: tests/gpu/check_lowp_gpu.py ($(left) s left)"
( cd "$B/tests" && timeout 150 "$PY" "$ROOT/tests/gpu/check_lowp_gpu.py" "$B/onnxtrain" "$ROOT" "$B/lowp_scratch" ) 2>&1 | tee "$B/check_lowp_gpu.log"
rc=${PIPESTATUS[0]}
if [ "$rc" -ne 0 ]; then echo "check.sh: low-precision end-to-end checks FAILED (exit $rc)"; FAIL=1; fi

# ---- 2. benchmark ----
if [ -n "$EXPORT_PID" ]; then
  wait "$EXPORT_PID" || { echo "check.sh: exporting the benchmark models failed:"; FAIL=1; }
  tail -5 "$B/export_bench.log"
fi
echo "== benchmark ($(left) s left)"
if [ -f "$BENCH/gpt2_small.onnx" ]; then
  rm -f "$B/bench_table.txt"
  timeout $(( $(left) > 20 ? $(left) - 10 : 10 )) "$PY" "$ROOT/tests/gpu/bench_gpu.py" --onnxtrain "$B/onnxtrain" \
    --models "$BENCH" --seconds $(( $(left) - 15 )) --table "$B/bench_table.txt" || FAIL=1
fi
echo "check.sh: finished in $(( $(date +%s) - START )) s, $([ $FAIL -eq 0 ] && echo PASSED || echo FAILED)"
# the table last
if [ -f "$B/bench_table.txt" ]; then echo; cat "$B/bench_table.txt"; fi
exit $FAIL
