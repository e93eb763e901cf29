#!/usr/bin/python3
"""check_lora.py — `train --lora` as a user runs it, on samples/tinygpt.onnx:
  - the adapters-only outputs (.npz and .onnx) hold the same adapters; the merged
    model (-o) has the input's initializers in the input's order, every one that was
    not adapted bitwise equal to the input's, every adapted W equal to
    W + (alpha/rank)·A·B (A·B has W's shape) within float32 rounding; onnx.checker
    accepts both .onnx files; the loss falls;
  - --resume from a step-2 checkpoint gives bitwise the same adapters and merged
    model as the uninterrupted 4-step run, and a run without --lora refuses it;
  - `info --lora` lists what is adapted; `plan --lora` reports the saving against the
    same step without LoRA;
  - --batch-size auto with --lora and --memory-budget picks a batch whose planned
    peak fits, and the run's measured peak is the planned one (--report);
  - usage errors exit 2.

    check_lora.py ONNXTRAIN_BINARY SCRATCH_DIR
"""
import json
import os
import subprocess
import sys

import numpy as np
import onnx
from onnx import numpy_helper

HERE = os.path.dirname(os.path.abspath(__file__))
S = os.path.join(HERE, "..", "samples")
MODEL = os.path.join(S, "tinygpt.onnx")
DATA = ["--input", os.path.join(S, "data", "tinygpt_tokens.npy"), "--labels", os.path.join(S, "data", "tinygpt_labels.npy")]
failures = []


def check(ok, what):
    print("%s  %s" % ("ok  " if ok else "FAIL", what))
    if not ok:
        failures.append(what)


def run(binary, *args):
    return subprocess.run([binary, *args], capture_output=True, text=True)


def inits(path):
    return {i.name: numpy_helper.to_array(i) for i in onnx.load(path).graph.initializer}


def adapters(path):
    if path.endswith(".npz"):
        a = dict(np.load(path))
        return a.pop("lora_rank").item(), a.pop("lora_alpha").item(), a
    mp = onnx.load(path)
    meta = {p.key: p.value for p in mp.metadata_props}
    return int(meta["lora_rank"]), float(meta["lora_alpha"]), {i.name: numpy_helper.to_array(i) for i in mp.graph.initializer}


def check_outputs(base, merged, ad_path, what):
    rank, alpha, ad = adapters(ad_path)
    b, m = inits(base), inits(merged)
    check(list(b) == list(m), "%s: the merged model has the input's initializers in order" % what)
    n_ad, worst = 0, 0.0
    for k in b:
        if k + ".lora_A" in ad:
            d = (alpha / rank) * (ad[k + ".lora_A"].astype(np.float64) @ ad[k + ".lora_B"].astype(np.float64))
            want = b[k].astype(np.float64) + d
            worst = max(worst, float(np.abs(m[k] - want).max() / np.abs(want).max()))
            n_ad += 1
        elif m[k].tobytes() != b[k].tobytes():
            check(False, "%s: '%s' (not adapted) changed" % (what, k))
    check(n_ad == 8 and worst < 1e-6, "%s: %d adapted weights merged as W + s*A@B (max rel err %.2e)" % (what, n_ad, worst))
    return ad


def train(binary, scratch, tag, *extra):
    out = os.path.join(scratch, tag)
    args = ["train", MODEL, *DATA, "--lora", "4:8", "--optimizer", "adam", "--lr", "0.01", "--batch-size", "8",
            "--seed", "3", "--threads", "1", *extra]
    p = run(binary, *args)
    check(p.returncode == 0, "train %s exits 0%s" % (tag, "" if p.returncode == 0 else " (%d: %s)" % (p.returncode, p.stderr.strip()[-300:])))
    return out, p


