#!/usr/bin/env python3
"""bench_mpi.py — data-parallel throughput (issue 17): one process against 2 ranks under
mpirun at the same global batch, and the share of a step spent in the collectives
(the ordered gradient sum, the losses, BatchNorm statistics, waiting for the slower
rank included), as rank 0 reports it. Random data of the sample's shapes, written to a
temporary folder. Prints a markdown table.

    python3 bench/bench_mpi.py [--onnxtrain build/onnxtrain] [--model tinygpt|mlp|resnet]
                               [--batch 32] [--steps 40] [--repeat 3]

Configurations, all at global batch B:
  1 process, --threads 2, --batch-size B          (plain: one micro-batch)
  1 process, --threads 2, --batch-size B/2 --accum 2  (what 2 ranks equal bitwise)
  1 process, --threads 1, --batch-size B/2 --accum 2
  2 ranks,   --threads 1 each, --batch-size B     (bitwise equal to the line above)
Samples/s are global samples over the run's total time (--report total_seconds), the
best of --repeat runs; wall-clock figures on a shared machine are noisy: the load
average is printed with them.
"""
import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
SAMPLES = os.path.join(HERE, "..", "samples")


def make_data(model, n, folder):
    rng = np.random.default_rng(0)
    if model == "tinygpt":
        x = rng.integers(0, 64, size=(n, 16), dtype=np.int64)
        y = rng.integers(0, 64, size=(n, 16), dtype=np.int64)
    elif model == "mlp":
        x = rng.standard_normal((n, 64), dtype=np.float32)
        y = rng.integers(0, 10, size=(n,), dtype=np.int64)
    else:
        x = rng.standard_normal((n, 3, 16, 16), dtype=np.float32)
        y = rng.integers(0, 10, size=(n,), dtype=np.int64)
    xp, yp = os.path.join(folder, "x.npy"), os.path.join(folder, "y.npy")
    np.save(xp, x)
    np.save(yp, y)
    return xp, yp


def one(cmd, report):
    p = subprocess.run(cmd, capture_output=True, text=True)
    if p.returncode:
        sys.exit(f"bench_mpi: {' '.join(cmd)} failed ({p.returncode}):\n{p.stderr[-2000:]}")
    r = json.load(open(report))
    m = re.search(r"spent ([0-9.]+) s of ([0-9.]+) s in collectives", p.stderr)
    comm = float(m.group(1)) / float(m.group(2)) if m else None
    return r["total_seconds"], comm


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--onnxtrain", default=os.path.join(HERE, "..", "build", "onnxtrain"))
    ap.add_argument("--model", default="tinygpt", choices=["tinygpt", "mlp", "resnet"])
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--steps", type=int, default=40)
    ap.add_argument("--repeat", type=int, default=3)
    a = ap.parse_args()
    if a.model == "resnet" and a.batch != 16:
        a.batch = 16  # resnet's batch is fixed at 8 per micro-batch
    if not shutil.which("mpirun"):
        sys.exit("bench_mpi: mpirun not found (apt install openmpi-bin)")
    tmp = tempfile.mkdtemp(prefix="bench_mpi.")
    xp, yp = make_data(a.model, a.batch * 4, tmp)
    model = os.path.join(SAMPLES, a.model + ".onnx")
    base = [a.onnxtrain, "train", model, "--input", xp, "--labels", yp, "--steps", str(a.steps), "--quiet",
            "--no-check-numerics"]
    mpi = ["mpirun", "--allow-run-as-root", "--oversubscribe", "-np", "2"]
    half = a.batch // 2
    configs = [("1 process, 2 threads, one micro-batch", [], ["--threads", "2", "--batch-size", str(a.batch)]),
               ("1 process, 2 threads, --accum 2", [], ["--threads", "2", "--batch-size", str(half), "--accum", "2"]),
               ("1 process, 1 thread, --accum 2", [], ["--threads", "1", "--batch-size", str(half), "--accum", "2"]),
               ("2 ranks x 1 thread", mpi, ["--threads", "1", "--batch-size", str(a.batch)])]
    if a.model == "resnet":
        configs = configs[1:]
    env_load = open("/proc/loadavg").read().split()[:3]
    print(f"model {a.model}, global batch {a.batch}, {a.steps} steps, best of {a.repeat}; "
          f"load average before: {' '.join(env_load)} on {os.cpu_count()} cores\n")
    print("| configuration | samples/s | collectives' share of rank 0's run |")
    print("|---|---|---|")
    for name, pre, opts in configs:
        best, comm = None, None
        for k in range(a.repeat):
            rep = os.path.join(tmp, f"r{k}.json")
            secs, c = one(pre + base + opts + ["-o", os.path.join(tmp, "t.onnx"), "--report", rep], rep)
            if best is None or secs < best:
                best, comm = secs, c
        sps = a.batch * a.steps / best if best > 0 else float("nan")
        share = f"{100 * comm:.1f}%" if comm is not None else "–"
        print(f"| {name} | {sps:.0f} | {share} |", flush=True)
    print(f"\nload average after: {' '.join(open('/proc/loadavg').read().split()[:3])}")
    shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
