#!/usr/bin/env python3
"""check_zoo_bf16.py — the zoo's bf16 column (issue 27 item 6): `--precision bf16` against
PyTorch's own CPU bfloat16 autocast run of the same model, both judged against float64,
on the fixtures of tests/fixtures/zoo_bf16 (gpt2, bert, llama, resnet18 and mnv3, each
from the TorchScript and the dynamo exporter; made with torch 2.15 by
samples/zoo/zoo_bf16.py, since CI has no torch 2.x).

Per row:
  - `grad --precision bf16`: every gradient's normwise error against float64,
    |g - g64| / max(|g64|, 1e-2 * the median tensor norm) (the floor keeps a tensor whose
    exact gradient is ~0 from dividing by nothing); the worst and the median over the
    tensors must be no more than K = 4 times autocast's own worst and median. Both runs
    round the same kinds of tensors to bfloat16 (unit roundoff 2^-8) with float32 sums,
    so their errors are of one size; the places differ (which ops each runs low,
    where the casts sit, the GEMMs' summation order), and errors from independent roundings
    add like a random walk: a few times as many roundings on one path is about 2x, so 4x
    is the margin. The same bound holds on the subset of tensors autocast gets within
    5% (see WELL). A gradient computed wrongly or summed in bfloat16 (errors ~ sqrt(n)
    2^-8, tens of times autocast's) fails; one computed in float32 throughout passes
    (far below autocast's): that bf16 kernels run at all is check_precision's part.
  - the loss: |loss - loss64| <= K * |autocast's - loss64| + 2^-8 |loss64|.
  - `train --optimizer sgd` for the fixture's STEPS at its lr on the one batch: every
    step's loss within K * autocast's spread (its largest distance to the float64 curve
    over the steps) + 1e-5 |loss| (float32's share) of the float64 curve. The curves
    train what the file trains: a parameter that is a constant in the file (a bias the
    dynamo exporter dropped as zero, folded position rows) is frozen in PyTorch's too,
    and the parameters of one merged initializer share one tensor there.

    check_zoo_bf16.py ONNXTRAIN SCRATCH_DIR FIXTURE_DIR [--table]

--table prints the markdown table of samples/zoo/README.md's bf16 column.
"""
import glob
import json
import os
import subprocess
import sys

import numpy as np

K = 4.0
U = 2.0 ** -8  # bfloat16's unit roundoff
WELL = 0.05  # autocast's error at most this: the well-conditioned tensors


def run(binary, *args):
    return subprocess.run([binary, *args], capture_output=True, text=True)


def errors(grads, a):
    """{initializer: normwise error against g64} for the gradients in `grads`."""
    names = [k[4:] for k in a.files if k.startswith("g64/")]
    med = float(np.median([np.linalg.norm(a["g64/" + n]) for n in names]))
    out = {}
    for n in names:
        ref = a["g64/" + n].astype(np.float64)
        if n in grads:
            out[n] = float(np.linalg.norm(grads[n].astype(np.float64) - ref) / max(np.linalg.norm(ref), 1e-2 * med))
    return out


def common_args(meta, a, scratch, row):
    args = []
    for name in meta["inputs"]:
        p = os.path.join(scratch, f"{row}_{name}.npy")
        np.save(p, a["in/" + name])
        args += ["--input", f"{name}={p}"]
    y = os.path.join(scratch, f"{row}_labels.npy")
    np.save(y, a["labels"])
    args += ["--batch-size", str(meta["batch"]), "--labels", y, "--threads", "1"]
    if meta["class_axis"] != -1:
        args += ["--class-axis", str(meta["class_axis"])]
    if meta.get("train_regex"):
        args += ["--train", meta["train_regex"]]
    return args


