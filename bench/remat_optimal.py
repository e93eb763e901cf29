#!/usr/bin/env python3
"""remat_optimal.py — `--remat auto` against `--remat optimal` (issue 16 item 3, issue 28 item 3).

For every sample (samples/*.onnx, batch 8), a few zoo models (samples/zoo, exported by
samples/zoo/export_zoo.py into /tmp/onnxtrain-zoo, or --zoo DIR; batch 4) and any --extra
model, budgets a quarter, half and three quarters of the way from the smallest feasible
peak (`--remat all`) to the plain one (`--remat none`) (--quarters 0,1,2,3,4 for all five),
every plan with `--optimizer sgd`. At each budget `onnxtrain plan --json` with auto and
with optimal gives the recompute FLOPs, the planned peak and the seconds the choice took,
and for optimal its lower bound on the FLOPs of any plan the planner accepts, whether it
proved its plan (the bound meets it), the gap (plan - bound) / plan, the rounds and the
seconds. Writes the table between the markers in docs/remat.md (--no-write: print it
only). With --only, just the named models' rows are replaced, where they stood; the other
models' rows are kept as they are.

    python3 bench/remat_optimal.py [--build build] [--zoo /tmp/onnxtrain-zoo] [--limit 60]
        [--extra gpt4_d128=DIR/model.onnx]

auto's excess is (auto - optimal) / step FLOPs, in % of the step, and auto / optimal
where optimal recomputes anything. A cell "—" is a budget the policy did not meet (exit
9: auto found no plan, or optimal's memory model found none that the planner accepts).
"""
import argparse
import json
import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
SAMPLES = ["mlp", "chain48", "resnet", "mobilenet", "tinygpt"]
ZOO = ["gpt2", "bert", "llama", "mobilenet_v2", "resnet18"]
BEGIN, END = "<!-- remat_optimal:begin -->", "<!-- remat_optimal:end -->"


def plan(binary, model, batch, policy, budget=None, limit=None):
    cmd = [binary, "plan", model, "--batch-size", str(batch), "--remat", policy, "--json", "--threads", "2",
           "--optimizer", "sgd"]
    if budget is not None:
        cmd += ["--memory-budget", str(budget)]
    if limit is not None:
        cmd += ["--remat-time-limit", str(limit)]
    p = subprocess.run(cmd, capture_output=True, text=True)
    if p.returncode == 9:
        return None
    if p.returncode != 0:
        raise SystemExit(f"{' '.join(cmd)}: exit {p.returncode}\n{p.stderr}")
    d = json.loads(p.stdout)
    return d, d["plans"][1]


def models(zoo, extra):
    out = [(m, os.path.join(ROOT, "samples", m + ".onnx"), 8) for m in SAMPLES]
    for e in extra:  # NAME=PATH[:BATCH], e.g. bench/peers_torch.py's exports
        name, rest = e.split("=", 1)
        path, _, batch = rest.partition(":")
        out.append((name, path, int(batch or 8)))
    for m in ZOO:
        path = os.path.join(zoo, m, m + ".onnx")
        if os.path.exists(path):
            out.append((m, path, 4))
        else:
            print(f"remat_optimal: {path} missing (samples/zoo/export_zoo.py --only {m}); skipped", file=sys.stderr)
    return out


def fmt_flops(x):
    return "—" if x is None else f"{x:,.0f}"


