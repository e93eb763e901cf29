#!/usr/bin/python3
"""precision_step.py — issue 27's speed figures: the training step time of `--precision
bf16` (and fp16) against float32 on GPT-2 small (bench/lora_memory.py's export: d 768,
12 layers, 12 heads, vocab 50257, tied head, sequence 256), torchvision's ResNet-18 and
MobileNetV2 (224x224, 1000 classes; MobileNetV2's ReLU6 exports as Clip), and of
PyTorch 2.x's own CPU step under torch.autocast("cpu", torch.bfloat16) on the same
model; Adam, 2 threads each, random weights and data.

    /usr/bin/python3 bench/precision_step.py BUILD SCRATCH [--rounds R] [--steps N]
        [--gpt-batch B] [--resnet-batch B (the CNNs)] [--torch PYTHON] [--models gpt2,resnet18,mobilenet]
        [--precisions fp32,bf16,fp16] [--tools onnxtrain,torch] [--base OLD_BUILD]

--precisions picks the precisions (default fp32,bf16; PyTorch runs fp16 under
torch.autocast("cpu", torch.float16)); --tools drops PyTorch or onnxtrain; --base adds
a second onnxtrain build (its libonnxtrain.so) to every round, as "base", so a change's
before and after are timed in the same rounds and their ratio printed per precision.

Each process also reports its CPU seconds per step (time.process_time: both threads),
printed beside the wall times: on a shared machine the steadier of the two.

Each measurement is one process (the model loaded, one untimed warm-up step, then N
timed steps; the median is kept); the processes run in rounds, each round every
(tool, precision) once in turn, so other work on the machine falls on all of them
alike. The ratios are per round (bf16 / fp32 of the same tool in the same round), and
the table gives their median. onnxtrain runs through its Python package (cffi) against
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


def mobilenet_module(torch):
    import torchvision  # noqa: PLC0415
    torch.manual_seed(0)
    return torchvision.models.mobilenet_v2(num_classes=1000).train()


def cnn_module(torch, kind):
    return mobilenet_module(torch) if kind == "mobilenet" else resnet18_module(torch)


SCRATCH_NAMES = {"gpt2": "gpt2_small_256.onnx", "resnet18": "resnet18_224.onnx", "mobilenet": "mobilenetv2_224.onnx"}


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
    m = cnn_module(torch, kind)
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
    times, cpu = [], []
    with onnxtrain.Trainer(model, optimizer="adam", lr=1e-4, threads=2, precision=prec, remat="none") as t:
        for i in range(steps + 1):
            t0, c0 = time.perf_counter(), time.process_time()
            t.step({name: x}, y)
            if i:
                times.append(time.perf_counter() - t0)
                cpu.append(time.process_time() - c0)
    return times, cpu


def worker_torch(kind, prec, b, steps):
    import numpy as np  # noqa: PLC0415
    import torch  # noqa: PLC0415
    torch.set_num_threads(2)
    m = gpt2_module(torch) if kind == "gpt2" else cnn_module(torch, kind)
    opt = torch.optim.Adam(m.parameters(), lr=1e-4)
    x, y = (torch.from_numpy(a) for a in batch(np, kind, b))
    times, cpu = [], []
    for i in range(steps + 1):
        t0, c0 = time.perf_counter(), time.process_time()
        opt.zero_grad(set_to_none=True)
        low = torch.float16 if prec == "fp16" else torch.bfloat16
        with torch.autocast("cpu", dtype=low, enabled=prec != "fp32"):
            out = m(x)
        loss = torch.nn.functional.cross_entropy(out.float().reshape(-1, out.shape[-1]), y.reshape(-1))
        loss.backward()
        opt.step()
        if i:
            times.append(time.perf_counter() - t0)
            cpu.append(time.process_time() - c0)
    return times, cpu


def main():
    if len(sys.argv) > 1 and sys.argv[1] == "worker":
        tool, kind, prec, b, steps, model, lib = sys.argv[2:9]
        b, steps = int(b), int(steps)
        t, c = worker_onnxtrain(model, kind, prec, b, steps, lib) if tool == "onnxtrain" else worker_torch(kind, prec, b, steps)
        print(json.dumps({"wall": t, "cpu": c}))
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
    ap.add_argument("--precisions", default="fp32,bf16")
    ap.add_argument("--tools", default="onnxtrain,torch")
    ap.add_argument("--base", default=None, help="a second onnxtrain build, timed as 'base' in every round")
    a = ap.parse_args()
    os.makedirs(a.scratch, exist_ok=True)
    libs = {"onnxtrain": os.path.join(os.path.abspath(a.build), "libonnxtrain.so")}
    tools = [(t, sys.executable if t == "onnxtrain" else a.torch) for t in a.tools.split(",")]
    if a.base:
        libs["base"] = os.path.join(os.path.abspath(a.base), "libonnxtrain.so")
        tools.insert(0, ("base", sys.executable))
    precs = a.precisions.split(",")
    env = dict(os.environ, OMP_WAIT_POLICY="PASSIVE")
    for kind in a.models.split(","):
        path = os.path.join(a.scratch, SCRATCH_NAMES[kind])
        if not os.path.exists(path):
            export(kind, path)
        b = a.gpt_batch if kind == "gpt2" else a.resnet_batch
        runs, cpus = {}, {}
        for r in range(a.rounds):
            for tool, py in tools:
                for prec in precs:
                    wtool = "torch" if tool == "torch" else "onnxtrain"
                    p = subprocess.run([py, os.path.abspath(__file__), "worker", wtool, kind, prec, str(b), str(a.steps),
                                        path, libs.get(tool, libs["onnxtrain"])], capture_output=True, text=True, env=env)
                    if p.returncode:
                        sys.exit("%s %s %s failed:\n%s" % (tool, kind, prec, p.stderr[-3000:]))
                    res = json.loads(p.stdout.strip().splitlines()[-1])
                    med, cpu = statistics.median(res["wall"]), statistics.median(res["cpu"])
                    runs.setdefault((tool, prec), []).append(med)
                    cpus.setdefault((tool, prec), []).append(cpu)
                    print("round %d %s %s %s: %.3f s/step (CPU %.3f s)" % (r + 1, kind, tool, prec, med, cpu),
                          flush=True)
        print("\n%s, batch %d, %d rounds x %d steps (median of each process, then over rounds):" % (kind, b, a.rounds, a.steps))
        ratio = lambda d, t1, p1, t2, p2: statistics.median(x / y for x, y in zip(d[(t1, p1)], d[(t2, p2)]))  # noqa: E731
        # wall, then process CPU seconds (both threads) per step: steadier than wall time
        # on a shared machine, where another job can take a core for part of a step
        for what, d in (("wall", runs), ("CPU", cpus)):
            for tool, _ in tools:
                line = "  %-4s %-9s" % (what, tool) + "".join(
                    "  %s %.3f s" % (p, statistics.median(d[(tool, p)])) for p in precs)
                if "fp32" in precs:
                    line += "".join("  %s/fp32 %.3fx" % (p, ratio(d, tool, p, tool, "fp32")) for p in precs if p != "fp32")
                print(line)
            if a.base:
                print("  %-4s onnxtrain / base:" % what + "".join(
                    "  %s %.3fx" % (p, ratio(d, "onnxtrain", p, "base", p)) for p in precs))
            if "torch" in a.tools.split(",") and "onnxtrain" in a.tools.split(","):
                print("  %-4s onnxtrain / torch autocast:" % what + "".join(
                    "  %s %.3fx" % (p, ratio(d, "onnxtrain", p, "torch", p)) for p in precs if p != "fp32"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
