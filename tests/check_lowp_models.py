#!/usr/bin/env python3
"""check_lowp_models.py — models exported in float16 and bfloat16 train as they are
(issue 27 part 2, train/lowp_model.c), through the CLI on the fixtures of
tests/fixtures/lowp (an MLP, a one-block GPT and a residual CNN with BatchNorm,
exported by torch 2.15 after model.half() / .to(torch.bfloat16), by the TorchScript
and the dynamo exporters; made by make_fixtures.py):

  - `grad`: the loss and every gradient PyTorch computes for the same batch; each
    gradient's error against float64 no more than 4x PyTorch's own low-precision error
    (plus a small slack), so a gradient in the wrong dtype or of the wrong param fails;
  - `verify --remat all` is bitwise (exit 0);
  - `train` writes the same graph with every initializer in its original dtype, the
    trained ones changed, BatchNorm's running statistics updated, and onnx's checker
    passes; fp16 models get loss scaling by default (the progress line's scale);
  - `eval --labels` of the model as exported gives PyTorch's loss;
  - ONNX Runtime (bench/setup_peers.sh's venv, when there is one) loads and runs each
    fp16 tuned model, and its inference form's logits are onnxtrain eval's within four
    float16 roundings of the largest (bf16: where it has the kernels; its refusal is
    printed);
  - `--resume` from a checkpoint of an fp16 model is bitwise the uninterrupted run;
  - bf16 inputs: float32 data is rounded as read (said once) and gives the loss that
    the same values as bfloat16 bits (uint16 .npy) give; fp16 data for a bf16 input and
    float32 data for an fp16 input exit 8 naming the file and the input;
    --precision other than the model's own dtype exits 2;
  - with Debian's torch 1.13 in /usr/bin/python3: a bfloat16 MLP exported by it at test
    time (its TorchScript exporter) trains and its tuned model keeps bfloat16.

    check_lowp_models.py ONNXTRAIN_BINARY SOURCE_DIR SCRATCH_DIR
"""
import glob
import json
import os
import subprocess
import sys

import numpy as np
import onnx
from onnx import numpy_helper

DATA_ERROR, USAGE_ERROR = 8, 2


def run(binary, *args):
    return subprocess.run([binary, *args], capture_output=True, text=True)


def init_bits(init):
    """An initializer's raw bytes as integers of its width (bitwise comparisons)."""
    a = numpy_helper.to_array(init)
    if init.data_type == onnx.TensorProto.BFLOAT16:
        return np.frombuffer(init.raw_data, np.uint16) if init.raw_data else np.array(init.int32_data, np.uint16)
    return a.view(np.uint16) if a.dtype == np.float16 else a


def check_grads(binary, model, z, x, y, scratch, stem):
    d = os.path.join(scratch, stem + "_grads")
    p = run(binary, "grad", model, "--input", x, "--labels", y, "--threads", "1", "--json", "--dump-grads", d)
    assert p.returncode == 0, (stem, p.stderr)
    loss = json.loads(p.stdout)["loss"]
    ref = float(z["loss"])
    assert abs(loss - ref) <= 2e-3 * abs(ref) + 1e-3, (stem, loss, ref)
    index = json.load(open(os.path.join(d, "index.json")))
    names = [k[2:] for k in z.files if k.startswith("g/")]
    compared = 0
    for n in names:
        if n not in index:  # a table the dynamo exporter folded: a constant (docs/training.md)
            assert stem.endswith("_dy"), (stem, n, "not trained")
            continue
        g = np.load(os.path.join(d, index[n]))
        assert g.dtype == np.float32, (stem, n, g.dtype)  # master gradients are float32
        g64 = z["g64/" + n].astype(np.float64)
        scale = np.abs(g64).max() + 1e-12
        ours = np.abs(g.astype(np.float64) - g64).max() / scale
        torch_err = np.abs(z["g/" + n].astype(np.float64) - g64).max() / scale
        assert ours <= 4 * torch_err + 2e-3, (stem, n, ours, torch_err)
        compared += 1
    assert compared >= len(names) - 1 and compared >= 4, (stem, compared, names)
    return compared


