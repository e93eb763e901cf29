#!/usr/bin/python3
"""check_bad_ops.py — bad input to every op issue 26 added (Resize, Upsample, LSTM / GRU /
RNN, ConvTranspose, Attention, Einsum, TopK, OneHot, DepthToSpace / SpaceToDepth,
GroupNormalization, InstanceNormalization, ArgMax, the new reductions, PRelu): absurd
scales and sizes, absurd hidden sizes, sequence_lens past the sequence, kernel shapes and
output_padding that contradict the weights, masks of the wrong shape, bad einsum
equations, K, depths, block sizes and group counts that do not fit.

Each case is a small model built here with onnx.helper (data as .npy where the bad value
is only known at run time). `onnxtrain info`, `grad` (--loss output on a scalar float
output, where the model has one) and `eval` run on it: each must exit with a documented
code (docs/bad-input.md: 5 invalid model, 6 unsupported, 7 shape, 8 data), within the
time limit, with a message naming the node ("node 'NAME'") and containing the case's
words; never a signal, 70 (internal), 0 (a silent result) or a hang.

    check_bad_ops.py ONNXTRAIN_BINARY SCRATCH_DIR
"""
import os
import shutil
import subprocess
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

F, I64, B = TensorProto.FLOAT, TensorProto.INT64, TensorProto.BOOL
BIG = 1 << 62
DOCUMENTED = {5, 6, 7, 8}
TIMEOUT = 30


def vi(name, elem, shape):
    return helper.make_tensor_value_info(name, elem, shape)


def init(name, array):
    return numpy_helper.from_array(np.asarray(array), name)


def rnd(*shape):
    return np.random.RandomState(0).randn(*shape).astype(np.float32)


class Case:
    """One bad model: nodes (the bad one named in `node`), its inputs with data, its
    initializers; `words` must appear in the message; `runtime`: the bad value is data,
    so info passes and only grad / eval must refuse it."""

    def __init__(self, name, node, nodes, inputs, inits, outputs, words, opset=23, runtime=False, data=None):
        self.name, self.node, self.words, self.runtime = name, node, words, runtime
        self.data = data or {}
        graph = helper.make_graph(nodes, name, [vi(n, t, s) for n, t, s in inputs], outputs, inits)
        self.model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
        self.model.ir_version = 8 if opset < 21 else 10
        self.scalar = any(o.name == "loss" for o in outputs)


def with_loss(y):
    """A scalar float output `loss` (ReduceSum of y) so that grad --loss output can run."""
    return helper.make_node("ReduceSum", [y], ["loss"], name="loss_sum", keepdims=0), vi("loss", F, [])


def unary(name, node, make, x_shape, y_elem=F, words="", opset=23, inits=(), extra_inputs=(), data=None,
          runtime=False):
    """A case whose bad node reads x (float, data given) and writes y; a loss when y is float."""
    nodes = [make]
    outputs = [vi("y", y_elem, None)]
    if y_elem == F:
        n, o = with_loss("y")
        nodes.append(n)
        outputs = [o]
    d = {"x": rnd(*x_shape)}
    d.update(data or {})
    return Case(name, node, nodes, [("x", F, list(x_shape))] + list(extra_inputs), list(inits), outputs, words,
                opset, runtime, d)


