#!/usr/bin/env python3
"""check_external_out.py — `onnxtrain train --external-data` writes the tuned model with
external data as the source laid it out, confined to the output's folder, atomically,
and loadable by onnx.checker.

    check_external_out.py ONNXTRAIN SCRATCH_DIR

For three sources built here (no external data; one data file; a file per tensor) it
trains two steps with and without --external-data and checks that
- the data files are the ones expected (MODEL.onnx.data, or MODEL.onnx.<tensor>.data
  per tensor), every location is a bare file name in the output's folder, offsets are
  4 KiB aligned, and no temporary file is left;
- onnx.checker.check_model(path) accepts the model, and onnx.load with its data gives
  exactly the initializers of the inline tuned model (same bytes), the graph unchanged;
- a failure while renaming the data files into place (a folder planted at one data
  file's name) leaves no model, no data file and no temporary file behind;
- writing over an existing model with data files gives a new, whole pair.
"""
import glob
import os
import shutil
import subprocess
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

D = 16


def build(path, layout):
    rng = np.random.default_rng(0)
    inits = [numpy_helper.from_array(rng.standard_normal((D, D)).astype(np.float32) / 4, f"layer/{i}.weight")
             for i in range(3)]
    inits.append(numpy_helper.from_array(np.full([D], 0.1, np.float32), "bias"))  # 64 bytes: stays inline
    nodes = [helper.make_node("MatMul", ["x", "layer/0.weight"], ["h0"], name="mm0"),
             helper.make_node("Relu", ["h0"], ["r0"], name="relu0"),
             helper.make_node("MatMul", ["r0", "layer/1.weight"], ["h1"], name="mm1"),
             helper.make_node("Add", ["h1", "bias"], ["a1"], name="add1"),
             helper.make_node("MatMul", ["a1", "layer/2.weight"], ["y"], name="mm2")]
    g = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", D])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", D])], inits)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)], producer_name="check_external_out")
    if layout == "none":
        onnx.save(m, path)
    else:
        onnx.save_model(m, path, save_as_external_data=True, all_tensors_to_one_file=(layout == "one"),
                        location=os.path.basename(path) + ".src.data" if layout == "one" else None,
                        size_threshold=1024)


def train(binary, src, out, data, extra=(), expect_ok=True):
    cmd = [binary, "train", src, "--input", data[0], "--labels", data[1], "--loss", "mse", "--steps", "2",
           "--batch-size", "4", "--quiet", "-o", out] + list(extra)
    r = subprocess.run(cmd, capture_output=True, text=True)
    if expect_ok and r.returncode != 0:
        sys.exit(f"FAIL: {' '.join(cmd)} exited {r.returncode}: {r.stderr}")
    if not expect_ok and r.returncode == 0:
        sys.exit(f"FAIL: {' '.join(cmd)} succeeded, expected a failure")
    return r


def locations(path):
    m = onnx.load(path, load_external_data=False)
    locs = {}
    for t in m.graph.initializer:
        if t.data_location == TensorProto.EXTERNAL:
            kv = {e.key: e.value for e in t.external_data}
            loc = kv["location"]
            if "/" in loc or loc.startswith(".") or ".." in loc.split("/"):
                sys.exit(f"FAIL: {path}: location {loc!r} is not a bare file name")
            if int(kv["offset"]) % 4096:
                sys.exit(f"FAIL: {path}: {t.name} at offset {kv['offset']}, not 4 KiB aligned")
            locs[t.name] = loc
    return locs


def no_temporaries(folder):
    left = glob.glob(os.path.join(folder, "*.tmp-*"))
    if left:
        sys.exit(f"FAIL: temporary files left behind: {left}")


