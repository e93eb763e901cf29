#!/usr/bin/python3
"""check_xfmr.py — issue 26's transformer ops (RMSNormalization, RotaryEmbedding,
Attention at opset 23) in whole models:

  0. tests/fixtures/xfmr/model.onnx, a tiny LLaMA-style decoder (nn.RMSNorm, SDPA with
     GQA and is_causal) exported by PyTorch 2.15's dynamo exporter at opset 23 as fused
     RMSNormalization and Attention ops (make_fixture.py there), against PyTorch's
     float64 loss and gradients stored beside it;

and against PyTorch 1.13 (which cannot export these ops), in models built here with
onnx.helper whose computation is written again in torch (float64) for the reference:

  1. a LLaMA-style block: RMSNorm, Q/K/V projections, RotaryEmbedding on 3-D Q and K
     with position ids, Attention 3-D with GQA (4 query heads, 2 key/value heads) and
     is_causal, the output projection, a residual and a second RMSNorm;
  2. a decoder step with a cache: 4-D Attention with past_key / past_value inputs, a
     float mask (an initializer: frozen, not trained), softcap and scale, interleaved
     rotary embeddings without position ids, present_key / present_value outputs.

For each: `onnxtrain grad --loss output` against torch's loss and gradients (fails
above 1e-5 absolute plus 1e-4 relative to the gradient's largest magnitude), and
`onnxtrain verify` bitwise under sqrt, selective and all. Then bad input to each op
(masks of the wrong shape, head counts that do not divide, position ids past the
caches, ...): `onnxtrain eval` must exit with the documented code and a message naming
the node, never crash.

    check_xfmr.py ONNXTRAIN_BINARY SCRATCH_DIR
"""
import json
import os
import subprocess
import sys

import numpy as np
import onnx
import torch
from onnx import TensorProto, helper, numpy_helper

F = TensorProto.FLOAT


def run(binary, args):
    p = subprocess.run([binary] + args, capture_output=True, text=True)
    return p.returncode, p.stdout + p.stderr


def grad(binary, model, inputs, out_dir):
    args = ["grad", model, "--loss", "output", "--output", "loss", "--dump-grads", out_dir, "--json"]
    for k, v in inputs.items():
        args += ["--input", "%s=%s" % (k, v)]
    rc, out = run(binary, args)
    if rc != 0:
        sys.exit("onnxtrain grad %s failed (%d): %s" % (model, rc, out))
    res = json.loads(out[: out.rindex("}") + 1])
    with open(os.path.join(out_dir, "index.json")) as f:
        index = json.load(f)
    return res, {k: np.load(os.path.join(out_dir, v)) for k, v in index.items()}


def compare(label, res, ours, loss, ref):
    bad = 0
    if abs(res["loss"] - loss) > 1e-4 * max(1.0, abs(loss)):
        print("%s: loss %r, torch %r" % (label, res["loss"], loss))
        bad += 1
    for name, want in sorted(ref.items()):
        got = ours.get(name)
        if got is None or got.shape != want.shape:
            print("%s: %s missing or misshapen (%s)" % (label, name, None if got is None else got.shape))
            bad += 1
            continue
        diff = float(np.max(np.abs(got - want)))
        tol = 1e-5 + 1e-4 * float(np.max(np.abs(want)))
        print("%s: %-6s max abs diff %.3g (largest |grad| %.3g)" % (label, name, diff, float(np.max(np.abs(want)))))
        if not diff <= tol:
            bad += 1
    extra = sorted(set(ours) - set(ref))
    if extra:
        print("%s: unexpected gradients for %s" % (label, extra))
        bad += 1
    return bad


def verify(binary, label, model, inputs):
    bad = 0
    for policy in ("sqrt", "selective", "all"):
        args = ["verify", model, "--loss", "output", "--output", "loss", "--remat", policy, "--time-steps", "1"]
        for k, v in inputs.items():
            args += ["--input", "%s=%s" % (k, v)]
        rc, out = run(binary, args)
        print("%s: verify --remat %s: exit %d" % (label, policy, rc))
        if rc != 0:
            print(out)
            bad += 1
    return bad


