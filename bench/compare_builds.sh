#!/usr/bin/env bash
# compare_builds.sh — behaviour check between two onnxtrain binaries (an old main and a
# refactor): on every bundled sample it runs train (SGD with momentum, Adam with
# clipping and accumulation, remat sqrt, with and without Dropout), grad, verify under
# every policy, plan and eval with both, and compares the results byte for byte: the
# tuned models, the loss / lr / gradient-norm histories of --report (step times and
# memory figures, which may legitimately change, are left out), every dumped gradient,
# eval outputs, verify's verdict and plan's peaks; where a binary has --fuse-update, its
# fused SGD run against its unfused one. Exit 0 when all are equal; every
# difference is listed.
#
#   bash bench/compare_builds.sh OLD/onnxtrain NEW/onnxtrain [--peaks]
#
# --peaks also requires plan's and train's peak bytes, and the plans that all and auto
# pick by measured peak, to be equal (off by default: a planner change may lower the
# peaks and so change those picks; the script then prints old → new as notes).
set -uo pipefail
OLD=$(realpath "$1") NEW=$(realpath "$2") PEAKS=${3:-}
HERE=$(cd "$(dirname "$0")/.." && pwd)
S=$HERE/samples
W=$(mktemp -d /tmp/compare_builds.XXXXXX)
trap 'rm -rf "$W"' EXIT
fails=0
say() { printf '%s\n' "$*"; }
differ() { say "DIFF  $*"; fails=$((fails + 1)); }

# A binary that takes --report-grad-norm computes the norm history only when asked; the
# older ones always did. Ask those that can, so the histories compare norms either way.
# (the help read whole first: under pipefail, grep -q closing the pipe early could fail it)
norm_flag() { local h; h=$("$1" train --help 2>/dev/null); [[ $h == *--report-grad-norm* ]] && echo --report-grad-norm; }
OLD_NORM=$(norm_flag "$OLD") NEW_NORM=$(norm_flag "$NEW")
# --fuse-update (updates fused into the backward pass) must give the bits of the update
# after it: where a binary has the flag, its fused SGD run is compared with its own
# unfused one (fused_same below), so an old binary without it is no difference.
fuse_flag() { local h; h=$("$1" train --help 2>/dev/null); [[ $h == *--fuse-update* ]] && echo yes; }
OLD_FUSE=$(fuse_flag "$OLD") NEW_FUSE=$(fuse_flag "$NEW")
fused_same() { # TAG MODEL DATA...: the $TAG run again with --fuse-update, per binary that has it
  local tag=$1 model=$2; shift 2
  for side in old new; do
    local bin=$OLD f=$OLD_FUSE; [ $side = new ] && bin=$NEW f=$NEW_FUSE
    [ -n "$f" ] || continue
    local d=$W/$side/$tag.fused; mkdir -p "$d"
    (cd "$d" && "$bin" train "$model" "$@" --steps 6 --optimizer sgd --momentum 0.9 --lr 0.05 --seed 3 --threads 2 \
      -o tuned.onnx --quiet --fuse-update >stdout.txt 2>stderr.txt)
    cmp -s "$d/tuned.onnx" "$W/$side/$tag/tuned.onnx" || differ "$tag: --fuse-update ($side) differs from the unfused run"
  done
}
# run TAG ARGS...: runs both binaries with the same arguments, outputs under $W/{old,new}/TAG
# (train with --report: plus the binary's norm_flag)
run() {
  local tag=$1; shift
  for side in old new; do
    local bin=$OLD nf=$OLD_NORM; [ $side = new ] && bin=$NEW nf=$NEW_NORM
    local extra=()
    [ "$1" = train ] && [ -n "$nf" ] && [[ " $* " == *" --report "* ]] && extra=("$nf")
    local d=$W/$side/$tag; mkdir -p "$d"
    (cd "$d" && "$bin" "$@" "${extra[@]}" >stdout.txt 2>stderr.txt; echo $? >rc.txt)
  done
  cmp -s "$W/old/$tag/rc.txt" "$W/new/$tag/rc.txt" ||
    differ "$tag: exit $(cat "$W/old/$tag/rc.txt") → $(cat "$W/new/$tag/rc.txt") ($(tail -1 "$W/new/$tag/stderr.txt"))"
}
same_file() { # TAG FILE
  local a=$W/old/$1/$2 b=$W/new/$1/$2
  if [ ! -e "$a" ] && [ ! -e "$b" ]; then differ "$1: $2 missing in both"; return; fi
  cmp -s "$a" "$b" || differ "$1: $2 differs"
}
same_dir() { # TAG DIR
  diff -rq "$W/old/$1/$2" "$W/new/$1/$2" >/dev/null 2>&1 || differ "$1: $2/ differs ($(diff -rq "$W/old/$1/$2" "$W/new/$1/$2" 2>&1 | head -3 | tr '\n' ' '))"
}
# The report's histories: losses, lrs, grad norms, validation; not times or memory. A
# figure only one build reports (a key new in an epoch's entry, e.g. val_perplexity) is
# no difference of behaviour: each side keeps the epoch keys both have.
same_history() { # TAG
  local py='import json,sys
r,o=(json.load(open(f)) for f in sys.argv[1:3])
keep={k:r[k] for k in r if any(w in k for w in ("loss","lr","norm","val","steps","epoch","accuracy"))}
both=set().union(*[e.keys() for e in r.get("epochs",[])[:1]]) & set().union(*[e.keys() for e in o.get("epochs",[])[:1]])
keep["epochs"]=[{k:v for k,v in e.items() if k in both} for e in keep.get("epochs",[])]
print(json.dumps(keep,sort_keys=True))'
  local a b
  a=$(python3 -c "$py" "$W/old/$1/report.json" "$W/new/$1/report.json" 2>&1)
  b=$(python3 -c "$py" "$W/new/$1/report.json" "$W/old/$1/report.json" 2>&1)
  [ "$a" = "$b" ] || differ "$1: report histories differ"
}
# verify --json without timings and memory figures (those are compared as peaks).
# The recompute figures of a policy that picks its plan by the planner's measured
# peak (all, auto) may change with the planner: a note, like a peak.
same_verdict() { # TAG
  local f='s/"(seconds|peak|measured|saved)_?[a-z]*": [0-9.e+-]*//g' c='s/"(extra_flops|recompute_nodes)": [0-9.e+-]*//g'
  local t='s/, "timing": (null|\{.*\})\}$/}/' # the time line's measurement (train/measure.h), last
  local a b; a=$(sed -E -e "$t" -e "$f" "$W/old/$1/stdout.txt") b=$(sed -E -e "$t" -e "$f" "$W/new/$1/stdout.txt")
  [ "$a" = "$b" ] && return
  case $1 in
    *.verify.all | *.verify.auto) if [ "$PEAKS" != --peaks ] && [ "$(sed -E "$c" <<<"$a")" = "$(sed -E "$c" <<<"$b")" ]; then
      local n='s/.*"recompute_nodes": ([0-9]+).*/\1/' x='s/.*"extra_flops": ([0-9]+).*/\1/'
      say "note  $1: plan choice: recompute nodes $(sed -E "$n" <<<"$a") → $(sed -E "$n" <<<"$b"), extra flops $(sed -E "$x" <<<"$a") → $(sed -E "$x" <<<"$b")"
      return; fi ;;
  esac
  differ "$1: verify's comparison differs"
}
# the first peak_bytes (train's report), or with `policy` the last policy's (plan)
peak_of() {
  if [ "${2:-}" = policy ]; then grep -oE '"policy": "[^"]*", "peak_bytes": *[0-9]+' "$1" | tail -1 | grep -oE '[0-9]+$'
  else grep -oE '"peak_bytes": *[0-9]+' "$1" | head -1 | grep -oE '[0-9]+$'; fi
}
same_peak() { # TAG FILE [policy]
  local a b; a=$(peak_of "$W/old/$1/$2" "${3:-}") b=$(peak_of "$W/new/$1/$2" "${3:-}")
  if [ "$a" != "$b" ]; then
    if [ "$PEAKS" = --peaks ]; then differ "$1: peak $a → $b"; else say "note  $1: peak $a → $b"; fi
  fi
}

