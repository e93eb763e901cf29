#!/usr/bin/python3
"""check_ops4.py — issue 26's ops batch 4 (Einsum, TopK, OneHot, Size) against
PyTorch 1.13, end to end:
  1. a model exported here with torch.onnx.export (TorchScript exporter, opset 14)
     using the einsum forms exporters emit (batched matmul "bij,bjk->bik", attention
     scores "bhqd,bhkd->bhqk", a transpose "ij->ji", a reduction "bij->b", ellipsis
     broadcasting "...ij,jk->...ik", a bilinear form of three operands, the implicit
     form "ij,jk"), torch.topk (largest and smallest, along a middle axis) and
     F.one_hot: `onnxtrain info` accepts it and `onnxtrain grad` gives PyTorch's
     loss and gradients;
  2. a model built with onnx.helper for what PyTorch 1.13 does not export: Einsum with
     a repeated label (the diagonal "ii->i", the trace "ii"), a label only one operand
     has ("ij,j->i" summing j of one side), an ellipsis that broadcasts a size-1 batch
     dim, TopK at opset 1 (k an attribute), OneHot with negative indices and a middle
     axis, Size feeding arithmetic; against torch's gradients and numpy's forward;
  3. nn.LSTM (two layers, bidirectional, batch first), nn.GRU (initial state a
     parameter) and nn.RNN (Relu, bidirectional) exported the same way: every weight,
     bias and the initial state against PyTorch;
  4. bad input: an Einsum whose equation does not fit its operands and a TopK whose
     K passes the axis are refused by `onnxtrain info` naming the node.
Fails above 1e-5 absolute plus 1e-5 relative to the gradient's largest magnitude.

    check_ops4.py ONNXTRAIN_BINARY SCRATCH_DIR
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


def run(binary, args, ok=True):
    p = subprocess.run([binary] + args, capture_output=True, text=True)
    if ok and p.returncode != 0:
        sys.exit("onnxtrain %s failed (%d): %s%s" % (" ".join(args), p.returncode, p.stdout, p.stderr))
    return p


def grad(binary, model, x, out_dir):
    out = run(binary, ["grad", model, "--input", x, "--loss", "output", "--dump-grads", out_dir, "--json"]).stdout
    res = json.loads(out)
    with open(os.path.join(out_dir, "index.json")) as f:
        index = json.load(f)
    return res, {k: np.load(os.path.join(out_dir, v)) for k, v in index.items()}


def compare(label, ours, ref, res=None, loss=None):
    bad = 0
    for name, want in sorted(ref.items()):
        got = ours.get(name)
        if got is None or got.shape != want.shape:
            print("%s: %s missing or misshapen (have %s)" % (label, name, sorted(ours)))
            bad += 1
            continue
        diff = float(np.max(np.abs(got - want))) if want.size else 0.0
        tol = 1e-5 + 1e-5 * float(np.max(np.abs(want)))
        print("%s: %-8s max abs diff %.3g (largest |grad| %.3g)" % (label, name, diff, float(np.max(np.abs(want)))))
        if not diff <= tol:
            bad += 1
    if res is not None and abs(res["loss"] - loss) > 1e-5 * max(1.0, abs(loss)):
        print("%s: loss %r, PyTorch %r" % (label, res["loss"], loss))
        bad += 1
    return bad


class Forms(torch.nn.Module):
    def __init__(self):
        super().__init__()
        g = torch.Generator().manual_seed(4)
        self.a = torch.nn.Parameter(torch.randn(2, 3, 4, generator=g))
        self.b = torch.nn.Parameter(torch.randn(2, 4, 5, generator=g))
        self.q = torch.nn.Parameter(torch.randn(2, 2, 3, 4, generator=g))
        self.w = torch.nn.Parameter(torch.randn(4, 3, generator=g))
        self.u = torch.nn.Parameter(torch.randn(2, 4, 3, generator=g))

    def forward(self, x):  # x [2, 3, 4]
        y = torch.einsum("bij,bjk->bik", x * self.a, self.b)
        s = torch.einsum("bhqd,bhkd->bhqk", self.q, self.q * 0.5 + x[0, :, :].reshape(1, 1, 3, 4))
        t = torch.einsum("ij->ji", self.w)
        r = torch.einsum("bij->b", y)
        e = torch.einsum("...ij,jk->...ik", x, self.w)  # [2, 3, 3]
        bl = torch.einsum("bi,oij,bj->bo", x[:, 0, :], self.u, x[:, 1, :3])  # three operands
        im = torch.einsum("ij,jk", self.w, t)
        vals, idx = torch.topk(y, 2, dim=1)  # middle axis, largest
        small, _ = torch.topk(s, 2, dim=-1, largest=False)
        oh = F.one_hot(idx, 3).float()  # [2, 2, 5, 3]
        return (y.sum() + (s * s).sum() + (t * t).sum() + r.sum() + (e * e).sum() + (bl * bl).sum()
                + (im * im).sum() + (vals * vals).sum() + small.sum() * 3.0 + (oh * vals.unsqueeze(-1)).sum())


def exported(binary, scratch):
    torch.manual_seed(7)
    m = Forms()
    x = torch.randn(2, 3, 4)
    path, xpath = os.path.join(scratch, "forms.onnx"), os.path.join(scratch, "x.npy")
    torch.onnx.export(m, (x,), path, opset_version=14, do_constant_folding=False, input_names=["x"],
                      output_names=["loss"], training=torch.onnx.TrainingMode.TRAINING)
    np.save(xpath, x.numpy())
    ops = {n.op_type for n in onnx.load(path).graph.node}
    want = {"Einsum", "TopK", "OneHot"}
    if not want <= ops:
        sys.exit("the export lacks %s (has %s)" % (sorted(want - ops), sorted(ops)))
    run(binary, ["info", path])
    res, ours = grad(binary, path, xpath, os.path.join(scratch, "exported"))
    loss = m(x)
    loss.backward()
    return compare("exported", ours, {n: p.grad.numpy() for n, p in m.named_parameters()}, res, loss.item())


def built(binary, scratch):
    rng = np.random.default_rng(44)
    x = rng.uniform(-2, 2, (3, 3)).astype(np.float32)
    p = rng.uniform(-2, 2, (3, 3)).astype(np.float32)
    v = rng.uniform(-2, 2, (3,)).astype(np.float32)
    bb = rng.uniform(-2, 2, (1, 4, 3)).astype(np.float32)  # broadcast batch dim of 1
    c = rng.uniform(-2, 2, (2, 1, 3, 3)).astype(np.float32)
    tk = rng.permutation(12).astype(np.float32).reshape(3, 4) / 4 - 1  # distinct: no ties
    const = lambda name, arr: helper.make_node("Constant", [], [name], value=numpy_helper.from_array(arr))
    nodes = [
        const("ind", np.array([[0, -1, 2], [1, 5, -3]], np.int64)),
        const("depth", np.array(3.0, np.float32)),
        const("onoff", np.array([0.5, 2.0], np.float32)),
        helper.make_node("Mul", ["x", "p"], ["h"]),
        helper.make_node("Einsum", ["h"], ["diag"], equation="ii->i"),
        helper.make_node("Einsum", ["h"], ["trace"], equation="ii"),
        helper.make_node("Einsum", ["h", "v"], ["hv"], equation="ij,j->i"),
        helper.make_node("Einsum", ["h", "v"], ["rowsum"], equation="ij,k->i"),
        helper.make_node("Einsum", ["c", "bb"], ["bc"], equation="...ij,...kj->...ik"),  # [2, 4, 3, 4]
        helper.make_node("Mul", ["diag", "hv"], ["dh"]),
        helper.make_node("Mul", ["bc", "bc"], ["bc2"]),
        helper.make_node("TopK", ["tkp"], ["tv", "ti"], k=2, axis=1),  # opset 1: k an attribute
        helper.make_node("Mul", ["tk", "p4"], ["tkp"]),
        helper.make_node("OneHot", ["ind", "depth", "onoff"], ["oh"], axis=1),  # [2, 3, 3]
        helper.make_node("Mul", ["oh", "h"], ["ohh"]),  # broadcast [2,3,3] * [3,3]
        helper.make_node("Size", ["bc"], ["n"]),
        helper.make_node("Cast", ["n"], ["nf"], to=TensorProto.FLOAT),
        helper.make_node("ReduceSum", ["dh"], ["s1"], keepdims=0),
        helper.make_node("ReduceSum", ["bc2"], ["s2"], keepdims=0),
        helper.make_node("ReduceSum", ["tv"], ["s3"], keepdims=0),
        helper.make_node("ReduceSum", ["ohh"], ["s4"], keepdims=0),
        helper.make_node("ReduceSum", ["rowsum"], ["s5"], keepdims=0),
        helper.make_node("Div", ["s2", "nf"], ["s2n"]),
        helper.make_node("Sum", ["s1", "trace", "s2n", "s3", "s4", "s5"], ["loss"]),
    ]
    p4 = rng.uniform(0.5, 1.5, (3, 4)).astype(np.float32)
    graph = helper.make_graph(nodes, "ops4_built", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [3, 3])],
                              [helper.make_tensor_value_info("loss", TensorProto.FLOAT, [])],
                              [numpy_helper.from_array(a, n) for a, n in
                               ((p, "p"), (v, "v"), (bb, "bb"), (c, "c"), (tk, "tk"), (p4, "p4"))])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 9)])
    model.opset_import[0].version = 12  # Einsum needs 12, TopK's k attribute is TopK-1's form
    path, xpath = os.path.join(scratch, "built.onnx"), os.path.join(scratch, "built_x.npy")
    onnx.save(model, path)
    np.save(xpath, x)
    res, ours = grad(binary, path, xpath, os.path.join(scratch, "built"))
    t = {k: torch.tensor(a, requires_grad=True) for k, a in (("p", p), ("v", v), ("bb", bb), ("c", c),
                                                             ("tk", tk), ("p4", p4))}
    h = torch.tensor(x) * t["p"]
    bc = torch.einsum("...ij,...kj->...ik", t["c"], t["bb"])
    tv, _ = torch.topk(t["tk"] * t["p4"], 2, dim=1)
    ind = torch.tensor([[0, -1, 2], [1, 5, -3]])
    onehot = np.full((2, 3, 3), 0.5, np.float32)  # OneHot's axis 1: [i, position, j]
    for i in range(2):
        for j in range(3):
            k = int(ind[i, j])
            k = k + 3 if k < 0 else k
            if 0 <= k < 3:
                onehot[i, k, j] = 2.0
    loss = ((torch.diagonal(h) * (h @ t["v"])).sum() + torch.trace(h) + (bc * bc).sum() / bc.numel() + tv.sum()
            + (torch.tensor(onehot) * h).sum() + (h.sum(dim=1) * t["v"].sum()).sum())
    loss.backward()
    return compare("built", ours, {k: a.grad.numpy() for k, a in t.items()}, res, loss.item())


class Recurrent(torch.nn.Module):
    def __init__(self):
        super().__init__()
        torch.manual_seed(12)
        self.lstm = torch.nn.LSTM(4, 5, num_layers=2, batch_first=True, bidirectional=True)
        self.gru = torch.nn.GRU(10, 3)
        self.rnn = torch.nn.RNN(3, 4, nonlinearity="relu", bidirectional=True)
        self.h0 = torch.nn.Parameter(torch.randn(1, 2, 3) * 0.5)

    def forward(self, x):  # x [2, 6, 4], batch first
        y, (h, c) = self.lstm(x)
        g, gh = self.gru(y.transpose(0, 1), self.h0)
        r, rh = self.rnn(g)
        return (y * y).sum() + h.sum() + c.sum() * 0.5 + (g * g).sum() + gh.sum() + (r * r).sum() + rh.sum()


def recurrent(binary, scratch):
    m = Recurrent()
    x = torch.randn(2, 6, 4)
    path, xpath = os.path.join(scratch, "recurrent.onnx"), os.path.join(scratch, "rx.npy")
    torch.onnx.export(m, (x,), path, opset_version=14, do_constant_folding=False, input_names=["x"],
                      output_names=["loss"], training=torch.onnx.TrainingMode.TRAINING)
    np.save(xpath, x.numpy())
    ops = {n.op_type for n in onnx.load(path).graph.node}
    if not {"LSTM", "GRU", "RNN"} <= ops:
        sys.exit("the recurrent export lacks LSTM, GRU or RNN (has %s)" % sorted(ops))
    run(binary, ["info", path])
    res, ours = grad(binary, path, xpath, os.path.join(scratch, "recurrent"))
    loss = m(x)
    loss.backward()
    # the exporter keeps PyTorch's weights as initializers (reordered into ONNX's gate
    # order by Slice / Concat nodes), so every parameter is compared by name
    return compare("recurrent", ours, {n: p.grad.numpy() for n, p in m.named_parameters()}, res, loss.item())


def bad_input(binary, scratch):
    bad = 0
    cases = [
        ("einsum_rank", helper.make_node("Einsum", ["a", "a"], ["y"], equation="ij,jk,kl->il", name="ein"),
         "ein", "terms"),
        ("einsum_label", helper.make_node("Einsum", ["a", "b"], ["y"], equation="ij,ij->i", name="ein2"),
         "ein2", "label 'j'"),
        ("topk_k", helper.make_node("TopK", ["a", "k"], ["y", "i"], axis=1, name="tk"), "tk", "K = 9"),
        ("lstm_hidden", helper.make_node("LSTM", ["x3", "w3", "r3"], ["y"], hidden_size=7, name="lstm"), "lstm",
         "hidden_size 7"),
    ]
    for tag, node, name, words in cases:
        inits = [numpy_helper.from_array(np.ones((2, 3), np.float32), "a"),
                 numpy_helper.from_array(np.ones((2, 4), np.float32), "b"),
                 numpy_helper.from_array(np.array([9], np.int64), "k"),
                 numpy_helper.from_array(np.ones((2, 1, 3), np.float32), "x3"),
                 numpy_helper.from_array(np.ones((1, 20, 3), np.float32), "w3"),
                 numpy_helper.from_array(np.ones((1, 20, 5), np.float32), "r3")]
        outs = [helper.make_tensor_value_info(o, TensorProto.FLOAT, None) for o in node.output[:1]]
        g = helper.make_graph([node], tag, [], outs, inits)
        path = os.path.join(scratch, tag + ".onnx")
        onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 14)]), path)
        p = run(binary, ["info", path], ok=False)
        msg = p.stdout + p.stderr
        if p.returncode == 0 or name not in msg or words not in msg or "Segmentation" in msg:
            print("bad input %s: exit %d, %r" % (tag, p.returncode, msg.strip()[:300]))
            bad += 1
        else:
            print("bad input %s: refused (exit %d): %s" % (tag, p.returncode, msg.strip().splitlines()[-1][:160]))
    return bad


def main():
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    binary, scratch = sys.argv[1], sys.argv[2]
    os.makedirs(scratch, exist_ok=True)
    bad = exported(binary, scratch) + built(binary, scratch) + recurrent(binary, scratch) + bad_input(binary, scratch)
    if bad:
        sys.exit("%d check(s) failed" % bad)
    print("ops batch 4: every gradient within tolerance")


if __name__ == "__main__":
    main()
