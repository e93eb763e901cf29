#!/usr/bin/env python3
"""export_torch2.py — exports the zoo's PyTorch-2 families (zoo_torch2.py: diffusers
UNet2DModel, HF Wav2Vec2, CLIP, Whisper, nn.LSTM / nn.GRU language models, torchvision's
LRASPP, DeepLabV3 and FCN, GPT-2, BERT and LLaMA at opset 23) with
torch.onnx.export(dynamo=True) and PyTorch's references for the graph it wrote, into
committed fixtures that ctest check_zoo2 runs without PyTorch (CI has only PyTorch 1.13,
whose TorchScript exporter is the zoo's other one: zoo_models.py, ctest check_zoo):

    /work/venvs/ops3/bin/pip install diffusers transformers
    /work/venvs/ops3/bin/pip install --no-deps torchvision==0.29.2  # none is built for 2.15; plain Python suffices
    /work/venvs/ops3/bin/python samples/zoo/export_torch2.py [--only NAME,...] [--keep DIR]

Each NAME goes through export_zoo.export_one (the zoo's dynamo path: references in
float32 and float64 for the graph in the file, same_graph.py) at the entry's opset (23
for the *_op23 rows, else the exporter's default) and is stored as
tests/fixtures/zoo2/NAME.json (the manifest), NAME_nodrop.onnx (and NAME.onnx when the
model has Dropout: those graphs differ) and NAME.npz (every .npy of the zoo folder keyed
by its path: inputs, labels, eval outputs, loss, parameter gradients at both
precisions), which tests/check_dynamo_fixtures.py unpacks back into the zoo's layout.
The stored files lose only the exporter's per-node debug text (DEBUG_METADATA) to stay
small. --keep DIR also leaves the zoo folders there (run_zoo.py --zoo DIR reads them).
"""
import argparse
import json
import os
import shutil
import sys
import tempfile
import warnings

import numpy as np
import onnx
import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import export_zoo  # noqa: E402
import zoo_models  # noqa: E402
import zoo_torch2  # noqa: E402

FIX = os.path.join(HERE, "..", "..", "tests", "fixtures", "zoo2")
# Dropout of the exported NAME.onnx (verify runs it with Dropout; grad uses _nodrop).
DROPOUT = 0.1


# The exporter's per-node debug text (Python stack, module path and class names: two
# thirds of a small file) that onnxtrain never reads; pkg.torch.onnx.fx_node (the params
# rule reads it: docs/training.md) and name_scopes stay.
DEBUG_METADATA = ("pkg.torch.onnx.stack_trace", "namespace", "pkg.torch.onnx.class_hierarchy")


def strip_debug(path):
    m = onnx.load(path)
    for node in m.graph.node:
        keep = [(p.key, p.value) for p in node.metadata_props if p.key not in DEBUG_METADATA]
        del node.metadata_props[:]
        for k, v in keep:
            node.metadata_props.add(key=k, value=v)
    onnx.save(m, path)


def store(name, d, man):
    for key in ("onnx", "nodrop_onnx"):
        strip_debug(os.path.join(d, man[key]))
    arrays = {}
    for root, _, files in os.walk(d):
        for f in files:
            if f.endswith(".npy"):
                rel = os.path.relpath(os.path.join(root, f), d)
                arrays[rel] = np.load(os.path.join(root, f))
    np.savez_compressed(os.path.join(FIX, f"{name}.npz"), **arrays)
    same = open(os.path.join(d, man["onnx"]), "rb").read() == open(os.path.join(d, man["nodrop_onnx"]), "rb").read()
    files = [man["nodrop_onnx"]] + ([] if same else [man["onnx"]])
    if same:  # no Dropout reached the graph: keep one file
        man["onnx"] = man["nodrop_onnx"]
    for f in files:
        shutil.copyfile(os.path.join(d, f), os.path.join(FIX, f))
    with open(os.path.join(FIX, f"{name}.json"), "w") as fh:
        json.dump(man, fh, indent=1, sort_keys=True)
    return {f: os.path.getsize(os.path.join(FIX, f)) // 1024 for f in os.listdir(FIX) if f.startswith(name + ".")
            or f.startswith(name + "_nodrop")}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--only", help="comma-separated names (default: all of zoo_torch2.ZOO2)")
    ap.add_argument("--keep", help="also keep the zoo folders in this directory")
    args = ap.parse_args()
    names = args.only.split(",") if args.only else list(zoo_torch2.ZOO2)
    bad = [n for n in names if n not in zoo_torch2.ZOO2]
    if bad:
        ap.error(f"unknown model(s) {', '.join(bad)}; known: {', '.join(zoo_torch2.ZOO2)}")
    warnings.filterwarnings("ignore")
    torch.use_deterministic_algorithms(True)
    torch.set_num_threads(1)
    torch.backends.mkldnn.enabled = False
    zoo_models.ZOO.update(zoo_torch2.ZOO2)
    export_zoo.DROPOUT = DROPOUT
    os.makedirs(FIX, exist_ok=True)
    out = args.keep or tempfile.mkdtemp(prefix="zoo2-")
    try:
        for name in names:
            man = export_zoo.export_one(name, out, zoo_torch2.ZOO2[name].get("opset"), "dynamo", True)
            sizes = store(name, os.path.join(out, name), man)
            print(f"{name}: opset {man['opset']}, {man['nodes']} nodes, {man['n_params']} params, "
                  f"{len(man['params'])} grads, {len(man['unmapped'])} unmapped, train lr {man['train']['lr']}, "
                  f"KiB {sizes}", flush=True)
    finally:
        if not args.keep:
            shutil.rmtree(out, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