def check_train(binary, model, x, y, scratch, stem, fp16):
    out = os.path.join(scratch, stem + "_tuned.onnx")
    p = run(binary, "train", model, "--input", x, "--labels", y, "--steps", "3", "--threads", "1", "-o", out)
    assert p.returncode == 0, (stem, p.stderr)
    assert ("  scale " in p.stderr) == fp16, (stem, "loss scaling by default for fp16 only", p.stderr)
    assert "params trained as float32 master weights" in p.stderr, (stem, p.stderr)
    a, b = onnx.load(model), onnx.load(out)
    if b.ir_version <= onnx.IR_VERSION:  # Debian's onnx predates the dynamo exporter's IR version
        onnx.checker.check_model(b)
    assert [n.op_type for n in a.graph.node] == [n.op_type for n in b.graph.node], stem
    before = {i.name: i for i in a.graph.initializer}
    changed = 0
    for i in b.graph.initializer:
        assert i.data_type == before[i.name].data_type, (stem, i.name, i.data_type)
        assert list(i.dims) == list(before[i.name].dims), (stem, i.name)
        changed += not np.array_equal(init_bits(i), init_bits(before[i.name]))
    assert changed >= 4, (stem, changed)
    if stem.startswith("cnn"):
        rm = [i for i in b.graph.initializer if i.name.endswith("running_mean")]
        assert rm and all(not np.array_equal(init_bits(i), init_bits(before[i.name])) for i in rm), stem
    return out


def check_eval(binary, model, z, x, y, scratch, stem):
    """eval --labels of the model as exported: the nodes without a low kernel run in
    float32 with casts; bfloat16 data as its bits (eval converts no float32 data)."""
    if "_bf16_" in stem and z["x"].dtype == np.float32:
        x = os.path.join(scratch, stem + "_xbits.npy")
        np.save(x, bf16_bits(z["x"]))
    p = run(binary, "eval", model, "--input", x, "--labels", y, "--threads", "1", "--json")
    assert p.returncode == 0, (stem, p.stderr)
    loss = json.loads(p.stdout)["loss"]
    if not stem.startswith("cnn"):  # BatchNorm evaluates with its running statistics
        assert abs(loss - float(z["loss"])) <= 1e-2 * abs(float(z["loss"])), (stem, loss, float(z["loss"]))


# ONNX Runtime runs the tuned model as written, then its inference form (BatchNorm's
# training_mode 0, Dropout off: what `eval` computes), and saves the logits.
ORT_RUN = r"""
import sys, numpy as np, onnx, onnxruntime as ort
model, name, x, out = sys.argv[1:5]
feeds = {name: np.load(x)}
def run(path):
    try:
        return ort.InferenceSession(path, providers=["CPUExecutionProvider"]).run(["logits"], feeds)[0]
    except Exception as e:
        print("ORT: " + str(e).splitlines()[0][:300]); sys.exit(3)
run(model)
m = onnx.load(model)
for n in m.graph.node:
    if n.op_type == "BatchNormalization":
        for a in n.attribute:
            if a.name == "training_mode":
                a.i = 0
        del n.output[1:]
    if n.op_type == "Dropout" and len(n.input) > 2:
        del n.input[2:]
onnx.save(m, out + ".onnx")
np.save(out, np.asarray(run(out + ".onnx"), np.float32))
"""


