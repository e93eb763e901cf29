#!/usr/bin/python3
"""remat_overhead.py — issue 30's acceptance check: does the overhead of a remat policy
that `onnxtrain bench` and `onnxtrain verify` report agree with the same ratio measured
from outside?

Per sample (batch: bench_common.default_batch; one batch of bench_common.make_data
written as .npy) and per policy (sqrt, all, selective, auto):
  bench    `onnxtrain bench --remat sqrt,all,selective,auto --steps S --json`: the median
           of the per-round ratios step(policy) / step(none) and their IQR;
  verify   `onnxtrain verify --remat P --time-steps S --json`: the same, for one policy;
  outside  separate `onnxtrain train --remat X --steps K --report R.json` processes, for
           X in none and the policies, interleaved (none, sqrt, all, ..., none, sqrt, ...)
           for --reps repetitions; the first --warm steps of each run dropped (warm-up);
           per repetition the ratio median(kept steps of P) / median(kept steps of none);
           the figure is the median of those ratios, its spread their IQR.
S and K grow for short steps (about 0.3 s of timed steps per configuration and run).
A figure agrees when the outside ratio lies within its reported IQR [q1..q3]; the
table says too whether the two IQRs overlap. The 1-minute load average before and after
each sample is written beside it: on a busy machine every time is unreliable.

Run with Debian's interpreter (bench_common imports torch for the sample data):
    /usr/bin/python3 bench/remat_overhead.py [--samples mlp,tinygpt] [--out bench/results_overhead.md]
It pins OMP/OpenBLAS threads and OMP_WAIT_POLICY=passive as the other benchmarks do
(bench_common.pin_environment), and drops OPENBLAS_CORETYPE/OPENBLAS_L2_SIZE from the
environment of its own runs (BLAS kernels of this CPU) unless --blas-core env."""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

import numpy as np

import bench_common as bc

POLICIES = ["sqrt", "all", "selective", "auto"]


def quartiles(xs):
    xs = sorted(xs)
    if len(xs) == 1:
        return xs[0], xs[0]
    q = statistics.quantiles(xs, n=4, method="inclusive")  # numpy's linear interpolation
    return q[0], q[2]


def run_json(cmd):
    p = subprocess.run(cmd, capture_output=True, text=True)
    if p.returncode != 0:
        sys.exit(f"remat_overhead: {' '.join(cmd)} failed ({p.returncode}):\n{p.stderr}")
    return json.loads(p.stdout)


def loadavg():
    with open("/proc/loadavg") as f:
        return float(f.read().split()[0])


def outside(binary, model, data, batch, policies, args, train_steps, tmp):
    """Per policy: the median, q1 and q3 of the per-repetition ratios, each the median step
    of the policy's run over the median step of none's run in the same repetition (runs
    next to each other see the same load; steps pooled over repetitions would not)."""
    per_rep = {c: [] for c in policies}
    for rep in range(args.reps):
        med = {}
        for c in ["none"] + policies:
            report = os.path.join(tmp, "report.json")
            cmd = [binary, "train", model] + data + ["--batch-size", str(batch), "--remat", c, "--steps",
                                                     str(train_steps), "--threads", str(args.threads),
                                                     "--report", report, "-o", os.path.join(tmp, "out.onnx")]
            p = subprocess.run(cmd, capture_output=True, text=True)
            if p.returncode != 0:
                sys.exit(f"remat_overhead: {' '.join(cmd)} failed ({p.returncode}):\n{p.stderr}")
            with open(report) as f:
                steps = json.load(f)["step_seconds"][args.warm:]
            med[c] = statistics.median(steps)
        for c in policies:
            per_rep[c].append(med[c] / med["none"])
    res = {}
    for c in policies:
        q1, q3 = quartiles(per_rep[c])
        res[c] = (statistics.median(per_rep[c]), q1, q3)
    return res


