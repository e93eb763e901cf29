#!/usr/bin/env python3
"""ort_drop_in.py — issue 29's acceptance comparison: ONNX Runtime's on-device training
loop run once with onnxruntime-training 1.19.2 and once with onnxtrain.training, the
loop's code the same but for the import, on an MLP (samples/mlp.onnx, cross-entropy)
and a small GPT (samples/tinygpt_nodrop.onnx, its logits transposed to [batch, vocab,
seq] because ONNX Runtime's CrossEntropyLoss, ONNX's SoftmaxCrossEntropyLoss, takes the
classes on axis 1). Each case: generate_artifacts (AdamW), CheckpointState, Module,
Optimizer, LinearLRScheduler, 20 steps, eval, export_model_for_inferencing, a
save/load round trip of the checkpoint. The two loss curves must agree within float32
rounding (max relative difference <= --rtol, default 1e-5).

    python3 bench/ort_drop_in.py [--ort-python VENV/bin/python] [--json OUT]

The ONNX Runtime side runs in the venv bench/setup_peers.sh makes ($OT_ORT_VENV, else
/work/venvs/ort); the onnxtrain side in this interpreter, with the package from python/
and the library of build/ (or $ONNXTRAIN_LIBRARY). Exit status: 0 agree, 1 differ,
77 no ONNX Runtime venv (ctest: skipped).
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
STEPS = 20

# The loop, as ONNX Runtime's on-device training tutorial writes it; FRAMEWORK picks the
# import, and nothing else differs.
LOOP = r'''
import json, os, sys
import numpy as np
import onnx
FRAMEWORK, case, out = sys.argv[1], json.loads(sys.argv[2]), sys.argv[3]
if FRAMEWORK == "ort":
    import types, onnxruntime  # the package __init__ wants torch: import the two modules alone
    pkg = types.ModuleType("onnxruntime.training")
    pkg.__path__ = [os.path.join(os.path.dirname(onnxruntime.__file__), "training")]
    sys.modules["onnxruntime.training"] = pkg
    onnxruntime.set_default_logger_severity(3)
    from onnxruntime.training import artifacts
    from onnxruntime.training.api import CheckpointState, Module, Optimizer, LinearLRScheduler
else:
    from onnxtrain.training import artifacts
    from onnxtrain.training.api import CheckpointState, Module, Optimizer, LinearLRScheduler

onnx_model = onnx.load(case["model"])
params = [i.name for i in onnx_model.graph.initializer]
frozen = case["frozen"]
requires_grad = [p for p in params if p not in frozen]
art = os.path.join(out, "artifacts")
os.makedirs(art, exist_ok=True)
artifacts.generate_artifacts(onnx_model, requires_grad=requires_grad, frozen_params=frozen,
                             loss=artifacts.LossType.CrossEntropyLoss, optimizer=artifacts.OptimType.AdamW,
                             artifact_directory=art)
state = CheckpointState.load_checkpoint(os.path.join(art, "checkpoint"))
model = Module(os.path.join(art, "training_model.onnx"), state, os.path.join(art, "eval_model.onnx"))
optimizer = Optimizer(os.path.join(art, "optimizer_model.onnx"), model)
scheduler = LinearLRScheduler(optimizer, 5, case["steps"], case["lr"])
x, y = np.load(case["x"]), np.load(case["y"])
B = case["batch"]
losses, lrs = [], []
for step in range(case["steps"]):
    model.train()
    loss = model(x[step * B:(step + 1) * B], y[step * B:(step + 1) * B])
    optimizer.step()
    scheduler.step()
    model.lazy_reset_grad()
    losses.append(float(loss))
    lrs.append(optimizer.get_learning_rate())
model.eval()
eval_loss = float(model(x[-B:], y[-B:]))
model.export_model_for_inferencing(os.path.join(out, "inference.onnx"), [case["output"]])
CheckpointState.save_checkpoint(state, os.path.join(out, "ckpt"), include_optimizer_state=True)
back = CheckpointState.load_checkpoint(os.path.join(out, "ckpt"))
same = all(np.array_equal(back.parameters[n].data, state.parameters[n].data) for n in requires_grad)
inf = onnx.load(os.path.join(out, "inference.onnx"))
print(json.dumps({"loss": losses, "lr": lrs, "eval_loss": eval_loss, "checkpoint_round_trip": same,
                  "inference_outputs": [o.name for o in inf.graph.output]}))
'''


def gpt_model(tmp):
    """tinygpt_nodrop with its logits [B, T, V] transposed to [B, V, T] (classes on axis 1)
    and its LayerNormalization nodes' optional outputs named."""
    import onnx
    from onnx import helper
    m = onnx.load(os.path.join(ROOT, "samples", "tinygpt_nodrop.onnx"))
    out = m.graph.output[0]
    # ONNX Runtime's LayerNormalization gradient reads the optional Mean and InvStdDev
    # outputs, which the exporter leaves out: name them (the model computes the same)
    for k, n in enumerate(m.graph.node):
        if n.op_type == "LayerNormalization" and len(n.output) == 1:
            n.output.extend(["ln%d_mean" % k, "ln%d_inv_std" % k])
    m.graph.node.append(helper.make_node("Transpose", [out.name], ["logits_bvt"], perm=[0, 2, 1]))
    del m.graph.output[:]
    # symbolic dims: ONNX Runtime's CrossEntropyLoss declares its labels input as the
    # output's shape without the last dim, which must then accept [batch, seq]
    m.graph.output.append(helper.make_tensor_value_info("logits_bvt", onnx.TensorProto.FLOAT,
                                                        ["batch", "classes", "positions"]))
    path = os.path.join(tmp, "tinygpt_bvt.onnx")
    onnx.save(m, path)
    return path


