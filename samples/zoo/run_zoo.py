#!/usr/bin/env python3
"""run_zoo.py — runs the built onnxtrain over the models export_zoo.py wrote and prints
one table row per model:

    python3 samples/zoo/run_zoo.py [--zoo DIR] [--onnxtrain build/onnxtrain] [--only NAME,...]
                                   [--allow-unsupported] [--json FILE] [--markdown FILE]
                                   [--session-args "ARGS"]

Checks, each against PyTorch's references in DIR/NAME/:
  info    the model imports with no unsupported op (else the row names the blocking ops)
  grad    one step on NAME_nodrop.onnx; every parameter gradient and the loss against
          PyTorch's float64 values, judged by float32 rounding: per tensor the largest
          (|ours - f64| - kink allowance) / max(|f64|, floor), floor = max(1e-2 * max|f64|
          of that tensor, 1e-3 * the model's median max|grad|) (an absolute view for
          entries ~0), must be within max(1e-3, 30x PyTorch float32's own), and the loss
          within 1e-5. The kink allowance (export_zoo.py, kinks.py: f64/kink/) bounds, entry
          by entry, what activations within float32 rounding of a ReLU-like kink can move
          when they fall on the other side; it is 0 wherever no such activation is upstream.
          A dynamo export also fails when onnxtrain trains a tensor PyTorch's graph holds
          constant (a table the exporter folded: docs/training.md, "Which initializers train")
  verify  --remat sqrt, selective and auto on NAME.onnx (with Dropout): bitwise equal
  plan    `plan --remat auto` without a budget, with and without --lora 4 (LoRA on the
          models it has targets for): auto's planned peak at most --remat none's (issue 31)
  train   5 SGD steps on one batch: every loss finite, the last below the first, at lr 0.01
          on NAME.onnx; a graph on which PyTorch's own SGD does not lower the loss at every
          step at 0.01 (export_zoo.py TRAIN_LRS: BatchNorm frozen in inference form) is
          trained at the manifest's stable lr on NAME_nodrop.onnx instead (column: ok@LR~pt;
          the note shows how far its losses are from PyTorch's on that graph: such graphs
          amplify rounding, so that is not judged)
  eval    inference-mode logits within 1e-5 (relative to max(1, max|ref|)) of PyTorch's
--session-args adds options to every grad, verify, plan and train command (e.g.
"--chunked-loss on --chunked-loss-rows 5": the fused loss judged by the same rules).
Exit 1 when any model fails a check; a blocked model (unsupported ops) fails too unless
--allow-unsupported. Needs only numpy.
"""
import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
POLICIES = ("sqrt", "selective", "auto")
TRAIN_STEPS = 5
SESSION_ARGS = []  # --session-args: appended to grad, verify, plan and train


def run(cmd, timeout=600):
    try:
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return 124, "", f"timed out after {timeout}s"
    return p.returncode, p.stdout, p.stderr


def last_line(text):
    """The error line of onnxtrain's stderr: the first (a usage hint may follow)."""
    lines = [ln for ln in text.strip().splitlines() if ln.strip()]
    return lines[0][:200] if lines else ""


class Model:
    """One exported model: its manifest and the common data arguments."""

    def __init__(self, zoo, name):
        self.dir = os.path.join(zoo, name)
        with open(os.path.join(self.dir, "manifest.json")) as f:
            self.man = json.load(f)
        self.name = name
        self.data = []
        for inp in self.man["inputs"]:
            self.data += ["--input", f"{inp['name']}={os.path.join(self.dir, inp['file'])}"]
        self.data += ["--batch-size", str(self.man["batch"])]
        self.bind = ["--bind", f"seq={self.man['seq']}"] if self.man["dynseq"] else []
        self.labels = ["--labels", os.path.join(self.dir, self.man["labels"])]
        if self.man.get("loss_kind") == "mse":  # float targets (a diffusion UNet's noise)
            self.labels += ["--loss", "mse"]
        if self.man.get("train_regex"):  # e.g. CLIP's rank-0 logit_scale (docs/training.md rule 1)
            self.labels += ["--train", self.man["train_regex"]]
        if self.man.get("class_axis", -1) != -1:  # segmentation: per-pixel classes on axis 1
            self.labels += ["--class-axis", str(self.man["class_axis"])]

    def path(self, key):
        return os.path.join(self.dir, self.man[key])

    def load(self, rel):
        return np.load(os.path.join(self.dir, rel))


