#!/usr/bin/env python3
"""zoo_bf16.py — the zoo's bf16 column (issue 27 item 6): PyTorch's own CPU bfloat16
autocast run of each model, stored beside the float32 and float64 references, so that
ctest check_zoo_bf16 (tests/check_zoo_bf16.py) can judge `onnxtrain --precision bf16`
against it without PyTorch 2.x (CI has only 1.13). Run by hand in the torch 2.15 venv:

    /work/venvs/ops3/bin/python samples/zoo/zoo_bf16.py [--only ROW,...]

Rows: gpt2, bert, llama (zoo_models.py's tiny HuggingFace configs), resnet18 (torchvision's
ResNet-18 layers at widths 4..32 on a 32x32 image) and mnv3 (torchvision's
MobileNetV3-Small at width 0.1 on 32x32: depthwise convolutions, squeeze-excite,
HardSwish), each exported by the TorchScript exporter (`dynamo=False`, opset 17, training
mode) and by the dynamo exporter (`_ts` / `_dy`), through export_zoo.export_one, so the
float32/float64 references are the zoo's own (for a dynamo file: PyTorch's model of the
graph it wrote, same_graph.py). Dropout is 0 (the _nodrop graph only).

What is added per row, for the same weights, batch and parameter -> initializer map:
  gbf/I   the gradient under torch.autocast("cpu", dtype=torch.bfloat16) (float32 master
          weights, the loss on the logits cast to float32), as float32
  c32, cbf, c64   losses of STEPS plain-SGD steps (lr LR) on the one batch: float32,
          autocast bf16, float64 (the loss before each step)
Stored as tests/fixtures/zoo_bf16/ROW.onnx, ROW.npz (also in/NAME inputs, labels, g64/I
as float32, loss32, loss64) and ROW.json (inputs, class axis, lr, steps, the exporter, torch, and f32_worst:
PyTorch float32's worst gradient error by the check's measure).
"""
import argparse
import copy
import json
import os
import shutil
import sys
import tempfile
import warnings

import numpy as np
import torch
import torch.nn as nn

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import export_torch2  # noqa: E402
import export_zoo  # noqa: E402
import same_graph  # noqa: E402
import zoo_models  # noqa: E402

FIX = os.path.join(HERE, "..", "..", "tests", "fixtures", "zoo_bf16")
STEPS, LR = 4, 0.01
SMALL = 64  # the image side of the two CNN rows (BatchNorm sees 16 values a channel at the last stage)


def resnet18_small(p):
    """torchvision's ResNet-18 (BasicBlock, [2, 2, 2, 2]) at widths 4, 8, 16, 32."""
    from torchvision.models.resnet import BasicBlock, ResNet  # noqa: PLC0415
    m = ResNet(BasicBlock, [2, 2, 2, 2], num_classes=zoo_models.CLASSES)
    m.inplanes = 4
    m.conv1 = nn.Conv2d(3, 4, 7, 2, 3, bias=False)
    m.bn1 = nn.BatchNorm2d(4)
    m.layer1 = m._make_layer(BasicBlock, 4, 2)
    m.layer2 = m._make_layer(BasicBlock, 8, 2, stride=2)
    m.layer3 = m._make_layer(BasicBlock, 16, 2, stride=2)
    m.layer4 = m._make_layer(BasicBlock, 32, 2, stride=2)
    m.fc = nn.Linear(32, zoo_models.CLASSES)
    return m


def mnv3_small(p):
    import torchvision  # noqa: PLC0415
    return torchvision.models.mobilenet_v3_small(width_mult=0.25, reduced_tail=True, num_classes=zoo_models.CLASSES, dropout=p)


def _rows():
    img = [("x", "image", (3, SMALL, SMALL))]
    models = {"gpt2": zoo_models.ZOO["gpt2"], "bert": zoo_models.ZOO["bert"], "llama": zoo_models.ZOO["llama"],
              "resnet18": zoo_models._entry("tv/resnet18", resnet18_small, img, zoo_models.CLASSES, ()),
              "mnv3": zoo_models._entry("tv/mobilenet_v3_small", mnv3_small, img, zoo_models.CLASSES, ())}
    return {f"{m}_{tag}": (m, entry, ex) for m, entry in models.items()
            for tag, ex in (("ts", "torchscript"), ("dy", "dynamo"))}


ROWS = _rows()
CAPTURED = {}
_references = export_zoo.references


def capture(model, names, data, labels, mapping, d, dtype, transposed=frozenset(), graph=None, calls32=None,
            axis=-1):
    """export_zoo.references, remembering the float32 call's model and maps (the model of
    the graph in the file) for the autocast run."""
    if dtype == torch.float32:
        CAPTURED.update(model=model, names=names, data=data, labels=labels, mapping=mapping,
                        transposed=transposed, graph=graph, axis=axis)
    return _references(model, names, data, labels, mapping, d, dtype, transposed, graph, calls32, axis)


def forward_loss(m, c, autocast):
    args = [c["data"][n] for n in c["names"]]
    if m.parameters().__next__().dtype == torch.float64:
        args = [a.double() if a.is_floating_point() else a for a in args]
    with torch.autocast("cpu", dtype=torch.bfloat16, enabled=autocast):
        logits = m(*args)
    return export_zoo.cross_entropy(logits.to(next(m.parameters()).dtype), c["labels"], c["axis"])


def fresh(c, dtype):
    m = copy.deepcopy(c["model"]).to(dtype).train()
    if c["graph"] is not None:
        same_graph.bn_eval(m)  # the dynamo file's BatchNorm is in inference form
    return m


