#!/usr/bin/env python3
"""peers_ort.py — the ONNX Runtime training side of bench/peers.py (issue 14).

    ORT_PY bench/peers_ort.py prepare --dir DIR
    ORT_PY bench/peers_ort.py train   --dir DIR --steps N --warmup W --threads T --result R.json
                                      [--no-spinning]
    ORT_PY bench/peers_ort.py sgemm   --threads T [--no-spinning]

ORT_PY is the venv bench/setup_peers.sh makes (onnxruntime-training-cpu 1.19.2, onnx 1.16.2,
numpy<2, protobuf<5; no torch). DIR is a case folder written by peers_torch.py export.

prepare adapts DIR/model.onnx to ORT's artifact generator and writes its artifacts
(training, eval and optimizer models, checkpoint) to DIR/ort/. Two adaptations, both
outside the measured graph's arithmetic:
- LayerNormalization: the TorchScript exporter writes only its first output; ORT's
  gradient builder reads the optional Mean and InvStdDev outputs (LayerNormalizationGrad
  takes them), and refuses the node without them. They are added under new names.
- cross-entropy over [B, T, V] logits: ORT's CrossEntropyLoss block is
  SoftmaxCrossEntropyLoss, whose class axis is 1; onnxtrain and PyTorch take the last
  axis. The model gets a Reshape to [B*T, V] after its output, and the labels are fed
  flattened to [B*T]: the same mean over the same B*T terms.
Trained parameters: exactly the ones PyTorch trains (case.json "params"); BatchNorm
running statistics and other initializers stay constants (ORT's BatchNormalization in
training mode updates its running statistics as outputs of the training graph).
Optimizer: ORT's SGD block (SGDOptimizerV2: w -= lr * g), lr from case.json.

train runs W + N steps of module(x, y) (forward, loss, backward), optimizer.step() and
module.lazy_reset_grad() on the case's one batch and writes the wall time of each step,
the process's CPU time over the N measured steps (process_time: all threads) and the
losses. --no-spinning sets session.intra_op.allow_spinning=0 (peers.py passes it when
OMP_WAIT_POLICY is passive, so that ORT's thread pool waits as the OpenMP workers of the
other two do).

sgemm prints ORT's own 1024^3 float32 MatMul rate (MLAS) as JSON: a second reference
beside numpy's OpenBLAS sgemm, since ORT's GEMMs are not OpenBLAS's.
"""
import argparse
import json
import os
import sys
import time
import types

import numpy as np
import onnx
from onnx import TensorProto, helper

import onnxruntime

onnxruntime.set_default_logger_severity(3)  # errors only: its info and warning lines would fill the logs


def import_training():
    """onnxruntime.training.artifacts and .api without running the package's __init__,
    which imports torch (for ORTModule and amp); this venv has no torch on purpose."""
    pkg = types.ModuleType("onnxruntime.training")
    pkg.__path__ = [os.path.join(os.path.dirname(onnxruntime.__file__), "training")]
    sys.modules.setdefault("onnxruntime.training", pkg)
    import onnxruntime.training.api as api  # noqa: PLC0415
    import onnxruntime.training.artifacts as artifacts  # noqa: PLC0415
    return artifacts, api


def add_layernorm_outputs(model):
    """Gives every LayerNormalization its Mean and InvStdDev outputs; returns how many."""
    n = 0
    for i, node in enumerate(model.graph.node):
        if node.op_type == "LayerNormalization" and len(node.output) == 1:
            base = node.name or f"layernorm_{i}"
            node.output.extend([f"{base}/ort_mean", f"{base}/ort_inv_std_dev"])
            n += 1
    return n


def flatten_logits(model, meta):
    """For cross-entropy over rank >= 3 logits: Reshape the output to [-1, classes]."""
    if meta["loss"] != "cross-entropy" or len(meta["output_shape"]) <= 2:
        return False
    g = model.graph
    out = g.output[0]
    classes = meta["output_shape"][-1]
    shape_name = "ort_flatten_logits_shape"
    g.initializer.append(helper.make_tensor(shape_name, TensorProto.INT64, [2], [-1, classes]))
    flat = out.name + "_flat"
    g.node.append(helper.make_node("Reshape", [out.name, shape_name], [flat], name="ort_flatten_logits"))
    rows = int(np.prod(meta["output_shape"][:-1]))
    new_out = helper.make_tensor_value_info(flat, out.type.tensor_type.elem_type, [rows, classes])
    g.output.remove(out)
    g.output.append(new_out)
    return True


