#!/usr/bin/python3
"""check_ops1.py — issue 26's ops batch 1 against PyTorch 1.13, end to end:
  1. a small model exported here with torch.onnx.export (PyTorch 1.13's TorchScript
     exporter, opset 17): Elu, Selu, Celu, PRelu (per-channel and single slope),
     Sign, Floor, Ceil, Round (Softsign comes out as Abs, Add, Div); `onnxtrain info`
     must accept it and
     `onnxtrain grad` must give PyTorch's loss and gradients (the rounding ops pass
     zeros, as PyTorch's autograd does);
  2. a model built with onnx.helper for what PyTorch 1.13 does not export
     (ThresholdedRelu, Softsign), against gradients torch computes here;
  3. the reductions exported the same way: torch.amax with exact ties (dY split
     evenly, as PyTorch), amin, prod with a zero, norm p=1 and p=2, logsumexp,
     x.max(), argmax and argmin (their indices select rows through Gather);
  4. ReduceSumSquare and ReduceMax / ReduceL2 at opset 18 (axes as an input), built
     with onnx.helper, against torch;
  5. nn.InstanceNorm2d(affine=True) and nn.GroupNorm exported the same way (GroupNorm
     comes out as Reshape -> InstanceNormalization -> Reshape -> Mul -> Add, the form
     the dynamo exporter writes at opset 18 too), and GroupNormalization built with
     onnx.helper at opset 18 (scale and bias per group) and 21 (per channel).
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


class Reductions(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = torch.nn.Linear(4, 4)
        self.register_buffer("w", torch.linspace(0.5, 1.5, 6))

    def forward(self, x):
        h = self.lin(x).reshape(2, 3, 4)
        t = torch.round(h * 2) / 2  # exact ties for amax / amin
        a = torch.amax(t, dim=1).sum() + torch.amin(t, dim=(0, 2), keepdim=True).sum() + t.max()
        z = h * (torch.arange(24.0).reshape(2, 3, 4) != 5).float()  # one exact zero
        b = torch.prod(z, dim=2).sum() + torch.prod(h, dim=1).sum()
        c = torch.norm(h, p=1, dim=1).sum() + torch.norm(h, p=2, dim=2).sum() + torch.logsumexp(h, dim=1).sum()
        i = torch.argmax(h, dim=2)  # [2, 3] int64
        j = torch.argmin(h, dim=1, keepdim=True)  # [2, 1, 4]
        d = torch.gather(h, 2, i.unsqueeze(2)).sum() + torch.gather(h, 1, j).sum()
        return (a + b + c + d) * self.w.sum() + (h * h).mean()


def reductions(binary, scratch):
    torch.manual_seed(5)
    m = Reductions()
    x = torch.randn(6, 4)
    path, xpath = os.path.join(scratch, "reductions.onnx"), os.path.join(scratch, "rx.npy")
    torch.onnx.export(m, (x,), path, opset_version=17, do_constant_folding=False, input_names=["x"],
                      output_names=["loss"], training=torch.onnx.TrainingMode.TRAINING)
    np.save(xpath, x.numpy())
    ops = {n.op_type for n in onnx.load(path).graph.node}
    want = {"ReduceMax", "ReduceMin", "ReduceProd", "ReduceL1", "ReduceL2", "ReduceLogSumExp", "ArgMax", "ArgMin"}
    if not want <= ops:
        sys.exit("the export lacks %s (has %s)" % (sorted(want - ops), sorted(ops)))
    run(binary, ["info", path])
    res, ours = grad(binary, path, xpath, os.path.join(scratch, "reductions"))
    t = torch.round(m.lin(x).reshape(2, 3, 4) * 2) / 2
    if not bool(((t == t.amax(dim=1, keepdim=True)).sum(dim=1) > 1).any()):
        sys.exit("reductions: the data has no tie for amax: change the seed")
    loss = m(x)
    loss.backward()
    bad = compare("reductions", ours, {n: p.grad.numpy() for n, p in m.named_parameters()})
    if abs(res["loss"] - loss.item()) > 1e-5 * max(1.0, abs(loss.item())):
        print("reductions: loss %r, PyTorch %r" % (res["loss"], loss.item()))
        bad += 1
    return bad


def opset18(binary, scratch):
    rng = np.random.default_rng(18)
    x = rng.uniform(-2, 2, (3, 4, 5)).astype(np.float32)
    p = rng.uniform(-2, 2, (3, 4, 5)).astype(np.float32)
    const = lambda name, arr: helper.make_node("Constant", [], [name], value=numpy_helper.from_array(arr))
    nodes = [
        const("ax1", np.array([1], np.int64)), const("ax02", np.array([0, 2], np.int64)),
        helper.make_node("Mul", ["x", "p"], ["h"]),
        helper.make_node("ReduceSumSquare", ["h", "ax02"], ["s"], keepdims=0),
        helper.make_node("ReduceMax", ["h", "ax1"], ["m"], keepdims=0),
        helper.make_node("ReduceL2", ["h", "ax1"], ["l"], keepdims=1),
        helper.make_node("ReduceSum", ["s"], ["s1"], keepdims=0),
        helper.make_node("ReduceSum", ["m"], ["m1"], keepdims=0),
        helper.make_node("ReduceSum", ["l"], ["l1"], keepdims=0),
        helper.make_node("Sum", ["s1", "m1", "l1"], ["loss"]),
    ]
    graph = helper.make_graph(nodes, "ops1_opset18", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [3, 4, 5])],
                              [helper.make_tensor_value_info("loss", TensorProto.FLOAT, [])],
                              [numpy_helper.from_array(p, "p")])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)])
    path, xpath = os.path.join(scratch, "opset18.onnx"), os.path.join(scratch, "x18.npy")
    onnx.save(model, path)
    np.save(xpath, x)
    _, ours = grad(binary, path, xpath, os.path.join(scratch, "opset18"))
    tp = torch.tensor(p, requires_grad=True)
    h = torch.tensor(x) * tp
    loss = (h * h).sum(dim=(0, 2)).sum() + torch.amax(h, dim=1).sum() + torch.norm(h, p=2, dim=1).sum()
    loss.backward()
    return compare("opset18", ours, {"p": tp.grad.numpy()})


class Norms(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = torch.nn.Conv2d(2, 6, 3, padding=1)
        self.inorm = torch.nn.InstanceNorm2d(6, affine=True)
        self.gnorm = torch.nn.GroupNorm(3, 6)
        with torch.no_grad():
            for m in (self.inorm, self.gnorm):
                m.weight.copy_(torch.linspace(0.5, 1.5, 6))
                m.bias.copy_(torch.linspace(-0.3, 0.4, 6))
        self.register_buffer("w", torch.linspace(-1.0, 2.0, 2 * 6 * 4 * 5).reshape(2, 6, 4, 5))

    def forward(self, x):
        h = self.conv(x)
        return ((self.inorm(h) + self.gnorm(h * h)) * self.w).sum()


def norms(binary, scratch):
    torch.manual_seed(7)
    m = Norms()
    x = torch.randn(2, 2, 4, 5)
    path, xpath = os.path.join(scratch, "norms.onnx"), os.path.join(scratch, "nx.npy")
    torch.onnx.export(m, (x,), path, opset_version=17, do_constant_folding=False, input_names=["x"],
                      output_names=["loss"], training=torch.onnx.TrainingMode.TRAINING)
    np.save(xpath, x.numpy())
    if "InstanceNormalization" not in {n.op_type for n in onnx.load(path).graph.node}:
        sys.exit("the export has no InstanceNormalization")
    run(binary, ["info", path])
    res, ours = grad(binary, path, xpath, os.path.join(scratch, "norms"))
    loss = m(x)
    loss.backward()
    bad = compare("norms", ours, {n: p.grad.numpy() for n, p in m.named_parameters()})
    if abs(res["loss"] - loss.item()) > 1e-5 * max(1.0, abs(loss.item())):
        print("norms: loss %r, PyTorch %r" % (res["loss"], loss.item()))
        bad += 1
    bad += group_norm_op(binary, scratch, 18) + group_norm_op(binary, scratch, 21)
    return bad


def group_norm_op(binary, scratch, opset):
    rng = np.random.default_rng(opset)
    x = rng.uniform(-2, 2, (2, 6, 3, 4)).astype(np.float32)
    p = rng.uniform(0.5, 2, (2, 6, 3, 4)).astype(np.float32)
    n_par = 3 if opset < 21 else 6
    sc = rng.uniform(0.5, 1.5, (n_par,)).astype(np.float32)
    b = rng.uniform(-1, 1, (n_par,)).astype(np.float32)
    w = rng.uniform(-1, 1, (2, 6, 3, 4)).astype(np.float32)
    nodes = [
        helper.make_node("Constant", [], ["w"], value=numpy_helper.from_array(w)),
        helper.make_node("Mul", ["x", "p"], ["h"]),
        helper.make_node("GroupNormalization", ["h", "scale", "b"], ["y"], num_groups=3, epsilon=1e-4),
        helper.make_node("Mul", ["y", "w"], ["yw"]),
        helper.make_node("ReduceSum", ["yw"], ["loss"], keepdims=0),
    ]
    graph = helper.make_graph(nodes, "gn%d" % opset, [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 6, 3, 4])],
                              [helper.make_tensor_value_info("loss", TensorProto.FLOAT, [])],
                              [numpy_helper.from_array(a, n) for a, n in ((p, "p"), (sc, "scale"), (b, "b"))])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    path, xpath = os.path.join(scratch, "gn%d.onnx" % opset), os.path.join(scratch, "gnx.npy")
    onnx.save(model, path)
    np.save(xpath, x)
    _, ours = grad(binary, path, xpath, os.path.join(scratch, "gn%d" % opset))
    tp, ts, tb = (torch.tensor(a, requires_grad=True) for a in (p, sc, b))
    h = torch.tensor(x) * tp
    rep = 6 // n_par
    y = F.group_norm(h, 3, ts.repeat_interleave(rep), tb.repeat_interleave(rep), eps=1e-4)
    (y * torch.tensor(w)).sum().backward()
    return compare("GroupNormalization-%d" % opset, ours, {"p": tp.grad.numpy(), "scale": ts.grad.numpy(),
                                                           "b": tb.grad.numpy()})


def main():
    binary, scratch = sys.argv[1:3]
    os.makedirs(scratch, exist_ok=True)
    bad = exported(binary, scratch) + built(binary, scratch) + reductions(binary, scratch) + opset18(binary, scratch)
    bad += norms(binary, scratch)
    if bad:
        sys.exit("check_ops1: %d mismatch(es) with PyTorch" % bad)
    print("check_ops1: every gradient matches PyTorch")


if __name__ == "__main__":
    main()
