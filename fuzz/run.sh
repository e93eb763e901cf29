#!/usr/bin/env bash
# fuzz/run.sh SECONDS — builds the libFuzzer harnesses (clang, ASan+UBSan) in
# build-fuzz/ and runs each for SECONDS (CI: 60) from a seed corpus generated here:
# samples/*.onnx and, when pip's onnx is installed, ONNX's backend node-test models
# for fuzz_model, plus the hostile models of tests/fixtures/regress/ (make_regress.py,
# make_bad_models.py: deep nesting, NULs in strings, absurd opsets and attributes);
# tests/fixtures/npy/*.npy plus a few hand-made headers for fuzz_npy.
# Exits non-zero if any harness crashed, leaked, hung or over-allocated, and prints
# the reproducer's path; replay one with  build-fuzz/fuzz/<harness> <file>.
# Environment: BUILD_DIR (default build-fuzz), JOBS (build parallelism).
set -uo pipefail
SECONDS_EACH=${1:-60}
ROOT=$(cd "$(dirname "$0")/.." && pwd)
BUILD=${BUILD_DIR:-$ROOT/build-fuzz}
JOBS=${JOBS:-$(nproc)}
case $SECONDS_EACH in '' | *[!0-9]*) echo "usage: fuzz/run.sh SECONDS" >&2; exit 2 ;; esac

mkdir -p "$BUILD"
command -v clang >/dev/null || { echo "fuzz/run.sh: clang not found (apt-get install clang libclang-rt-14-dev)" >&2; exit 2; }
cmake -S "$ROOT" -B "$BUILD" -DCMAKE_C_COMPILER=clang -DCMAKE_BUILD_TYPE=Release -DOT_SANITIZE=ON -DOT_FUZZ=ON \
  -DOT_CUDA=OFF -DOT_WERROR=ON >"$BUILD/fuzz-configure.log" 2>&1 || { cat "$BUILD/fuzz-configure.log"; exit 2; }
cmake --build "$BUILD" --target fuzz_model fuzz_npy -j"$JOBS" >"$BUILD/fuzz-build.log" 2>&1 || { tail -50 "$BUILD/fuzz-build.log"; exit 2; }

# ---- seed corpus (generated, never committed) ----------------------------------
SEEDS=$BUILD/seeds
rm -rf "$SEEDS" && mkdir -p "$SEEDS/model" "$SEEDS/npy"
cp "$ROOT"/samples/*.onnx "$SEEDS/model/"
NODE_DIR=$(cd /tmp && python3 -I -c "import os, onnx; print(os.path.join(os.path.dirname(onnx.__file__), 'backend', 'test', 'data', 'node'))" 2>/dev/null || true)
if [ -n "$NODE_DIR" ] && [ -d "$NODE_DIR" ]; then
  # Small models exercising every op's attributes and shape rules.
  for m in "$NODE_DIR"/*/model.onnx; do cp "$m" "$SEEDS/model/$(basename "$(dirname "$m")").onnx"; done
fi
cp "$ROOT"/tests/fixtures/npy/*.npy "$SEEDS/npy/"
cp "$ROOT"/tests/fixtures/regress/*.npy "$SEEDS/npy/" 2>/dev/null || true
cp "$ROOT"/tests/fixtures/regress/*.onnx "$SEEDS/model/" 2>/dev/null || true
echo "fuzz/run.sh: seeds: $(ls "$SEEDS/model" | wc -l) models, $(ls "$SEEDS/npy" | wc -l) .npy files"

# ---- run ----------------------------------------------------------------------
# -malloc_limit_mb: inputs are at most a few hundred KB, so an allocation of 512 MB
# means a size was trusted from the input without a check (a "claims gigabytes" bug).
# -timeout: one input taking 30 s is a hang. OMP_NUM_THREADS=1: constant folding runs
# the CPU kernels; threads only slow the fuzzer down.
export OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:allocator_may_return_null=0}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
fail=0
for h in fuzz_model fuzz_npy; do
  corpus=$BUILD/corpus/$h arts=$BUILD/crashes/$h
  mkdir -p "$corpus" "$arts"
  seeds=$SEEDS/npy
  [ $h = fuzz_model ] && seeds=$SEEDS/model
  log=$BUILD/$h.log
  echo "fuzz/run.sh: $h for ${SECONDS_EACH}s (log $log)"
  # A fixed seed and run count make a CI run repeatable: with the same seeds, the same
  # inputs are tried in the same order (a time limit only cuts the sequence short).
  # Set FUZZ_SEED=0 for a random seed and FUZZ_RUNS=-1 to run until the time is up.
  rm -rf "$corpus" && mkdir -p "$corpus"
  "$BUILD/fuzz/$h" "$corpus" "$seeds" -seed="${FUZZ_SEED:-1}" -runs="${FUZZ_RUNS:-200000}" \
    -max_total_time="$SECONDS_EACH" -timeout=30 -rss_limit_mb=2560 \
    -malloc_limit_mb=512 -print_final_stats=1 -artifact_prefix="$arts/" >"$log" 2>&1
  rc=$?
  grep -E "^(stat::number_of_executed_units|stat::peak_rss_mb|#[0-9]+ +DONE)" "$log" | sed "s/^/  $h: /"
  if [ $rc -ne 0 ]; then
    fail=1
    repro=$(grep -oE "Test unit written to [^ ]+" "$log" | tail -1 | sed 's/Test unit written to //')
    echo "fuzz/run.sh: $h FAILED (exit $rc); reproducer: ${repro:-see $log}" >&2
    grep -E "ERROR: |SUMMARY: |runtime error" "$log" | head -5 >&2
    echo "  replay: $BUILD/fuzz/$h ${repro:-<file>}" >&2
  fi
done
exit $fail
