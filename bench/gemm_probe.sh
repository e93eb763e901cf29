#!/usr/bin/env bash
# gemm_probe.sh — lists the GEMM shapes the bench cases issue in one training step
# (through the LD_PRELOAD logger bench/gemm_probe_log.c) and times each with
# bench/gemm_probe.c on 1 and 2 threads; the table behind kernels/cpu/gemm_select.c.
#
#   bash bench/gemm_probe.sh ONNXTRAIN CASES_DIR OUT_DIR [case ...]
# CASES_DIR holds bench/peers.py's case folders (model.onnx, x.npy, y.npy, case.json).
# OpenBLAS's tuning variables are dropped, as bench/peers.py does.
set -euo pipefail
OT=$1 CASES=$2 OUT=$3
shift 3
CASELIST=${*:-mlp6x512 chain48 gpt4_d128 gpt2_small bert_base resnet18 mobilenet_v2}
HERE=$(cd "$(dirname "$0")" && pwd)
INC=/usr/include/$(gcc -print-multiarch)/openblas-openmp
mkdir -p "$OUT"
gcc -O2 -shared -fPIC -fopenmp -I"$INC" -o "$OUT/gemm_probe_log.so" "$HERE/gemm_probe_log.c" -ldl
gcc -O2 -fopenmp -I"$INC" -o "$OUT/gemm_probe" "$HERE/gemm_probe.c" \
  -L/usr/lib/$(gcc -print-multiarch)/openblas-openmp -Wl,-rpath,/usr/lib/$(gcc -print-multiarch)/openblas-openmp \
  -lopenblas -ldnnl
: > "$OUT/shapes.txt"
for c in $CASELIST; do
  d=$CASES/$c
  read -r loss batch lr < <(python3 -c "import json;m=json.load(open('$d/case.json'));print(m['loss'],m['batch'],m['lr'])")
  rm -f "$OUT/$c.log"
  GEMM_LOG=$OUT/$c.log LD_PRELOAD=$OUT/gemm_probe_log.so env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE \
    "$OT" train "$d/model.onnx" --input "$d/x.npy" --labels "$d/y.npy" --loss "$loss" --batch-size "$batch" \
    --steps 1 --lr "$lr" --optimizer sgd --threads 2 --remat none --no-shuffle -o "$OUT/$c.tuned.onnx" >/dev/null
  # "TT M N K count" per distinct shape of the step
  awk '{print $2, $3, $4, $5}' "$OUT/$c.log" | sort | uniq -c | awk -v c="$c" '{print $2, $3, $4, $5, $1, c}' \
    >> "$OUT/shapes.txt"
done
for t in 1 2; do
  cut -d' ' -f1-5 "$OUT/shapes.txt" | OMP_WAIT_POLICY=PASSIVE env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE "$OUT/gemm_probe" $t \
    > "$OUT/probe_t$t.txt"
done
paste -d' ' <(cut -d' ' -f6 "$OUT/shapes.txt" | sed '1i case') "$OUT/probe_t2.txt"
