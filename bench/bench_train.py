#!/usr/bin/python3
"""bench_train.py — training steps of every sample with onnxtrain (`onnxtrain train`) and
with PyTorch (the same model class and weights, from samples/export_samples.py), plain SGD
on the same batch and thread count, with and without rematerialization, in one run.
Prints and writes bench/results_train.md and the chart bench/results_train.svg.

    /usr/bin/python3 bench/bench_train.py [--threads 2] [--steps 30] [--warmup 5]
                                          [--onnxtrain build/onnxtrain]

Each configuration runs in its own child process (so peak RSS is that
process's own, measured by /usr/bin/time): `onnxtrain train ... --steps W+N --report R.json` (step times from the
report) and this script in --child mode for PyTorch. Median step time over the N steps
after W warm-up steps. Remat: onnxtrain `--remat sqrt`; PyTorch
torch.utils.checkpoint(use_reentrant=False) at the same granularity: the forward is
written as a list of stages, each ending at a named ONNX value (a layer's or a
residual block's output, or finer), and PyTorch's segments end exactly where
onnxtrain's sqrt plan (`plan --remat sqrt --json`) keeps a value; every segment is
checkpointed, as onnxtrain recomputes every segment (the first from the input, the
last up to the logits). Kept activation bytes:
onnxtrain's `plan --json` kept_activation_bytes (values held for the backward pass);
PyTorch's are the distinct non-parameter storages autograd saves during one forward
(saved_tensors_hooks), plus the inputs of checkpointed segments.
"""
import argparse
import json
import math
import os
import subprocess
import sys
import tempfile
import time

import numpy as np

import bench_common as bc
import torch
import torch.nn.functional as F
from torch.utils.checkpoint import checkpoint

LR = 0.05
POLICIES = ["none", "sqrt"]


# ---- PyTorch side (runs in a child process) ---------------------------------------

def stages(name, m):
    """The model's forward as a list of consecutive stages (ONNX value name of the
    stage's output, callable on one tensor). The names are those PyTorch's exporter
    gives (samples/export_samples.py); the parent checks they exist in the model."""
    if name == "mlp":
        return [("/Relu_output_0", lambda x: F.relu(m.fc1(x))), ("/Relu_1_output_0", lambda x: F.relu(m.fc2(x))),
                ("logits", m.fc3)]
    if name == "resnet":
        return [("/Relu_output_0", lambda x: F.relu(m.bn(m.stem(x)))), ("/pool/MaxPool_output_0", m.pool),
                ("/block1/Relu_1_output_0", m.block1), ("/block2/Relu_1_output_0", m.block2),
                ("logits", lambda x: m.fc(torch.flatten(F.adaptive_avg_pool2d(x, 1), 1)))]
    if name == "mobilenet":
        out = [("/act/Clip_output_0", lambda x: m.act(m.bn(m.stem(x))))]
        for bn, b in (("block1", m.block1), ("block2", m.block2)):
            out += [(f"/{bn}/dw/Conv_output_0", b.dw), (f"/{bn}/bn1/BatchNormalization_output_0", b.bn1),
                    (f"/{bn}/act/Clip_output_0", b.act), (f"/{bn}/pw/Conv_output_0", b.pw),
                    (f"/{bn}/bn2/BatchNormalization_output_0", b.bn2), (f"/{bn}/act_1/Clip_output_0", b.act)]
        return out + [("logits", lambda x: m.fc(torch.flatten(m.pool(x), 1)))]
    if name == "tinygpt":
        def embed(tokens):
            pos = torch.arange(tokens.size(1), dtype=torch.long).unsqueeze(0)
            return m.drop(m.tok(tokens) + m.pos(pos))
        out = [("/drop/Dropout_output_0", embed)]
        for i, b in enumerate(m.blocks):
            out.append((f"/blocks.{i}/Add_output_0", lambda x, b=b: x + b.attn(b.ln1(x))))
            out.append((f"/blocks.{i}/Add_1_output_0", lambda x, b=b: x + b.mlp(b.ln2(x))))
        return out + [("logits", lambda x: m.head(m.ln_f(x)))]
    if name == "chain48":
        return [(f"/Tanh_{i}_output_0" if i else "/Tanh_output_0", lambda x, layer=layer: torch.tanh(layer(x)))
                for i, layer in enumerate(m.layers)] + [("logits", m.out)]
    raise ValueError(name)


