#!/usr/bin/python3
"""bench_step.py — step cost of onnxtrain builds on real-size models (issue 14): the
6x512 MLP (batch 32), 48 x (Linear 512 + Tanh) (batch 16), a 4-layer GPT d128 (8 x 64
tokens) and GPT-2 small (2 x 256 tokens), SGD. Old and new side by side in one run.

    /usr/bin/python3 bench/bench_step.py --export DIR            # the models and data, once
    /usr/bin/python3 bench/bench_step.py --dir DIR OLD/onnxtrain NEW/onnxtrain \
        [--cases mlp512,chain512,gpt4,gpt2s] [--threads 1,2] [--reps 3] [--callgrind]

Per build, case and thread count, interleaved (old, new, old, new, ...):
  * wall ms/step: median of the report's step times after the first two steps;
  * CPU ms/step: (user + system time of a long run - of a short run) / (extra steps),
    so import, planning and export cancel out;
  * the same with --no-check-numerics: the NaN/Inf checks' share of the step.
With --callgrind, instructions per step at one thread (long - short run, exact and
repeatable on a loaded machine; GPT-2 small is left out, it takes too long there).
Never an assertion: it prints a table for a human to read. The machine is shared:
wall and CPU times are as measured, with the load average printed.
"""
import argparse
import os
import statistics
import subprocess
import sys
import json
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)

# name: (onnx file, input .npy, labels .npy, batch, steps of the long run)
CASES = {
    "mlp512": ("mlp512.onnx", 32, 40),
    "chain512": ("chain512.onnx", 16, 20),
    "gpt4": ("gpt4.onnx", 8, 20),
    "gpt2s": ("gpt2s.onnx", 2, 4),
}
SHORT = 2


def export(out):
    """The four models with random weights (fixed seeds) and 4 batches of data each."""
    sys.path.insert(0, os.path.join(ROOT, "samples"))
    import numpy as np
    import torch
    import torch.nn as nn
    import torch.nn.functional as F
    import export_samples as es

    class WideMLP(nn.Module):
        def __init__(self, d=512, layers=6, classes=10):
            super().__init__()
            self.layers = nn.ModuleList([nn.Linear(d, d) for _ in range(layers - 1)])
            self.out = nn.Linear(d, classes)

        def forward(self, x):
            for layer in self.layers:
                x = F.relu(layer(x))
            return self.out(x)

    os.makedirs(out, exist_ok=True)
    torch.set_num_threads(1)
    rng = np.random.default_rng(0)
    specs = [
        ("mlp512", lambda: WideMLP(), "float", (512,), 10, (), 32),
        ("chain512", lambda: es.Chain(depth=48, d=512, classes=10), "float", (512,), 10, (), 16),
        ("gpt4", lambda: es.TinyGPT(vocab=256, d=128, heads=4, seq=64, layers=4, p=0.1), "tokens", (64,), 256, (64,), 8),
        ("gpt2s", lambda: es.TinyGPT(vocab=50257, d=768, heads=12, seq=256, layers=12, p=0.1, tie_head=True),
         "tokens", (256,), 50257, (256,), 2),
    ]
    for name, make, kind, shape, classes, lshape, batch in specs:
        torch.manual_seed(0)
        model = make().train()
        n = 4 * batch
        if kind == "float":
            x = rng.standard_normal((n,) + shape).astype(np.float32)
        else:
            x = rng.integers(0, classes, (n,) + shape).astype(np.int64)
        y = rng.integers(0, classes, (n,) + lshape).astype(np.int64)
        np.save(os.path.join(out, f"{name}_x.npy"), x)
        np.save(os.path.join(out, f"{name}_y.npy"), y)
        es.export(model, torch.from_numpy(x[:batch]), os.path.join(out, f"{name}.onnx"),
                  "tokens" if kind == "tokens" else "x", True)
        print(f"{name}: {sum(p.numel() for p in model.parameters())} params", flush=True)


def train_cmd(binary, d, case, steps, threads, tmp, extra):
    f, batch, _ = CASES[case]
    return [binary, "train", os.path.join(d, f), "--input", os.path.join(d, f"{case}_x.npy"), "--labels",
            os.path.join(d, f"{case}_y.npy"), "--batch-size", str(batch), "--steps", str(steps), "--threads",
            str(threads), "--lr", "0.01", "--quiet", "-o", os.path.join(tmp, "out.onnx"), "--report",
            os.path.join(tmp, "r.json"), *extra]


