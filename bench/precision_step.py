#!/usr/bin/python3
"""precision_step.py — issue 27's speed figures: the training step time of `--precision
bf16` against float32 on GPT-2 small (bench/lora_memory.py's export: d 768, 12 layers,
12 heads, vocab 50257, tied head, sequence 256) and torchvision's ResNet-18 (224x224,
1000 classes), and of PyTorch 2.x's own CPU step under torch.autocast("cpu",
torch.bfloat16) on the same model; Adam, 2 threads each, random weights and data.

    /usr/bin/python3 bench/precision_step.py BUILD SCRATCH [--rounds R] [--steps N]
        [--gpt-batch B] [--resnet-batch B] [--torch PYTHON] [--models gpt2,resnet18]

Each measurement is one process (the model loaded, one untimed warm-up step, then N
timed steps; the median is kept); the processes run in rounds, each round every
(tool, precision) once in turn, so other work on the machine falls on all of them
alike. The ratios are per round (bf16 / fp32 of the same tool in the same round), and
the table gives their median. Each step's CPU time (time.process_time: every thread of
the process) is reported too: on a machine shared with other work the wall time is
mostly waiting for a core, the CPU time what the step costs. onnxtrain runs through its Python package (cffi) against
BUILD's library; PyTorch in the interpreter given by --torch (default
/work/venvs/ops3/bin/python, torch 2.15), which only builds the same nn.Module.
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)


def gpt2_module(torch):
    sys.path.insert(0, os.path.join(ROOT, "samples"))
    import export_samples as es  # noqa: PLC0415 (the samples' module, on the path now)
    torch.manual_seed(0)
    return es.TinyGPT(vocab=50257, d=768, heads=12, seq=256, layers=12, p=0.1, tie_head=True).train()


def resnet18_module(torch):
    import torchvision  # noqa: PLC0415
    torch.manual_seed(0)
    return torchvision.models.resnet18(num_classes=1000).train()


def batch(np, kind, b):
    rng = np.random.default_rng(0)
    if kind == "gpt2":
        return rng.integers(0, 50257, (b, 256), dtype=np.int64), rng.integers(0, 50257, (b, 256), dtype=np.int64)
    return rng.standard_normal((b, 3, 224, 224), dtype=np.float32), rng.integers(0, 1000, (b,), dtype=np.int64)


def export(kind, path):
    import torch  # noqa: PLC0415
    if kind == "gpt2":
        sys.path.insert(0, HERE)
        import lora_memory  # noqa: PLC0415
        lora_memory.export(path)
        return
    m = resnet18_module(torch)
    x = torch.zeros(1, 3, 224, 224)
    torch.onnx.export(m, (x,), path, input_names=["x"], output_names=["logits"], opset_version=14,
                      dynamic_axes={"x": {0: "batch"}, "logits": {0: "batch"}}, training=torch.onnx.TrainingMode.TRAINING,
                      do_constant_folding=False)


def worker_onnxtrain(model, kind, prec, b, steps, lib):
    import numpy as np  # noqa: PLC0415
    os.environ.setdefault("ONNXTRAIN_LIBRARY", lib)
    os.environ.setdefault("ONNXTRAIN_HEADER", os.path.join(ROOT, "include", "onnxtrain.h"))
    sys.path.insert(0, os.path.join(ROOT, "python"))
    import onnxtrain  # noqa: PLC0415
    x, y = batch(np, kind, b)
    name = "tokens" if kind == "gpt2" else "x"
    times = []
    with onnxtrain.Trainer(model, optimizer="adam", lr=1e-4, threads=2, precision=prec, remat="none") as t:
        for i in range(steps + 1):
            t0, c0 = time.perf_counter(), time.process_time()
            t.step({name: x}, y)
            if i:
                times.append((time.perf_counter() - t0, time.process_time() - c0))
    return times


def worker_torch(kind, prec, b, steps):
    import numpy as np  # noqa: PLC0415
    import torch  # noqa: PLC0415
    torch.set_num_threads(2)
    m = gpt2_module(torch) if kind == "gpt2" else resnet18_module(torch)
    opt = torch.optim.Adam(m.parameters(), lr=1e-4)
    x, y = (torch.from_numpy(a) for a in batch(np, kind, b))
    times = []
    for i in range(steps + 1):
        t0, c0 = time.perf_counter(), time.process_time()
        opt.zero_grad(set_to_none=True)
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=prec == "bf16"):
            out = m(x)
        loss = torch.nn.functional.cross_entropy(out.float().reshape(-1, out.shape[-1]), y.reshape(-1))
        loss.backward()
        opt.step()
        if i:
            times.append((time.perf_counter() - t0, time.process_time() - c0))
    return times


def main():
    if len(sys.argv) > 1 and sys.argv[1] == "worker":
        tool, kind, prec, b, steps, model, lib = sys.argv[2:9]
        b, steps = int(b), int(steps)
        t = worker_onnxtrain(model, kind, prec, b, steps, lib) if tool == "onnxtrain" else worker_torch(kind, prec, b, steps)
        print(json.dumps(t))
        return 0
    ap = argparse.ArgumentParser()
    ap.add_argument("build")
    ap.add_argument("scratch")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--steps", type=int, default=2)
    ap.add_argument("--gpt-batch", type=int, default=8)
    ap.add_argument("--resnet-batch", type=int, default=8)
    ap.add_argument("--torch", default="/work/venvs/ops3/bin/python")
    ap.add_argument("--models", default="gpt2,resnet18")
    a = ap.parse_args()
    os.makedirs(a.scratch, exist_ok=True)
    lib = os.path.join(os.path.abspath(a.build), "libonnxtrain.so")
    env = dict(os.environ, OMP_WAIT_POLICY="PASSIVE")
    for kind in a.models.split(","):
        path = os.path.join(a.scratch, "gpt2_small_256.onnx" if kind == "gpt2" else "resnet18_224.onnx")
        if not os.path.exists(path):
            export(kind, path)
        b = a.gpt_batch if kind == "gpt2" else a.resnet_batch
        runs, cpus = {}, {}
        for r in range(a.rounds):
            for tool, py in (("onnxtrain", sys.executable), ("torch", a.torch)):
                for prec in ("fp32", "bf16"):
                    p = subprocess.run([py, os.path.abspath(__file__), "worker", tool, kind, prec, str(b), str(a.steps),
                                        path, lib], capture_output=True, text=True, env=env)
                    if p.returncode:
                        sys.exit("%s %s %s failed:\n%s" % (tool, kind, prec, p.stderr[-3000:]))
                    steps_t = json.loads(p.stdout.strip().splitlines()[-1])
                    med = statistics.median(w for w, _ in steps_t)
                    cpu = statistics.median(c for _, c in steps_t)
                    runs.setdefault((tool, prec), []).append(med)
                    cpus.setdefault((tool, prec), []).append(cpu)
                    print("round %d %s %s %s: %.3f s/step, CPU %.3f s/step" % (r + 1, kind, tool, prec, med, cpu),
                          flush=True)
        print("\n%s, batch %d, %d rounds x %d steps (median of each process, then over rounds):" % (kind, b, a.rounds, a.steps))
        for tool in ("onnxtrain", "torch"):
            f32, b16 = runs[(tool, "fp32")], runs[(tool, "bf16")]
            ratio = statistics.median(x / y for x, y in zip(b16, f32))
            print("  %-9s fp32 %.3f s  bf16 %.3f s  bf16/fp32 %.3fx" % (tool, statistics.median(f32),
                                                                        statistics.median(b16), ratio))
        ot_vs = statistics.median(x / y for x, y in zip(runs[("onnxtrain", "bf16")], runs[("torch", "bf16")]))
        print("  onnxtrain bf16 / torch autocast bf16: %.3fx" % ot_vs)
        # CPU time of the process per step (every thread's): what a step costs whatever
        # share of the cores the machine's other work leaves it (OMP_WAIT_POLICY=PASSIVE:
        # waiting threads burn none)
        print("  CPU seconds per step:")
        for tool in ("onnxtrain", "torch"):
            f32, b16 = cpus[(tool, "fp32")], cpus[(tool, "bf16")]
            ratio = statistics.median(x / y for x, y in zip(b16, f32))
            print("  %-9s fp32 %.3f s  bf16 %.3f s  bf16/fp32 %.3fx" % (tool, statistics.median(f32),
                                                                        statistics.median(b16), ratio))
        ot_vs = statistics.median(x / y for x, y in zip(cpus[("onnxtrain", "bf16")], cpus[("torch", "bf16")]))
        print("  onnxtrain bf16 / torch autocast bf16 (CPU): %.3fx" % ot_vs)
    return 0


if __name__ == "__main__":
    sys.exit(main())
