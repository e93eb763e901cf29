#!/usr/bin/env bash
# check_cost.sh — the NaN/Inf check's share of a training step (issue 14), for two
# onnxtrain builds side by side: perf samples (perf record -F 2000) in the gradient
# sum-of-squares functions (ss_*, including the sums the optimizer kernels take during
# their update) and in the scans that prove GEMM gradients finite from their inputs
# (max_abs_bits*, ot_train_check_*: train/train_check.c), over all samples, with the
# start-up (import, planning, export) cancelled by subtracting a 3-step run from a
# long one. A share, not a time: it holds up on a loaded machine where wall times do
# not. OpenMP's wait policy is the caller's: export OMP_WAIT_POLICY=PASSIVE, or
# ONNXTRAIN_NO_REEXEC=1 for spinning workers (the CLI's re-exec is skipped).
#
#   bash bench/check_cost.sh OLD/onnxtrain NEW/onnxtrain WORK [reps]
#
# WORK holds the cases of bench/peers.py (its --work folder): WORK/mlp6x512 and
# WORK/chain48, each with model.onnx, x.npy and y.npy. Runs SGD at --threads 2 as
# peers.py does, with OpenBLAS on this CPU's own kernels (the workplace shell's
# OPENBLAS_CORETYPE / OPENBLAS_L2_SIZE dropped, as peers.py drops them: they halve
# the GEMMs and so shrink every other share). Prints one line per build, case and
# repetition; never asserts.
set -uo pipefail
OLD=$(realpath "$1") NEW=$(realpath "$2") WORK=$(realpath "$3") REPS=${4:-2}
T=$(mktemp -d /tmp/check_cost.XXXXXX)
trap 'rm -rf "$T"' EXIT
command -v perf >/dev/null || { echo "check_cost: perf is not installed" >&2; exit 2; }

# samples BIN CASE BATCH STEPS: "check samples, all samples, samples in libgomp" of one
# run (with spinning workers most samples are libgomp's wait loop: the second share
# leaves them out)
samples() {
  local d=$WORK/$2
  perf record -q -F 2000 -o "$T/perf.data" -- env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE "$1" train "$d/model.onnx" --input "$d/x.npy" --labels "$d/y.npy" \
    --loss cross-entropy --batch-size "$3" --steps "$4" --lr 0.01 --optimizer sgd --threads 2 --remat none \
    --no-shuffle -o "$T/tuned.onnx" >/dev/null 2>&1 || { echo "check_cost: $1 failed on $2" >&2; exit 1; }
  perf report -i "$T/perf.data" -n --no-children --sort dso,symbol --stdio 2>/dev/null |
    awk '/^ +[0-9.]+%/ {t += $2; if ($3 ~ /libgomp/) w += $2;
      if ($5 ~ /^(ss_|grads_sum_sq|ot_grad_sum_sq|max_abs_bits|ot_f32_max_abs_bits|ot_train_check_)/) s += $2}
      END {print s + 0, t + 0, w + 0}'
}

echo "load: $(cut -d' ' -f1-3 /proc/loadavg); OMP_WAIT_POLICY=${OMP_WAIT_POLICY:-unset} ONNXTRAIN_NO_REEXEC=${ONNXTRAIN_NO_REEXEC:-unset}; OPENBLAS_CORETYPE / OPENBLAS_L2_SIZE unset for the runs (the shell had ${OPENBLAS_CORETYPE:-none} / ${OPENBLAS_L2_SIZE:-none})"
for r in $(seq 1 "$REPS"); do
  for c in "chain48 16 153" "mlp6x512 32 603"; do
    set -- $c
    for side in old new; do
      bin=$OLD; [ $side = new ] && bin=$NEW
      read -r s1 t1 w1 < <(samples "$bin" "$1" "$2" 3)
      read -r s2 t2 w2 < <(samples "$bin" "$1" "$2" "$3")
      awk -v c="$1" -v side=$side -v r="$r" -v s=$((s2 - s1)) -v t=$((t2 - t1)) -v w=$((w2 - w1)) \
        'BEGIN {printf "rep %d %-9s %s: check %.2f%% of the step (%d of %d samples); %.2f%% without the %d in libgomp\n",
          r, c, side, (t > 0 ? 100 * s / t : 0), s, t, (t - w > 0 ? 100 * s / (t - w) : 0), w}'
    done
  done
done
