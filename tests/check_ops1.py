#!/usr/bin/python3
"""check_ops1.py — issue 26's ops batch 1 against PyTorch 1.13, end to end:
  1. a small model exported here with torch.onnx.export (PyTorch 1.13's TorchScript
     exporter, opset 17): Elu, Selu, Celu, PRelu (per-channel and single slope),
     Sign, Floor, Ceil, Round (Softsign comes out as Abs, Add, Div); `onnxtrain info`
     must accept it and
     `onnxtrain grad` must give PyTorch's loss and gradients (the rounding ops pass
     zeros, as PyTorch's autograd does);
  2. a model built with onnx.helper for what PyTorch 1.13 does not export
     (ThresholdedRelu, Softsign), against gradients torch computes here.
Prints the largest absolute difference per parameter; fails above 1e-5 absolute plus
1e-5 relative to the gradient's largest magnitude.

    check_ops1.py ONNXTRAIN_BINARY SCRATCH_DIR
"""
import json
import os
import subprocess
import sys

import numpy as np
import onnx
import torch
import torch.nn.functional as F
from onnx import TensorProto, helper, numpy_helper


def run(binary, args):
    p = subprocess.run([binary] + args, capture_output=True, text=True)
    if p.returncode != 0:
        sys.exit("onnxtrain %s failed (%d): %s%s" % (" ".join(args), p.returncode, p.stdout, p.stderr))
    return p.stdout


def grad(binary, model, x, out_dir):
    out = run(binary, ["grad", model, "--input", x, "--loss", "output", "--dump-grads", out_dir, "--json"])
    res = json.loads(out)
    with open(os.path.join(out_dir, "index.json")) as f:
        index = json.load(f)
    return res, {k: np.load(os.path.join(out_dir, v)) for k, v in index.items()}


def compare(label, ours, ref):
    bad = 0
    for name, want in sorted(ref.items()):
        got = ours.get(name)
        if got is None or got.shape != want.shape:
            print("%s: %s missing or misshapen (have %s)" % (label, name, sorted(ours)))
            bad += 1
            continue
        diff = float(np.max(np.abs(got - want))) if want.size else 0.0
        tol = 1e-5 + 1e-5 * float(np.max(np.abs(want)))
        print("%s: %-14s max abs diff %.3g (largest |grad| %.3g)" % (label, name, diff, float(np.max(np.abs(want)))))
        if not diff <= tol:
            bad += 1
    return bad


class Activations(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = torch.nn.Linear(5, 6)
        self.prelu = torch.nn.PReLU(6)
        self.prelu1 = torch.nn.PReLU()
        with torch.no_grad():
            self.prelu.weight.copy_(torch.linspace(-0.5, 0.7, 6))
        self.register_buffer("w", torch.linspace(-1.0, 1.0, 24).reshape(4, 6))

    def forward(self, x):
        h = self.lin(x)
        a = F.elu(h, 0.8) + F.selu(h) + F.celu(h, 1.3) + self.prelu(h) + F.softsign(h)
        b = self.prelu1(h) * torch.floor(h) + torch.sign(h) * h + torch.round(h) * torch.ceil(h)
        return ((a + b) * self.w).sum()


def exported(binary, scratch):
    torch.manual_seed(3)
    m = Activations()
    x = torch.randn(4, 5) * 2
    path, xpath = os.path.join(scratch, "activations.onnx"), os.path.join(scratch, "x.npy")
    torch.onnx.export(m, (x,), path, opset_version=17, do_constant_folding=False, input_names=["x"],
                      output_names=["loss"], training=torch.onnx.TrainingMode.TRAINING)
    np.save(xpath, x.numpy())
    ops = {n.op_type for n in onnx.load(path).graph.node}
    want = {"Elu", "Selu", "Celu", "PRelu", "Sign", "Floor", "Ceil", "Round"}
    if not want <= ops:
        sys.exit("the export lacks %s (has %s)" % (sorted(want - ops), sorted(ops)))
    info = run(binary, ["info", path])
    print("info: accepted (%d lines)" % len(info.splitlines()))
    res, ours = grad(binary, path, xpath, os.path.join(scratch, "exported"))
    loss = m(x)
    loss.backward()
    ref = {n: p.grad.numpy() for n, p in m.named_parameters()}
    bad = compare("exported", ours, ref)
    if abs(res["loss"] - loss.item()) > 1e-5 * max(1.0, abs(loss.item())):
        print("exported: loss %r, PyTorch %r" % (res["loss"], loss.item()))
        bad += 1
    return bad


def built(binary, scratch):
    rng = np.random.default_rng(26)
    x = rng.uniform(-2, 2, (3, 5)).astype(np.float32)
    p = rng.uniform(-2, 2, (3, 5)).astype(np.float32)
    w = rng.uniform(-1, 1, (3, 5)).astype(np.float32)
    h = x * p
    p[np.abs(h - 0.6) < 0.05] += 0.1  # keep the jump of ThresholdedRelu off the data
    nodes = [
        helper.make_node("Constant", [], ["w"], value=numpy_helper.from_array(w)),
        helper.make_node("Mul", ["x", "p"], ["h"]),
        helper.make_node("ThresholdedRelu", ["h"], ["t"], alpha=0.6),
        helper.make_node("Softsign", ["h"], ["ss"]),
        helper.make_node("Add", ["t", "ss"], ["ts"]),
        helper.make_node("Mul", ["ts", "w"], ["tw"]),
        helper.make_node("ReduceSum", ["tw"], ["loss"], keepdims=0),
    ]
    graph = helper.make_graph(nodes, "ops1_built", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [3, 5])],
                              [helper.make_tensor_value_info("loss", TensorProto.FLOAT, [])],
                              [numpy_helper.from_array(p, "p")])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    path, xpath = os.path.join(scratch, "built.onnx"), os.path.join(scratch, "built_x.npy")
    onnx.save(model, path)
    np.save(xpath, x)
    _, ours = grad(binary, path, xpath, os.path.join(scratch, "built"))
    tp = torch.tensor(p, requires_grad=True)
    th = torch.tensor(x) * tp
    t = torch.where(th > 0.6, th, torch.zeros_like(th))
    ((t + F.softsign(th)) * torch.tensor(w)).sum().backward()
    return compare("built", ours, {"p": tp.grad.numpy()})


def main():
    binary, scratch = sys.argv[1:3]
    os.makedirs(scratch, exist_ok=True)
    bad = exported(binary, scratch) + built(binary, scratch)
    if bad:
        sys.exit("check_ops1: %d mismatch(es) with PyTorch" % bad)
    print("check_ops1: every gradient matches PyTorch")


if __name__ == "__main__":
    main()