def tie_merged(m, graph):
    """The dynamo exporter merges initializers with equal bytes (fresh LayerNorm scales,
    all ones): onnxtrain then trains one tensor for all of them, with the sum of their
    gradients. For the curves PyTorch's parameters of such a merged initializer become
    one Parameter, so both train the same set of tensors. Only same-shape plain uses."""
    params = dict(m.named_parameters())
    for uses, _ in (graph or {}).values():
        names = [p for p, form in uses if form == "same" and p in params]
        if len(names) < 2 or len(names) != len(uses):
            continue
        first = params[names[0]]
        for name in names[1:]:
            mod, _, attr = name.rpartition(".")
            setattr(m.get_submodule(mod), attr, first)


def autocast_grads(c):
    m = fresh(c, torch.float32)
    m.zero_grad()
    forward_loss(m, c, True).backward()
    pg = {n: p.grad.float().numpy() for n, p in m.named_parameters() if p.grad is not None}
    return export_zoo.to_initializers(pg, c["mapping"], c["transposed"], c["graph"])


def curve(c, dtype, autocast):
    old = torch.get_default_dtype()
    torch.set_default_dtype(dtype)  # HF mask code fills with finfo(default dtype).min
    try:
        m = fresh(c, dtype)
        # A parameter no initializer stands for (a zero bias the dynamo exporter dropped,
        # GPT-2's folded position rows) is a constant in the file: onnxtrain does not
        # train it, so neither does the reference curve.
        tie_merged(m, c["graph"])
        frozen = set(c["unmapped"])
        opt = torch.optim.SGD([p for n, p in m.named_parameters() if p.requires_grad and n not in frozen], lr=LR)
        losses = []
        for _ in range(STEPS):
            opt.zero_grad()
            loss = forward_loss(m, c, autocast)
            loss.backward()
            opt.step()
            losses.append(float(loss.item()))
        return losses
    finally:
        torch.set_default_dtype(old)


def make(row, tmp):
    name, entry, exporter = ROWS[row]
    zoo_models.ZOO[name] = entry
    CAPTURED.clear()
    opset = 17 if exporter == "torchscript" else None
    man = export_zoo.export_one(name, tmp, opset, exporter, True)
    d = os.path.join(tmp, name)
    c = dict(CAPTURED, unmapped=man["unmapped"])
    arrays = {}
    for inp in man["inputs"]:
        arrays["in/" + inp["name"]] = np.load(os.path.join(d, inp["file"]))
    arrays["labels"] = np.load(os.path.join(d, man["labels"]))
    g32 = {}
    for init, files in man["params"].items():
        g32[init] = np.load(os.path.join(d, files["f32"]))
        # float32 is plenty for a reference that judges bfloat16 (2^-8) errors
        arrays["g64/" + init] = np.load(os.path.join(d, files["f64"])).astype(np.float32)
    for init, g in autocast_grads(c).items():
        if init in man["params"]:
            arrays["gbf/" + init] = g.astype(np.float32)
    arrays["c32"] = np.array(curve(c, torch.float32, False))
    arrays["cbf"] = np.array(curve(c, torch.float32, True))
    arrays["c64"] = np.array(curve(c, torch.float64, False))
    arrays["loss32"] = np.array(man["loss_f32"])
    arrays["loss64"] = np.array(man["loss_f64"])
    onnx_path = os.path.join(FIX, f"{row}.onnx")
    shutil.copyfile(os.path.join(d, man["nodrop_onnx"]), onnx_path)
    if exporter == "dynamo":
        export_torch2.strip_debug(onnx_path)
    np.savez_compressed(os.path.join(FIX, f"{row}.npz"), **arrays)
    meta = dict(row=row, model=name, family=man["family"], exporter=exporter, opset=man["opset"],
                torch=torch.__version__, inputs=[i["name"] for i in man["inputs"]], class_axis=man["class_axis"],
                batch=man["batch"], lr=LR, steps=STEPS, n_params=man["n_params"], unmapped=man["unmapped"],
                train_regex=man.get("train_regex"), f32_worst=worst_error(g32, arrays))
    with open(os.path.join(FIX, f"{row}.json"), "w") as fh:
        json.dump(meta, fh, indent=1, sort_keys=True)
    return arrays


def worst_error(grads, a):
    """The largest normwise error of grads against g64, as tests/check_zoo_bf16.py
    measures it (the floor: 1e-2 of the median tensor norm)."""
    names = [k[4:] for k in a if k.startswith("g64/")]
    med = float(np.median([np.linalg.norm(a["g64/" + n]) for n in names]))
    return max(float(np.linalg.norm(grads[n].astype(np.float64) - a["g64/" + n]) /
                     max(np.linalg.norm(a["g64/" + n].astype(np.float64)), 1e-2 * med)) for n in names if n in grads)


def summary(row, a):
    gbf = {k[4:]: a[k] for k in a if k.startswith("gbf/")}
    print(f"{row}: worst grad err autocast bf16 {worst_error(gbf, a):.2e}; curves f32 "
          f"{np.round(a['c32'], 5)} bf16 {np.round(a['cbf'], 5)} f64 {np.round(a['c64'], 5)}", flush=True)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--only", help="comma-separated rows (default: all of " + ", ".join(ROWS) + ")")
    args = ap.parse_args()
    rows = args.only.split(",") if args.only else list(ROWS)
    bad = [r for r in rows if r not in ROWS]
    if bad:
        ap.error(f"unknown row(s) {', '.join(bad)}; known: {', '.join(ROWS)}")
    warnings.filterwarnings("ignore")
    torch.use_deterministic_algorithms(True)
    torch.set_num_threads(1)
    torch.backends.mkldnn.enabled = False  # as export_zoo.py: repeatable sums
    export_zoo.references = capture
    os.makedirs(FIX, exist_ok=True)
    tmp = tempfile.mkdtemp(prefix="zoo-bf16-")
    try:
        for row in rows:
            summary(row, make(row, tmp))
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