def cases(tmp):
    data = os.path.join(ROOT, "samples", "data")
    return {
        "mlp": {"model": os.path.join(ROOT, "samples", "mlp.onnx"), "x": os.path.join(data, "mlp_x.npy"),
                "y": os.path.join(data, "mlp_labels.npy"), "batch": 16, "steps": STEPS, "lr": 0.003,
                "frozen": [], "output": "logits"},
        "tinygpt": {"model": gpt_model(tmp), "x": os.path.join(data, "tinygpt_tokens.npy"),
                    "y": os.path.join(data, "tinygpt_labels.npy"), "batch": 8, "steps": STEPS, "lr": 0.003,
                    "frozen": ["pos.weight"], "output": "logits_bvt"},
    }


def run(python, framework, case, out, env=None):
    r = subprocess.run([python, "-c", LOOP, framework, json.dumps(case), out], capture_output=True, text=True,
                       env=env)
    if r.returncode != 0:
        raise SystemExit("ort_drop_in: the %s loop failed:\n%s" % (framework, r.stderr[-3000:]))
    return json.loads(r.stdout.strip().splitlines()[-1])


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    venv = os.environ.get("OT_ORT_VENV", "/work/venvs/ort")
    ap.add_argument("--ort-python", default=os.path.join(venv, "bin", "python"))
    ap.add_argument("--library", default=os.environ.get("ONNXTRAIN_LIBRARY",
                                                        os.path.join(ROOT, "build", "libonnxtrain.so.0")))
    ap.add_argument("--rtol", type=float, default=1e-5)
    ap.add_argument("--json", help="write both curves and the verdict here")
    a = ap.parse_args()
    if not os.path.exists(a.ort_python):
        print("skipped: no ONNX Runtime training venv at %s (bash bench/setup_peers.sh)" % a.ort_python)
        return 77
    env = dict(os.environ, ONNXTRAIN_LIBRARY=a.library,
               ONNXTRAIN_HEADER=os.path.join(ROOT, "include", "onnxtrain.h"),
               PYTHONPATH=os.path.join(ROOT, "python") + os.pathsep + os.environ.get("PYTHONPATH", ""))
    report, ok = {}, True
    with tempfile.TemporaryDirectory() as tmp:
        for name, case in cases(tmp).items():
            res = {}
            for fw, py in (("ort", a.ort_python), ("onnxtrain", sys.executable)):
                out = os.path.join(tmp, name + "_" + fw)
                os.makedirs(out)
                res[fw] = run(py, fw, case, out, env)
            o, t = res["ort"], res["onnxtrain"]
            rel = [abs(x - y) / max(abs(x), 1e-12) for x, y in zip(o["loss"] + [o["eval_loss"]],
                                                                   t["loss"] + [t["eval_loss"]])]
            lr_rel = max(abs(x - y) / max(abs(x), 1e-30) for x, y in zip(o["lr"], t["lr"]))
            good = (max(rel) <= a.rtol and lr_rel <= 1e-6 and t["checkpoint_round_trip"]
                    and t["inference_outputs"] == o["inference_outputs"])
            ok &= good
            report[name] = {"ort": o, "onnxtrain": t, "max_rel_diff": max(rel), "lr_max_rel_diff": lr_rel,
                            "agree": good}
            print("%-8s %s: max relative loss difference %.2e over %d steps and eval (rtol %.0e); lr schedules %s; "
                  "checkpoint round trip %s" % (name, "agree" if good else "DIFFER", max(rel), len(o["loss"]),
                                                a.rtol, "equal" if lr_rel == 0 else "within %.1e" % lr_rel,
                                                "ok" if t["checkpoint_round_trip"] else "FAILED"))
            print("  step  onnxruntime   onnxtrain")
            for i, (x, y) in enumerate(zip(o["loss"], t["loss"])):
                print("  %4d  %.7f   %.7f" % (i, x, y))
            print("  eval  %.7f   %.7f" % (o["eval_loss"], t["eval_loss"]))
    if a.json:
        with open(a.json, "w") as f:
            json.dump(report, f, indent=1)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
