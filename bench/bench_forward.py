#!/usr/bin/python3
"""bench_forward.py — times the forward pass of every sample with onnxtrain (`onnxtrain
eval`) and with PyTorch (the same model class and weights, from samples/export_samples.py)
on the same batch and thread count, in one run, and prints a Markdown table with the
ratio onnxtrain/PyTorch (below 1: onnxtrain is faster). Writes it to
bench/results_forward.md.

    /usr/bin/python3 bench/bench_forward.py [--threads 2] [--onnxtrain build/onnxtrain]

Method: both run the graph as exported, in training mode (BatchNorm with batch
statistics, Dropout 0.1 for tinygpt), PyTorch under torch.no_grad(). One repeat runs
NB batches back to back (NB chosen so a repeat takes ~0.3 s) and gives the mean time per
batch; onnxtrain's comes from `eval --json` "seconds" (the batch loop only: model load and
planning excluded). The table shows the median over repeats, onnxtrain and PyTorch
repeats interleaved so that load from other processes hits both alike.
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

import numpy as np

import bench_common as bc
import torch


def onnxtrain_forward(exe, name, npy, batch, threads):
    """Seconds per batch of one `onnxtrain eval` run over the whole file, its JSON, and
    the process's CPU seconds (user + system, all threads, from wait4)."""
    cmd = [exe, "eval", os.path.join(bc.SAMPLES_DIR, f"{name}.onnx"), "--input", npy, "--batch-size", str(batch),
           "--threads", str(threads), "--json", "--train-mode"]  # PyTorch runs .train() too
    with tempfile.TemporaryFile("w+") as out, tempfile.TemporaryFile("w+") as errf:
        p = subprocess.Popen(cmd, stdout=out, stderr=errf, text=True)
        _, status, ru = os.wait4(p.pid, 0)
        p.returncode = rc = os.waitstatus_to_exitcode(status)
        out.seek(0)
        errf.seek(0)
        stdout, stderr = out.read(), errf.read()
    if rc != 0:
        raise RuntimeError(f"{' '.join(cmd)}: exit {rc}: {stderr.strip()[:400]}")
    j = json.loads(stdout)
    return j["seconds"] / j["batches"], j, ru.ru_utime + ru.ru_stime


def torch_forward(model, x, batch, nb):
    """Wall and CPU seconds (process_time: all threads) per batch of nb forward passes
    over consecutive slices of x."""
    with torch.no_grad():
        c0, t0 = time.process_time(), time.perf_counter()
        for b in range(nb):
            model(x[b * batch:(b + 1) * batch])
        return (time.perf_counter() - t0) / nb, (time.process_time() - c0) / nb