def save_model(path, nodes, inputs, outputs, inits):
    graph = helper.make_graph(nodes, "g", inputs, outputs,
                              [numpy_helper.from_array(v, k) for k, v in inits.items()])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 23)], producer_name="check_xfmr")
    model.ir_version = 10
    onnx.save(model, path)


def rope_caches(rows, half):
    p = np.arange(rows)[:, None]
    inv = 10000.0 ** (-np.arange(half) / half)
    return np.cos(p * inv).astype(np.float32), np.sin(p * inv).astype(np.float32)


# ---- torch references (float64) ---------------------------------------------------


def t_rms(x, g, eps):
    return x * torch.rsqrt((x * x).mean(-1, keepdim=True) + eps) * g


def t_rope(x, c, s, interleaved):
    """x [B, H, S, D]; c, s broadcastable to [B, 1, S, D/2]."""
    if interleaved:
        x1, x2 = x[..., 0::2], x[..., 1::2]
    else:
        x1, x2 = x.chunk(2, dim=-1)
    r, i = c * x1 - s * x2, s * x1 + c * x2
    if interleaved:
        return torch.stack((r, i), dim=-1).reshape(x.shape)
    return torch.cat((r, i), dim=-1)


def t_attention(q, k, v, bias, scale, softcap):
    """q [B, Hq, Sq, D], k / v [B, Hkv, T, d]; bias broadcastable to the scores."""
    rep = q.shape[1] // k.shape[1]
    k, v = k.repeat_interleave(rep, dim=1), v.repeat_interleave(rep, dim=1)
    s = (q @ k.transpose(-1, -2)) * scale
    if softcap:
        s = softcap * torch.tanh(s / softcap)
    return torch.softmax(s + bias, dim=-1) @ v


# ---- 1: a LLaMA-style block -------------------------------------------------------