def main():
    binary, scratch = sys.argv[1], sys.argv[2]
    os.makedirs(scratch, exist_ok=True)
    f = lambda n: os.path.join(scratch, n)  # noqa: E731

    _, p = train(binary, scratch, "npz", "--steps", "4", "--checkpoint-every", "2", "--checkpoint-dir", f("ck"),
                 "-o", f("merged.onnx"), "--lora-save", f("ad.npz"), "--report", f("rep.json"))
    loss = json.load(open(f("rep.json")))["loss"]
    check(loss[-1] < loss[0], "the loss falls (%s)" % loss)
    a_npz = check_outputs(MODEL, f("merged.onnx"), f("ad.npz"), "npz run")
    train(binary, scratch, "onnx", "--steps", "4", "--lora-save", f("ad.onnx"))
    _, _, a_onnx = adapters(f("ad.onnx"))
    check(sorted(a_npz) == sorted(a_onnx) and all(a_npz[k].tobytes() == a_onnx[k].tobytes() for k in a_npz),
          ".npz and .onnx hold the same adapters")
    for path in ("merged.onnx", "ad.onnx"):
        try:
            onnx.checker.check_model(f(path))
            check(True, "onnx.checker accepts %s" % path)
        except Exception as e:  # noqa: BLE001
            check(False, "onnx.checker on %s: %s" % (path, e))

    ck = os.path.join(f("ck"), "ckpt-2.otc")
    train(binary, scratch, "resume", "--steps", "4", "--resume", ck, "--checkpoint-dir", f("ck2"),
          "-o", f("merged_r.onnx"), "--lora-save", f("ad_r.npz"))
    check(open(f("ad_r.npz"), "rb").read() == open(f("ad.npz"), "rb").read(), "resume: adapters bitwise equal")
    check(open(f("merged_r.onnx"), "rb").read() == open(f("merged.onnx"), "rb").read(), "resume: merged model bitwise equal")
    p = run(binary, "train", MODEL, *DATA, "--batch-size", "8", "--seed", "3", "--steps", "4", "--optimizer", "adam",
            "--resume", ck, "-o", f("plain.onnx"))
    check(p.returncode == 5, "resuming a LoRA checkpoint without --lora exits 5 (%d)" % p.returncode)

    p = run(binary, "info", MODEL, "--lora", "4", "--json")
    lw = json.loads(p.stdout)["lora"]["weights"] if p.returncode == 0 else []
    adapted = [w["name"] for w in lw if w["adapted"]]
    check(len(adapted) == 8 and "head.weight" not in adapted, "info --lora adapts 8 weights, not the head")
    p = run(binary, "plan", MODEL, "--batch-size", "16", "--optimizer", "adam", "--lora", "4")
    check(p.returncode == 0 and "without LoRA: saves" in p.stdout, "plan --lora reports the saving")

    p = run(binary, "train", MODEL, *DATA, "--lora", "4", "--optimizer", "adam", "--batch-size", "auto",
            "--memory-budget", "3M", "--steps", "1", "-o", f("auto.onnx"), "--report", f("auto.json"))
    check(p.returncode == 0 and "--batch-size auto:" in p.stderr,
          "--batch-size auto with --lora runs%s" % ("" if p.returncode == 0 else " (%s)" % p.stderr[-200:]))
    if p.returncode == 0:
        rep = json.load(open(f("auto.json")))
        mem = rep["memory"]
        check(mem["measured_peak"] == mem["planned_peak"] <= 3 << 20,
              "--batch-size auto: measured peak == planned peak <= budget (%s)" % mem)

    for args, what in ((["--lora-save", f("x.npz")], "--lora-save without --lora"),
                       (["--lora", "4", "--lora-target", "nope*", "-o", f("x.onnx")], "a glob that matches nothing"),
                       (["--lora", "4", "--lora-save", f("x.txt")], "--lora-save with another ending"),
                       (["--lora", "0", "-o", f("x.onnx")], "--lora 0"),
                       (["--batch-size", "auto", "-o", f("x.onnx")], "--batch-size auto without a budget")):
        p = run(binary, "train", MODEL, *DATA, "--steps", "1", *args)
        check(p.returncode == 2, "%s exits 2 (%d: %s)" % (what, p.returncode, p.stderr.strip().splitlines()[0]))
    print("%d failures" % len(failures))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