def check_ort(binary, tuned, x, scratch, stem):
    """The tuned fp16 model loads and runs in ONNX Runtime (the venv of
    bench/setup_peers.sh, $OT_ORT_VENV; skipped without it) and gives onnxtrain eval's
    logits within four float16 roundings (2^-11) of the largest. bf16: ONNX Runtime's CPU
    provider has few bfloat16 kernels, so its refusal is reported, not failed."""
    py = os.path.join(os.environ.get("OT_ORT_VENV", "/work/venvs/ort"), "bin", "python")
    if not os.path.exists(py):
        return "ORT skipped (no venv)"
    name = "ids" if stem.startswith("gpt") else "x"
    ev = os.path.join(scratch, stem + "_tuned_eval")
    p = run(binary, "eval", tuned, "--input", f"{name}={x}", "--threads", "1", "--dump-outputs", ev)
    assert p.returncode == 0, (stem, p.stderr)
    out = os.path.join(scratch, stem + "_ort.npy")
    p = subprocess.run([py, "-c", ORT_RUN, tuned, name, x, out], capture_output=True, text=True)
    if "_bf16_" in stem and p.returncode == 3:
        return p.stdout.strip()[:120]
    assert p.returncode == 0, (stem, p.stdout, p.stderr[-500:])
    ours = np.load(os.path.join(ev, "logits.npy"))
    if ours.dtype == np.uint16:  # bfloat16 bits
        ours = (ours.astype(np.uint32) << 16).view(np.float32)
    theirs = np.load(out).astype(np.float64)
    err = np.abs(ours.astype(np.float64) - theirs).max() / np.abs(theirs).max()
    # the two runtimes round in different places (float32 inside onnxtrain's casts)
    assert err <= 4 * (2.0 ** -8 if "_bf16_" in stem else 2.0 ** -11), (stem, err)
    return f"ORT runs the tuned model, {err:.1e} from eval"


def check_resume(binary, model, x, y, scratch):
    common = ["--input", x, "--labels", y, "--steps", "4", "--threads", "1"]
    full, res = os.path.join(scratch, "resume_full.onnx"), os.path.join(scratch, "resume_res.onnx")
    ck = os.path.join(scratch, "resume_ckpt")
    p = run(binary, "train", model, *common, "-o", full)
    assert p.returncode == 0, p.stderr
    p = run(binary, "train", model, *common, "-o", os.path.join(scratch, "resume_part.onnx"), "--checkpoint-dir", ck,
            "--checkpoint-every", "2")
    assert p.returncode == 0, p.stderr
    p = run(binary, "train", model, *common, "-o", res, "--resume", os.path.join(ck, "ckpt-2.otc"))
    assert p.returncode == 0, p.stderr
    assert open(full, "rb").read() == open(res, "rb").read(), "--resume of an fp16 model is not bitwise"


def bf16_bits(a):
    """float32 values bfloat16 holds exactly, as their bfloat16 bits."""
    u = np.ascontiguousarray(a, np.float32).view(np.uint32)
    assert not (u & 0xFFFF).any()
    return (u >> 16).astype(np.uint16)


def check_bf16_data(binary, fix, scratch):
    model = os.path.join(fix, "mlp_bf16_ts.onnx")
    z = np.load(os.path.join(fix, "mlp_bf16_ts.npz"))
    x32, x16, xbits, y = (os.path.join(scratch, n) for n in ("bx32.npy", "bx16.npy", "bxbits.npy", "by.npy"))
    np.save(x32, z["x"])
    np.save(x16, z["x"].astype(np.float16))
    np.save(xbits, bf16_bits(z["x"]))
    np.save(y, z["labels"])
    losses = []
    for x in (x32, xbits):
        p = run(binary, "grad", model, "--input", x, "--labels", y, "--threads", "1", "--json")
        assert p.returncode == 0, p.stderr
        said = "float32 data for bfloat16 input 'x'" in p.stderr
        assert said == (x == x32), p.stderr
        losses.append(json.loads(p.stdout)["loss"])
    assert losses[0] == losses[1], losses
    p = run(binary, "grad", model, "--input", x16, "--labels", y)
    assert p.returncode == DATA_ERROR and "bx16.npy" in p.stderr and "'x' is bfloat16" in p.stderr, p.stderr
    fp16 = os.path.join(fix, "mlp_fp16_ts.onnx")
    p = run(binary, "grad", fp16, "--input", x32, "--labels", y)
    assert p.returncode == DATA_ERROR and "bx32.npy" in p.stderr and "astype(np.float16)" in p.stderr, p.stderr
    p = run(binary, "train", fp16, "--input", x16, "--labels", y, "--precision", "bf16", "-o",
            os.path.join(scratch, "no.onnx"))
    assert p.returncode == USAGE_ERROR and "--precision bf16" in p.stderr, p.stderr


