#!/usr/bin/python3
"""bench_conv.py — the convolution cases of issue 14, side by side with PyTorch: a
training step (SGD, cross-entropy) of torchvision's ResNet-18 (full width) and
MobileNetV2 (width --mobilenet-width) on 64x64 images, batch 8, exported in training
mode by PyTorch 1.13 (the TorchScript exporter, opset 17, do_constant_folding=False, as
samples/export_samples.py).

    /usr/bin/python3 bench/bench_conv.py [--onnxtrain build/onnxtrain] [--baseline OLD/onnxtrain]
        [--threads 2] [--reps 5] [--steps 12] [--models resnet18,mobilenet_v2] [--out DIR]

Each repetition runs onnxtrain (and --baseline, another build) and PyTorch one after
the other (interleaved), with the
same threading environment (bench_common.pin_environment). onnxtrain's step time is
the median of its report's step_seconds without the first step; PyTorch's the median
of its timed steps after one warm-up step. Exports and data are written under --out
(default /tmp/onnxtrain-bench-conv) and reused when present; nothing is committed.
Prints one line per repetition, then the medians and the load average: on a shared
machine the wall times are noisy, so read them with the load.
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import bench_common as bc  # noqa: E402  (pin_environment, find_onnxtrain)

IMAGE, BATCH, CLASSES = 64, 8, 10


def make_model(name, width):
    import torchvision.models as tvm  # noqa: PLC0415
    if name == "resnet18":
        return tvm.resnet18(num_classes=CLASSES)
    if name == "mobilenet_v2":
        return tvm.mobilenet_v2(width_mult=width, num_classes=CLASSES, dropout=0.0)
    sys.exit(f"bench_conv: unknown model {name}")


def prepare(name, width, out):
    """The ONNX export, its data (one batch) and the exported weights loaded back into
    the PyTorch model (tracing in training mode moves BatchNorm's running statistics)."""
    import numpy as np
    import onnx
    import onnx.numpy_helper
    import torch
    d = os.path.join(out, name)
    os.makedirs(d, exist_ok=True)
    path = os.path.join(d, f"{name}.onnx")
    torch.manual_seed(0)
    model = make_model(name, width)
    model.train()
    rng = np.random.default_rng(0)
    x = rng.standard_normal((BATCH, 3, IMAGE, IMAGE)).astype(np.float32)
    y = rng.integers(0, CLASSES, BATCH).astype(np.int64)
    np.save(os.path.join(d, "x.npy"), x)
    np.save(os.path.join(d, "y.npy"), y)
    if not os.path.exists(path):
        torch.onnx.export(model, torch.from_numpy(x), path, input_names=["x"], output_names=["logits"],
                          opset_version=17, do_constant_folding=False,
                          training=torch.onnx.TrainingMode.TRAINING, export_params=True)
    inits = {i.name: onnx.numpy_helper.to_array(i) for i in onnx.load(path).graph.initializer}
    with torch.no_grad():
        for k, v in list(model.state_dict().items()):
            if k in inits and tuple(inits[k].shape) == tuple(v.shape):
                v.copy_(torch.from_numpy(inits[k].copy()))
    return path, d, model, x, y


def run_onnxtrain(exe, path, d, steps, threads):
    rep = os.path.join(d, "report.json")
    subprocess.run([exe, "train", path, "--input", os.path.join(d, "x.npy"), "--labels", os.path.join(d, "y.npy"),
                    "--batch-size", str(BATCH), "--steps", str(steps), "--threads", str(threads), "--quiet",
                    "--report", rep, "-o", os.path.join(d, "tuned.onnx")], check=True, capture_output=True)
    with open(rep) as f:
        return statistics.median(json.load(f)["step_seconds"][1:])


def run_torch(model, x, y, steps):
    import torch
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    xt, yt = torch.from_numpy(x), torch.from_numpy(y)
    times = []
    for s in range(steps):
        t = time.perf_counter()
        opt.zero_grad(set_to_none=True)
        loss = torch.nn.functional.cross_entropy(model(xt), yt)
        loss.backward()
        opt.step()
        if s:
            times.append(time.perf_counter() - t)
    return statistics.median(times)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--onnxtrain")
    ap.add_argument("--baseline", help="a second onnxtrain build, run interleaved with the first")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--steps", type=int, default=12)
    ap.add_argument("--models", default="resnet18,mobilenet_v2")
    ap.add_argument("--mobilenet-width", type=float, default=0.5)
    ap.add_argument("--wait-policy", default="passive", choices=["passive", "active", "default"])
    ap.add_argument("--out", default="/tmp/onnxtrain-bench-conv")
    a = ap.parse_args()
    bc.pin_environment(a.threads, a.wait_policy)
    import torch
    torch.set_num_threads(a.threads)
    exe = bc.find_onnxtrain(a.onnxtrain)
    print(f"onnxtrain {exe}; PyTorch {torch.__version__}; {a.threads} threads; batch {BATCH}, {IMAGE}x{IMAGE}")
    for name in a.models.split(","):
        path, d, model, x, y = prepare(name, a.mobilenet_width, a.out)
        ours, base, theirs = [], [], []
        for r in range(a.reps):
            ours.append(run_onnxtrain(exe, path, d, a.steps, a.threads))
            line = f"  {name} rep {r}: onnxtrain {ours[-1] * 1e3:8.1f} ms/step"
            if a.baseline:
                base.append(run_onnxtrain(os.path.abspath(a.baseline), path, d, a.steps, a.threads))
                line += f"  baseline {base[-1] * 1e3:8.1f} ms/step"
            theirs.append(run_torch(model, x, y, a.steps))
            print(f"{line}  PyTorch {theirs[-1] * 1e3:8.1f} ms/step", flush=True)
        mo, mt = statistics.median(ours), statistics.median(theirs)
        extra = ""
        if base:
            mb = statistics.median(base)
            extra = f", baseline {mb * 1e3:.1f} ms/step (ratio to PyTorch {mb / mt:.2f}x)"
        print(f"{name}: onnxtrain {mo * 1e3:.1f} ms/step, PyTorch {mt * 1e3:.1f} ms/step, ratio {mo / mt:.2f}x{extra} "
              f"(median of {a.reps} interleaved repetitions)")
    load = os.getloadavg()
    print(f"load average {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}: wall times on a shared machine are noisy")


if __name__ == "__main__":
    sys.exit(main())
