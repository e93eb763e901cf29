#!/usr/bin/env python3
"""compare_steps.py — step cost of two onnxtrain builds on the bundled samples, as ratios.

Two measures, both per training step, old and new side by side in one run:
  * instructions (valgrind --tool=callgrind, one thread): exact and repeatable whatever
    else the machine is doing. Per-step = (I(long run) - I(short run)) / (extra steps),
    so import, planning and export cancel out.
  * wall time: median of interleaved runs (old, new, old, new, ...) of the same
    difference, one thread, OMP_WAIT_POLICY=PASSIVE. Noisy on a shared machine: the
    load average is printed with it.

    python3 bench/compare_steps.py OLD/onnxtrain NEW/onnxtrain [--runs 5] [--out FILE.md]

Never an assertion: it prints a table (and writes it to --out) for a human to read.
"""
import argparse
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
S = os.path.join(HERE, "samples")


def sample_args(m, tmp):
    if m.startswith("tinygpt"):
        return ["--input", f"{S}/data/tinygpt_tokens.npy", "--labels", f"{S}/data/tinygpt_labels.npy", "--batch-size", "8"]
    if m == "chain48":
        import numpy as np
        r = np.random.default_rng(0)
        np.save(f"{tmp}/x.npy", r.standard_normal((64, 32)).astype(np.float32))
        np.save(f"{tmp}/y.npy", r.integers(0, 10, 64).astype(np.int64))
        return ["--input", f"{tmp}/x.npy", "--labels", f"{tmp}/y.npy", "--batch-size", "16"]
    return ["--input", f"{S}/{m}/input.npy", "--labels", f"{S}/{m}/labels.npy"]


def train_cmd(binary, m, steps, tmp, extra):
    return [binary, "train", f"{S}/{m}.onnx", *sample_args(m, tmp), "--steps", str(steps), "--threads", "1",
            "--quiet", "-o", f"{tmp}/out.onnx", *extra]


def instructions(cmd, tmp):
    out = f"{tmp}/cg.out"
    # OMP_WAIT_POLICY set: onnxtrain does not re-exec itself (cli/main.c), which
    # valgrind would not follow
    subprocess.run(["valgrind", "--tool=callgrind", f"--callgrind-out-file={out}", *cmd],
                   check=True, capture_output=True, env=dict(os.environ, OMP_WAIT_POLICY="PASSIVE",
                                                             OMP_NUM_THREADS="1"))
    with open(out) as f:
        for line in f:
            if line.startswith("summary:") or line.startswith("totals:"):
                return int(line.split()[1])
    raise RuntimeError("no callgrind summary")


def seconds(cmd, env):
    t = time.perf_counter()
    subprocess.run(cmd, check=True, capture_output=True, env=env)
    return time.perf_counter() - t


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("old")
    ap.add_argument("new")
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--out")
    ap.add_argument("--samples", default="mlp,resnet,mobilenet,tinygpt,chain48")
    a = ap.parse_args()
    env = dict(os.environ, OMP_WAIT_POLICY="PASSIVE", OMP_NUM_THREADS="1")
    short, long_ = 2, 12
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for m in a.samples.split(","):
            for label, extra in (("sgd", []), ("adam+sqrt+accum2", ["--optimizer", "adam", "--remat", "sqrt", "--accum", "2"])):
                ins = {}
                for side, b in (("old", a.old), ("new", a.new)):
                    i_long = instructions(train_cmd(b, m, long_, tmp, extra), tmp)
                    i_short = instructions(train_cmd(b, m, short, tmp, extra), tmp)
                    ins[side] = (i_long - i_short) / (long_ - short)
                wall = {"old": [], "new": []}
                for _ in range(a.runs):
                    for side, b in (("old", a.old), ("new", a.new)):
                        d = seconds(train_cmd(b, m, long_ * 4, tmp, extra), env) - seconds(
                            train_cmd(b, m, short, tmp, extra), env)
                        wall[side].append(d / (long_ * 4 - short))
                wo, wn = statistics.median(wall["old"]), statistics.median(wall["new"])
                rows.append((m, label, ins["old"], ins["new"], wo * 1e3, wn * 1e3))
                print(f"{m:10s} {label:18s} instr/step {ins['old']:12.0f} -> {ins['new']:12.0f} "
                      f"({ins['new'] / ins['old']:.3f}x)  ms/step {wo * 1e3:7.3f} -> {wn * 1e3:7.3f} "
                      f"({wn / wo:.3f}x)", flush=True)
    load = os.getloadavg()
    lines = ["| sample | run | instructions/step old | new | new/old | ms/step old | new | new/old |",
             "|---|---|---|---|---|---|---|---|"]
    for m, label, io, inn, wo, wn in rows:
        lines.append(f"| {m} | {label} | {io:,.0f} | {inn:,.0f} | {inn / io:.3f} | {wo:.3f} | {wn:.3f} | {wn / wo:.3f} |")
    lines.append("")
    lines.append(f"One thread; wall time: median of {a.runs} interleaved runs, load average "
                 f"{load[0]:.2f} {load[1]:.2f} {load[2]:.2f} at the end.")
    text = "\n".join(lines)
    print(text)
    if a.out:
        with open(a.out, "w") as f:
            f.write(text + "\n")


if __name__ == "__main__":
    sys.exit(main())