def segments(n, cuts):
    """Stage indices of each segment: a segment ends after each stage in cuts."""
    out, cur = [], []
    for i in range(n):
        cur.append(i)
        if i in cuts or i == n - 1:
            out.append(cur)
            cur = []
    return out


class Forward:
    """The model's forward, plain or checkpointed by segments; records the inputs of
    checkpointed segments (what non-reentrant checkpoint keeps) when asked."""

    def __init__(self, name, model, remat, cuts=()):
        self.model, self.remat = model, remat
        self.st = [f for _, f in stages(name, model)]
        self.segs = segments(len(self.st), set(cuts))
        self.kept_inputs = None

    def run_seg(self, idx, x):
        for i in idx:
            x = self.st[i](x)
        return x

    def __call__(self, x):
        if self.remat == "none":
            return self.model(x)
        for idx in self.segs:
            if self.kept_inputs is not None:
                self.kept_inputs.append(x)
            x = checkpoint(lambda t, idx=idx: self.run_seg(idx, t), x, use_reentrant=False)
        return x


def kept_bytes(fwd, model, x, y):
    """Bytes of the distinct non-parameter storages kept for the backward pass."""
    params = {p.data_ptr() for p in model.parameters()}
    seen = {}

    def pack(t):
        if t.data_ptr() not in params:
            seen[t.data_ptr()] = t.storage().nbytes() if hasattr(t.storage(), "nbytes") else t.numel() * t.element_size()
        return t

    fwd.kept_inputs = []
    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        loss = bc.es.cross_entropy(fwd(x), y)
    for t in fwd.kept_inputs:
        seen[t.data_ptr()] = t.numel() * t.element_size()
    fwd.kept_inputs = None
    loss.backward()
    return sum(seen.values())


def child_torch(args):
    torch.set_num_threads(args.threads)
    d = np.load(args.data)
    x, y = torch.from_numpy(d["x"]), torch.from_numpy(d["y"])
    model, _ = bc.torch_model(args.sample)
    cuts = [int(c) for c in args.cuts.split(",") if c] if args.cuts else []
    fwd = Forward(args.sample, model, args.remat, cuts)
    opt = torch.optim.SGD(model.parameters(), lr=LR, momentum=0.0)
    saved = {k: v.clone() for k, v in model.state_dict().items()}
    opt.zero_grad(set_to_none=True)
    kept = kept_bytes(fwd, model, x, y)  # untimed, then back to the exported weights
    model.load_state_dict(saved)
    times, losses = [], []
    cpu0 = time.process_time()
    for s in range(args.steps):
        if s == args.warmup:
            cpu0 = time.process_time()
        t0 = time.perf_counter()
        opt.zero_grad(set_to_none=True)
        loss = bc.es.cross_entropy(fwd(x), y)
        loss.backward()
        opt.step()
        times.append(time.perf_counter() - t0)
        losses.append(loss.item())
    with open(args.result, "w") as f:
        cpu = (time.process_time() - cpu0) / max(1, args.steps - args.warmup)
        json.dump({"step_seconds": times, "loss": losses, "kept_activation_bytes": kept, "cpu_seconds_per_step": cpu,
                   "segments": len(fwd.segs) if args.remat != "none" else 0, "stages": len(fwd.st)}, f)
    return 0


# ---- parent ------------------------------------------------------------------------

