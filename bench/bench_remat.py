#!/usr/bin/python3
"""bench_remat.py — onnxtrain's rematerialization against PyTorch's activation
checkpointing (torch.utils.checkpoint, use_reentrant=False) at the same granularity, on
the samples, in one run: activation bytes held for the backward pass and the time of
one training step (forward + loss + backward), each without and with remat. Also the
exact planned peak of onnxtrain's whole step and the timeline pictures
(`onnxtrain plan --timeline`). Writes bench/results_remat.md and docs/remat_<sample>.svg.

    /usr/bin/python3 bench/bench_remat.py [--threads 2] [--onnxtrain build/onnxtrain] [--repeats 5]

Granularity: PyTorch checkpoints one module per segment (each residual block, each GPT
block, each depthwise-separable block; chain48 in sqrt(48) ~ 7-layer segments); onnxtrain
runs the policy that keeps the same boundaries (every:K over the articulation points the
backward reads, or sqrt for the chain). Held activation bytes: onnxtrain's from `plan`
(forward values alive across the forward/backward boundary); PyTorch's are the tensors
autograd saves for backward (saved_tensors_hooks, parameters excluded, each storage once).
PyTorch on the CPU has no exact peak, so only onnxtrain's planned peak is shown.
Caveat: PyTorch recomputes BatchNorm in training mode and updates its running statistics
a second time under checkpointing; onnxtrain's recompute clones never do (`verify`).
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

import numpy as np

import bench_common as bc
import torch
from torch.utils.checkpoint import checkpoint as torch_checkpoint

# Non-reentrant checkpointing keeps a segment's inputs itself, out of sight of
# saved_tensors_hooks: RECORD (when set) is told about them.
RECORD = []


def checkpoint(fn, x, use_reentrant=False):
    for r in RECORD:
        r(x)
    return torch_checkpoint(fn, x, use_reentrant=use_reentrant)


def ckpt_forward(name, model):
    """PyTorch's forward of sample `name` with one checkpoint per unit (see POLICY)."""
    if name == "chain48":
        seg = 7

        def fwd(x):
            layers = list(model.layers)
            for i in range(0, len(layers), seg):
                part = layers[i:i + seg]

                def run(h, part=part):
                    for layer in part:
                        h = torch.tanh(layer(h))
                    return h
                x = checkpoint(run, x, use_reentrant=False)
            return model.out(x)
        return fwd
    if name == "tinygpt":
        def fwd(tokens):
            T = tokens.size(1)
            pos = torch.arange(T, dtype=torch.long).unsqueeze(0)
            x = model.drop(model.tok(tokens) + model.pos(pos))
            for b in model.blocks:
                x = checkpoint(b, x, use_reentrant=False)
            return model.head(model.ln_f(x))
        return fwd
    if name == "resnet":
        def fwd(x):
            x = model.pool(torch.relu(model.bn(model.stem(x))))
            x = checkpoint(model.block1, x, use_reentrant=False)
            x = checkpoint(model.block2, x, use_reentrant=False)
            x = torch.nn.functional.adaptive_avg_pool2d(x, 1)
            return model.fc(torch.flatten(x, 1))
        return fwd
    if name == "mobilenet":
        def fwd(x):
            x = model.act(model.bn(model.stem(x)))
            x = checkpoint(model.block1, x, use_reentrant=False)
            x = checkpoint(model.block2, x, use_reentrant=False)
            return model.fc(torch.flatten(model.pool(x), 1))
        return fwd
    if name == "mlp":
        def fwd(x):
            h = checkpoint(lambda t: torch.relu(model.fc1(t)), x, use_reentrant=False)
            h = checkpoint(lambda t: torch.relu(model.fc2(t)), h, use_reentrant=False)
            return model.fc3(h)
        return fwd
    raise KeyError(name)


POLICY = {"chain48": ("sqrt", "segments of ~7 layers"), "tinygpt": ("every:2", "each GPT block"),
          "resnet": ("every:1", "each residual block"), "mobilenet": ("every:4", "each separable block"),
          "mlp": ("every:1", "each Linear+ReLU")}


def torch_saved_bytes(model, fwd, x, y):
    params = {p.untyped_storage().data_ptr() if hasattr(p, "untyped_storage") else p.storage().data_ptr()
              for p in model.parameters()}
    # the data batch is an input, not an activation (onnxtrain counts it as I/O)
    params.add(x.untyped_storage().data_ptr() if hasattr(x, "untyped_storage") else x.storage().data_ptr())
    seen = {}

    def pack(t):
        st = t.untyped_storage() if hasattr(t, "untyped_storage") else t.storage()
        ptr = st.data_ptr()
        if ptr not in params:
            seen[ptr] = max(seen.get(ptr, 0), st.nbytes() if hasattr(st, "nbytes") else st.size() * t.element_size())
        return t

    RECORD.append(pack)
    try:
        with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
            loss = bc.es.cross_entropy(fwd(x), y)
    finally:
        RECORD.pop()
    loss.backward()
    model.zero_grad(set_to_none=True)
    return sum(seen.values())