def run_timed(cmd, tmp):
    """(CPU seconds of the child, the report's step times)"""
    pid = os.fork()
    if pid == 0:
        fd = os.open(os.devnull, os.O_WRONLY)
        os.dup2(fd, 1)
        os.dup2(fd, 2)
        os.execv(cmd[0], cmd)
    _, status, ru = os.wait4(pid, 0)
    if os.waitstatus_to_exitcode(status) != 0:
        raise RuntimeError(f"{' '.join(cmd)}: exit {os.waitstatus_to_exitcode(status)}")
    with open(os.path.join(tmp, "r.json")) as fh:
        steps = json.load(fh).get("step_seconds", [])
    return ru.ru_utime + ru.ru_stime, steps


def instructions(cmd, tmp):
    out = os.path.join(tmp, "cg.out")
    subprocess.run(["valgrind", "--tool=callgrind", f"--callgrind-out-file={out}", *cmd], check=True,
                   capture_output=True, env=dict(os.environ, OMP_WAIT_POLICY="PASSIVE", OMP_NUM_THREADS="1"))
    with open(out) as fh:
        for line in fh:
            if line.startswith("summary:") or line.startswith("totals:"):
                return int(line.split()[1])
    raise RuntimeError("no callgrind summary")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("old", nargs="?")
    ap.add_argument("new", nargs="?")
    ap.add_argument("--export", metavar="DIR")
    ap.add_argument("--dir", default="/tmp/bench_step")
    ap.add_argument("--cases", default="mlp512,chain512,gpt4,gpt2s")
    ap.add_argument("--threads", default="1,2")
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--callgrind", action="store_true")
    ap.add_argument("--cg-steps", type=int, default=4, help="extra steps of the long callgrind run (default 4)")
    a = ap.parse_args()
    if a.export:
        export(a.export)
        return 0
    if not a.old or not a.new:
        ap.error("OLD and NEW binaries are needed (or --export DIR)")
    bins = {"old": os.path.abspath(a.old), "new": os.path.abspath(a.new)}
    lines = ["| case | threads | checks | wall ms/step old | new | CPU ms/step old | new |", "|---|---|---|---|---|---|---|"]
    with tempfile.TemporaryDirectory() as tmp:
        for case in a.cases.split(","):
            long_ = CASES[case][2]
            if a.callgrind and case != "gpt2s":
                ins = {}
                for side, b in bins.items():
                    il = instructions(train_cmd(b, a.dir, case, SHORT + a.cg_steps, 1, tmp, []), tmp)
                    ish = instructions(train_cmd(b, a.dir, case, SHORT, 1, tmp, []), tmp)
                    ins[side] = (il - ish) / a.cg_steps
                print(f"{case:9s} callgrind instr/step {ins['old']:14.0f} -> {ins['new']:14.0f} "
                      f"({ins['new'] / ins['old']:.3f}x)", flush=True)
                lines.insert(0, f"callgrind {case}: {ins['old']:,.0f} -> {ins['new']:,.0f} instr/step "
                             f"({ins['new'] / ins['old']:.3f}x)\n")
            for th in (int(t) for t in a.threads.split(",")):
                for label, extra in (("on", []), ("off", ["--no-check-numerics"])):
                    wall = {"old": [], "new": []}
                    cpu = {"old": [], "new": []}
                    for _ in range(a.reps):
                        for side, b in bins.items():
                            c_long, st = run_timed(train_cmd(b, a.dir, case, long_, th, tmp, extra), tmp)
                            c_short, _ = run_timed(train_cmd(b, a.dir, case, SHORT, th, tmp, extra), tmp)
                            wall[side].append(statistics.median(st[2:]) if len(st) > 2 else float("nan"))
                            cpu[side].append((c_long - c_short) / (long_ - SHORT))
                    w = {k: statistics.median(v) * 1e3 for k, v in wall.items()}
                    c = {k: statistics.median(v) * 1e3 for k, v in cpu.items()}
                    row = (f"| {case} | {th} | {label} | {w['old']:.2f} | {w['new']:.2f} | {c['old']:.2f} | "
                           f"{c['new']:.2f} |")
                    print(row, flush=True)
                    lines.append(row)
    load = os.getloadavg()
    lines.append("")
    lines.append(f"Medians of {a.reps} interleaved repetitions; load average {load[0]:.2f} {load[1]:.2f} "
                 f"{load[2]:.2f} at the end.")
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main())
