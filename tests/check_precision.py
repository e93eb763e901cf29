#!/usr/bin/env python3
"""check_precision.py — `--precision` end to end through the CLI on the samples:
`info --precision` lists every MatMul/Gemm/Conv as low or as a fallback (and agrees
with its own counts, in text and JSON); `plan --precision bf16 --json` splits the
kept and transient bytes by dtype and the split adds up to the categories; `verify
--precision bf16|fp16` is bitwise under a recomputing policy (exit 0); `train
--precision fp16` writes a tuned model that onnx's checker loads with the original
dtypes; `grad --precision` gives a finite loss; bad values exit 2 naming the option;
the conv-net samples run every node in bf16 and verify bitwise under every policy.
fp16 loss scaling: skipped steps in the progress line, the summary and the report,
`--resume` from a checkpoint between skips and growths bitwise the uninterrupted run,
refused with --fuse-update (exit 2), and a NaN in the forward pass still names its node
(exit 10).

    check_precision.py ONNXTRAIN_BINARY SOURCE_DIR SCRATCH_DIR
"""
import json
import os
import subprocess
import sys

import onnx


def run(binary, *args):
    return subprocess.run([binary, *args], capture_output=True, text=True)


def check_loss_scale(binary, gpt, data, scratch):
    # a scale that overflows float16 at first, then halves and grows every 2 clean steps
    ls = ["--precision", "fp16", "--batch-size", "4", "--steps", "12", "--threads", "1", "--loss-scale-init",
          "131072", "--loss-scale-growth-interval", "2"]
    full, res = os.path.join(scratch, "ls_full.onnx"), os.path.join(scratch, "ls_res.onnx")
    rep, ck = os.path.join(scratch, "ls.json"), os.path.join(scratch, "ls_ckpt")
    p = run(binary, "train", gpt, *data, *ls, "-o", full, "--report", rep)
    assert p.returncode == 0, p.stderr
    assert "  scale " in p.stderr and " skipped " in p.stderr, p.stderr
    doc = json.load(open(rep))["loss_scale"]
    assert doc["skipped_steps"] >= 1, doc
    assert "loss scaling: %d step" % doc["skipped_steps"] in p.stderr, p.stderr
    p = run(binary, "train", gpt, *data, *ls, "-o", os.path.join(scratch, "ls_part.onnx"), "--checkpoint-dir", ck,
            "--checkpoint-every", "5")
    assert p.returncode == 0, p.stderr
    p = run(binary, "train", gpt, *data, *ls, "-o", res, "--resume", os.path.join(ck, "ckpt-5.otc"))
    assert p.returncode == 0, p.stderr
    assert open(full, "rb").read() == open(res, "rb").read(), "--resume with loss scaling is not bitwise"
    # a checkpoint with the scaler's state does not resume without loss scaling
    p = run(binary, "train", gpt, *data, *ls, "--loss-scale", "off", "-o", res, "--resume",
            os.path.join(ck, "ckpt-5.otc"))
    assert p.returncode == 5 and "--loss-scale" in p.stderr, (p.returncode, p.stderr)
    p = run(binary, "train", gpt, *data, "--precision", "fp16", "--steps", "1", "--fuse-update", "-o", res)
    assert p.returncode == 2 and "--loss-scale off" in p.stderr, (p.returncode, p.stderr)
    p = run(binary, "train", gpt, *data, "--precision", "fp16", "--loss-scale", "sometimes", "-o", res)
    assert p.returncode == 2 and "sometimes" in p.stderr, (p.returncode, p.stderr)
    # a NaN that is no overflow: parameters blown up by a huge step name the node (exit 10)
    p = run(binary, "train", gpt, *data, "--precision", "fp16", "--steps", "4", "--batch-size", "4",
            "--optimizer", "sgd", "--lr", "1e30", "-o", res)
    assert p.returncode == 10 and "node '" in p.stderr, (p.returncode, p.stderr)