def fmt_ratio(m, q1, q3):
    return f"{m:.3f} [{q1:.3f}..{q3:.3f}]"


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--onnxtrain")
    ap.add_argument("--samples", default=",".join(bc.SAMPLES))
    ap.add_argument("--steps", type=int, default=15, help="timed rounds of bench and verify")
    ap.add_argument("--train-steps", type=int, default=40, help="steps of each outside train run")
    ap.add_argument("--warm", type=int, default=10, help="first steps of each train run dropped")
    ap.add_argument("--reps", type=int, default=7, help="interleaved repetitions of the outside runs")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--blas-core", choices=["machine", "env"], default="machine")
    ap.add_argument("--out", help="write the Markdown table here too")
    args = ap.parse_args()
    bc.pin_environment(args.threads, "passive", args.blas_core)
    binary = bc.find_onnxtrain(args.onnxtrain)
    header = ["sample", "batch", "rounds / train steps", "policy", "bench x none [IQR]", "verify x none [IQR]",
              "outside x none [IQR of reps]", "within bench IQR", "within verify IQR", "IQRs overlap",
              "load before -> after"]
    rows = []
    started = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    with tempfile.TemporaryDirectory() as tmp:
        for name in args.samples.split(","):
            batch = bc.default_batch(name)
            x, y = bc.make_data(name, batch)
            xp, yp = os.path.join(tmp, f"{name}_x.npy"), os.path.join(tmp, f"{name}_y.npy")
            np.save(xp, x.numpy())
            np.save(yp, y.numpy())
            model = os.path.join(bc.SAMPLES_DIR, f"{name}.onnx")
            data = ["--input", xp, "--labels", yp]
            common = data + ["--batch-size", str(batch), "--threads", str(args.threads)]
            l0 = loadavg()
            # Size the runs by the step: a run of a 0.1 ms step over 40 steps lasts 4 ms, and one
            # burst of other work then moves a whole run; aim at >= ~0.3 s of timed steps each.
            probe = run_json([binary, "bench", model] + common + ["--remat", "sqrt", "--steps", "3", "--json"])
            t = probe["measurement"]["configs"][0]["wall_seconds"]["median"]
            steps = min(max(args.steps, int(0.3 / t)), 1000)
            train_steps = min(max(args.train_steps, args.warm + int(0.3 / t)), 5000)
            b = run_json([binary, "bench", model] + common + ["--remat", ",".join(POLICIES), "--steps",
                                                             str(steps), "--json"])
            bench = {c["remat"]: c["ratio_vs_none"] for c in b["measurement"]["configs"]}
            ver = {}
            for pol in POLICIES:
                v = run_json([binary, "verify", model] + common + ["--remat", pol, "--time-steps", str(steps),
                                                                  "--json"])
                if not v["equal"]:
                    sys.exit(f"remat_overhead: verify {name} --remat {pol}: results differ")
                ver[pol] = v["timing"]["configs"][1]["ratio_vs_none"]
            out = outside(binary, model, data, batch, POLICIES, args, train_steps, tmp)
            l1 = loadavg()
            for pol in POLICIES:
                br, vr, (o, oq1, oq3) = bench[pol], ver[pol], out[pol]
                rows.append([name, batch, f"{steps} / {train_steps}", pol, fmt_ratio(br["median"], br["q1"], br["q3"]),
                             fmt_ratio(vr["median"], vr["q1"], vr["q3"]), fmt_ratio(o, oq1, oq3),
                             "yes" if br["q1"] <= o <= br["q3"] else "no",
                             "yes" if vr["q1"] <= o <= vr["q3"] else "no",
                             "yes" if br["q1"] <= oq3 and oq1 <= br["q3"] else "no",
                             f"{l0:.2f} -> {l1:.2f}"])
                print(" | ".join(str(c) for c in rows[-1]), flush=True)
    table = bc.markdown_table(header, rows)
    note = (f"{started}; {bc.machine_line(args.threads)}; {bc.blas_env_line()}; bench and verify: "
            f"the rounds after a warm-up step (at least {args.steps}, more for short steps: about 0.3 s of "
            f"steps); outside: {args.reps} interleaved repetitions of `train --steps N` (N at least "
            f"{args.train_steps}, more for short steps), the first {args.warm} steps of each dropped.\n")
    print("\n" + table + "\n" + note)
    if args.out:
        with open(args.out, "a") as f:
            f.write("\n" + note + "\n" + table)


if __name__ == "__main__":
    main()
