#!/usr/bin/env python3
"""bench_gpu.py — the GPU benchmark behind tests/gpu/check.sh.

Trains the GPT-2-small- and ResNet-50-sized models written by
`tests/gpu/export_bench.py DIR` (samples/export_samples.py's --gpu-bench models) for a
few steps with onnxtrain on CUDA (--remat none; every:K, one kept value per block,
the granularity of PyTorch's per-block torch.utils.checkpoint; selective; auto at a
budget of 60% of none's peak) and with PyTorch eager on the same GPU, with and
without torch.utils.checkpoint around each block, and prints one table: step time
(median after a warm-up step), samples/s and peak memory (onnxtrain: the arena
high-water mark from --report; PyTorch: torch.cuda.max_memory_allocated). Runs that do
not fit the time limit are listed as skipped. The table is the last thing printed
(and written to --table).

Like for like: the same batch, data shapes, loss (mean cross-entropy), optimizer
(SGD, lr 0.01, no momentum: onnxtrain's defaults) and Dropout; float32 everywhere,
TF32 off on both sides (onnxtrain runs cuBLAS in pedantic float32 and cuDNN with FMA
math; PyTorch would use TF32 tensor cores for convolutions by default); onnxtrain
without its per-step NaN/Inf scan (--no-check-numerics), which reads every gradient
and updated param (on the GPU, ot_backend.scan_f32) and has no PyTorch counterpart.

Tensor cores (issue 27), --remat none only, after the float32 rows: onnxtrain with
--tf32 against PyTorch with TF32 allowed for matmuls and convolutions; and, when the
CLI has --precision, onnxtrain --precision bf16 / fp16 against PyTorch's
torch.autocast(dtype=bfloat16 / float16) (fp16 with a GradScaler, as its docs do)."""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))

MODELS = {
    # name: (file, batch, kind, every:K keeping one value per block as PyTorch's
    # per-block checkpoint does: a GPT block has two articulation points (after each
    # residual add), a bottleneck one; `onnxtrain plan --remat every:K` lists them)
    "gpt2-small": ("gpt2_small.onnx", 4, "gpt", 2),
    "resnet50": ("resnet50.onnx", 32, "resnet", 1),
}
STEPS = 4  # the first is a warm-up


def write_data(kind, batch, folder):
    import numpy as np
    rng = np.random.default_rng(0)
    x = os.path.join(folder, f"{kind}_x.npy")
    y = os.path.join(folder, f"{kind}_y.npy")
    if kind == "gpt":
        np.save(x, rng.integers(0, 50257, size=(batch, 1024), dtype=np.int64))
        np.save(y, rng.integers(0, 50257, size=(batch, 1024), dtype=np.int64))
    else:
        np.save(x, rng.standard_normal((batch, 3, 224, 224), dtype=np.float32))
        np.save(y, rng.integers(0, 1000, size=(batch,), dtype=np.int64))
    return x, y


def run_onnxtrain(exe, model, x, y, batch, remat, budget, folder, timeout, extra=()):
    rep = os.path.join(folder, f"report_{os.path.basename(model)}_{remat}{'_'.join(extra)}.json")
    cmd = [exe, "train", model, "--input", x, "--labels", y, "--device", "cuda", "--remat", remat,
           "--steps", str(STEPS), "--batch-size", str(batch), "--no-shuffle", "--no-check-numerics",
           "--report", rep, "-o", os.path.join(folder, "tuned.onnx")]
    if budget:
        cmd += ["--memory-budget", str(budget)]
    cmd += list(extra)
    t0 = time.time()
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    if p.returncode != 0:
        msg = (p.stderr or p.stdout).strip().splitlines()
        return {"error": f"exit {p.returncode}: {msg[-1] if msg else ''}"[:90]}
    with open(rep) as f:
        r = json.load(f)
    st = r["step_seconds"][1:] or r["step_seconds"]
    t = statistics.median(st)
    return {"step_s": t, "samples_s": batch / t, "peak": r["memory"]["measured_peak"],
            "planned": r["memory"]["planned_peak"], "wall": time.time() - t0}


def torch_model(kind):
    sys.path.insert(0, os.path.join(ROOT, "samples"))
    import export_samples as es
    if kind == "gpt":
        return es.TinyGPT(vocab=50257, d=768, heads=12, seq=1024, layers=12, p=0.1, tie_head=True)
    return es.ResNet50()