for m in mlp resnet mobilenet tinygpt tinygpt_nodrop chain48; do
  model=$S/$m.onnx
  case $m in
    tinygpt*) data=(--input "$S/data/tinygpt_tokens.npy" --labels "$S/data/tinygpt_labels.npy" --batch-size 8) ;;
    chain48) python3 - "$W/chain48" <<'PY'
import numpy as np, os, sys
os.makedirs(sys.argv[1], exist_ok=True); r = np.random.default_rng(0)
np.save(sys.argv[1] + "/x.npy", r.standard_normal((32, 32)).astype(np.float32))
np.save(sys.argv[1] + "/y.npy", r.integers(0, 10, 32).astype(np.int64))
PY
      data=(--input "$W/chain48/x.npy" --labels "$W/chain48/y.npy" --batch-size 8) ;;
    *) data=(--input "$S/$m/input.npy" --labels "$S/$m/labels.npy") ;;
  esac
  run "$m.sgd" train "$model" "${data[@]}" --steps 6 --optimizer sgd --momentum 0.9 --lr 0.05 --seed 3 --threads 2 \
      --report report.json -o tuned.onnx --quiet
  same_file "$m.sgd" tuned.onnx; same_history "$m.sgd"; same_peak "$m.sgd" report.json
  fused_same "$m.sgd" "$model" "${data[@]}"
  run "$m.adam" train "$model" "${data[@]}" --steps 4 --accum 2 --optimizer adamw --clip-grad-norm 0.5 \
      --schedule cosine --warmup-steps 1 --remat sqrt --seed 5 --threads 1 --report report.json -o tuned.onnx --quiet
  same_file "$m.adam" tuned.onnx; same_history "$m.adam"; same_peak "$m.adam" report.json
  run "$m.grad" grad "$model" "${data[@]}" --dump-grads grads --seed 2 --remat selective
  same_dir "$m.grad" grads; same_file "$m.grad" stdout.txt
  # --optimizer sgd: plan and verify size the optimizer's state, and the CLI's default
  # optimizer changed (SGD, then AdamW): both builds plan the same step
  for p in none all sqrt every:2 selective auto; do
    run "$m.verify.$p" verify "$model" "${data[@]}" --remat "$p" --seed 4 --optimizer sgd --json
    same_file "$m.verify.$p" rc.txt; same_verdict "$m.verify.$p"
    run "$m.plan.$p" plan "$model" --batch-size 8 --remat "$p" --optimizer sgd --json
    same_file "$m.plan.$p" rc.txt; same_peak "$m.plan.$p" stdout.txt policy
  done
  case $m in
    tinygpt*) edata=(--input "$S/data/tinygpt_tokens.npy" --batch-size 5) ;;
    chain48) edata=(--input "$W/chain48/x.npy" --batch-size 5) ;;
    *) edata=(--input "$S/$m/input.npy") ;;
  esac
  run "$m.eval" eval "$model" "${edata[@]}" --dump-outputs out
  same_dir "$m.eval" out
done
if [ $fails -eq 0 ]; then say "compare_builds: every result is bitwise equal"; else say "compare_builds: $fails difference(s)"; fi
[ $fails -eq 0 ]