def cases():
    c = []
    # ---- Resize / Upsample -------------------------------------------------------
    for tag, scales, words in (("huge", [1, 1, 1e30, 1e30], "overflow"), ("zero", [1, 1, 0, 0], "scale"),
                               ("to_none", [1, 1, 0.1, 1], "none"),
                               ("negative", [1, 1, -2, 2], "scale"), ("nan", [1, 1, float("nan"), 2], "scale")):
        c.append(unary(f"resize_scales_{tag}", "rs", helper.make_node("Resize", ["x", "", "sc"], ["y"], name="rs",
                                                                       mode="linear"),
                       (1, 2, 4, 4), inits=[init("sc", np.array(scales, np.float32))], words=words))
    for tag, sizes, words in (("huge", [1, 2, BIG, BIG], "would have shape"), ("negative", [1, 2, -4, 4], "size"),
                              ("rank", [1, 2, 4], "size")):
        c.append(unary(f"resize_sizes_{tag}", "rs", helper.make_node("Resize", ["x", "", "", "sz"], ["y"], name="rs",
                                                                      mode="nearest"),
                       (1, 2, 4, 4), inits=[init("sz", np.array(sizes, np.int64))], words=words))
    c.append(unary("upsample_huge", "up", helper.make_node("Upsample", ["x", "sc"], ["y"], name="up", mode="nearest"),
                   (1, 2, 4, 4), opset=9, inits=[init("sc", np.array([1, 1, 1e30, 1e30], np.float32))], words="overflow"))
    c.append(unary("upsample_below_one", "up", helper.make_node("Upsample", ["x", "sc"], ["y"], name="up",
                                                                mode="nearest"),
                   (1, 2, 4, 4), opset=9, inits=[init("sc", np.array([1, 1, 0.5, 2], np.float32))], words="below 1"))
    # ---- LSTM / GRU / RNN --------------------------------------------------------
    for op, gates in (("LSTM", 4), ("GRU", 3), ("RNN", 1)):
        low = op.lower()
        T, N, I, H = 3, 2, 4, 5
        w, r = init("W", rnd(1, gates * H, I)), init("R", rnd(1, gates * H, H))
        c.append(unary(f"{low}_hidden_huge", "rnn", helper.make_node(op, ["x", "W", "R"], ["y"], name="rnn",
                                                                      hidden_size=BIG),
                       (T, N, I), inits=[w, r], words="hidden"))
        c.append(unary(f"{low}_hidden_zero", "rnn", helper.make_node(op, ["x", "W", "R"], ["y"], name="rnn",
                                                                      hidden_size=0),
                       (T, N, I), inits=[w, r], words="hidden"))
        c.append(unary(f"{low}_hidden_mismatch", "rnn", helper.make_node(op, ["x", "W", "R"], ["y"], name="rnn",
                                                                          hidden_size=H + 1),
                       (T, N, I), inits=[w, r], words="hidden"))
        c.append(unary(f"{low}_input_mismatch", "rnn", helper.make_node(op, ["x", "W", "R"], ["y"], name="rnn",
                                                                         hidden_size=H),
                       (T, N, I + 1), inits=[w, r], words="W"))
        # layout 1 (batch first): data is read in samples along axis 0, X's and sequence_lens'
        for tag, lens in (("past", [T + 2, 1]), ("negative", [-1, 2])):
            c.append(unary(f"{low}_seq_lens_{tag}", "rnn",
                           helper.make_node(op, ["x", "W", "R", "", "sl"], ["y"], name="rnn", hidden_size=H, layout=1),
                           (N, T, I), inits=[w, r], extra_inputs=[("sl", TensorProto.INT32, [N])],
                           data={"sl": np.array(lens, np.int32)}, words="sequence_lens", runtime=True))
        c.append(unary(f"{low}_seq_lens_shape", "rnn",
                       helper.make_node(op, ["x", "W", "R", "", "sl"], ["y"], name="rnn", hidden_size=H),
                       (T, N, I), inits=[w, r], extra_inputs=[("sl", TensorProto.INT32, [N + 1])],
                       data={"sl": np.array([1] * (N + 1), np.int32)}, words="sequence_lens"))
    for op in ("LSTM", "GRU"):
        gates = 4 if op == "LSTM" else 3
        c.append(unary(f"{op.lower()}_activation_unknown", "rnn",
                       helper.make_node(op, ["x", "W", "R"], ["y"], name="rnn", hidden_size=5,
                                        activations=["Sigmoid", "Bogus"] + (["Tanh"] if op == "LSTM" else [])),
                       (3, 2, 4), inits=[init("W", rnd(1, gates * 5, 4)), init("R", rnd(1, gates * 5, 5))],
                       words="Bogus"))
        c.append(unary(f"{op.lower()}_direction", "rnn",
                       helper.make_node(op, ["x", "W", "R"], ["y"], name="rnn", hidden_size=5, direction="sideways"),
                       (3, 2, 4), inits=[init("W", rnd(1, gates * 5, 4)), init("R", rnd(1, gates * 5, 5))],
                       words="direction"))
    # ---- ConvTranspose -----------------------------------------------------------
    wct = init("W", rnd(2, 3, 3, 3))
    for tag, attrs, words in (("kernel_mismatch", dict(kernel_shape=[5, 5]), "kernel"),
                              ("output_padding_stride", dict(strides=[1, 1], output_padding=[1, 1]), "output_padding"),
                              ("output_padding_negative", dict(strides=[2, 2], output_padding=[-1, 0]),
                               "output_padding"),
                              ("output_shape_unreachable", dict(strides=[2, 2], output_shape=[20, 20]), "output"),
                              ("groups", dict(group=3), "group"),
                              ("stride_zero", dict(strides=[0, 1]), "stride")):
        c.append(unary(f"convt_{tag}", "ct", helper.make_node("ConvTranspose", ["x", "W"], ["y"], name="ct", **attrs),
                       (1, 2, 4, 4), inits=[wct], words=words))
    for tag, attrs, words in (("dilation_zero", dict(dilations=[0, 1]), "dilation"),
                              ("pads_negative", dict(pads=[-1, 0, 0, 0]), "pad"),
                              ("kernel_rank", dict(kernel_shape=[3]), "kernel")):
        c.append(unary(f"convt_{tag}", "ct", helper.make_node("ConvTranspose", ["x", "W"], ["y"], name="ct", **attrs),
                       (1, 2, 4, 4), inits=[wct], words=words))
    c.append(unary("convt_channels", "ct", helper.make_node("ConvTranspose", ["x", "W"], ["y"], name="ct"),
                   (1, 3, 4, 4), inits=[wct], words="channel"))
    # ---- Attention ---------------------------------------------------------------
    q = rnd(1, 2, 3, 4)
    for tag, mshape in (("mask_rank", [3, 3, 3, 3, 3]), ("mask_keys", [3, 5]), ("mask_queries", [4, 3])):
        c.append(unary(f"attention_{tag}", "att",
                       helper.make_node("Attention", ["x", "k", "v", "m"], ["y"], name="att"),
                       (1, 2, 3, 4), extra_inputs=[("k", F, [1, 2, 3, 4]), ("v", F, [1, 2, 3, 4]), ("m", B, mshape)],
                       data={"k": q, "v": q, "m": np.ones(mshape, bool)}, words="mask"))
    # ---- Einsum ------------------------------------------------------------------
    for tag, eq, words in (("operands", "ij,jk->ik", "operand"), ("new_letter", "ij->ik", "k"),
                           ("bad_char", "i!j->ij", "equation"), ("rank", "ijk->ik", "rank"),
                           ("dims", "ij,ij->i", "dim"), ("empty", "", "equation"),
                           ("two_arrows", "ij->i->j", "equation")):
        inputs = ["x", "x2"] if tag == "dims" else ["x"]
        extra = [("x2", F, [3, 5])] if tag == "dims" else []
        data = {"x2": rnd(3, 5)} if tag == "dims" else {}
        c.append(unary(f"einsum_{tag}", "es", helper.make_node("Einsum", inputs, ["y"], name="es", equation=eq),
                       (3, 4), extra_inputs=extra, data=data, words=words))
    # ---- TopK, ArgMax, reductions ------------------------------------------------
    for tag, k, words in (("past_axis", 9, "K"), ("negative", -1, "K")):
        c.append(Case(f"topk_{tag}", "tk", [helper.make_node("TopK", ["x", "k"], ["y", "i"], name="tk", axis=1),
                                            with_loss("y")[0]],
                      [("x", F, [2, 4])], [init("k", np.array([k], np.int64))],
                      [with_loss("y")[1], vi("i", I64, None)], words, data={"x": rnd(2, 4)}))
    c.append(unary("topk_axis", "tk", helper.make_node("TopK", ["x", "k"], ["y", "i"], name="tk", axis=5),
                   (2, 4), inits=[init("k", np.array([1], np.int64))], words="axis"))
    c.append(unary("argmax_axis", "am", helper.make_node("ArgMax", ["x"], ["y"], name="am", axis=3), (2, 4),
                   y_elem=I64, words="axis"))
    c.append(unary("reducemax_axes", "rm", helper.make_node("ReduceMax", ["x", "ax"], ["y"], name="rm"), (2, 4),
                   inits=[init("ax", np.array([4], np.int64))], words="axis"))
    c.append(unary("reducemax_axes_repeated", "rm", helper.make_node("ReduceMax", ["x", "ax"], ["y"], name="rm"),
                   (2, 4), inits=[init("ax", np.array([1, -1], np.int64))], words="axis"))
    # ---- OneHot ------------------------------------------------------------------
    vals = init("vals", np.array([0, 1], np.float32))
    for tag, depth, words in (("zero", 0, "depth"), ("negative", -3, "depth"), ("huge", BIG, "depth")):
        n, o = with_loss("y")
        c.append(Case(f"onehot_{tag}", "oh", [helper.make_node("OneHot", ["idx", "depth", "vals"], ["y"], name="oh"),
                                              n],
                      [("idx", I64, [2, 3])], [init("depth", np.array(depth, np.int64)), vals], [o], words,
                      data={"idx": np.zeros((2, 3), np.int64)}))
    # ---- DepthToSpace / SpaceToDepth ---------------------------------------------
    for op, shape in (("DepthToSpace", (1, 6, 2, 2)), ("SpaceToDepth", (1, 2, 3, 3))):
        for tag, bs in (("not_dividing", 2), ("zero", 0), ("negative", -2), ("huge", BIG)):
            c.append(unary(f"{op.lower()}_{tag}", "d2s", helper.make_node(op, ["x"], ["y"], name="d2s", blocksize=bs),
                           shape, words="blocksize"))
    # ---- GroupNormalization / InstanceNormalization ------------------------------
    for opset in (18, 21):
        for tag, groups in (("not_dividing", 4), ("zero", 0), ("negative", -2)):
            sc = init("s", np.ones(6 if opset == 21 else groups if groups > 0 else 1, np.float32))
            bi = init("b", np.zeros(6 if opset == 21 else groups if groups > 0 else 1, np.float32))
            c.append(unary(f"groupnorm{opset}_{tag}", "gn",
                           helper.make_node("GroupNormalization", ["x", "s", "b"], ["y"], name="gn", num_groups=groups),
                           (2, 6, 3), opset=opset, inits=[sc, bi], words="group"))
        c.append(unary(f"groupnorm{opset}_scale", "gn",
                       helper.make_node("GroupNormalization", ["x", "s", "b"], ["y"], name="gn", num_groups=2),
                       (2, 6, 3), opset=opset, inits=[init("s", np.ones(5, np.float32)),
                                                      init("b", np.zeros(5, np.float32))], words="scale"))
    c.append(unary("instancenorm_scale", "in",
                   helper.make_node("InstanceNormalization", ["x", "s", "b"], ["y"], name="in"),
                   (2, 6, 3), inits=[init("s", np.ones(5, np.float32)), init("b", np.zeros(6, np.float32))],
                   words="scale"))
    # ---- activations with a parameter that divides ----------------------------
    c.append(unary("celu_alpha_zero", "ce", helper.make_node("Celu", ["x"], ["y"], name="ce", alpha=0.0), (2, 3),
                   words="alpha"))
    # ---- PRelu -------------------------------------------------------------------
    c.append(unary("prelu_slope", "pr", helper.make_node("PRelu", ["x", "sl"], ["y"], name="pr"), (2, 6, 3),
                   inits=[init("sl", np.ones(5, np.float32))], words="broadcast"))
    return c


