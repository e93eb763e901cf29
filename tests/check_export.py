#!/usr/bin/env python3
"""check_export.py — ONNX's own checker accepts what onnxtrain's exporter writes.

    check_export.py TEST_EXPORT_BINARY SOURCE_DIR SCRATCH_DIR

Exports every samples/*.onnx (or, when there are none, a small model built here with
onnx.helper, including an initializer stored in float_data) through
`test_export --export`, then runs onnx.checker.check_model (full_check with shape
inference) on the result and checks that the graph is unchanged and that each
initializer holds the same values as in the source.
"""
import glob
import os
import subprocess
import sys

import numpy as np
import onnx
from onnx import helper, numpy_helper, TensorProto


def built_model(path):
    w = numpy_helper.from_array(np.arange(12, dtype=np.float32).reshape(3, 4) / 7, "W")
    b = helper.make_tensor("B", TensorProto.FLOAT, [3], [0.5, -1.0, 2.0])  # float_data form
    g = helper.make_graph(
        [helper.make_node("Gemm", ["x", "W", "B"], ["h"], name="fc", transB=1),
         helper.make_node("Relu", ["h"], ["y"], name="relu")],
        "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 4])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", 3])], [w, b])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)], producer_name="check_export")
    helper.set_model_props(m, {"k": "v"})
    onnx.save(m, path)


def main():
    binary, source_dir, scratch = sys.argv[1:4]
    os.makedirs(scratch, exist_ok=True)
    models = sorted(glob.glob(os.path.join(source_dir, "samples", "*.onnx")))
    if not models:
        p = os.path.join(scratch, "built.onnx")
        built_model(p)
        models = [p]
    for src in models:
        dst = os.path.join(scratch, "exported_" + os.path.basename(src))
        subprocess.run([binary, "--export", src, dst], check=True)
        a, b = onnx.load(src), onnx.load(dst)
        onnx.checker.check_model(b, full_check=True)
        assert a.opset_import == b.opset_import, src
        assert a.metadata_props == b.metadata_props, src
        assert a.producer_name == b.producer_name and a.ir_version == b.ir_version, src
        assert list(a.graph.node) == list(b.graph.node), src
        assert list(a.graph.input) == list(b.graph.input), src
        assert list(a.graph.output) == list(b.graph.output), src
        assert len(a.graph.initializer) == len(b.graph.initializer), src
        for ta, tb in zip(a.graph.initializer, b.graph.initializer):
            assert ta.name == tb.name and ta.data_type == tb.data_type and list(ta.dims) == list(tb.dims)
            xa, xb = numpy_helper.to_array(ta), numpy_helper.to_array(tb)
            assert xa.dtype == xb.dtype and np.array_equal(xa.view(np.uint8), xb.view(np.uint8)), ta.name
            assert len(tb.raw_data) == xb.nbytes, ta.name
        print(f"{os.path.basename(src)}: exported, onnx.checker ok, {len(b.graph.initializer)} initializers equal")
        os.remove(dst)


if __name__ == "__main__":
    main()