def run_child(cmd, log):
    """Runs cmd under /usr/bin/time; returns (exit status, peak RSS bytes of that process,
    its CPU seconds: user + system, all threads).
    Not wait4 here: a child forked from this process inherits its RSS high-water mark
    (PyTorch is imported here), and Linux carries it across exec."""
    rss_file = log + ".rss"
    with open(log, "w") as f:
        p = subprocess.Popen(["/usr/bin/time", "-f", "%M", "-o", rss_file] + cmd, stdout=f, stderr=subprocess.STDOUT)
        # wait4's rusage covers /usr/bin/time and the child it reaped, to the microsecond
        # (/usr/bin/time's own %U/%S print only 10 ms steps)
        _, status, ru = os.wait4(p.pid, 0)
        p.returncode = rc = os.waitstatus_to_exitcode(status)
    cpu = ru.ru_utime + ru.ru_stime
    rss = None
    try:
        with open(rss_file) as f:
            rss = int(f.read().strip().splitlines()[-1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    return rc, rss, cpu


def tail(path, n=400):
    with open(path) as f:
        return f.read()[-n:].strip()


def onnxtrain_plan(exe, name, batch, policy):
    """(kept activation bytes, names of the values kept) of `onnxtrain plan --json`."""
    cmd = [exe, "plan", os.path.join(bc.SAMPLES_DIR, f"{name}.onnx"), "--batch-size", str(batch), "--remat", policy,
           "--json"]
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode != 0:
        return None, []
    try:
        plans = json.loads(r.stdout)["plans"]
    except (ValueError, KeyError):
        return None, []
    for p in plans:
        if p.get("policy") == policy:
            return p.get("kept_activation_bytes"), [k for seg in p.get("segments", []) for k in seg["kept"]]
    return None, []


def torch_cuts(exe, name, batch):
    """Stage indices after which PyTorch's checkpoint segments end: where onnxtrain's
    sqrt plan keeps a value. Exits when onnxtrain keeps a value inside a stage (the
    stages in stages() must then be made finer), so the columns never compare two
    different granularities."""
    _, kept = onnxtrain_plan(exe, name, batch, "sqrt")
    model, _ = bc.torch_model(name)
    names = [n for n, _ in stages(name, model)]
    cuts = []
    for k in kept:
        if k not in names:
            sys.exit(f"bench: onnxtrain's sqrt plan of {name} keeps '{k}', which no stage of bench_train.stages() "
                     f"ends at; split the stages there")
        if names.index(k) < len(names) - 1:
            cuts.append(names.index(k))
    return sorted(cuts)


def run_onnxtrain(exe, name, policy, x_npy, y_npy, batch, args, tmp):
    rep = os.path.join(tmp, f"{name}_{policy}_report.json")
    log = os.path.join(tmp, f"{name}_{policy}_ot.log")

    def cmd(steps):
        return [exe, "train", os.path.join(bc.SAMPLES_DIR, f"{name}.onnx"), "--input", x_npy, "--labels", y_npy,
                "--batch-size", str(batch), "--steps", str(steps), "--lr", str(LR), "--optimizer", "sgd",
                "--threads", str(args.threads), "--remat", policy, "--no-shuffle", "--quiet",
                "-o", os.path.join(tmp, "tuned.onnx"), "--report", rep]
    # CPU time per step: a run of the warm-up steps alone, subtracted from the full run
    rc, _, cpu_short = run_child(cmd(args.warmup), log)
    if rc == 0:
        rc, rss, cpu = run_child(cmd(args.warmup + args.steps), log)
    if rc != 0:
        return {"error": f"exit {rc}: {tail(log)}"}
    with open(rep) as f:
        r = json.load(f)
    t = r.get("step_seconds") or []
    cpu_step = (cpu - cpu_short) / args.steps if cpu is not None and cpu_short is not None else None
    return {"steps": t[args.warmup:], "rss": rss, "kept": onnxtrain_plan(exe, name, batch, policy)[0],
            "loss": r.get("loss", [None])[0], "cpu": cpu_step}


def run_torch(name, policy, data, batch, args, tmp, cuts):
    res = os.path.join(tmp, f"{name}_{policy}_torch.json")
    log = os.path.join(tmp, f"{name}_{policy}_torch.log")
    cmd = [sys.executable, os.path.abspath(__file__), "--child", "--sample", name, "--remat", policy, "--data", data,
           "--result", res, "--steps", str(args.warmup + args.steps), "--warmup", str(args.warmup),
           "--threads", str(args.threads), "--cuts", ",".join(map(str, cuts))]
    rc, rss, _ = run_child(cmd, log)
    if rc != 0:
        return {"error": f"exit {rc}: {tail(log)}"}
    with open(res) as f:
        r = json.load(f)
    t = r["step_seconds"]
    return {"steps": t[args.warmup:], "rss": rss, "kept": r["kept_activation_bytes"],
            "segments": r["segments"], "loss": r["loss"][0], "cpu": r["cpu_seconds_per_step"]}


def check_stages(name):
    """The staged forward must be the model's forward (Dropout off): else the remat
    column would time another model."""
    model, _ = bc.torch_model(name, dropout=0.0)
    x, _ = bc.make_data(name, 4)
    saved = {k: v.clone() for k, v in model.state_dict().items()}
    with torch.no_grad():
        a = model(x)
        model.load_state_dict(saved)
        f = Forward(name, model, "sqrt")
        b = f.run_seg(range(len(f.st)), x)
    if not torch.allclose(a, b, rtol=0, atol=0):
        sys.exit(f"bench: the staged forward of {name} differs from the model's forward")
    import onnx  # only here: the stage names must be values of the exported model
    produced = {o for n in onnx.load(os.path.join(bc.SAMPLES_DIR, f"{name}.onnx")).graph.node for o in n.output}
    missing = [n for n, _ in stages(name, model) if n not in produced]
    if missing:
        sys.exit(f"bench: stages() of {name} name values the exported model lacks: {missing}")


def svg_chart(results, path, title):
    """Grouped bars: per sample, step time of each configuration relative to PyTorch's
    plain step (left panel) and peak RSS in MiB (right panel). Written by hand: no
    plotting library needed."""
    configs = [("onnxtrain", "none", "#1f77b4"), ("PyTorch", "none", "#ff7f0e"),
               ("onnxtrain", "sqrt", "#aec7e8"), ("PyTorch", "sqrt", "#ffbb78")]
    names = list(results)
    bw, gap, left, top, ph = 14, 22, 60, 50, 220
    pw = len(names) * (len(configs) * bw + gap) + gap
    width, height = max(left + 2 * pw + 80, left + 4 * 170), top + ph + 110
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" font-family="sans-serif" '
           f'font-size="11">', f'<rect width="{width}" height="{height}" fill="white"/>',
           f'<text x="{left}" y="20" font-size="14">{title}</text>']

    def panel(x0, label, value, vmax, ticks, fmt):
        out.append(f'<text x="{x0}" y="{top - 8}">{label}</text>')
        for tv in ticks:
            y = top + ph - ph * tv / vmax
            out.append(f'<line x1="{x0}" x2="{x0 + pw}" y1="{y:.1f}" y2="{y:.1f}" stroke="#ddd"/>')
            out.append(f'<text x="{x0 - 4}" y="{y + 4:.1f}" text-anchor="end">{fmt(tv)}</text>')
        for i, n in enumerate(names):
            gx = x0 + gap + i * (len(configs) * bw + gap)
            for j, (who, pol, color) in enumerate(configs):
                v = value(results[n], who, pol)
                if v is None:
                    continue
                h = ph * min(v, vmax) / vmax
                out.append(f'<rect x="{gx + j * bw}" y="{top + ph - h:.1f}" width="{bw - 2}" height="{h:.1f}" '
                           f'fill="{color}"><title>{n} {who} {pol}: {fmt(v)}</title></rect>')
            out.append(f'<text x="{gx + 2 * bw}" y="{top + ph + 14}" text-anchor="middle">{n}</text>')
        out.append(f'<line x1="{x0}" x2="{x0 + pw}" y1="{top + ph}" y2="{top + ph}" stroke="black"/>')

    def rel(r, who, pol):
        base = r[("PyTorch", "none")].get("step")
        v = r[(who, pol)].get("step")
        return v / base if v and base else None

    def rss(r, who, pol):
        v = r[(who, pol)].get("rss")
        return v / (1 << 20) if v else None

    vals = [rel(results[n], w, p) for n in names for w, p, _ in configs]
    vmax = max([v for v in vals if v] + [1.0]) * 1.1
    step = 0.5 if vmax <= 4 else math.ceil(vmax / 8)
    panel(left, "step time / PyTorch plain step", rel, vmax,
          [i * step for i in range(int(vmax / step) + 1)], lambda v: f"{v:.2f}")
    vals = [rss(results[n], w, p) for n in names for w, p, _ in configs]
    rmax = max([v for v in vals if v] + [1.0]) * 1.1
    rstep = 10 ** math.floor(math.log10(rmax / 2))
    while rmax / rstep > 8:
        rstep *= 2
    panel(left + pw + 60, "peak RSS (MiB)", rss, rmax,
          [i * rstep for i in range(int(rmax / rstep) + 1)], lambda v: f"{v:.0f}")
    for j, (who, pol, color) in enumerate(configs):
        x = left + j * 170
        out.append(f'<rect x="{x}" y="{top + ph + 40}" width="12" height="12" fill="{color}"/>')
        out.append(f'<text x="{x + 16}" y="{top + ph + 50}">{who}, remat {pol}</text>')
    out.append("</svg>")
    with open(path + ".tmp", "w") as f:
        f.write("\n".join(out) + "\n")
    os.replace(path + ".tmp", path)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--onnxtrain", help="onnxtrain binary (default: build/onnxtrain)")
    ap.add_argument("--threads", type=int, default=2, help="threads for both (default 2)")
    ap.add_argument("--wait-policy", choices=["passive", "active", "default"], default="passive",
                    help="OMP_WAIT_POLICY for both tools (default passive; see bench_common.pin_environment)")
    ap.add_argument("--batch", type=int, help="batch of the dynamic-batch samples (default 32)")
    ap.add_argument("--steps", type=int, default=30, help="timed steps (default 30)")
    ap.add_argument("--warmup", type=int, default=5, help="untimed warm-up steps (default 5)")
    ap.add_argument("--rounds", type=int, default=3,
                    help="child runs per configuration, interleaved; the median is over all their steps")
    ap.add_argument("--only", action="append", choices=bc.SAMPLES, help="benchmark only these samples")
    ap.add_argument("--out", default=os.path.join(bc.HERE, "results_train"), help="output path without extension")
    # child mode (internal)
    ap.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--sample", help=argparse.SUPPRESS)
    ap.add_argument("--remat", default="none", help=argparse.SUPPRESS)
    ap.add_argument("--data", help=argparse.SUPPRESS)
    ap.add_argument("--result", help=argparse.SUPPRESS)
    ap.add_argument("--cuts", default="", help=argparse.SUPPRESS)
    args = ap.parse_args()
    bc.pin_environment(args.threads, args.wait_policy)
    if args.child:
        return child_torch(args)

    exe = None
    try:
        exe = bc.find_onnxtrain(args.onnxtrain)
    except SystemExit as e:
        print(f"bench: {e}; onnxtrain columns will read n/a", file=sys.stderr)
    results, rows, rows10 = {}, [], []
    load0 = os.getloadavg()[0]
    with tempfile.TemporaryDirectory(prefix="ot-bench-train-") as tmp:
        for name in args.only or bc.SAMPLES:
            check_stages(name)
            batch = args.batch or bc.default_batch(name)
            if not bc.es.SAMPLES[name]["dynamic"]:
                batch = 8
            cuts = torch_cuts(exe, name, batch) if exe else []
            x, y = bc.make_data(name, batch)
            x_npy, y_npy, data = (os.path.join(tmp, f"{name}_{k}") for k in ("x.npy", "y.npy", "xy.npz"))
            np.save(x_npy, x.numpy())
            np.save(y_npy, y.numpy())
            np.savez(data, x=x.numpy(), y=y.numpy())
            res = {}
            for _ in range(args.rounds):  # interleaved, so load from other processes hits all alike
                for policy in POLICIES:
                    runs = [(("onnxtrain", policy), lambda: run_onnxtrain(exe, name, policy, x_npy, y_npy, batch,
                                                                          args, tmp)
                             if exe else {"error": "no onnxtrain binary"}),
                            (("PyTorch", policy), lambda: run_torch(name, policy, data, batch, args, tmp, cuts))]
                    for key, fn in runs:
                        r = fn()
                        acc = res.setdefault(key, {"steps": [], "rss": 0, "cpus": []})
                        if "error" in r:
                            acc["error"] = r["error"]
                            continue
                        acc["steps"] += r["steps"]
                        if r.get("cpu") is not None:
                            acc["cpus"].append(r["cpu"])
                        acc["rss"] = max(acc["rss"], r["rss"] or 0)
                        acc["kept"] = r["kept"]
            for acc in res.values():
                acc["step"] = bc.median(acc["steps"]) if acc["steps"] and "error" not in acc else None
                acc["p10"] = (sorted(acc["steps"])[len(acc["steps"]) // 10]
                              if acc["steps"] and "error" not in acc else None)
                acc["cpu"] = bc.median(acc["cpus"]) if acc["cpus"] and "error" not in acc else None
            for k, v in res.items():
                if "error" in v:
                    print(f"  {name} {k[0]} --remat {k[1]}: not available ({v['error']})", file=sys.stderr)
            results[name] = res
            for policy in POLICIES:
                o, p = res[("onnxtrain", policy)], res[("PyTorch", policy)]
                os_, ps_ = o.get("step"), p.get("step")
                o_extra = p_extra = None
                if policy != "none":
                    on, pn = res[("onnxtrain", "none")].get("step"), res[("PyTorch", "none")].get("step")
                    o_extra = os_ - on if os_ and on else None
                    p_extra = ps_ - pn if ps_ and pn else None
                rows.append([name, batch, policy,
                             bc.fmt(os_ * 1e3 if os_ else None), bc.fmt(ps_ * 1e3 if ps_ else None),
                             bc.fmt(os_ / ps_ if os_ and ps_ else None, 2),
                             "" if policy == "none" else bc.fmt(o_extra * 1e3 if o_extra is not None else None),
                             "" if policy == "none" else bc.fmt(p_extra * 1e3 if p_extra is not None else None),
                             bc.fmt_bytes(o.get("rss")), bc.fmt_bytes(p.get("rss")),
                             bc.fmt_bytes(o.get("kept")), bc.fmt_bytes(p.get("kept"))])
                op, pp = o.get("p10"), p.get("p10")
                oc, pc = o.get("cpu"), p.get("cpu")
                rows10.append([name, policy, bc.fmt(op * 1e3 if op else None), bc.fmt(pp * 1e3 if pp else None),
                               bc.fmt(op / pp if op and pp else None, 2),
                               bc.fmt(oc * 1e3 if oc else None), bc.fmt(pc * 1e3 if pc else None),
                               bc.fmt(oc / pc if oc and pc else None, 2)])
            print(f"  {name}: done", file=sys.stderr)
    load1 = os.getloadavg()[0]
    header = ["sample", "batch", "remat", "onnxtrain ms/step", "PyTorch ms/step", "ratio", "onnxtrain extra ms",
              "PyTorch extra ms", "onnxtrain peak RSS", "PyTorch peak RSS", "onnxtrain kept act.",
              "PyTorch kept act."]
    title = (f"SGD training step, median of {args.rounds} x {args.steps} steps ({args.rounds} child runs of "
             f"{args.steps} steps after {args.warmup} warm-up) "
             f"({bc.machine_line(args.threads)}; load average {load0:.1f} -> {load1:.1f})")
    text = (title + f"; {time.strftime('%Y-%m-%d %H:%M')}.\nratio = onnxtrain/PyTorch step time; extra = remat "
            "step minus the same tool's plain step; remat: onnxtrain `--remat sqrt`, PyTorch "
            "`torch.utils.checkpoint(use_reentrant=False)` over segments ending where onnxtrain's sqrt plan keeps a "
            "value (the same granularity; every segment checkpointed).\n\n"
            + bc.markdown_table(header, rows) + "\n![training step chart](results_train.svg)\n\n"
            "Figures less sensitive to load from other processes: the fastest 10% of steps (10th "
            "percentile of wall time), and CPU time per step (user + system, all threads; onnxtrain: "
            "a run of the warm-up steps alone subtracted from the full run; PyTorch: process_time over "
            "the timed steps).\n\n"
            + bc.markdown_table(["sample", "remat", "onnxtrain p10 ms", "PyTorch p10 ms", "p10 ratio",
                                 "onnxtrain CPU ms/step", "PyTorch CPU ms/step", "CPU ratio"], rows10))
    print(text)
    with open(args.out + ".md.tmp", "w") as f:
        f.write(text)
    os.replace(args.out + ".md.tmp", args.out + ".md")
    svg_chart(results, args.out + ".svg", f"SGD step, {args.threads} threads: onnxtrain vs PyTorch")
    return 0


if __name__ == "__main__":
    sys.exit(main())
