#!/usr/bin/env python3
"""check_dynamo_fixtures.py — ctest check_dynamo_fixtures: models exported by a
current PyTorch's default exporter (torch.onnx.export(dynamo=True), optimizer on),
committed under tests/fixtures/dynamo/ with PyTorch's references for the graph that
exporter wrote (make_fixtures.py there regenerates them; CI has no current PyTorch).
Each fixture is unpacked into export_zoo.py's folder layout and run through
run_zoo.py's checks: info (no unsupported op), grad against float64 within float32
rounding, verify bitwise under sqrt / selective / auto, five SGD steps with a falling
loss, eval within 1e-5.

    check_dynamo_fixtures.py ONNXTRAIN TMPDIR [FIXDIR]

FIXDIR (ctest check_zoo2: tests/fixtures/zoo2/, made by samples/zoo/export_torch2.py)
runs every fixture there instead: the issue-26 families only a current PyTorch
exports (diffusers UNet2DModel with MSE on the noise, Wav2Vec2, CLIP, Whisper, nn.LSTM
and nn.GRU language models, GPT-2 / BERT / LLaMA at opset 23), judged the same way.

--fused-attention on: the FUSED fixtures (the dynamo exporter's attention, its scale
and mask fill rank-0 initializers) must fuse every Softmax in a plan-only run (which
reads no weights) and, run again with the option, pass the same checks: gradients
against PyTorch's with the probabilities recomputed.
"""
import json
import os
import shutil
import subprocess
import sys

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
FIX = os.path.join(HERE, "fixtures", "dynamo")
sys.path.insert(0, os.path.join(HERE, "..", "samples", "zoo"))
import run_zoo  # noqa: E402

NAMES = ("tiny_gpt2", "tiny_cnn")
FUSED = {"dynamo": ("tiny_gpt2",), "zoo2": ("wav2vec2",)}  # run again with --fused-attention on


def check_fused(exe, tmp, name):
    """plan-only fuses every Softmax of NAME; then run_zoo's checks with the option on."""
    onnx = os.path.join(tmp, name, name + "_nodrop.onnx")
    r = subprocess.run([exe, "plan", onnx, "--fused-attention", "on", "--json"], capture_output=True, text=True)
    fa = json.loads(r.stdout).get("fused_attention", {}) if r.returncode == 0 else {}
    if not fa.get("fused") or fa.get("left_alone"):
        print(f"{name} --fused-attention on: plan exit {r.returncode}: {fa.get('what') or r.stderr.strip()}")
        return False
    saved = list(run_zoo.SESSION_ARGS)
    run_zoo.SESSION_ARGS[:] = saved + ["--fused-attention", "on"]
    try:
        row, verdict = run_zoo.run_model(exe, tmp, name)
    finally:
        run_zoo.SESSION_ARGS[:] = saved
    row["model"] = name + " (fused attention)"
    run_zoo.print_row(row)
    return verdict == "pass"


def unpack(name, zoo, fix=FIX):
    d = os.path.join(zoo, name)
    os.makedirs(d)
    with open(os.path.join(fix, f"{name}.json")) as f:
        man = json.load(f)
    with open(os.path.join(d, "manifest.json"), "w") as f:
        json.dump(man, f)
    for key in ("onnx", "nodrop_onnx"):
        if not os.path.exists(os.path.join(d, man[key])):
            shutil.copyfile(os.path.join(fix, man[key]), os.path.join(d, man[key]))
    with np.load(os.path.join(fix, f"{name}.npz")) as z:
        for rel in z.files:
            os.makedirs(os.path.dirname(os.path.join(d, rel)), exist_ok=True)
            np.save(os.path.join(d, rel), z[rel])


def main():
    exe, tmp = sys.argv[1], sys.argv[2]
    fix = sys.argv[3] if len(sys.argv) > 3 else FIX
    names = NAMES if fix == FIX else sorted(f[:-5] for f in os.listdir(fix) if f.endswith(".json"))
    if not names:
        print(f"check_dynamo_fixtures: no fixture (NAME.json) in {fix}")
        return 1
    shutil.rmtree(tmp, ignore_errors=True)
    failed = []
    for name in names:
        unpack(name, tmp, fix)
        row, verdict = run_zoo.run_model(exe, tmp, name)
        run_zoo.print_row(row)
        if verdict != "pass":
            failed.append(name)
        if name in FUSED.get(os.path.basename(os.path.normpath(fix)), ()) and not check_fused(exe, tmp, name):
            failed.append(name + " (fused attention)")
    print(f"check_dynamo_fixtures {os.path.basename(os.path.normpath(fix))}: {len(names) - len(failed)} of "
          f"{len(names)} pass"
          + (f"; failed: {', '.join(failed)}" if failed else ""))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
