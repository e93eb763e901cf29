#!/usr/bin/env python3
"""check_info.py — `onnxtrain info` end to end on models built with onnx.helper:
text and --json output (dtypes, symbolic dims, parameter/state counts, op histogram),
exit code 6 with every unsupported op and all its nodes listed, error exit codes.

    check_info.py ONNXTRAIN_BINARY SCRATCH_DIR
"""
import json
import os
import subprocess
import sys

import numpy as np
import onnx
from onnx import helper, numpy_helper, TensorProto


def run(binary, *args):
    p = subprocess.run([binary, "info", *args], capture_output=True, text=True)
    return p.returncode, p.stdout, p.stderr


def main():
    binary, scratch = sys.argv[1:3]
    os.makedirs(scratch, exist_ok=True)
    f32 = lambda name, shape: numpy_helper.from_array(np.ones(shape, np.float32), name)
    inits = [f32("W", (3, 4)), f32("B", (3,)), f32("s", (3,)), f32("b", (3,)), f32("rm", (3,)), f32("rv", (3,))]
    nodes = [
        helper.make_node("Gemm", ["x", "W", "B"], ["h"], name="fc", transB=1),
        helper.make_node("Unsqueeze", ["h", "ax"], ["h3"], name="u"),
        helper.make_node("Constant", [], ["ax"], name="c", value=numpy_helper.from_array(np.array([2], np.int64))),
        helper.make_node("BatchNormalization", ["h3", "s", "b", "rm", "rv"], ["y3"], name="bn"),
        helper.make_node("Relu", ["y3"], ["r1"], name="relu1"),
        helper.make_node("Relu", ["r1"], ["y"], name="relu2"),
    ]
    g = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 4])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], inits)
    good = os.path.join(scratch, "good.onnx")
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 15)], producer_name="check_info"), good)

    rc, out, err = run(binary, good)
    assert rc == 0, (rc, out, err)
    assert "x" in out and "[batch,4]" in out and "check_info" in out, out
    rc, out, err = run(binary, "--json", good)
    assert rc == 0, (rc, err)
    j = json.loads(out)
    assert j["opset"] == 15 and j["producer"]["name"] == "check_info"
    assert j["inputs"] == [{"name": "x", "dtype": "float32", "shape": ["batch", 4]}], j["inputs"]
    assert j["parameters"] == {"tensors": 4, "count": 12 + 3 + 3 + 3, "bytes": 4 * 21}, j["parameters"]
    assert j["state"] == {"tensors": 2, "count": 6, "bytes": 24}, j["state"]
    assert j["ops"][0] == {"op": "Relu", "count": 2}, j["ops"]  # sorted by count
    assert {o["op"] for o in j["ops"]} == {"Relu", "Gemm", "Unsqueeze", "BatchNormalization"}, j["ops"]
    assert j["unsupported"] == []
    rc, out, err = run(binary, "--dump", "text", good)
    assert rc == 0 and "BatchNormalization" in out, (rc, out, err)
    rc, out, err = run(binary, "--dump", "dot", good)
    assert rc == 0 and "digraph" in out, (rc, out, err)

    bad_nodes = [
        helper.make_node("NonZero", ["x"], ["a"], name="nz_0"),
        helper.make_node("Relu", ["x"], ["r"], name="ok"),
        helper.make_node("NonZero", ["r"], ["b"], name="nz_3"),
        helper.make_node("Unique", ["x"], ["c"], name="uniq"),
    ]
    g = helper.make_graph(bad_nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [4])],
                          [helper.make_tensor_value_info(n, TensorProto.FLOAT, None) for n in "abc"])
    bad = os.path.join(scratch, "unsupported.onnx")
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]), bad)
    rc, out, err = run(binary, bad)
    assert rc == 6, (rc, out, err)
    assert "'nz_0', 'nz_3'" in out and "'uniq'" in out and "Relu" in out, out
    assert "onnxtrain: " in err and "2 unsupported ops: NonZero (nodes 'nz_0', 'nz_3'), Unique (node 'uniq')" in err, err
    rc, out, err = run(binary, "--json", bad)
    assert rc == 6
    j = json.loads(out)
    assert [u["op"] for u in j["unsupported"]] == ["NonZero", "Unique"]
    assert j["unsupported"][0]["nodes"] == ["nz_0", "nz_3"]

    rc, out, err = run(binary, os.path.join(scratch, "missing.onnx"))
    assert rc == 3 and err.startswith("onnxtrain: ") and "missing.onnx" in err, (rc, err)
    junk = os.path.join(scratch, "junk.onnx")
    open(junk, "wb").write(b"\xff" * 64)
    rc, out, err = run(binary, junk)
    assert rc == 4 and "not an ONNX model" in err, (rc, err)
    rc, out, err = run(binary)
    assert rc == 2, rc
    rc, out, err = run(binary, "--dump", "svg", good)
    assert rc == 2, rc
    rc, out, err = run(binary, "--help")
    assert rc == 0 and "usage" in out
    print("onnxtrain info: ok")


if __name__ == "__main__":
    main()
