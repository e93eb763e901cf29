#!/usr/bin/env python3
"""mpi_fuse_overlap.py — step time and peak of `mpirun -np 2 onnxtrain train` with
--fuse-update (each gradient's sum over the ranks overlaps the rest of the backward
pass, docs/training.md "Fused updates") against the unfused run (the sum after the
backward pass), in interleaved rounds; also checks that the two tuned models are equal.

    /usr/bin/python3 bench/mpi_fuse_overlap.py BUILD/onnxtrain MODEL.onnx SCRATCH \\
        --data NAME=FILE.npy ... --labels FILE.npy --global-batch 2 [--steps 2] [--rounds 2] \\
        [--remat all] [--optim sgd] [--threads 1]

Each run: `nice -n 5 mpirun --oversubscribe -np 2 onnxtrain train ... --report R.json`;
the figures are the report's median step time (the first step is a warm-up and left
out when there are two or more), rank 0's seconds in collectives (its stderr line), and
the planned and measured peak per rank. Prints one row per run and the ratio of the
medians (fused / unfused)."""
import argparse
import hashlib
import json
import os
import re
import statistics
import subprocess
import sys


def one_run(a, fused, tag):
    out = os.path.join(a.scratch, tag + ".onnx")
    cmd = ["nice", "-n", "5", "mpirun", "--allow-run-as-root", "--oversubscribe", "-np", "2", a.binary, "train",
           a.model, *sum((["--input", d] for d in a.data), []), "--labels", a.labels, "--batch-size",
           str(a.global_batch), "--steps", str(a.steps), "--remat", a.remat, "--optim", a.optim, "--threads",
           str(a.threads), "--seed", "3", "-o", out, "--report", out + ".json"] + (["--fuse-update"] if fused else [])
    env = dict(os.environ, OMPI_MCA_btl_vader_single_copy_mechanism="none")
    p = subprocess.run(cmd, capture_output=True, text=True, env=env)
    if p.returncode:
        sys.exit(" ".join(cmd) + "\n" + p.stderr[-2000:])
    r = json.load(open(out + ".json"))
    times = r.get("step_times") or r.get("step_seconds") or []
    steady = times[1:] if len(times) > 1 else times
    m = re.search(r"spent ([0-9.]+) s of ([0-9.]+) s in collectives", p.stderr)
    return {"tag": tag, "step_s": statistics.median(steady) if steady else float("nan"), "times": times,
            "comm_s": float(m.group(1)) if m else float("nan"), "planned": r["memory"]["planned_peak"],
            "measured": r["memory"]["measured_peak"], "model": out}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("binary")
    ap.add_argument("model")
    ap.add_argument("scratch")
    ap.add_argument("--data", action="append", required=True)
    ap.add_argument("--labels", required=True)
    ap.add_argument("--global-batch", type=int, default=2)
    ap.add_argument("--steps", type=int, default=2)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--remat", default="all")
    ap.add_argument("--optim", default="sgd")
    ap.add_argument("--threads", type=int, default=1)
    a = ap.parse_args()
    os.makedirs(a.scratch, exist_ok=True)
    rows = []
    for k in range(a.rounds):
        for fused in (True, False):  # interleaved: the machine's load shifts both alike
            row = one_run(a, fused, ("fused" if fused else "unfused") + str(k))
            rows.append(row)
            print("%-9s step %.3f s (all: %s)  rank 0 in collectives %.3f s  peak planned %d measured %d" %
                  (row["tag"], row["step_s"], " ".join("%.3f" % t for t in row["times"]), row["comm_s"],
                   row["planned"], row["measured"]), flush=True)
    med = {f: statistics.median(r["step_s"] for r in rows if r["tag"].startswith(f)) for f in ("fused", "unfused")}
    same = len({hashlib.sha256(open(r["model"], "rb").read()).hexdigest() for r in rows}) == 1
    print("median step: fused %.3f s, unfused %.3f s, ratio fused/unfused %.3f; tuned models equal: %s" %
          (med["fused"], med["unfused"], med["fused"] / med["unfused"], same))


if __name__ == "__main__":
    main()