def check_layout(binary, work, layout, data):
    src = os.path.join(work, "src", f"{layout}.onnx")
    os.makedirs(os.path.dirname(src), exist_ok=True)
    build(src, layout)
    out_dir = os.path.join(work, f"out_{layout}")
    os.makedirs(out_dir, exist_ok=True)
    inline, ext = os.path.join(out_dir, "inline.onnx"), os.path.join(out_dir, "tuned.onnx")
    train(binary, src, inline, data)
    train(binary, src, ext, data, ["--external-data"])
    locs = locations(ext)
    weights = [f"layer/{i}.weight" for i in range(3)]
    if sorted(locs) != weights:
        sys.exit(f"FAIL: {layout}: external initializers {sorted(locs)}, expected {weights}")
    if layout == "many":
        want = {w: "tuned.onnx." + w.replace("/", "_") + ".data" for w in weights}
    else:
        want = {w: "tuned.onnx.data" for w in weights}
    if locs != want:
        sys.exit(f"FAIL: {layout}: locations {locs}, expected {want}")
    files = sorted(os.listdir(out_dir))
    expect = sorted({"inline.onnx", "tuned.onnx"} | set(want.values()))
    if files != expect:
        sys.exit(f"FAIL: {layout}: the output folder holds {files}, expected {expect}")
    no_temporaries(out_dir)
    onnx.checker.check_model(ext)  # by path: the checker follows the external data
    a, b = onnx.load(inline), onnx.load(ext)
    if [n.SerializeToString() for n in a.graph.node] != [n.SerializeToString() for n in b.graph.node]:
        sys.exit(f"FAIL: {layout}: the graph changed")
    for ta, tb in zip(a.graph.initializer, b.graph.initializer):
        if numpy_helper.to_array(ta).tobytes() != numpy_helper.to_array(tb).tobytes():
            sys.exit(f"FAIL: {layout}: {ta.name} differs between the inline and the external tuned model")
    src_w = {t.name: numpy_helper.to_array(t).tobytes() for t in onnx.load(src).graph.initializer}
    if all(numpy_helper.to_array(t).tobytes() == src_w[t.name] for t in b.graph.initializer if t.name in locs):
        sys.exit(f"FAIL: {layout}: training left the weights unchanged; the comparison shows nothing")
    return src, out_dir, want


def check_failure(binary, src, work, layout, want, data):
    """A folder planted at the last data file's name: its rename fails after the others."""
    out_dir = os.path.join(work, f"fail_{layout}")
    os.makedirs(out_dir, exist_ok=True)
    names = sorted(set(want.values()))
    os.makedirs(os.path.join(out_dir, names[-1]))
    r = train(binary, src, os.path.join(out_dir, "tuned.onnx"), data, ["--external-data"], expect_ok=False)
    if "tuned.onnx" not in r.stderr:
        sys.exit(f"FAIL: {layout}: the failure message does not name the output: {r.stderr}")
    left = sorted(os.listdir(out_dir))
    if left != [names[-1]]:
        sys.exit(f"FAIL: {layout}: after a failed write the folder holds {left}, expected only {names[-1]}/")


def check_replace(binary, src, out_dir, data):
    """Writing over an existing external model gives a new model whose data checks out."""
    ext = os.path.join(out_dir, "tuned.onnx")
    before = os.stat(ext).st_ino
    train(binary, src, ext, data, ["--external-data", "--lr", "0.5"])
    if os.stat(ext).st_ino == before:
        sys.exit("FAIL: the model was not replaced")
    onnx.checker.check_model(ext)
    no_temporaries(out_dir)


def main():
    binary, work = sys.argv[1:3]
    shutil.rmtree(work, ignore_errors=True)
    os.makedirs(work)
    rng = np.random.default_rng(1)
    data = (os.path.join(work, "x.npy"), os.path.join(work, "y.npy"))
    np.save(data[0], rng.standard_normal((8, D)).astype(np.float32))
    np.save(data[1], rng.standard_normal((8, D)).astype(np.float32))
    for layout in ("none", "one", "many"):
        src, out_dir, want = check_layout(binary, work, layout, data)
        check_failure(binary, src, work, layout, want, data)
        if layout == "many":
            check_replace(binary, src, out_dir, data)
        print(f"ok: {layout}: {sorted(set(want.values()))}")
    print("check_external_out: all checks passed")


if __name__ == "__main__":
    main()