TORCH113 = r"""
import sys, warnings
import numpy as np, torch
warnings.filterwarnings("ignore")
torch.manual_seed(0)
m = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 4)).to(torch.bfloat16)
x = torch.randn(16, 8)
torch.onnx.export(m, x[:2].to(torch.bfloat16), sys.argv[1], input_names=["x"], output_names=["y"],
                  dynamic_axes={"x": {0: "batch"}}, training=torch.onnx.TrainingMode.TRAINING,
                  do_constant_folding=False)
np.save(sys.argv[2], x.numpy())
np.save(sys.argv[3], torch.randint(0, 4, (16,)).numpy())
"""


def check_torch113(binary, scratch):
    model, x, y = (os.path.join(scratch, n) for n in ("t113_bf16.onnx", "t113_x.npy", "t113_y.npy"))
    p = subprocess.run(["/usr/bin/python3", "-c", "import torch; print(torch.__version__)"], capture_output=True,
                       text=True)
    if p.returncode != 0:
        print("torch 1.13 export: skipped (no torch in /usr/bin/python3)")
        return
    p = subprocess.run(["/usr/bin/python3", "-c", TORCH113, model, x, y], capture_output=True, text=True)
    assert p.returncode == 0, p.stderr
    out = os.path.join(scratch, "t113_tuned.onnx")
    p = run(binary, "train", model, "--input", x, "--labels", y, "--steps", "2", "-o", out)
    assert p.returncode == 0, p.stderr
    assert all(i.data_type == onnx.TensorProto.BFLOAT16 for i in onnx.load(out).graph.initializer)
    print("torch 1.13 bf16 export: trained")


def main():
    binary, src, scratch = sys.argv[1:4]
    os.makedirs(scratch, exist_ok=True)
    fix = os.path.join(src, "tests", "fixtures", "lowp")
    models = sorted(glob.glob(os.path.join(fix, "*.onnx")))
    assert len(models) == 10, models
    for model in models:
        stem = os.path.basename(model)[:-5]
        z = np.load(os.path.join(fix, stem + ".npz"))
        x, y = os.path.join(scratch, stem + "_x.npy"), os.path.join(scratch, stem + "_y.npy")
        np.save(x, z["x"])
        np.save(y, z["labels"])
        n = check_grads(binary, model, z, x, y, scratch, stem)
        p = run(binary, "verify", model, "--input", x, "--labels", y, "--remat", "all", "--time-steps", "1")
        assert p.returncode == 0 and "bitwise equal" in p.stdout + p.stderr, (stem, p.returncode, p.stderr)
        tuned = check_train(binary, model, x, y, scratch, stem, "_fp16_" in stem)
        check_eval(binary, model, z, x, y, scratch, stem)
        xe = x
        if "_bf16_" in stem and z["x"].dtype == np.float32:  # eval and ORT read bfloat16 bits
            xe = os.path.join(scratch, stem + "_xbits.npy")
            np.save(xe, bf16_bits(z["x"]))
        ort = check_ort(binary, tuned, xe, scratch, stem)
        print(f"{stem}: {n} gradients within bounds, verify bitwise, tuned model in its own dtypes; {ort}")
    stem = "gpt_fp16_ts"
    check_resume(binary, os.path.join(fix, stem + ".onnx"), os.path.join(scratch, stem + "_x.npy"),
                 os.path.join(scratch, stem + "_y.npy"), scratch)
    check_bf16_data(binary, fix, scratch)
    check_torch113(binary, scratch)
    print("check_lowp_models: ok")
    return 0


if __name__ == "__main__":
    sys.exit(main())