def run(exe, args):
    try:
        p = subprocess.run([exe] + args, capture_output=True, text=True, timeout=TIMEOUT)
    except subprocess.TimeoutExpired:
        return None, f"no answer within {TIMEOUT} s (a hang)"
    return p.returncode, (p.stdout + p.stderr).strip()


def check(exe, tmp, case):
    """Returns the failures of one case (empty: it passed)."""
    d = os.path.join(tmp, case.name)
    os.makedirs(d)
    path = os.path.join(d, "model.onnx")
    onnx.save(case.model, path)
    data = []
    for k, v in case.data.items():
        np.save(os.path.join(d, k + ".npy"), v)
        data += ["--input", f"{k}={os.path.join(d, k + '.npy')}"]
    cmds = [("eval", ["eval", path, *data])]
    if not case.runtime:
        cmds.insert(0, ("info", ["info", path]))
    if case.scalar:
        cmds.append(("grad", ["grad", path, *data, "--loss", "output", "--output", "loss"]))
    bad = []
    for label, args in cmds:
        rc, out = run(exe, args)
        last = out.splitlines()[-1] if out else ""
        why = None
        if rc is None:
            why = out
        elif rc < 0:
            why = f"killed by signal {-rc} (a crash)"
        elif rc == 0:
            why = "exit 0 (a silent result)"
        elif rc not in DOCUMENTED:
            why = f"exit {rc}, not one of the documented {sorted(DOCUMENTED)}"
        elif f"node '{case.node}'" not in out:
            why = f"exit {rc}, but the message does not name node '{case.node}'"
        elif case.words.lower() not in out.lower():
            why = f"exit {rc}, but the message does not say '{case.words}'"
        status = "ok" if why is None else "FAIL"
        print(f"{status:4} {case.name:34} {label:5} exit {rc}: {last[:160]}")
        if why:
            bad.append(f"{case.name} {label}: {why}")
    return bad


def main():
    if len(sys.argv) != 3:
        print(__doc__)
        return 2
    exe, tmp = sys.argv[1], sys.argv[2]
    only = os.environ.get("CHECK_BAD_OPS_ONLY")
    shutil.rmtree(tmp, ignore_errors=True)
    os.makedirs(tmp)
    failures, n = [], 0
    for case in cases():
        if only and only not in case.name:
            continue
        n += 1
        failures += check(exe, tmp, case)
    print(f"check_bad_ops: {n} cases, {len(failures)} failures")
    for f in failures:
        print("  " + f)
    if not failures:
        shutil.rmtree(tmp, ignore_errors=True)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
