#!/usr/bin/env python3
"""fold_probe.py — a measuring probe, not a fix: for a blocked zoo model whose
unsupported nodes all lie off the gradient path, replaces those nodes' outputs by the
values ONNX's reference evaluator computes for the stored data, so run_zoo.py can show
what would still block the model once those ops exist (or once import folds them).

    python3 samples/zoo/fold_probe.py [--zoo DIR] [--out DIR2] [--only NAME,...]
    python3 samples/zoo/run_zoo.py --zoo DIR2 --allow-unsupported

The probed models are valid only for the stored data (a 'data' node such as a padding
mask is frozen to this batch's mask). Models with an unsupported node on the gradient
path (blockers.py: 'grad') are skipped: they need a gradient rule, not folding.
Needs onnx >= 1.13 (the reference evaluator), e.g. pip's onnx under python3.
"""
import argparse
import json
import os
import shutil
import subprocess
import sys

import re

import numpy as np
import onnx
import onnx.helper as oh
import onnx.numpy_helper as onh
from onnx.reference import ReferenceEvaluator

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import blockers  # noqa: E402


def needed_nodes(graph, targets):
    """Indices of the nodes that the target values depend on."""
    producer = {o: i for i, n in enumerate(graph.node) for o in n.output}
    need, stack = set(), list(targets)
    while stack:
        v = stack.pop()
        i = producer.get(v)
        if i is None or i in need:
            continue
        need.add(i)
        stack.extend(x for x in graph.node[i].input if x)
    return sorted(need)


def evaluate(model, targets, feeds):
    g = model.graph
    idx = needed_nodes(g, targets)
    nodes = [g.node[i] for i in idx]
    used = {x for n in nodes for x in n.input}
    types = blockers.elem_types(model)
    sub = oh.make_graph(nodes, "probe", [i for i in g.input if i.name in used],
                        [oh.make_tensor_value_info(t, types.get(t, onnx.TensorProto.FLOAT), None) for t in targets],
                        [t for t in g.initializer if t.name in used])
    m = oh.make_model(sub, opset_imports=model.opset_import)
    m.ir_version = model.ir_version
    sess = ReferenceEvaluator(m)
    return dict(zip(targets, sess.run(None, {k: v for k, v in feeds.items() if k in used})))


def fold(model, bad_nodes, feeds):
    g = model.graph
    targets = [o for n in g.node if n.name in bad_nodes for o in n.output if o]
    values = evaluate(model, targets, feeds)
    keep = [n for n in g.node if n.name not in bad_nodes]
    types = blockers.elem_types(model)
    # The reference evaluator may widen (CumSum of int32 gives int64): keep the graph's type.
    inits = list(g.initializer) + [
        onh.from_array(np.asarray(values[t]).astype(onnx.helper.tensor_dtype_to_np_dtype(types[t]))
                       if t in types else np.asarray(values[t]), t) for t in targets]
    outs = [o.name for o in g.output]
    g2 = oh.make_graph(keep, g.name, list(g.input), list(g.output), inits)
    live = set(needed_nodes(g2, outs))
    g3 = oh.make_graph([n for i, n in enumerate(keep) if i in live], g.name, list(g.input), list(g.output),
                       [t for t in inits if t.name in {x for i in live for x in keep[i].input}])
    m = oh.make_model(g3, opset_imports=model.opset_import, producer_name=model.producer_name,
                      producer_version=model.producer_version)
    m.ir_version = model.ir_version
    return m


KERNEL_MISSING = re.compile(r"'([^']+)' \(([A-Za-z]+)(?: on ([a-z0-9]+))?\)")


def missing_kernels(exe, path, man, d):
    """Nodes the executor has no kernel for (exit 6 from grad after import succeeded)."""
    cmd = [exe, "grad", path, "--labels", os.path.join(d, man["labels"]), "--batch-size", str(man["batch"])]
    for i in man["inputs"]:
        cmd += ["--input", f"{i['name']}={os.path.join(d, i['file'])}"]
    if man["dynseq"]:
        cmd += ["--bind", f"seq={man['seq']}"]
    p = subprocess.run(cmd, capture_output=True, text=True)
    if p.returncode != 6 or "has no kernel" not in p.stderr:
        return []
    return KERNEL_MISSING.findall(p.stderr)


def probe_one(exe, path, man, d, feeds, out_path):
    """Folds the unsupported nodes, then (up to 4 rounds) the off-gradient nodes the
    executor has no kernel for. Returns (notes, ok); ok False: a gradient-path blocker."""
    info = json.loads(subprocess.run([exe, "info", path, "--json"], capture_output=True, text=True).stdout)
    bad = {n for u in info.get("unsupported", []) for n in u["nodes"]}
    model = onnx.load(path)
    classes = blockers.classify(model, set(man["params"]))
    on_grad = sorted({u["op"] for u in info.get("unsupported", []) for n in u["nodes"] if classes.get(n) == "grad"})
    if on_grad:
        return [f"{', '.join(on_grad)} on the gradient path"], False
    notes = []
    for _ in range(4):
        onnx.save(fold(model, bad, feeds), out_path)
        missing = missing_kernels(exe, out_path, man, d)
        if not missing:
            break
        notes += [f"no kernel: {op}{' on ' + dt if dt else ''} ({classes.get(n, '?')})" for n, op, dt in missing]
        if any(classes.get(n) not in ("const", "data") for n, _, _ in missing):
            return notes, False
        model, bad = onnx.load(out_path), {n for n, _, _ in missing}  # fold on top of the last round
    return notes, True


def probe(exe, zoo, out, name):
    d = os.path.join(zoo, name)
    with open(os.path.join(d, "manifest.json")) as f:
        man = json.load(f)
    od = os.path.join(out, name)
    shutil.rmtree(od, ignore_errors=True)
    shutil.copytree(d, od, ignore=shutil.ignore_patterns("*.onnx"))
    feeds = {i["name"]: np.load(os.path.join(d, i["file"])) for i in man["inputs"]}
    info = json.loads(subprocess.run([exe, "info", os.path.join(d, man["onnx"]), "--json"], capture_output=True,
                                     text=True).stdout)
    if not info.get("unsupported"):
        shutil.rmtree(od)
        return "clean: nothing to probe"
    for key in ("onnx", "nodrop_onnx"):
        notes, ok = probe_one(exe, os.path.join(d, man[key]), man, d, feeds, os.path.join(od, man[key]))
        if not ok:
            shutil.rmtree(od)
            return "stops: " + "; ".join(notes)
    return "probed" + (": after folding, also " + "; ".join(sorted(set(notes))) if notes else ": only the listed ops")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--zoo", default="/tmp/onnxtrain-zoo")
    ap.add_argument("--out", default="/tmp/onnxtrain-zoo-probe")
    ap.add_argument("--onnxtrain", default=os.path.join(os.path.dirname(os.path.dirname(HERE)), "build", "onnxtrain"))
    ap.add_argument("--only")
    args = ap.parse_args()
    names = args.only.split(",") if args.only else sorted(
        n for n in os.listdir(args.zoo) if os.path.exists(os.path.join(args.zoo, n, "manifest.json")))
    for name in names:
        print(f"{name}: {probe(args.onnxtrain, args.zoo, args.out, name)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