def row_for(binary, name, path, batch, limit, quarters):
    d, p_all = plan(binary, path, batch, "all")
    none, least = d["plans"][0]["peak_bytes"], p_all["peak_bytes"]
    step = d["plans"][0]["step_flops"]
    rows = []
    budgets = sorted({least + (none - least) * i // 4 for i in quarters})
    for b in budgets:
        a = plan(binary, path, batch, "auto", b)
        o = plan(binary, path, batch, "optimal", b, limit)
        af = a[1]["extra_flops"] if a else None
        of = o[1]["extra_flops"] if o else None
        os_ = o[1].get("optimal") if o else None
        if af is not None and of is not None:
            excess = f"{100.0 * (af - of) / step:+.2f}%"
            ratio = f"{af / of:.2f}" if of > 0 else ("1.00" if af == 0 else "∞")
        else:
            excess = ratio = "—"
        if os_:
            # proven: the bound meets the plan; else the certified gap (plan - bound) / plan
            gap = "0" if os_["proven"] else "%.2g%%" % (100 * os_["gap"])
            kept = "auto's plan kept; " if os_.get("heuristic") else ""
            solve = (f"{kept}{fmt_flops(os_['bound_flops'])} / {'yes' if os_['proven'] else 'no'} / {gap} / "
                     f"{os_['rounds']} / {os_['seconds']:.2f} s")
        else:
            solve = "—"
        rows.append(f"| {name} | {d['nodes']} | {b:,} | {fmt_flops(af)} | {a[1]['choose_seconds']:.2f} s | "
                    f"{fmt_flops(of)} | {excess} | {ratio} | {solve} |" if a else
                    f"| {name} | {d['nodes']} | {b:,} | — | — | {fmt_flops(of)} | — | — | {solve} |")
    return rows


def row_model(row):
    """The model named in a table row's first cell."""
    return row.split("|")[1].strip()


def merge_rows(old_table, new_rows, only):
    """The table's old rows with those of the models in `only` replaced by new_rows:
    each model's new rows stand where its first old row stood (a model new to the
    table goes last), so a run over a few models keeps every other model's rows."""
    old = [r for r in old_table.strip().splitlines()[2:] if r.startswith("|")]
    fresh = {}
    for r in new_rows:
        fresh.setdefault(row_model(r), []).append(r)
    out, placed = [], set()
    for r in old:
        m = row_model(r)
        if m not in only:
            out.append(r)
        elif m not in placed and m in fresh:
            out += fresh[m]
            placed.add(m)
    for m, rs in fresh.items():
        if m not in placed:
            out += rs
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--build", default=os.path.join(ROOT, "build"))
    ap.add_argument("--zoo", default="/tmp/onnxtrain-zoo")
    ap.add_argument("--limit", type=float, default=60.0, help="--remat-time-limit for optimal")
    ap.add_argument("--only", help="comma-separated model names")
    ap.add_argument("--quarters", default="1,2,3",
                    help="budgets, in quarters of the way from all's peak (0) to none's (4); default 1,2,3")
    ap.add_argument("--no-write", action="store_true")
    ap.add_argument("--extra", action="append", default=[], metavar="NAME=PATH[:BATCH]",
                    help="one more model (batch 8 unless given), e.g. gpt4_d128=DIR/model.onnx from "
                         "bench/peers_torch.py export --case gpt4_d128 --dir DIR")
    a = ap.parse_args()
    binary = os.path.join(a.build, "onnxtrain")
    head = ["| model | nodes | budget (bytes) | auto extra FLOPs | auto time | optimal extra FLOPs | "
            "auto − optimal (% of step) | auto / optimal | optimal bound / proven / gap / rounds / time |",
            "|---|---|---|---|---|---|---|---|---|"]
    rows = []
    for name, path, batch in models(a.zoo, a.extra):
        if a.only and name not in a.only.split(","):
            continue
        rows += row_for(binary, name, path, batch, a.limit, [int(q) for q in a.quarters.split(",")])
        print(rows[-1], file=sys.stderr)
    print("\n".join(head + rows))
    if a.no_write:
        return
    doc = os.path.join(ROOT, "docs", "remat.md")
    text = open(doc).read()
    i, j = text.index(BEGIN) + len(BEGIN), text.index(END)
    if a.only:
        rows = merge_rows(text[i:j], rows, a.only.split(","))
    table = "\n".join(head + rows)
    with open(doc + ".tmp", "w") as f:
        f.write(text[:i] + "\n" + table + "\n" + text[j:])
    os.replace(doc + ".tmp", doc)


if __name__ == "__main__":
    main()