def check_row(binary, fix, scratch, row):
    meta = json.load(open(os.path.join(fix, row + ".json")))
    a = np.load(os.path.join(fix, row + ".npz"))
    model = os.path.join(fix, row + ".onnx")
    args = common_args(meta, a, scratch, row)
    d = os.path.join(scratch, row + "_grads")
    p = run(binary, "grad", model, *args, "--precision", "bf16", "--json", "--dump-grads", d)
    assert p.returncode == 0, (row, p.stderr)
    loss = json.loads(p.stdout)["loss"]
    index = json.load(open(os.path.join(d, "index.json")))
    ours = errors({n: np.load(os.path.join(d, f)) for n, f in index.items()}, a)
    theirs = errors({k[4:]: a[k] for k in a.files if k.startswith("gbf/")}, a)
    missing = sorted(set(theirs) - set(ours))
    assert not missing, (row, "no gradient for", missing)
    r = dict(row=row, n=len(ours), worst=max(ours.values()), worst_ac=max(theirs.values()),
             med=float(np.median(list(ours.values()))), med_ac=float(np.median(list(theirs.values()))),
             worst_f32=meta["f32_worst"])
    assert r["worst"] <= K * r["worst_ac"], (row, "worst", r)
    assert r["med"] <= K * r["med_ac"], (row, "median", r)
    # Behind a training-mode BatchNorm of a few values a channel, some gradients are
    # differences of near-equal sums, and bfloat16 leaves autocast's own error near 1
    # there: 4x of that would pass anything. The tensors autocast gets within WELL
    # are judged on their own, so a wrong gradient cannot hide behind those.
    well = [n for n, e in theirs.items() if e <= WELL]
    r["well"] = len(well)
    if well:
        r["worst_well"], r["worst_well_ac"] = max(ours[n] for n in well), max(theirs[n] for n in well)
        assert r["worst_well"] <= K * r["worst_well_ac"], (row, "well-conditioned", r)
    l64 = float(a["loss64"])
    r.update(loss_err=abs(loss - l64) / abs(l64), loss_err_ac=abs(float(a["cbf"][0]) - l64) / abs(l64))
    assert abs(loss - l64) <= K * abs(float(a["cbf"][0]) - l64) + U * abs(l64), (row, "loss", loss, l64, r)
    rep = os.path.join(scratch, row + "_report.json")
    p = run(binary, "train", model, *args, "--precision", "bf16", "--optimizer", "sgd", "--lr", str(meta["lr"]),
            "--steps", str(meta["steps"]), "--no-shuffle", "--quiet", "--report", rep,
            "-o", os.path.join(scratch, row + "_tuned.onnx"))
    assert p.returncode == 0, (row, p.stderr)
    curve = np.array(json.load(open(rep))["loss"], np.float64)
    c64, cbf = a["c64"].astype(np.float64), a["cbf"].astype(np.float64)
    assert curve.shape == c64.shape, (row, curve, c64)
    spread = float(np.max(np.abs(cbf - c64)))
    dev = float(np.max(np.abs(curve - c64)))
    r.update(curve_dev=dev, curve_spread=spread, curve=curve.tolist(), c64=c64.tolist())
    assert np.all(np.abs(curve - c64) <= K * spread + 1e-5 * np.abs(c64)), (row, "curve", curve, c64, cbf)
    return r


def table(rows):
    print("| row | grads | worst grad err: onnxtrain bf16 / autocast bf16 (/ PyTorch f32) | median: ours / autocast | well-conditioned (autocast <= 5%): n, worst ours / autocast "
          "| loss err: ours / autocast | SGD curve: largest distance to f64, ours / autocast |")
    print("|---|---|---|---|---|---|---|")
    for r in rows:
        print(f"| {r['row']} | {r['n']} | {r['worst']:.1e} / {r['worst_ac']:.1e} ({r['worst_f32']:.0e}) | "
              f"{r['med']:.1e} / {r['med_ac']:.1e} | {r['well']}, {r.get('worst_well', 0):.1e} / "
              f"{r.get('worst_well_ac', 0):.1e} | {r['loss_err']:.1e} / {r['loss_err_ac']:.1e} | "
              f"{r['curve_dev']:.1e} / {r['curve_spread']:.1e} |")


def main():
    if len(sys.argv) < 4:
        print(__doc__)
        return 2
    binary, scratch, fix = sys.argv[1:4]
    os.makedirs(scratch, exist_ok=True)
    rows = sorted(os.path.basename(p)[:-5] for p in glob.glob(os.path.join(fix, "*.json")))
    assert len(rows) >= 10, rows
    results = []
    for row in rows:
        r = check_row(binary, fix, scratch, row)
        results.append(r)
        print(f"{row}: {r['n']} grads, worst {r['worst']:.2e} (autocast {r['worst_ac']:.2e}), median "
              f"{r['med']:.2e} ({r['med_ac']:.2e}), curve {r['curve_dev']:.1e} (autocast {r['curve_spread']:.1e})",
              flush=True)
    if "--table" in sys.argv:
        table(results)
    print("check_zoo_bf16: ok")
    return 0


if __name__ == "__main__":
    sys.exit(main())