def check_info(exe, m, row):
    rc, out, err = run([exe, "info", m.path("onnx"), "--json"])
    try:
        info = json.loads(out)
    except ValueError:
        row["info"] = f"exit {rc}"
        row["note"] = last_line(err)
        return False
    row["nodes"] = info.get("nodes", "?")
    row["ops"] = len(info.get("ops", []))
    bad = info.get("unsupported", [])
    row["unsupported"] = {u["op"]: len(u["nodes"]) for u in bad}
    if rc == 0 and not bad:
        row["info"] = "ok"
        return True
    row["info"] = "blocked"
    row["note"] = "unsupported: " + ", ".join(f"{op} x{n}" for op, n in row["unsupported"].items())
    return False


def rel_err(got, ref, scale, allow=0.0):
    """Largest (|got - ref| - allow) / max(|ref|, floor), and the same without the
    allowance. The floor gives an absolute view of entries whose true value is
    ~0: 1e-2 of the tensor's largest entry, and at least 1e-3 of the model's typical
    gradient size (a tensor whose exact gradient is 0, like a key bias under softmax,
    is judged against that). allow: the kink allowance (kinks.py), entry by entry; the
    part of a difference it explains is not counted, the rest is judged as usual."""
    if not ref.size:
        return 0.0, 0.0
    floor = max(1e-2 * float(np.max(np.abs(ref))), 1e-3 * scale, 1e-30)
    diff = np.abs(got - ref)
    denom = np.maximum(np.abs(ref), floor)
    return float(np.max(np.maximum(diff - allow, 0.0) / denom)), float(np.max(diff / denom))


def check_grad(exe, m, row, tmp):
    dump = os.path.join(tmp, "grads")
    rc, out, err = run([exe, "grad", m.path("nodrop_onnx"), *m.data, *m.bind, *m.labels, "--threads", "1",
                        "--dump-grads", dump, "--json", *SESSION_ARGS])
    if rc != 0:
        row["grad"] = f"exit {rc}"
        row.setdefault("note", last_line(err))
        return False
    loss = json.loads(out)["loss"]
    with open(os.path.join(dump, "index.json")) as f:
        ours = json.load(f)
    worst, worst_name, worst_t32, missing, covered = 0.0, "", 0.0, [], 0
    scale = float(np.median([np.max(np.abs(m.load(f["f64"]))) for f in m.man["params"].values()] or [0.0]))
    for pname, files in m.man["params"].items():
        if pname not in ours:
            missing.append(pname)
            continue
        ref64 = m.load(files["f64"])
        allow = m.load(files["kink"]) if "kink" in files else 0.0
        got = np.load(os.path.join(dump, ours[pname])).astype(np.float64)
        e, raw = rel_err(got, ref64, scale, allow)
        t32, t32_raw = rel_err(m.load(files["f32"]).astype(np.float64), ref64, scale, allow)
        covered += raw > max(1e-3, 30 * t32_raw) and e <= max(1e-3, 30 * t32)  # passes only through the allowance
        if e / max(1e-3, 30 * t32) > worst / max(1e-3, 30 * worst_t32) or not worst_name:
            worst, worst_name, worst_t32 = e, pname, t32
    loss_err = abs(loss - m.man["loss_f64"]) / max(abs(m.man["loss_f64"]), 1e-12)
    extra = sorted(set(ours) - set(m.man["params"]))
    # A dynamo export's tensors are the graph's parameters or its constants, and the
    # params rule must tell which (docs/training.md rule 4): training one that PyTorch
    # does not (a folded table) fails. A TorchScript file may hold float buffers that
    # train with a zero-effect gradient, as always: only noted.
    exact = not extra or m.man.get("exporter") != "dynamo"
    ok = not missing and exact and worst <= max(1e-3, 30 * worst_t32) and loss_err <= 1e-5
    row["grad_err"] = f"{worst:.1e}/{worst_t32:.1e}"
    row["kinks"] = m.man.get("kink_entries", 0)
    row["grad"] = "ok" if ok else "FAIL"
    notes = []
    if missing:
        notes.append(f"grads missing for {len(missing)} params ({missing[0]}...)")
    if extra:
        notes.append(f"trains {len(extra)} tensors PyTorch does not ({extra[0]}...)")
    if covered:
        notes.append(f"{covered} tensors within float32 rounding only after the allowance of "
                     f"{row['kinks']} near-kink activations")
    if not ok and not missing:
        notes.append(f"worst grad {worst_name}: {worst:.2e} (PyTorch f32 {worst_t32:.2e}), loss {loss_err:.1e}")
    if notes:
        row.setdefault("note", "; ".join(notes))
    return ok


