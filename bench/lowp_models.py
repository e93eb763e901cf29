#!/usr/bin/env python3
"""lowp_models.py — issue 27 part 2 at real size: GPT-2 small, BERT-base and ResNet-18
(random weights) exported after `model.half()` / `model.to(torch.bfloat16)` by torch
2.15's dynamo exporter (`dy`) and its TorchScript exporter (`ts`: dynamo=False, training
mode, opset 17), then through onnxtrain: `train` a few steps writing the tuned model,
`verify` under every --remat policy (bitwise), `eval --dump-outputs` of the tuned model,
onnx.checker (full_check) on the tuned model, and ONNX Runtime loading and running the tuned model, then its inference form
(BatchNormalization's training_mode 0, Dropout off: what `eval` computes) against
onnxtrain's eval; ort_err is the largest difference over the largest |logit|. Run with nice: it is CPU-heavy.

    nice -n 5 /work/venvs/ops3/bin/python bench/lowp_models.py --onnxtrain build/onnxtrain \\
        [--only gpt2,bert,resnet18] [--dtypes fp16,bf16] [--exporters dy,ts] [--policies none,all,sqrt,auto] \\
        [--steps 4] [--seq 128] [--scratch /tmp/lowp_models]

ONNX Runtime runs in its own venv ($ORT_PYTHON, default /work/venvs/ort/bin/python):
ops3 has no onnxruntime. One line per model/dtype/exporter; a failing stage prints the
command and the first line of its error, and the rest of that row goes on where it can.
Debian's torch 1.13 cannot export these: it has no float16 Linear/Conv on the CPU to
trace through (tests/fixtures/lowp/make_fixtures.py says the same), so `ts` here is
torch 2.15's TorchScript exporter.
"""
import argparse
import json
import os
import subprocess
import sys
import time
import warnings

import numpy as np
import torch

BATCH = 1
DT = {"fp16": torch.float16, "bf16": torch.bfloat16}
ORT_RUN = r"""
import sys, json, numpy as np, onnx, onnxruntime as ort
model, out = sys.argv[1], sys.argv[2]
feeds = {k: np.load(v) for k, v in json.loads(sys.argv[3]).items()}
def session(path):
    try:
        return ort.InferenceSession(path, providers=["CPUExecutionProvider"])
    except Exception as e:
        print("LOAD FAILED: " + str(e).splitlines()[0][:300]); sys.exit(3)
def run(s):
    try:
        return s.run(["logits"], feeds)[0]
    except Exception as e:
        print("RUN FAILED: " + str(e).splitlines()[0][:300]); sys.exit(4)
run(session(model))  # the tuned model as written loads and runs
# The inference form for the comparison with `onnxtrain eval` (running statistics, no
# Dropout): a TorchScript export in training mode has BatchNormalization with
# training_mode=1 (batch statistics in ONNX Runtime) and Dropout with training_mode on.
m = onnx.load(model)
for n in m.graph.node:
    if n.op_type == "BatchNormalization":
        for a in n.attribute:
            if a.name == "training_mode":
                a.i = 0
        del n.output[1:]
    if n.op_type == "Dropout" and len(n.input) > 2:
        del n.input[2:]
path = out + ".eval.onnx"
onnx.save(m, path)
y = run(session(path))
np.save(out, y if y.dtype == np.uint16 else np.asarray(y, dtype=np.float32))
print("ok", y.dtype, y.shape)
"""


class Logits(torch.nn.Module):
    def __init__(self, m):
        super().__init__()
        self.m = m

    def forward(self, x):
        out = self.m(x)
        return out if isinstance(out, torch.Tensor) else out.logits


def build(name):
    torch.manual_seed(0)
    if name == "resnet18":
        import torchvision  # noqa: PLC0415
        return Logits(torchvision.models.resnet18(num_classes=1000)), "x"
    import transformers  # noqa: PLC0415
    if name == "gpt2":
        cfg = transformers.GPT2Config()
        cls = transformers.GPT2LMHeadModel
    else:
        cfg = transformers.BertConfig()
        cls = transformers.BertForMaskedLM
    cfg._attn_implementation = "eager"
    return Logits(cls(cfg)), "input_ids"


def data(name, seq, dtype):
    g = torch.Generator().manual_seed(1)
    if name == "resnet18":
        x = torch.randn(BATCH, 3, 224, 224, generator=g).to(dtype)
        y = torch.randint(0, 1000, (BATCH,), generator=g)
    else:
        x = torch.randint(0, 30522, (BATCH, seq), generator=g)
        y = torch.randint(0, 30522, (BATCH, seq), generator=g)
    return x, y


def save_x(path, x):
    """The model's data as onnxtrain and ONNX Runtime read it: float16 as is, bfloat16 as
    its bits (uint16; docs/training.md's bf16 .npy convention), ids as int64."""
    if x.dtype == torch.bfloat16:
        np.save(path, x.view(torch.int16).numpy().view(np.uint16))
    else:
        np.save(path, x.numpy())


def export(model, x, in_name, path, exporter):
    if exporter == "dy":
        prog = torch.onnx.export(model, (x,), input_names=[in_name], output_names=["logits"], dynamo=True,
                                 external_data=False)
        prog.save(path, external_data=False)
    else:
        torch.onnx.export(model, (x,), path, input_names=[in_name], output_names=["logits"], dynamo=False,
                          training=torch.onnx.TrainingMode.TRAINING, do_constant_folding=False, opset_version=17)


