#!/usr/bin/env python3
"""check_samples.py — checks each exported sample against its forward fixtures with
ONNX's own reference evaluator (onnx >= 1.13, e.g. pip's onnx 1.17 under `python3`),
an implementation independent of both PyTorch and onnxtrain:

    python3 samples/check_samples.py

For tinygpt the fixtures were computed with dropout off, so tinygpt_nodrop.onnx is the
one evaluated. BatchNormalization runs in training mode (batch statistics).
"""
import json
import os
import sys

import numpy as np
from onnx.reference import ReferenceEvaluator

HERE = os.path.dirname(os.path.abspath(__file__))


def main():
    failed = 0
    for name in ("mlp", "resnet", "mobilenet", "tinygpt", "chain48"):
        d = os.path.join(HERE, name)
        meta = json.load(open(os.path.join(d, "meta.json")))
        model = f"{name}_nodrop.onnx" if os.path.exists(os.path.join(HERE, f"{name}_nodrop.onnx")) else f"{name}.onnx"
        sess = ReferenceEvaluator(os.path.join(HERE, model))
        x = np.load(os.path.join(d, "input.npy"))
        for n in meta["batches"]:
            want = np.load(os.path.join(d, f"output_b{n}.npy"))
            got = sess.run(None, {meta["input"]: x[:n]})[0]
            err = float(np.max(np.abs(got - want)))
            ok = got.shape == want.shape and np.allclose(got, want, rtol=1e-4, atol=1e-5)
            failed += not ok
            print(f"{'ok  ' if ok else 'FAIL'} {model} batch {n}: max abs err {err:.2e}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
