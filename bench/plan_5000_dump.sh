#!/bin/sh
# plan_5000_dump.sh — byte-compares the plans two builds make of plan_5000.c's residual
# MLP (bench/plan_5000_dump.c: every offset, lifetime, link, workspace, timeline entry
# and peak, with and without remat rewrites) at each size given (blocks; default
# 37 556 1112 2780: about 340, 5,000, 10,000 and 25,000 nodes). For planner changes
# that must not change a plan. Exit 0 when every dump is equal, 1 otherwise.
#   bash bench/plan_5000_dump.sh OLD_BUILD NEW_BUILD [blocks...]
# (a build directory: the one holding libonnxtrain_lib.a and CMakeCache.txt)
set -e
ROOT=$(cd "$(dirname "$0")/.." && pwd)
. "$ROOT/bench/plan_5000_libs.sh"
[ $# -ge 2 ] || { echo "usage: $0 OLD_BUILD NEW_BUILD [blocks...]" >&2; exit 2; }
OLD=$(cd "$1" && pwd); NEW=$(cd "$2" && pwd); shift 2
[ $# -gt 0 ] || set -- 37 556 1112 2780
OUT=$(mktemp -d)
trap 'rm -rf "$OUT"' EXIT
for b in old new; do
  B=$OLD; [ $b = new ] && B=$NEW
  # the optional libraries that build found (GLPK, CBC, oneDNN), from CMake's cache
  cc -std=c11 -O2 -D_POSIX_C_SOURCE=200809L -D_DEFAULT_SOURCE -I"$ROOT" -I"$ROOT/ir" -I"$ROOT/bench" -o "$OUT/$b" \
    "$ROOT/bench/plan_5000_dump.c" "$B/libonnxtrain_lib.a" "$B/onnx/libot_onnx_proto.a" \
    -lprotobuf-c -fopenmp -lm $(plan_5000_libs "$B")
done
status=0
for n in "$@"; do
  "$OUT/old" "$n" > "$OUT/old.txt"
  "$OUT/new" "$n" > "$OUT/new.txt"
  if cmp -s "$OUT/old.txt" "$OUT/new.txt"; then
    echo "plan_5000_dump: $n blocks: $(wc -l < "$OUT/new.txt") lines, equal"
  else
    echo "plan_5000_dump: $n blocks: the plans differ:"; diff "$OUT/old.txt" "$OUT/new.txt" | head -5; status=1
  fi
done
exit $status
