#!/usr/bin/python3
"""blockers.py — says, per zoo model, what each unsupported node needs: a gradient rule,
a forward kernel only, or nothing at run time (foldable at import).

    /usr/bin/python3 samples/zoo/blockers.py [--zoo DIR] [--onnxtrain build/onnxtrain] [--only NAME,...]

Each node onnxtrain's `info` names as unsupported is classed by the values it reads:
  grad   a floating input depends on a trained parameter: needs forward and backward
  data   depends on the data (ids, masks, images) but on no parameter: forward only
  const  depends only on constants, non-trained initializers and shapes: foldable at
         import (issue 13 item 2), needing no kernel at run time once folded
Needs the onnx package (Debian's python3-onnx).
"""
import argparse
import json
import os
import subprocess
import sys

import onnx
from onnx import TensorProto

FLOATS = {TensorProto.FLOAT, TensorProto.DOUBLE, TensorProto.FLOAT16, TensorProto.BFLOAT16}
# Outputs that carry no value dependence on their input's contents, only its shape.
SHAPE_OPS = {"Shape", "Size"}


def elem_types(model):
    inferred = onnx.shape_inference.infer_shapes(model)
    types = {}
    for vi in list(inferred.graph.value_info) + list(inferred.graph.input) + list(inferred.graph.output):
        types[vi.name] = vi.type.tensor_type.elem_type
    for t in model.graph.initializer:
        types[t.name] = t.data_type
    return types


def classify(model, params):
    """Forward pass over the (topologically sorted) graph marking each value: 'grad' when
    a float value depends on a parameter, 'data' when it depends on graph inputs."""
    types = elem_types(model)
    inits = {t.name for t in model.graph.initializer}
    mark = {}
    for i in model.graph.input:
        if i.name not in inits:
            mark[i.name] = "data"
    for p in params:
        mark[p] = "grad"
    node_class = {}
    for node in model.graph.node:
        ins = [x for x in node.input if x]
        if node.op_type in SHAPE_OPS:
            cls = "const"
        elif any(mark.get(x) == "grad" and types.get(x) in FLOATS for x in ins):
            cls = "grad"
        elif any(mark.get(x) in ("grad", "data") for x in ins):
            cls = "data"
        else:
            cls = "const"
        node_class[node.name] = cls
        for o in node.output:
            if cls == "grad" and types.get(o, TensorProto.FLOAT) not in FLOATS:
                mark[o] = "data"  # an integer or bool result carries no gradient
            elif cls != "const":
                mark[o] = cls
    return node_class


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--zoo", default="/tmp/onnxtrain-zoo")
    ap.add_argument("--onnxtrain", default=os.path.join(os.path.dirname(os.path.dirname(here)), "build", "onnxtrain"))
    ap.add_argument("--only")
    args = ap.parse_args()
    names = args.only.split(",") if args.only else sorted(
        n for n in os.listdir(args.zoo) if os.path.exists(os.path.join(args.zoo, n, "manifest.json")))
    for name in names:
        d = os.path.join(args.zoo, name)
        with open(os.path.join(d, "manifest.json")) as f:
            man = json.load(f)
        path = os.path.join(d, man["onnx"])
        info = json.loads(subprocess.run([args.onnxtrain, "info", path, "--json"], capture_output=True,
                                         text=True).stdout)
        bad = info.get("unsupported", [])
        if not bad:
            continue
        model = onnx.load(path)
        classes = classify(model, set(man["params"]))
        parts = []
        for u in bad:
            counts = {}
            for n in u["nodes"]:
                c = classes.get(n, "?")
                counts[c] = counts.get(c, 0) + 1
            parts.append(f"{u['op']} " + "+".join(f"{k}x{v}" for k, v in sorted(counts.items())))
        print(f"{name:20s} {man['family']:22s} " + ", ".join(parts))
    return 0


if __name__ == "__main__":
    sys.exit(main())