def check_verify(exe, m, row):
    marks = []
    for pol in POLICIES:
        rc, _, err = run([exe, "verify", m.path("onnx"), *m.data, *m.bind, *m.labels, "--remat", pol,
                          "--threads", "1", *SESSION_ARGS])
        marks.append("ok" if rc == 0 else ("DIFF" if rc == 11 else f"exit{rc}"))
        if rc != 0:
            row.setdefault("note", f"verify {pol}: {last_line(err)}")
    row["verify"] = "ok" if all(x == "ok" for x in marks) else "/".join(marks)
    return row["verify"] == "ok"


def check_plan(exe, m, row):
    """auto without a budget never plans more than none (remat/auto_modest.c); the cell
    gives auto's saving in % of none's peak (LoRA's after the slash, '-' when the model has
    no default LoRA target)."""
    cells = []
    for extra in ([], ["--lora", "4"]):
        rc, out, err = run([exe, "plan", m.path("onnx"), *m.data, *m.bind, *m.labels, "--remat", "auto", "--json",
                            "--threads", "1", *extra, *SESSION_ARGS])
        if rc != 0 and extra and "no weight that takes an adapter" in err:
            cells.append("-")
            continue
        if rc != 0:
            row["plan"] = f"exit {rc}"
            row.setdefault("note", f"plan{' --lora 4' if extra else ''}: {last_line(err)}")
            return False
        plans = json.loads(out)["plans"]
        none, auto = plans[0]["peak_bytes"], plans[1]["peak_bytes"]
        if auto > none:
            row["plan"] = "FAIL"
            row.setdefault("note", f"plan --remat auto{' --lora 4' if extra else ''}: peak {auto} > none's {none}")
            return False
        cells.append(f"{100.0 * (none - auto) / none:.0f}%")
    row["plan"] = "/".join(cells)
    return True


def check_train(exe, m, row, tmp):
    report = os.path.join(tmp, "report.json")
    tr = m.man.get("train", {})
    lr, key = tr.get("lr", 0.01), tr.get("onnx", "onnx")
    rc, _, err = run([exe, "train", m.path(key), *m.data, *m.bind, *m.labels, "--steps", str(TRAIN_STEPS),
                      "--no-shuffle", "--lr", str(lr), "--threads", "1", "--quiet", "--report", report,
                      "-o", os.path.join(tmp, "tuned.onnx"), *SESSION_ARGS])
    if rc != 0:
        row["train"] = f"exit {rc}"
        row.setdefault("note", last_line(err))
        return False
    with open(report) as f:
        rep = json.load(f)
    losses = rep["loss"]
    ok = all(np.isfinite(losses)) and losses[-1] < losses[0]
    dev = 0.0
    if key == "nodrop_onnx":  # how far from PyTorch's steps on the same graph (shown, not judged)
        ref = tr["torch_losses"]
        dev = max(abs(a - b) / max(abs(b), 1e-12) for a, b in zip(losses, ref)) if len(ref) == len(losses) else 1.0
    row["train"] = "ok" if ok else "FAIL"
    secs = rep.get("step_seconds", [])[1:] or rep.get("step_seconds", [])
    row["step_ms"] = f"{1000 * float(np.median(secs)):.1f}" if secs else "?"
    if lr != 0.01:
        row["train"] += f"@{lr:g}"
    if key == "nodrop_onnx":
        row["train"] += "~pt"
        row.setdefault("note", f"train at lr {lr:g} (PyTorch's stable lr) on the Dropout-free graph: losses within "
                               f"{dev:.1e} of PyTorch's")
    if not ok:
        row.setdefault("note", f"loss at lr {lr:g}: " + " ".join(f"{x:.4g}" for x in losses))
    return ok


def check_eval(exe, m, row, tmp):
    out = os.path.join(tmp, "eval")
    rc, _, err = run([exe, "eval", m.path("onnx"), *m.data, *m.bind, "--threads", "1", "--dump-outputs", out])
    if rc != 0:
        row["eval"] = f"exit {rc}"
        row.setdefault("note", last_line(err))
        return False
    got = np.load(os.path.join(out, "logits.npy")).astype(np.float64)
    ref = m.load(m.man["eval"]["f32"]).astype(np.float64)
    if got.shape != ref.shape:
        row["eval"] = "FAIL"
        row.setdefault("note", f"eval shape {got.shape} != {ref.shape}")
        return False
    e = float(np.max(np.abs(got - ref))) / max(1.0, float(np.max(np.abs(ref))))
    row["eval"] = "ok" if e <= 1e-5 else "FAIL"
    row["eval_err"] = f"{e:.1e}"
    return e <= 1e-5


