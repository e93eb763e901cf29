#!/bin/bash
# gemm_lowp.sh [THREADS] [ALTERNATIONS] [ROUNDS] — onnxtrain's CPU GEMM kernels in
# float32, bfloat16 and float16 (bench/gemm_lowp.c, built against build/: cmake
# --build build first) and PyTorch 2.x's float32 and bfloat16 matmul
# (bench/gemm_lowp_torch.py, $TORCH_PY, default /work/venvs/ops3/bin/python) on the
# same shapes, the two processes alternating ALTERNATIONS times; prints the median
# GFLOP/s of every column over the alternations and the ratios. OpenBLAS's tuning
# variables are dropped, OpenMP waits passively, as the CLI runs.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(dirname "$here")
b=$root/build
T=${1:-2} ALT=${2:-5} R=${3:-3}
PY=${TORCH_PY:-/work/venvs/ops3/bin/python}
work=${TMPDIR:-/tmp}/gemm_lowp.$$
mkdir -p "$work"
trap 'rm -rf "$work"' EXIT
cc -O2 -std=c11 -fopenmp -I"$root" -I"$root/ir" "$here/gemm_lowp.c" -o "$work/gemm_lowp" \
  -Wl,-rpath,/usr/lib/x86_64-linux-gnu/openblas-openmp "$b/libonnxtrain_lib.a" "$b/onnx/libot_onnx_proto.a" \
  -lprotobuf-c /usr/lib/x86_64-linux-gnu/openblas-openmp/libopenblas.so -ldnnl -lm -ldl \
  $(ls /usr/lib/x86_64-linux-gnu/openmpi/lib/libmpi.so /usr/lib/x86_64-linux-gnu/libglpk.so 2>/dev/null)
# the issue's product, then GPT-2 small at 512 tokens (2 x 256): QKV, attention
# projection, MLP up and down (forward NN as exported MatMuls), their input
# gradients (NT) and weight gradients (TN)
cat > "$work/shapes" <<'S'
NN 512 3072 768
NN 512 2304 768
NN 512 768 768
NN 512 768 3072
NT 512 768 3072
NT 512 3072 768
TN 768 3072 512
TN 3072 768 512
NN 2048 3072 768
S
for i in $(seq "$ALT"); do
  env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE OMP_WAIT_POLICY=PASSIVE "$work/gemm_lowp" "$T" "$R" < "$work/shapes" > "$work/ot.$i"
  env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE OMP_WAIT_POLICY=PASSIVE "$PY" "$here/gemm_lowp_torch.py" "$T" "$R" \
    < "$work/shapes" > "$work/pt.$i"
done
head -1 "$work/ot.1"
head -1 "$work/pt.1"
python3 - "$work" "$ALT" <<'P'
import statistics, sys
work, alt = sys.argv[1], int(sys.argv[2])
rows, impl = {}, {}
for i in range(1, alt + 1):
    for pre in ("ot", "pt"):
        lines = [l.split() for l in open(f"{work}/{pre}.{i}") if not l.startswith("#")]
        head, body = lines[0], lines[1:]
        for f in body:
            key = tuple(f[:4])
            for name, v in zip(head[4:], f[4:]):
                try:
                    rows.setdefault(key, {}).setdefault(name, []).append(float(v))
                except ValueError:
                    pass
            if pre == "ot":
                impl[key] = f[-1]
cols = ["f32", "bf16>f32", "bf16>bf16", "f16>f32", "torch_f32", "torch_bf16"]
print("median GFLOP/s over %d alternations" % alt)
print("%-3s %5s %5s %5s " % ("op", "M", "N", "K") + " ".join("%10s" % c for c in cols) +
      "  bf16/f32 bf16/torch_bf16  oneDNN impl")
for key, d in rows.items():
    med = {c: statistics.median(d[c]) for c in cols}
    print("%-3s %5s %5s %5s " % key + " ".join("%10.1f" % med[c] for c in cols) +
          "  %8.2f %14.2f  %s" % (med["bf16>f32"] / med["f32"], med["bf16>f32"] / med["torch_bf16"], impl[key]))
P