def torch_step_seconds(model, fwd, x, y, repeats):
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        loss = bc.es.cross_entropy(fwd(x), y)
        loss.backward()
        times.append(time.perf_counter() - t0)
        model.zero_grad(set_to_none=True)
    return bc.median(times)


def onnxtrain_json(binary, args):
    out = subprocess.run([binary] + args, capture_output=True, text=True)
    if out.returncode != 0:
        sys.exit(f"bench: onnxtrain {' '.join(args)} failed ({out.returncode}):\n{out.stderr}")
    return json.loads(out.stdout)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--onnxtrain", default=None)
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--samples", default=",".join(bc.SAMPLES))
    args = ap.parse_args()
    binary = bc.find_onnxtrain(args.onnxtrain)
    bc.pin_environment(args.threads, "passive")  # as bench_train.py: no spinning threads on a shared machine
    torch.set_num_threads(args.threads)
    rows = []
    tmp = tempfile.mkdtemp(prefix="bench_remat_")
    for name in args.samples.split(","):
        policy, gran = POLICY[name]
        batch = bc.default_batch(name)
        model, spec = bc.torch_model(name)
        bc.check_twin(name, model)
        x, y = bc.make_data(name, batch)
        xp, yp = os.path.join(tmp, f"{name}_x.npy"), os.path.join(tmp, f"{name}_y.npy")
        np.save(xp, x.numpy())
        np.save(yp, y.numpy())
        plain = model.forward
        ck = ckpt_forward(name, model)
        t_saved0 = torch_saved_bytes(model, plain, x, y)
        t_saved1 = torch_saved_bytes(model, ck, x, y)
        torch_step_seconds(model, plain, x, y, 2)  # warm-up: allocator and thread pool
        torch_step_seconds(model, ck, x, y, 2)
        # interleave the timings so that load from other processes hits both alike
        t0s, t1s, o0s, o1s = [], [], [], []
        for _ in range(args.repeats):
            t0s.append(torch_step_seconds(model, plain, x, y, 3))
            t1s.append(torch_step_seconds(model, ck, x, y, 3))
            v = onnxtrain_json(binary, ["verify", os.path.join(bc.SAMPLES_DIR, f"{name}.onnx"), "--input", xp,
                                        "--labels", yp, "--remat", policy, "--threads", str(args.threads),
                                        "--batch-size", str(batch), "--json"])
            if not v["equal"]:
                sys.exit(f"bench: onnxtrain verify {name} --remat {policy}: results differ")
            o0s.append(v["seconds_none"])
            o1s.append(v["seconds_remat"])
        svg = os.path.join(bc.ROOT, "docs", f"remat_{name}.svg")
        p = onnxtrain_json(binary, ["plan", os.path.join(bc.SAMPLES_DIR, f"{name}.onnx"), "--remat", policy,
                                    "--batch-size", str(batch), "--json", "--timeline", svg])
        pn, pr = p["plans"]
        rows.append([name, batch, gran, policy,
                     bc.fmt_bytes(pn["kept_activation_bytes"]), bc.fmt_bytes(pr["kept_activation_bytes"]),
                     bc.fmt_bytes(t_saved0), bc.fmt_bytes(t_saved1),
                     bc.fmt_bytes(pn["peak_bytes"]), bc.fmt_bytes(pr["peak_bytes"]),
                     bc.fmt(bc.median(o0s) * 1e3, 2), bc.fmt(bc.median(o1s) * 1e3, 2),
                     bc.fmt(bc.median(t0s) * 1e3, 2), bc.fmt(bc.median(t1s) * 1e3, 2)])
        print(" | ".join(str(c) for c in rows[-1]), flush=True)
    header = ["sample", "batch", "checkpoint unit", "onnxtrain --remat", "onnxtrain held (none)",
              "onnxtrain held (remat)", "PyTorch saved (plain)", "PyTorch saved (checkpoint)",
              "onnxtrain peak (none)", "onnxtrain peak (remat)", "onnxtrain step ms (none)",
              "onnxtrain step ms (remat)", "PyTorch step ms (plain)", "PyTorch step ms (checkpoint)"]
    table = bc.markdown_table(header, rows)
    out = os.path.join(bc.HERE, "results_remat.md")
    with open(out, "w") as f:
        load = os.getloadavg()[0]
        f.write("# Remat: onnxtrain vs PyTorch checkpointing\n\n" + bc.machine_line(args.threads) +
                f"; load average {load:.1f} at the end of the run"
                + (" (busy machine: the times are not meaningful, the bytes are)" if load > (os.cpu_count() or 1)
                   else "") + "\n\n")
        f.write(table)
        f.write("\nHeld/saved: activation bytes kept for the backward pass (see bench_remat.py). "
                "Step: forward + loss + backward, median over repeats. Timelines: docs/remat_<sample>.svg.\n")
    print(table)
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