def run_model(exe, zoo, name):
    m = Model(zoo, name)
    row = dict(model=name, family=m.man["family"], nodes="?", ops="?", info="-", grad="-", verify="-", plan="-",
               train="-", eval="-", step_ms="", grad_err="", kinks="", eval_err="")
    if not check_info(exe, m, row):
        return row, "blocked" if row["info"] == "blocked" else "fail"
    tmp = tempfile.mkdtemp(prefix=f"zoo-{name}-")
    try:
        ok = [check_grad(exe, m, row, tmp), check_verify(exe, m, row), check_plan(exe, m, row),
              check_train(exe, m, row, tmp), check_eval(exe, m, row, tmp)]
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return row, "pass" if all(ok) else "fail"


COLS = (("model", 19), ("family", 22), ("nodes", 5), ("ops", 3), ("info", 7), ("grad", 5), ("grad_err", 15),
        ("kinks", 5), ("verify", 9), ("plan", 7), ("train", 9), ("eval", 5), ("eval_err", 8), ("step_ms", 7))


def print_row(row):
    cells = [str(row.get(k, "")).ljust(w)[:max(w, len(str(row.get(k, ""))))] for k, w in COLS]
    print(" ".join(cells) + ("  " + row["note"] if row.get("note") else ""), flush=True)


def markdown(rows, zoo):
    """The acceptance's table: per model (grouped by family) nodes, ops, gradient
    agreement (ours / PyTorch float32's error against float64), verify, train, step time."""
    def passed(r):
        return all(str(r.get(k, "")).split("@")[0] == "ok" for k in ("info", "grad", "verify", "train", "eval"))
    out = [f"zoo {zoo}: {sum(map(passed, rows))} of {len(rows)} pass every check", "",
           "| family | model | nodes | ops | grad err (ours / PyTorch f32) | near kinks | verify | auto saves (/ lora 4) | train | eval err | step ms |",
           "|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in sorted(rows, key=lambda r: (r["family"], r["model"])):
        grad = f"{r['grad']} {r.get('grad_err', '')}".strip()
        out.append(f"| {r['family']} | {r['model']} | {r['nodes']} | {r['ops']} | {grad} | {r.get('kinks', '')} | "
                   f"{r['verify']} | {r.get('plan', '')} | {r['train']} | {r.get('eval_err', '')} | {r.get('step_ms', '')} |")
    notes = [f"- {r['model']}: {r['note']}" for r in rows if r.get("note")]
    return "\n".join(out + ([""] + notes if notes else [])) + "\n"


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--zoo", default="/tmp/onnxtrain-zoo", help="export_zoo.py's --out (default /tmp/onnxtrain-zoo)")
    ap.add_argument("--onnxtrain", default=os.path.join(ROOT, "build", "onnxtrain"))
    ap.add_argument("--only", help="comma-separated model names (default: every model in the zoo folder)")
    ap.add_argument("--allow-unsupported", action="store_true", help="report blocked models without failing")
    ap.add_argument("--json", help="also write the rows to this JSON file")
    ap.add_argument("--markdown", help="also write the per-family table (markdown) to this file")
    ap.add_argument("--session-args", default="", help="options added to grad, verify, plan and train")
    args = ap.parse_args()
    SESSION_ARGS.extend(args.session_args.split())
    if args.only:
        names = args.only.split(",")
    else:
        names = sorted(n for n in os.listdir(args.zoo) if os.path.exists(os.path.join(args.zoo, n, "manifest.json")))
    missing = [n for n in names if not os.path.exists(os.path.join(args.zoo, n, "manifest.json"))]
    if missing or not names:
        print(f"run_zoo: no export in {args.zoo} for {', '.join(missing) or 'any model'}; run export_zoo.py first")
        return 2
    print("grad_err: worst gradient error of onnxtrain / of PyTorch float32, both against float64")
    print_row({k: k for k, _ in COLS})
    rows, verdicts, t0 = [], {}, time.time()
    for n in names:
        row, verdict = run_model(args.onnxtrain, args.zoo, n)
        rows.append(row)
        verdicts[n] = verdict
        print_row(row)
    passed = [n for n, v in verdicts.items() if v == "pass"]
    blocked = [n for n, v in verdicts.items() if v == "blocked"]
    failed = [n for n, v in verdicts.items() if v == "fail"]
    print(f"zoo: {len(passed)} pass, {len(failed)} fail, {len(blocked)} blocked ({time.time() - t0:.0f}s)")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(rows, f, indent=1)
    if args.markdown:
        with open(args.markdown, "w") as f:
            f.write(markdown(rows, args.zoo))
    return 1 if failed or (blocked and not args.allow_unsupported) else 0


if __name__ == "__main__":
    sys.exit(main())