def run_torch(kind, batch, checkpoint, tensor_cores=None):
    """tensor_cores: None (float32, TF32 off), "tf32", "bf16" or "fp16" (autocast)."""
    import torch
    import torch.nn as nn
    import torch.nn.functional as F
    from torch.utils.checkpoint import checkpoint as ckpt

    class Ckpt(nn.Module):
        def __init__(self, m):
            super().__init__()
            self.m = m

        def forward(self, *a):
            return ckpt(self.m, *a, use_reentrant=False)

    # float32 as onnxtrain computes it: no TF32 tensor cores (PyTorch's default for
    # cuDNN convolutions), so the step times compare the same arithmetic
    torch.backends.cuda.matmul.allow_tf32 = tensor_cores == "tf32"
    torch.backends.cudnn.allow_tf32 = tensor_cores == "tf32"
    amp = {"bf16": torch.bfloat16, "fp16": torch.float16}.get(tensor_cores)
    torch.manual_seed(0)
    m = torch_model(kind).train()
    if checkpoint:
        if kind == "gpt":
            m.blocks = nn.ModuleList([Ckpt(b) for b in m.blocks])
        else:
            m.layers = nn.Sequential(*[Ckpt(b) for b in m.layers])
    dev = torch.device("cuda")
    m = m.to(dev)
    opt = torch.optim.SGD(m.parameters(), lr=0.01)
    if kind == "gpt":
        x = torch.randint(0, 50257, (batch, 1024), device=dev)
        y = torch.randint(0, 50257, (batch, 1024), device=dev)
    else:
        x = torch.randn(batch, 3, 224, 224, device=dev)
        y = torch.randint(0, 1000, (batch,), device=dev)
    scaler = torch.cuda.amp.GradScaler() if tensor_cores == "fp16" else None
    torch.cuda.reset_peak_memory_stats()
    times = []
    for _ in range(STEPS):
        torch.cuda.synchronize()
        t0 = time.time()
        opt.zero_grad(set_to_none=False)
        with torch.autocast("cuda", dtype=amp or torch.float32, enabled=amp is not None):
            out = m(x)
            loss = F.cross_entropy(out.reshape(-1, out.shape[-1]).float(), y.reshape(-1))
        if scaler:
            scaler.scale(loss).backward()
            scaler.step(opt)
            scaler.update()
        else:
            loss.backward()
            opt.step()
        torch.cuda.synchronize()
        times.append(time.time() - t0)
    t = statistics.median(times[1:])
    peak = torch.cuda.max_memory_allocated()
    del m, opt, x, y
    torch.cuda.empty_cache()
    return {"step_s": t, "samples_s": batch / t, "peak": peak}


def fmt_mib(b):
    return f"{b / 1048576:.0f} MiB"


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--onnxtrain", required=True)
    ap.add_argument("--models", required=True, help="folder written by export_samples.py --gpu-bench")
    ap.add_argument("--seconds", type=float, default=420, help="time limit for all runs")
    ap.add_argument("--table", help="also write the table to this file")
    a = ap.parse_args()
    start = time.time()
    left = lambda: a.seconds - (time.time() - start)
    help_text = subprocess.run([a.onnxtrain, "train", "--help"], capture_output=True, text=True).stdout
    has_device = "--device" in help_text
    rows, failed = [], False
    with tempfile.TemporaryDirectory() as folder:
        for name, (file, batch, kind, per_block) in MODELS.items():
            model = os.path.join(a.models, file)
            x, y = write_data(kind, batch, folder)
            none_peak = None
            for remat in ["none", f"every:{per_block}", "selective", "auto"]:
                label = f"onnxtrain --remat {remat}"
                if remat.startswith("every:"):
                    label += " (per block)"
                budget = int(none_peak * 0.6) if remat == "auto" and none_peak else None
                if remat == "auto":
                    label += f" (budget {fmt_mib(budget)})" if budget else " (no budget: none failed)"
                if not has_device:
                    rows.append((name, label, {"error": "the CLI has no --device option yet"}))
                    failed = True
                    continue
                if left() < 40:
                    rows.append((name, label, {"error": "skipped: out of time"}))
                    continue
                try:
                    r = run_onnxtrain(a.onnxtrain, model, x, y, batch, remat, budget, folder, max(30, left() - 30))
                except subprocess.TimeoutExpired:
                    r = {"error": "timed out"}
                if "error" in r:
                    failed = True
                elif remat == "none":
                    none_peak = r["planned"]
                rows.append((name, label, r))
                print(f"{name} {label}: {r}", flush=True)
            for ck in (False, True):
                label = "pytorch eager" + (" + checkpoint per block" if ck else "")
                if left() < 20:
                    rows.append((name, label, {"error": "skipped: out of time"}))
                    continue
                try:
                    r = run_torch(kind, batch, ck)
                except Exception as e:  # report and go on: the table is the point
                    r = {"error": f"{type(e).__name__}: {e}"[:90]}
                    failed = True
                rows.append((name, label, r))
                print(f"{name} {label}: {r}", flush=True)
            # tensor cores (issue 27): --remat none
            modes = [("tf32", ["--tf32"])] if "--tf32" in help_text else []
            if "--precision" in help_text:
                modes += [("bf16", ["--precision", "bf16"]), ("fp16", ["--precision", "fp16"])]
            for mode, extra in modes:
                for who in ("onnxtrain", "pytorch"):
                    label = f"onnxtrain {' '.join(extra)}" if who == "onnxtrain" else \
                        f"pytorch eager {'TF32' if mode == 'tf32' else 'autocast ' + mode}"
                    if left() < 40:
                        rows.append((name, label, {"error": "skipped: out of time"}))
                        continue
                    try:
                        if who == "onnxtrain":
                            r = run_onnxtrain(a.onnxtrain, model, x, y, batch, "none", None, folder,
                                              max(30, left() - 30), extra)
                        else:
                            r = run_torch(kind, batch, False, mode)
                    except subprocess.TimeoutExpired:
                        r = {"error": "timed out"}
                    except Exception as e:
                        r = {"error": f"{type(e).__name__}: {e}"[:90]}
                    if "error" in r:
                        failed = True
                    rows.append((name, label, r))
                    print(f"{name} {label}: {r}", flush=True)
    lines = [f"{'model':<11} {'run':<44} {'step (ms)':>10} {'samples/s':>10} {'peak memory':>12}"]
    for name, label, r in rows:
        if "error" in r:
            lines.append(f"{name:<11} {label:<44} {r['error']}")
        else:
            lines.append(f"{name:<11} {label:<44} {r['step_s'] * 1000:>10.1f} {r['samples_s']:>10.1f} "
                         f"{fmt_mib(r['peak']):>12}")
    table = "\n".join(lines)
    if a.table:
        with open(a.table, "w") as f:
            f.write(table + "\n")
    print("\n" + table)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