def sh(cmd, timeout=3600):
    t0 = time.time()
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    return p, time.time() - t0


def first_err(p):
    lines = [ln for ln in p.stderr.splitlines() if "error" in ln.lower()] or p.stderr.splitlines() or [""]
    return lines[0][:240]


def checker(path):
    """onnx.checker with full_check (types against each op's schema at the file's opset):
    what a bf16 row can show where ONNX Runtime has no bf16 kernel to run the file."""
    import onnx  # noqa: PLC0415
    try:
        onnx.checker.check_model(path, full_check=True)
        return "ok"
    except Exception as e:  # noqa: BLE001 (reported in the row)
        return f"FAILED: {str(e).splitlines()[0][:200]}"


def one(args, name, tag, ex):
    row = dict(model=name, dtype=tag, exporter=ex)
    d = os.path.join(args.scratch, f"{name}_{tag}_{ex}")
    os.makedirs(d, exist_ok=True)
    model, in_name = build(name)
    model = model.to(DT[tag]).train()
    x, y = data(name, args.seq, DT[tag])
    onnx_path, xp, yp = (os.path.join(d, n) for n in ("model.onnx", "x.npy", "y.npy"))
    save_x(xp, x)
    np.save(yp, y.numpy())
    t0 = time.time()
    try:
        export(model, x, in_name, onnx_path, ex)
    except Exception as e:  # noqa: BLE001 (reported in the row)
        row["export"] = f"FAILED: {type(e).__name__}: {str(e).splitlines()[0][:200]}"
        return row
    row["export_s"] = round(time.time() - t0, 1)
    row["mb"] = round(os.path.getsize(onnx_path) / 2**20, 1)
    del model
    common = ["--input", f"{in_name}={xp}", "--labels", yp, "--batch-size", str(BATCH)]
    tuned = os.path.join(d, "tuned.onnx")
    p, secs = sh([args.onnxtrain, "train", onnx_path, *common, "--steps", str(args.steps), "--no-shuffle",
                  "--report", os.path.join(d, "report.json"), "-o", tuned])
    if p.returncode != 0:
        row["train"] = f"exit {p.returncode}: {first_err(p)}"
        return row
    rep = json.load(open(os.path.join(d, "report.json")))
    row["train"] = "ok"
    row["losses"] = [round(v, 4) for v in rep["loss"]]
    row["train_s"] = round(secs, 1)
    row["params"] = rep["params"]["tensors"]
    if "loss_scale" in rep:  # fp16: GradScaler's rules skip the steps whose gradients overflow
        row["skipped"] = rep["loss_scale"]["skipped_steps"]
    row["verify"] = {}
    for pol in args.policies.split(","):
        p, secs = sh([args.onnxtrain, "verify", onnx_path, *common, "--remat", pol, "--time-steps", "1"])
        ok = p.returncode == 0 and "bitwise equal" in p.stdout + p.stderr
        row["verify"][pol] = "bitwise" if ok else f"exit {p.returncode}: {first_err(p)}"
    ev = os.path.join(d, "eval")
    p, _ = sh([args.onnxtrain, "eval", tuned, "--input", f"{in_name}={xp}", "--batch-size", str(BATCH),
               "--dump-outputs", ev])
    if p.returncode != 0:
        row["eval"] = f"exit {p.returncode}: {first_err(p)}"
        return row
    ours = np.load(os.path.join(ev, "logits.npy"))
    row["checker"] = checker(tuned)
    ort_out = os.path.join(d, "ort.npy")
    feeds = json.dumps({in_name: xp})
    p, _ = sh([args.ort_python, "-c", ORT_RUN, tuned, ort_out, feeds])
    if p.returncode != 0:
        row["ort"] = (p.stdout.strip() or first_err(p))[:300]
        return row
    theirs = np.load(ort_out)
    if ours.dtype == np.uint16:  # bfloat16 bits
        ours = (ours.astype(np.uint32) << 16).view(np.float32)
    if theirs.dtype == np.uint16:
        theirs = (theirs.astype(np.uint32) << 16).view(np.float32)
    ours, theirs = ours.astype(np.float64), theirs.astype(np.float64)
    row["ort"] = "ok" if ours.shape == theirs.shape else f"shape {theirs.shape} vs {ours.shape}"
    if ours.shape == theirs.shape:
        row["ort_err"] = float(np.max(np.abs(ours - theirs)) / max(np.max(np.abs(theirs)), 1e-30))
    return row


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--onnxtrain", default="build/onnxtrain")
    ap.add_argument("--only", default="resnet18,gpt2,bert")
    ap.add_argument("--dtypes", default="fp16,bf16")
    ap.add_argument("--exporters", default="dy,ts")
    ap.add_argument("--policies", default="none,all,sqrt,auto")
    ap.add_argument("--steps", type=int, default=4)
    ap.add_argument("--seq", type=int, default=128)
    ap.add_argument("--scratch", default="/tmp/lowp_models")
    ap.add_argument("--ort-python", default=os.environ.get("ORT_PYTHON", "/work/venvs/ort/bin/python"))
    args = ap.parse_args()
    warnings.filterwarnings("ignore")
    torch.set_num_threads(2)
    for name in args.only.split(","):
        for tag in args.dtypes.split(","):
            for ex in args.exporters.split(","):
                row = one(args, name, tag, ex)
                print(json.dumps(row), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