def check_conv_nets(binary, s):
    """Conv nets in bf16 (issue 27 part 4): every node of ResNet's and MobileNet's
    samples runs low on the CPU (Conv, BatchNormalization, Relu, the pools, the
    residual Add; no float32-list or fallback node but MobileNet's Clip), and `verify --precision bf16` is
    bitwise under every recomputing policy on 1 and 2 threads (the bf16 convolutions
    are oneDNN's, one kept primitive per node)."""
    for m in ("resnet", "mobilenet"):
        model = os.path.join(s, m + ".onnx")
        data = ["--input", os.path.join(s, "data", m + "_x.npy"), "--labels", os.path.join(s, "data", m + "_labels.npy")]
        p = run(binary, "info", model, "--precision", "bf16", "--json")
        assert p.returncode == 0, p.stderr
        info = json.loads(p.stdout)["precision"]
        # MobileNet's ReLU6 (Clip with scalar bounds) has no bf16 kernel yet: the one fallback
        fallback = [n for n in info["fallback"] if not (m == "mobilenet" and "Clip" in n)]
        assert not info["float32_list"] and not fallback and not info["promoted"], (m, info)
        kinds = {n.op_type for n in onnx.load(model).graph.node if n.name in info["low"]}
        assert {"Conv", "BatchNormalization"} <= kinds, (m, kinds)
        for pol in ("all", "sqrt", "selective", "auto"):
            for t in ("1", "2"):
                p = run(binary, "verify", model, *data, "--precision", "bf16", "--remat", pol, "--threads", t,
                        "--time-steps", "1")
                assert p.returncode == 0 and "bitwise equal" in p.stdout, (m, pol, t, p.stdout, p.stderr)


def main():
    binary, src, scratch = sys.argv[1:4]
    os.makedirs(scratch, exist_ok=True)
    s = os.path.join(src, "samples")
    gpt = os.path.join(s, "tinygpt.onnx")
    data = ["--input", os.path.join(s, "data", "tinygpt_tokens.npy"), "--labels",
            os.path.join(s, "data", "tinygpt_labels.npy")]

    # info: every low-list node is listed once, as low or as a fallback
    p = run(binary, "info", gpt, "--precision", "bf16", "--json")
    assert p.returncode == 0, p.stderr
    info = json.loads(p.stdout)["precision"]
    heavy = sum(1 for n in onnx.load(gpt).graph.node if n.op_type in ("MatMul", "Gemm", "Conv"))
    listed = [n for n in info["low"] + info["fallback"]]
    assert len(listed) >= heavy, (len(listed), heavy)
    p = run(binary, "info", gpt, "--precision", "bf16")
    assert p.returncode == 0 and "precision bf16 on the CPU" in p.stdout, p.stdout

    # plan: the by-dtype split adds up to the categories at the peak
    p = run(binary, "plan", gpt, *data, "--precision", "bf16", "--remat", "none", "--json", "--batch-size", "4")
    assert p.returncode == 0, p.stderr
    doc = json.loads(p.stdout)
    plans = doc["plans"] if isinstance(doc, dict) and "plans" in doc else doc
    plans = plans if isinstance(plans, list) else [plans]
    for pl in plans:
        by = pl["bytes_by_dtype"]
        for cat in ("kept_activations", "transient"):
            assert sum(by[cat].values()) == pl["plan"]["at_peak"][cat], (cat, by, pl["plan"]["at_peak"])
    p = run(binary, "plan", gpt, *data, "--precision", "bf16", "--remat", "none", "--batch-size", "4")
    assert "by precision: kept_activations float32" in p.stdout, p.stdout

    # verify: bitwise under a recomputing policy in both low precisions
    for prec in ("bf16", "fp16"):
        p = run(binary, "verify", gpt, *data, "--precision", prec, "--remat", "all", "--batch-size", "4")
        assert p.returncode == 0, (prec, p.stdout, p.stderr)

    # train: the tuned model keeps the model's dtypes
    out = os.path.join(scratch, "tuned.onnx")
    p = run(binary, "train", gpt, *data, "--precision", "fp16", "--steps", "2", "--batch-size", "4", "-o", out)
    assert p.returncode == 0, p.stderr
    m = onnx.load(out)
    onnx.checker.check_model(m)
    orig = {t.name: t.data_type for t in onnx.load(gpt).graph.initializer}
    assert {t.name: t.data_type for t in m.graph.initializer} == orig

    p = run(binary, "grad", gpt, *data, "--precision", "bf16", "--batch-size", "4", "--json")
    assert p.returncode == 0, p.stderr

    # bad values: exit 2, the option and the value named
    for cmd in (["train", gpt, *data], ["plan", gpt], ["info", gpt], ["eval", gpt, "--input", data[1]]):
        p = run(binary, *cmd, "--precision", "int8")
        assert p.returncode == 2 and "--precision" in p.stderr and "int8" in p.stderr, (cmd, p.returncode, p.stderr)
    check_loss_scale(binary, gpt, data, scratch)
    check_conv_nets(binary, s)
    print("check_precision: ok")
    return 0


if __name__ == "__main__":
    sys.exit(main())