def llama_block(binary, scratch):
    rng = np.random.default_rng(26)
    B, T, C, Hq, Hkv, D = 2, 5, 16, 4, 2, 4
    u = lambda *s: rng.uniform(-0.5, 0.5, s).astype(np.float32)
    w = {"g1": (1 + u(C)), "wq": u(C, Hq * D), "wk": u(C, Hkv * D), "wv": u(C, Hkv * D), "wo": u(Hq * D, C),
         "g2": (1 + u(C))}
    cos, sin = rope_caches(16, D // 2)
    w["r"] = u(B, T, C)  # the loss weights: a param like the others
    x = rng.uniform(-1, 1, (B, T, C)).astype(np.float32)
    pos = np.array([[0, 1, 2, 3, 4], [3, 4, 5, 6, 7]], np.int64)
    inits = dict(w, cos=cos, sin=sin)
    nodes = [
        helper.make_node("RMSNormalization", ["x", "g1"], ["h"], epsilon=1e-5),
        helper.make_node("MatMul", ["h", "wq"], ["q0"]),
        helper.make_node("MatMul", ["h", "wk"], ["k0"]),
        helper.make_node("MatMul", ["h", "wv"], ["v"]),
        helper.make_node("RotaryEmbedding", ["q0", "cos", "sin", "position_ids"], ["q"], num_heads=Hq),
        helper.make_node("RotaryEmbedding", ["k0", "cos", "sin", "position_ids"], ["k"], num_heads=Hkv),
        helper.make_node("Attention", ["q", "k", "v"], ["a"], is_causal=1, q_num_heads=Hq, kv_num_heads=Hkv),
        helper.make_node("MatMul", ["a", "wo"], ["o"]),
        helper.make_node("Add", ["o", "x"], ["res"]),
        helper.make_node("RMSNormalization", ["res", "g2"], ["y"], epsilon=1e-5),
        helper.make_node("Mul", ["y", "r"], ["yr"]),
        helper.make_node("ReduceSum", ["yr"], ["loss"], keepdims=0),
    ]
    path = os.path.join(scratch, "llama_block.onnx")
    save_model(path, nodes,
               [helper.make_tensor_value_info("x", F, [B, T, C]),
                helper.make_tensor_value_info("position_ids", TensorProto.INT64, [B, T])],
               [helper.make_tensor_value_info("loss", F, [])], inits)
    np.save(os.path.join(scratch, "x.npy"), x)
    np.save(os.path.join(scratch, "pos.npy"), pos)
    inputs = {"x": os.path.join(scratch, "x.npy"), "position_ids": os.path.join(scratch, "pos.npy")}
    res, ours = grad(binary, path, inputs, os.path.join(scratch, "llama_grads"))

    tw = {k: torch.tensor(v, dtype=torch.float64, requires_grad=True) for k, v in w.items()}
    tx = torch.tensor(x, dtype=torch.float64)
    heads = lambda t, H: t.reshape(B, T, H, D).transpose(1, 2)
    c = torch.tensor(cos, dtype=torch.float64)[torch.tensor(pos)][:, None]
    s = torch.tensor(sin, dtype=torch.float64)[torch.tensor(pos)][:, None]
    h = t_rms(tx, tw["g1"], 1e-5)
    q = t_rope(heads(h @ tw["wq"], Hq), c, s, False)
    k = t_rope(heads(h @ tw["wk"], Hkv), c, s, False)
    v = heads(h @ tw["wv"], Hkv)
    causal = torch.triu(torch.full((T, T), float("-inf"), dtype=torch.float64), 1)
    a = t_attention(q, k, v, causal, 1 / np.sqrt(D), 0).transpose(1, 2).reshape(B, T, Hq * D)
    y = t_rms(a @ tw["wo"] + tx, tw["g2"], 1e-5)
    loss = (y * tw["r"]).sum()
    loss.backward()
    ref = {k: t.grad.numpy().astype(np.float32) for k, t in tw.items()}
    return compare("llama block", res, ours, float(loss), ref) + verify(binary, "llama block", path, inputs)


# ---- 2: a decoder step with a cache ---------------------------------------------


def cached_step(binary, scratch):
    rng = np.random.default_rng(27)
    B, T, P, C, H, D, Dv = 2, 3, 4, 12, 2, 6, 4
    u = lambda *s: rng.uniform(-0.5, 0.5, s).astype(np.float32)
    w = {"wq": u(C, H * D), "wk": u(C, H * D), "wv": u(C, H * Dv), "wo": u(H * Dv, C)}
    cos, sin = rope_caches(B * T, D // 2)
    cos, sin = cos.reshape(B, T, D // 2), sin.reshape(B, T, D // 2)
    mask = rng.uniform(-1, 0, (B, 1, T, P + T)).astype(np.float32)
    mask[0, 0, 1, :3] = -np.inf
    w["r"] = u(B, T, C)
    x = rng.uniform(-1, 1, (B, T, C)).astype(np.float32)
    pk, pv = u(B, H, P, D), u(B, H, P, Dv)
    inits = dict(w, cos=cos, sin=sin, mask=mask, shp_q=np.array([B, T, H, D], np.int64),
                 shp_v=np.array([B, T, H, Dv], np.int64), shp_o=np.array([B, T, H * Dv], np.int64))
    split = lambda src, shp, dst: [helper.make_node("Reshape", [src, shp], [dst + "_r"]),
                                   helper.make_node("Transpose", [dst + "_r"], [dst], perm=[0, 2, 1, 3])]
    nodes = ([helper.make_node("MatMul", ["x", "wq"], ["q0"]), helper.make_node("MatMul", ["x", "wk"], ["k0"]),
              helper.make_node("MatMul", ["x", "wv"], ["v0"])] + split("q0", "shp_q", "q1") +
             split("k0", "shp_q", "k1") + split("v0", "shp_v", "v") + [
        helper.make_node("RotaryEmbedding", ["q1", "cos", "sin"], ["q"], interleaved=1),
        helper.make_node("RotaryEmbedding", ["k1", "cos", "sin"], ["k"], interleaved=1),
        helper.make_node("Attention", ["q", "k", "v", "mask", "past_key", "past_value"],
                         ["a", "present_key", "present_value"], softcap=2.5, scale=0.3),
        helper.make_node("Transpose", ["a"], ["at"], perm=[0, 2, 1, 3]),
        helper.make_node("Reshape", ["at", "shp_o"], ["a2"]),
        helper.make_node("MatMul", ["a2", "wo"], ["o"]),
        helper.make_node("Mul", ["o", "r"], ["or"]),
        helper.make_node("ReduceSum", ["or"], ["loss"], keepdims=0),
    ])
    path = os.path.join(scratch, "cached_step.onnx")
    save_model(path, nodes,
               [helper.make_tensor_value_info("x", F, [B, T, C]),
                helper.make_tensor_value_info("past_key", F, [B, H, P, D]),
                helper.make_tensor_value_info("past_value", F, [B, H, P, Dv])],
               [helper.make_tensor_value_info("loss", F, []),
                helper.make_tensor_value_info("present_key", F, [B, H, P + T, D]),
                helper.make_tensor_value_info("present_value", F, [B, H, P + T, Dv])], inits)
    for name, arr in (("x2", x), ("pk", pk), ("pv", pv)):
        np.save(os.path.join(scratch, name + ".npy"), arr)
    inputs = {"x": os.path.join(scratch, "x2.npy"), "past_key": os.path.join(scratch, "pk.npy"),
              "past_value": os.path.join(scratch, "pv.npy")}
    res, ours = grad(binary, path, inputs, os.path.join(scratch, "cached_grads"))

    tw = {k: torch.tensor(v, dtype=torch.float64, requires_grad=True) for k, v in w.items()}
    tx = torch.tensor(x, dtype=torch.float64)
    c = torch.tensor(cos, dtype=torch.float64)[:, None]
    s = torch.tensor(sin, dtype=torch.float64)[:, None]
    heads = lambda t, d: t.reshape(B, T, H, d).transpose(1, 2)
    q = t_rope(heads(tx @ tw["wq"], D), c, s, True)
    k = t_rope(heads(tx @ tw["wk"], D), c, s, True)
    v = heads(tx @ tw["wv"], Dv)
    k = torch.cat((torch.tensor(pk, dtype=torch.float64), k), dim=2)
    v = torch.cat((torch.tensor(pv, dtype=torch.float64), v), dim=2)
    a = t_attention(q, k, v, torch.tensor(mask, dtype=torch.float64), 0.3, 2.5)
    o = a.transpose(1, 2).reshape(B, T, H * Dv) @ tw["wo"]
    loss = (o * tw["r"]).sum()
    loss.backward()
    ref = {k: t.grad.numpy().astype(np.float32) for k, t in tw.items()}
    return compare("cached step", res, ours, float(loss), ref) + verify(binary, "cached step", path, inputs)


# ---- 3: bad input ---------------------------------------------------------------


def bad_inputs(binary, scratch):
    """(label, nodes, inputs {name: array}, initializers, exit code, words the message must hold)"""
    f = lambda *s: np.ones(s, np.float32)
    cos, sin = rope_caches(4, 2)
    cases = [
        ("mask too long", [helper.make_node("Attention", ["q", "k", "v", "m"], ["y"], name="att")],
         {"q": f(1, 2, 3, 4), "k": f(1, 2, 3, 4), "v": f(1, 2, 3, 4)}, {"m": f(3, 4)}, 7,
         ["'att'", "covers 4 keys but there are 3"]),
        ("mask not broadcastable", [helper.make_node("Attention", ["q", "k", "v", "m"], ["y"], name="att")],
         {"q": f(1, 2, 3, 4), "k": f(1, 2, 3, 4), "v": f(1, 2, 3, 4)}, {"m": f(2, 3)}, 7, ["'att'", "must be 1 or 3"]),
        ("3-D without heads", [helper.make_node("Attention", ["q", "k", "v"], ["y"], name="att")],
         {"q": f(1, 3, 8), "k": f(1, 3, 8), "v": f(1, 3, 8)}, {}, 5, ["'att'", "q_num_heads"]),
        ("heads do not divide", [helper.make_node("Attention", ["q", "k", "v"], ["y"], name="att", q_num_heads=3,
                                                  kv_num_heads=2)],
         {"q": f(1, 3, 8), "k": f(1, 3, 8), "v": f(1, 3, 8)}, {}, 7, ["'att'", "multiple"]),
        ("qk_matmul_output", [helper.make_node("Attention", ["q", "k", "v"], ["y", "", "", "qk"], name="att")],
         {"q": f(1, 2, 3, 4), "k": f(1, 2, 3, 4), "v": f(1, 2, 3, 4)}, {}, 6, ["'att'", "qk_matmul_output"]),
        ("position id past the caches",
         [helper.make_node("RotaryEmbedding", ["x", "c", "s", "p"], ["y"], name="rope", num_heads=2)],
         {"x": f(1, 2, 8), "p": np.array([[0, 9]], np.int64)}, {"c": cos, "s": sin}, 5,
         ["'rope'", "position id 9"]),
        ("odd rotary dim", [helper.make_node("RotaryEmbedding", ["x", "c", "s"], ["y"], name="rope",
                                             rotary_embedding_dim=3)],
         {"x": f(1, 2, 2, 4)}, {"c": f(1, 2, 2), "s": f(1, 2, 2)}, 5, ["'rope'", "rotary_embedding_dim"]),
        ("rotary 3-D without heads", [helper.make_node("RotaryEmbedding", ["x", "c", "s"], ["y"], name="rope")],
         {"x": f(1, 2, 4)}, {"c": f(1, 2, 2), "s": f(1, 2, 2)}, 5, ["'rope'", "num_heads"]),
        ("rms scale size", [helper.make_node("RMSNormalization", ["x", "g"], ["y"], name="rms")],
         {"x": f(2, 6)}, {"g": f(4)}, 7, ["'rms'", "scale"]),
        ("rms stash_type", [helper.make_node("RMSNormalization", ["x", "g"], ["y"], name="rms", stash_type=0)],
         {"x": f(2, 6)}, {"g": f(6)}, 6, ["'rms'", "stash_type"]),
    ]
    bad = 0
    for k, (label, nodes, inputs, inits, code, words) in enumerate(cases):
        path = os.path.join(scratch, "bad%d.onnx" % k)
        ins = [helper.make_tensor_value_info(n, TensorProto.INT64 if a.dtype == np.int64 else F, list(a.shape))
               for n, a in inputs.items()]
        save_model(path, nodes, ins, [helper.make_tensor_value_info("y", F, None)], inits)
        args = ["eval", path]
        for n, a in inputs.items():
            np.save(os.path.join(scratch, "bad%d_%s.npy" % (k, n)), a)
            args += ["--input", "%s=%s" % (n, os.path.join(scratch, "bad%d_%s.npy" % (k, n)))]
        rc, out = run(binary, args)
        ok = rc == code and all(w in out for w in words)
        print("bad input: %-28s exit %d%s" % (label, rc, "" if ok else " (want %d and %s): %s" % (code, words, out)))
        bad += not ok
    return bad


# ---- 0: PyTorch 2.15's export ------------------------------------------------------


def exported(binary, scratch):
    fx = os.path.join(os.path.dirname(os.path.abspath(__file__)), "fixtures", "xfmr")
    model, inputs = os.path.join(fx, "model.onnx"), {"x": os.path.join(fx, "x.npy")}
    res, ours = grad(binary, model, inputs, os.path.join(scratch, "exported_grads"))
    with open(os.path.join(fx, "grads", "index.json")) as f:
        ref = {k: np.load(os.path.join(fx, "grads", v)) for k, v in json.load(f).items()}
    loss = float(np.load(os.path.join(fx, "loss.npy")))
    return compare("torch 2.15 export", res, ours, loss, ref) + verify(binary, "torch 2.15 export", model, inputs)


def main():
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    binary, scratch = sys.argv[1], sys.argv[2]
    os.makedirs(scratch, exist_ok=True)
    torch.manual_seed(0)
    bad = exported(binary, scratch) + llama_block(binary, scratch) + cached_step(binary, scratch) + bad_inputs(binary, scratch)
    if bad:
        sys.exit("check_xfmr: %d mismatches" % bad)
    print("check_xfmr: ok")


if __name__ == "__main__":
    main()
