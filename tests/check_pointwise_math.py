#!/usr/bin/python3
"""check_pointwise_math.py — issue 13's differentiable ops against PyTorch 1.13:
`onnxtrain grad` on
  1. tests/fixtures/pointwise_math/model.onnx, exported by PyTorch (make_fixture.py
     there: Abs, Sin, Cos, HardSigmoid, HardSwish, Softplus, Max / Min with exact
     ties, Mod with fmod = 1, comparisons and logic feeding Where), against the stored
     loss and gradients;
  2. a model built here with onnx.helper for what PyTorch 1.13 does not export (Mish,
     a three-input Max with ties, HardSigmoid with its own alpha / beta, CastLike),
     against gradients torch computes here.
Prints the largest absolute difference per parameter; fails above 1e-5 absolute plus
1e-5 relative to the gradient's largest magnitude.

    check_pointwise_math.py ONNXTRAIN_BINARY SCRATCH_DIR
"""
import json
import os
import subprocess
import sys

import numpy as np
import onnx
import torch
from onnx import TensorProto, helper, numpy_helper

HERE = os.path.dirname(os.path.abspath(__file__))
FIXTURE = os.path.join(HERE, "fixtures", "pointwise_math")


def grad(binary, model, x, out_dir):
    p = subprocess.run([binary, "grad", model, "--input", x, "--loss", "output", "--dump-grads", out_dir, "--json"],
                       capture_output=True, text=True)
    if p.returncode != 0:
        sys.exit("onnxtrain grad %s failed (%d): %s%s" % (model, p.returncode, p.stdout, p.stderr))
    res = json.loads(p.stdout)
    with open(os.path.join(out_dir, "index.json")) as f:
        index = json.load(f)
    return res, {k: np.load(os.path.join(out_dir, v)) for k, v in index.items()}


def compare(label, ours, ref):
    bad = 0
    for name, want in sorted(ref.items()):
        got = ours.get(name)
        if got is None or got.shape != want.shape:
            print("%s: %s missing or misshapen" % (label, name))
            bad += 1
            continue
        diff = float(np.max(np.abs(got - want))) if want.size else 0.0
        tol = 1e-5 + 1e-5 * float(np.max(np.abs(want)))
        print("%s: %-3s max abs diff %.3g (largest |grad| %.3g)" % (label, name, diff, float(np.max(np.abs(want)))))
        if not diff <= tol:
            bad += 1
    return bad


def fixture(binary, scratch):
    res, ours = grad(binary, os.path.join(FIXTURE, "model.onnx"), os.path.join(FIXTURE, "x.npy"),
                     os.path.join(scratch, "fixture"))
    with open(os.path.join(FIXTURE, "grads", "index.json")) as f:
        ref = {k: np.load(os.path.join(FIXTURE, "grads", v)) for k, v in json.load(f).items()}
    bad = compare("exported", ours, ref)
    want_loss = float(np.load(os.path.join(FIXTURE, "loss.npy")))
    if abs(res["loss"] - want_loss) > 1e-5 * max(1.0, abs(want_loss)):
        print("exported: loss %r, PyTorch %r" % (res["loss"], want_loss))
        bad += 1
    return bad


def built(binary, scratch):
    rng = np.random.default_rng(13)
    x = rng.uniform(-2, 2, (3, 5)).astype(np.float32)
    p = rng.uniform(-2, 2, (3, 5)).astype(np.float32)
    q = rng.uniform(-1, 1, (5,)).astype(np.float32)
    r3 = q.copy()
    r3[1::2] = rng.uniform(-1, 1, (2,)).astype(np.float32)  # q and r3 tie at 0, 2, 4
    w = rng.uniform(-1, 1, (3, 5)).astype(np.float32)
    const = lambda name, arr: helper.make_node("Constant", [], [name], name=name, value=numpy_helper.from_array(arr))
    nodes = [
        const("w", w), const("like64", np.zeros((1,), np.float64)),
        helper.make_node("Mul", ["x", "p"], ["h"]),
        helper.make_node("Mish", ["h"], ["m"]),
        helper.make_node("HardSigmoid", ["h"], ["hs"], alpha=0.3, beta=0.45),
        helper.make_node("Max", ["h", "q", "r3"], ["mx"]),
        helper.make_node("CastLike", ["h", "like64"], ["h64"]),
        helper.make_node("CastLike", ["h64", "x"], ["h32"]),
        helper.make_node("Mul", ["h32", "h32"], ["sq"]),
        helper.make_node("Sum", ["m", "hs", "mx", "sq"], ["s"]),
        helper.make_node("Mul", ["s", "w"], ["ws"]),
        helper.make_node("ReduceSum", ["ws"], ["loss"], keepdims=0),
    ]
    graph = helper.make_graph(nodes, "pointwise_math_built",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, [3, 5])],
                              [helper.make_tensor_value_info("loss", TensorProto.FLOAT, [])],
                              [numpy_helper.from_array(p, "p"), numpy_helper.from_array(q, "q"),
                               numpy_helper.from_array(r3, "r3")])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)])
    path, xpath = os.path.join(scratch, "built.onnx"), os.path.join(scratch, "built_x.npy")
    onnx.save(model, path)
    np.save(xpath, x)
    _, ours = grad(binary, path, xpath, os.path.join(scratch, "built"))

    tp, tq, tr = (torch.tensor(a, requires_grad=True) for a in (p, q, r3))
    h = torch.tensor(x) * tp
    hs = torch.clamp(0.3 * h + 0.45, 0.0, 1.0)
    mx = torch.maximum(torch.maximum(h, tq), tr)
    h32 = h.double().float()
    s = torch.nn.functional.mish(h) + hs + mx + h32 * h32
    (s * torch.tensor(w)).sum().backward()
    return compare("built", ours, {"p": tp.grad.numpy(), "q": tq.grad.numpy(), "r3": tr.grad.numpy()})


def main():
    binary, scratch = sys.argv[1:3]
    os.makedirs(scratch, exist_ok=True)
    bad = fixture(binary, scratch) + built(binary, scratch)
    if bad:
        sys.exit("check_pointwise_math: %d mismatch(es) with PyTorch" % bad)
    print("check_pointwise_math: every gradient matches PyTorch")


if __name__ == "__main__":
    main()
