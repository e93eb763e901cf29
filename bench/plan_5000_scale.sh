#!/bin/sh
# plan_5000_scale.sh — how auto's planning time grows with the graph: bench/plan_5000's
# residual MLP at 556, 1,112 and 2,780 blocks (5,007, 10,011 and 25,023 nodes), `auto`
# alone at the budget the full run picks there (halfway between `all`'s least peak and
# none's: 310,902,880, 620,888,160 and 1,550,860,384 bytes), CPU seconds of each run,
# the builds interleaved, then per build the ratio of its 25,023- to its 5,007-node
# median (each line also shows auto's choice: its peak and recompute share). OpenBLAS's shell overrides are dropped (they do not matter here, but every
# timing on this machine drops them) and OMP_WAIT_POLICY=PASSIVE is set.
#   bash bench/plan_5000_scale.sh BUILD [BUILD2 ...] [-- REPS]   (default 2 runs each)
set -e
ROOT=$(cd "$(dirname "$0")/.." && pwd)
. "$ROOT/bench/plan_5000_libs.sh"
OUT=$(mktemp -d)
trap 'rm -rf "$OUT"' EXIT
reps=2 n=0
while [ $# -gt 0 ]; do
  case "$1" in
  --) reps=$2; break ;;
  *) B=$(cd "$1" && pwd); n=$((n + 1))
     cc -std=c11 -O2 -D_POSIX_C_SOURCE=200809L -D_DEFAULT_SOURCE -I"$ROOT" -I"$ROOT/ir" -o "$OUT/b$n" \
       "$ROOT/bench/plan_5000.c" "$B/libonnxtrain_lib.a" "$B/onnx/libot_onnx_proto.a" \
       -lprotobuf-c -fopenmp -lm $(plan_5000_libs "$B")
     echo "build $n: $B" ;;
  esac
  shift
done
[ $n -gt 0 ] || { echo "usage: $0 BUILD [BUILD2 ...] [-- REPS]" >&2; exit 2; }
echo "load: $(cut -d' ' -f1-3 /proc/loadavg)"
for size in 556:310902880 1112:620888160 2780:1550860384; do
  for r in $(seq "$reps"); do
    for i in $(seq $n); do
      line=$(env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE OMP_WAIT_POLICY=PASSIVE "$OUT/b$i" "${size%%:*}" auto "${size##*:}" |
             grep 'remat auto')
      cpu=$(echo "$line" | sed -n 's/.*(\([0-9.]*\) s CPU).*/\1/p')
      echo "${size%%:*} $i $cpu $(echo "$line" | grep -o '[0-9]* planner runs.*' | sed 's/ ([^)]*)//')" | tee -a "$OUT/times"
    done
  done
done
echo "load: $(cut -d' ' -f1-3 /proc/loadavg)"
for i in $(seq $n); do
  for b in 556 1112 2780; do
    awk -v b=$b -v i=$i '$1 == b && $2 == i {print $3}' "$OUT/times" | sort -n |
      awk '{v[NR] = $1} END {print (NR % 2 ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2)}' > "$OUT/med_${i}_$b"
  done
  awk -v i=$i -v a="$(cat "$OUT/med_${i}_556")" -v b="$(cat "$OUT/med_${i}_1112")" -v c="$(cat "$OUT/med_${i}_2780")" \
    'BEGIN {printf "build %d: median CPU s 5,007 %.3f, 10,011 %.3f, 25,023 %.3f; 10k/5k %.2f, 25k/5k %.2f\n", i, a, b, c, b / a, c / a}'
done