def bench_sample(name, exe, args, tmp):
    batch = args.batch or bc.default_batch(name)
    if not bc.es.SAMPLES[name]["dynamic"] and batch != 8:
        batch = 8  # fixed batch dim in the exported graph
    model, _ = bc.torch_model(name)
    err = bc.check_twin(name, model)
    # Calibrate the repeat length on PyTorch (in process, cheap).
    x1, _ = bc.make_data(name, batch)
    with torch.no_grad():
        for _ in range(5):
            model(x1)
    t, _ = torch_forward(model, x1, batch, 5)
    nb = int(min(args.max_batches, max(20, args.repeat_seconds / max(t, 1e-6))))
    x, _ = bc.make_data(name, batch * nb)
    npy = os.path.join(tmp, f"{name}_fwd.npy")
    np.save(npy, x.numpy())
    # CPU time per batch of onnxtrain: a run over SHORT batches subtracted from the full run
    short = 2
    npy_short = os.path.join(tmp, f"{name}_fwd_short.npy")
    np.save(npy_short, x[:batch * short].numpy())
    ot, pt, oc, pc, info = [], [], [], [], None
    try:
        onnxtrain_forward(exe, name, npy, batch, args.threads)  # warm-up (page cache, first run)
    except RuntimeError as e:
        print(f"  {name}: onnxtrain failed: {e}", file=sys.stderr)
        ot = None
    torch_forward(model, x, batch, min(nb, 20))  # warm-up
    for _ in range(args.repeats):
        if ot is not None:
            s, info, cpu = onnxtrain_forward(exe, name, npy, batch, args.threads)
            _, _, cpu_short = onnxtrain_forward(exe, name, npy_short, batch, args.threads)
            ot.append(s)
            oc.append((cpu - cpu_short) / (nb - short))
        w, c = torch_forward(model, x, batch, nb)
        pt.append(w)
        pc.append(c)
    ot_ms = bc.median(ot) * 1e3 if ot else None
    pt_ms = bc.median(pt) * 1e3
    oc_ms = bc.median(oc) * 1e3 if oc else None
    pc_ms = bc.median(pc) * 1e3
    ratio = ot_ms / pt_ms if ot_ms else None
    cratio = oc_ms / pc_ms if oc_ms and pc_ms > 0 else None
    peak = info["peak_bytes"] if info else None
    print(f"  {name}: batch {batch}, {nb} batches x {args.repeats} repeats: onnxtrain {bc.fmt(ot_ms)} ms, "
          f"PyTorch {pt_ms:.3f} ms, ratio {bc.fmt(ratio, 2)}, CPU ratio {bc.fmt(cratio, 2)} "
          f"(twin error {err:.1e})", file=sys.stderr)
    return [name, batch, bc.fmt(ot_ms), bc.fmt(pt_ms), bc.fmt(ratio, 2), bc.fmt(oc_ms), bc.fmt(pc_ms),
            bc.fmt(cratio, 2), bc.fmt_bytes(peak)], ratio


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--onnxtrain", help="onnxtrain binary (default: build/onnxtrain)")
    ap.add_argument("--threads", type=int, default=2, help="threads for both (default 2)")
    ap.add_argument("--wait-policy", choices=["passive", "active", "default"], default="passive",
                    help="OMP_WAIT_POLICY for both tools (default passive; see bench_common.pin_environment)")
    ap.add_argument("--batch", type=int, help="batch for the dynamic-batch samples (default 32; "
                    "resnet and mobilenet always run their fixed batch of 8)")
    ap.add_argument("--repeats", type=int, default=7, help="timed repeats per side (default 7)")
    ap.add_argument("--repeat-seconds", type=float, default=0.3, help="target length of one repeat")
    ap.add_argument("--max-batches", type=int, default=1000)
    ap.add_argument("--only", action="append", choices=bc.SAMPLES, help="benchmark only these samples")
    ap.add_argument("--out", default=os.path.join(bc.HERE, "results_forward.md"), help="Markdown output")
    args = ap.parse_args()
    bc.pin_environment(args.threads, args.wait_policy)
    exe = bc.find_onnxtrain(args.onnxtrain)
    torch.set_num_threads(args.threads)
    rows = []
    with tempfile.TemporaryDirectory(prefix="ot-bench-") as tmp:
        for name in args.only or bc.SAMPLES:
            row, _ = bench_sample(name, exe, args, tmp)
            rows.append(row)
    table = bc.markdown_table(["sample", "batch", "onnxtrain ms", "PyTorch ms", "ratio onnxtrain/PyTorch",
                               "onnxtrain CPU ms", "PyTorch CPU ms", "CPU ratio", "onnxtrain planned peak"], rows)
    text = (f"Forward pass, median time per batch over {args.repeats} repeats "
            f"({bc.machine_line(args.threads)}; `{os.path.relpath(exe, bc.ROOT)}`, "
            f"{time.strftime('%Y-%m-%d %H:%M')}; load average {os.getloadavg()[0]:.1f}). Training mode as exported; "
            "ratio < 1: onnxtrain faster. CPU ms: user + system time per batch, all threads (less "
            "sensitive to load from other processes than wall time).\n\n"
            + table)
    print(text)
    with open(args.out + ".tmp", "w") as f:
        f.write(text)
    os.replace(args.out + ".tmp", args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