def prepare(args):
    artifacts, _ = import_training()
    args.dir = os.path.abspath(args.dir)
    with open(os.path.join(args.dir, "case.json")) as f:
        meta = json.load(f)
    model = onnx.load(os.path.join(args.dir, "model.onnx"))
    n_ln = add_layernorm_outputs(model)
    flat = flatten_logits(model, meta)
    loss = artifacts.LossType.MSELoss if meta["loss"] == "mse" else artifacts.LossType.CrossEntropyLoss
    out = os.path.join(args.dir, "ort")
    os.makedirs(out, exist_ok=True)
    # The model goes in as a ModelProto: given a path (its way for models over 2 GB, which
    # none of the cases is), 1.19.2 re-saves the model as external data to temp.onnx in the
    # working folder after each block, and a nested loss block (MSELoss: Sub, Pow,
    # ReduceMean) deletes that data while the outer block still points at it.
    if model.ByteSize() >= 2**31:
        sys.exit(f"peers_ort: {args.dir}/model.onnx is over 2 GB; this script passes models by value")
    t0 = time.perf_counter()
    os.chdir(out)  # where anything the generator writes by relative name lands
    artifacts.generate_artifacts(model, requires_grad=meta["params"], frozen_params=[], loss=loss,
                                 optimizer=artifacts.OptimType.SGD, artifact_directory=out)
    info = {"layernorm_outputs_added": n_ln, "logits_flattened": flat, "generate_seconds": time.perf_counter() - t0,
            "onnxruntime": onnxruntime.__version__, "onnx": onnx.__version__}
    with open(os.path.join(out, "prepared.json"), "w") as f:
        json.dump(info, f)
    print(json.dumps(info))
    return 0


def train(args):
    _, api = import_training()
    with open(os.path.join(args.dir, "case.json")) as f:
        meta = json.load(f)
    out = os.path.join(args.dir, "ort")
    with open(os.path.join(out, "prepared.json")) as f:
        prep = json.load(f)
    so = onnxruntime.SessionOptions()
    so.intra_op_num_threads = args.threads
    so.inter_op_num_threads = 1
    so.log_severity_level = 3
    if args.no_spinning:
        so.add_session_config_entry("session.intra_op.allow_spinning", "0")
    state = api.CheckpointState.load_checkpoint(os.path.join(out, "checkpoint"))
    # No eval model: it is only for module.eval(), and 1.19.2 writes BatchNormalization into
    # it with training_mode=0 but the three outputs of training mode, which it then refuses
    # to load ("number of op outputs should be 1 when Training_mode = False").
    module = api.Module(os.path.join(out, "training_model.onnx"), state, None, device="cpu", session_options=so)
    opt = api.Optimizer(os.path.join(out, "optimizer_model.onnx"), module)
    opt.set_learning_rate(meta["lr"])
    module.train()
    x = np.load(os.path.join(args.dir, "x.npy"))
    y = np.load(os.path.join(args.dir, "y.npy"))
    if prep["logits_flattened"]:
        y = y.reshape(-1)
    times, losses, cpu0 = [], [], None
    for s in range(args.warmup + args.steps):
        if s == args.warmup:
            cpu0 = time.process_time()
        t0 = time.perf_counter()
        loss = module(x, y)
        opt.step()
        module.lazy_reset_grad()
        times.append(time.perf_counter() - t0)
        losses.append(float(loss))
    cpu = (time.process_time() - cpu0) / args.steps
    with open(args.result, "w") as f:
        json.dump({"step_seconds": times[args.warmup:], "cpu_seconds_per_step": cpu, "loss": losses,
                   "onnxruntime": onnxruntime.__version__}, f)
    return 0


def sgemm(args):
    """ORT's own float32 MatMul (MLAS) on 1024^3 at T intra-op threads: the median and
    the best rate over ~1 s of calls, as peers.py measures numpy's OpenBLAS sgemm."""
    n = 1024
    graph = helper.make_graph([helper.make_node("MatMul", ["a", "b"], ["c"])], "sgemm",
                              [helper.make_tensor_value_info(k, TensorProto.FLOAT, [n, n]) for k in ("a", "b")],
                              [helper.make_tensor_value_info("c", TensorProto.FLOAT, [n, n])])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    so = onnxruntime.SessionOptions()
    so.intra_op_num_threads = args.threads
    if args.no_spinning:
        so.add_session_config_entry("session.intra_op.allow_spinning", "0")
    sess = onnxruntime.InferenceSession(model.SerializeToString(), so, providers=["CPUExecutionProvider"])
    rng = np.random.default_rng(0)
    feed = {k: rng.standard_normal((n, n), dtype=np.float32) for k in ("a", "b")}
    sess.run(None, feed)
    ts, t_end = [], time.perf_counter() + 1.0
    while time.perf_counter() < t_end or len(ts) < 5:
        t0 = time.perf_counter()
        sess.run(None, feed)
        ts.append(time.perf_counter() - t0)
    ts.sort()
    print(json.dumps({"gflops": 2 * n ** 3 / ts[len(ts) // 2] / 1e9, "best": 2 * n ** 3 / ts[0] / 1e9}))
    return 0


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("command", choices=["prepare", "train", "sgemm"])
    ap.add_argument("--dir")
    ap.add_argument("--steps", type=int, default=3)
    ap.add_argument("--warmup", type=int, default=1)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--no-spinning", action="store_true")
    ap.add_argument("--result")
    args = ap.parse_args()
    if args.command == "sgemm":
        return sgemm(args)
    if not args.dir:
        ap.error(f"{args.command} needs --dir")
    if args.command == "prepare":
        return prepare(args)
    if not args.result:
        ap.error("train needs --result")
    return train(args)


if __name__ == "__main__":
    sys.exit(main())
