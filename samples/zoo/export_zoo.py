#!/usr/bin/python3
"""export_zoo.py — exports onnxtrain's model zoo: tiny random-weight instances of
torchvision's classification models and HuggingFace transformers (tiny configs, no
downloads), with PyTorch's references in float32 and float64, outside git.

Run with Debian's PyTorch 1.13 through a venv that adds transformers (DESIGN.md):

    /usr/bin/python3 -m venv --system-site-packages /work/venvs/hf
    /work/venvs/hf/bin/pip install 'transformers<4.40'
    /work/venvs/hf/bin/python samples/zoo/export_zoo.py [--out DIR] [--only NAME,...]

The exporter settings are those of samples/export_samples.py (TorchScript exporter,
opset 17, training=TrainingMode.TRAINING, do_constant_folding=False), so BatchNorm and
Dropout keep their training form. For each model DIR/NAME/ holds:

    NAME.onnx          as a user exports it (Dropout p=0.1 where the model has any)
    NAME_nodrop.onnx   the same weights and graph with every Dropout probability 0
    data/*.npy         inputs (one file per graph input) and int64 labels
    f32/, f64/         PyTorch's references at that precision (model.double() for f64):
                       eval.npy      logits in inference mode (model.eval())
                       loss.npy      cross-entropy of the training-mode logits (no dropout)
                       grads/*.npy   d loss / d parameter, one file per ONNX initializer
    manifest.json      inputs, loss, classes, the parameter -> file map, the family

Everything is deterministic (fixed seeds, deterministic algorithms, one thread).

--exporter dynamo runs torch.onnx.export(..., dynamo=True) of a current PyTorch (>= 2.5,
in a venv of its own) at its default opset: the model is exported in training mode, but
that exporter keeps only Dropout's training form. Its optimizer folds BatchNorm into the
Conv, merges identical initializers, drops zero biases, splits tied weights and folds
position rows. The references are PyTorch's for the graph it wrote (same_graph.py:
BatchNorm in eval mode, the same folds, each initializer mapped to the parameter uses
it stands for); the manifest lists merged initializers (`shared`), transposed ones and
the parameters no initializer stands for (`unmapped`: dropped or folded away). Before
export every BatchNorm gets statistics of its own from one training-mode pass over the
trace batch (fresh ones would fold into zero biases, which the optimizer drops).
"""
import argparse
import copy
import json
import os
import sys
import time
import warnings

import numpy as np
import onnx
import onnx.numpy_helper
import torch
import torch.nn as nn
import torch.nn.functional as F

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import kinks  # noqa: E402
import same_graph  # noqa: E402
import zoo_models  # noqa: E402

OPSET = 17  # TorchScript's default; --opset 13..17 (PyTorch 1.13's TorchScript exporter stops at 17)
TORCH2 = int(torch.__version__.split(".")[0]) >= 2
DROPOUT = 0.1
# run_zoo's train check (manifest "train"): the largest of these lrs at which PyTorch's own
# plain SGD on the same graph and batch lowers the loss at every one of TRAIN_STEPS steps.
# At 0.01, onnxtrain's default, the check is the plain one (NAME.onnx, a falling loss);
# a graph that does not descend steadily even in PyTorch at 0.01 (BatchNorm frozen in
# inference form by the dynamo exporter) is checked at its stable lr on the Dropout-free
# graph, where Dropout's noise cannot outweigh so small a step.
TRAIN_LRS = (0.01, 0.003, 0.001, 3e-4, 1e-4, 3e-5, 1e-5, 3e-6, 1e-6)
TRAIN_STEPS = 5


class Logits(nn.Module):
    """Calls the wrapped model with named inputs and returns only the logits, so every
    export has one output named 'logits'."""

    def __init__(self, model, names):
        super().__init__()
        self.model = model
        self.names = names

    def forward(self, *args):
        if len(self.names) == 1 and not hasattr(self.model, "config"):
            return self.model(args[0])  # torchvision: one positional image
        out = self.model(**dict(zip(self.names, args)))
        return out if isinstance(out, torch.Tensor) else out.logits  # a wrapper's own tensor (zoo_torch2.py)


def torch_export(wrap, args, path, names, axes, opset, exporter, optimize):
    """The one place that branches on the exporter and PyTorch's version. TorchScript
    (PyTorch 1.13): training mode, no constant folding. Dynamo (PyTorch >= 2.5): it has no
    training switch (torch.export records the module's mode: Dropout keeps its training
    form, BatchNorm comes out in inference form), its own optimizer (--no-optimize turns
    it off) and external data (off: these models are tiny)."""
    if exporter == "torchscript":
        kw = dict(dynamo=False) if TORCH2 else {}
        torch.onnx.export(wrap, args, path, input_names=names, output_names=["logits"], dynamic_axes=axes,
                          opset_version=opset, do_constant_folding=False,
                          training=torch.onnx.TrainingMode.TRAINING, export_params=True, **kw)
        return
    if not TORCH2:
        raise SystemExit(f"--exporter dynamo needs PyTorch >= 2.5 (this is {torch.__version__})")
    # Logits.forward(*args): one dynamic_shapes entry (for args) holding one per input.
    # The positional embedding tables hold 32 positions at most (zoo_models).
    dims = {"batch": torch.export.Dim("batch"), "seq": torch.export.Dim("seq", max=32)}
    shapes = (tuple({ax: dims[d] for ax, d in axes[n].items()} for n in names),)
    prog = torch.onnx.export(wrap, args, input_names=names, output_names=["logits"], dynamic_shapes=shapes,
                             opset_version=opset, dynamo=True, optimize=optimize, external_data=False)
    prog.save(path, external_data=False)


def rename_dims(m, names, axes):
    """The dynamo exporter names symbolic dims itself (s0, s1...): give the graph inputs'
    dims the names of dynamic_axes (run_zoo binds 'seq') everywhere they occur."""
    ren = {}
    for inp in m.graph.input:
        for ax, want in axes.get(inp.name, {}).items():
            dim = inp.type.tensor_type.shape.dim[ax]
            if dim.dim_param and dim.dim_param != want:
                ren[dim.dim_param] = want
    if not ren:
        return
    for vi in list(m.graph.input) + list(m.graph.output) + list(m.graph.value_info):
        for dim in vi.type.tensor_type.shape.dim:
            if dim.dim_param in ren:
                dim.dim_param = ren[dim.dim_param]


def export(wrap, data, path, entry, opset, exporter="torchscript", optimize=True):
    names = [n for n, _, _ in entry["inputs"]]
    axes = {}
    for n, kind, _ in entry["inputs"]:
        axes[n] = {0: "batch", 1: "seq"} if entry["dynseq"] and kind != "image" else {0: "batch"}
    axes["logits"] = {0: "batch", 1: "seq"} if entry["dynseq"] and entry["label_shape"] else {0: "batch"}
    args = tuple(data[n] for n in names)
    torch_export(wrap, args, path, names, axes, opset, exporter, optimize)
    # Output dims the exporter could not infer get invented names; all but batch/seq are
    # fixed by the model, so record the traced size (as export_samples.py does).
    m = onnx.load(path)
    rename_dims(m, names, axes)
    # The traced size, without moving BatchNorm's running statistics (a training-mode
    # forward would): a dynamo file folds them into the Conv, so the model must keep
    # what the file holds.
    state = copy.deepcopy(wrap.state_dict())
    with torch.no_grad():
        shape = tuple(wrap(*args).shape)
    wrap.load_state_dict(state)
    for dim, size in zip(m.graph.output[0].type.tensor_type.shape.dim, shape):
        if dim.dim_param and dim.dim_param not in ("batch", "seq"):
            dim.dim_value = size
    onnx.save(m, path)
    return m


def map_params(model, m, strict=False):
    """PyTorch parameter / buffer name -> ONNX initializer. With do_constant_folding=False
    the exporter keeps state-dict names; otherwise (tied weights) the one initializer with
    the same bytes. Unmappable names are returned apart, never guessed. strict (dynamo):
    a name match must hold the same bytes too, since its optimizer folds BatchNorm into
    the Conv weight under the Conv's name; several parameters may then map to one merged
    initializer (identical LayerNorm scales), whose reference gradient is their sum, and
    a Linear weight may be stored transposed under a new name (returned in `transposed`:
    its reference gradient is transposed too)."""
    inits = {t.name: onnx.numpy_helper.to_array(t) for t in m.graph.initializer}
    mapping, unmapped, transposed = {}, [], set()
    params = {n for n, _ in model.named_parameters()}
    for name, t in list(model.named_parameters()) + list(model.named_buffers()):
        a = t.detach().numpy()
        if name in inits and inits[name].shape == a.shape and (not strict or np.array_equal(inits[name], a)):
            mapping[name] = name
            continue
        hits = [k for k, v in inits.items() if v.shape == a.shape and v.dtype == a.dtype and np.array_equal(v, a)]
        if len(hits) == 1:
            mapping[name] = hits[0]
            continue
        if strict and a.ndim == 2 and name in params:
            hits = [k for k, v in inits.items() if v.shape == a.T.shape and v.dtype == a.dtype
                    and np.array_equal(v, a.T)]
            if len(hits) == 1:
                mapping[name] = hits[0]
                transposed.add(name)
                continue
        if name in params:  # an unmapped buffer (a mask, a step counter) has no gradient
            unmapped.append(name)
    return mapping, unmapped, inits, transposed


def load_initializers(model, mapping, inits, transposed):
    """Tracing a training-mode model moves BatchNorm's running statistics: make the
    PyTorch model hold exactly what the file holds."""
    with torch.no_grad():
        for name, t in list(model.named_parameters()) + list(model.named_buffers()):
            if name in mapping and name not in transposed:
                t.copy_(torch.from_numpy(inits[mapping[name]].copy()))


def save(path, array):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    np.save(path, np.ascontiguousarray(array))


def cross_entropy(logits, labels, axis):
    """Mean cross-entropy over every position, the classes on `axis` (-1 for the last;
    1 for a segmentation model's [batch, classes, H, W] logits: per pixel). axis None:
    the mean squared error against float targets (onnxtrain --loss mse), for a model
    that regresses (a diffusion UNet's noise)."""
    if axis is None:
        return F.mse_loss(logits, labels.to(logits.dtype))
    return F.cross_entropy(logits.movedim(axis, -1).reshape(-1, logits.shape[axis]), labels.reshape(-1))


def references(model, names, data, labels, mapping, d, dtype, transposed=frozenset(), graph=None, calls32=None,
               axis=-1):
    """Writes eval logits, training-mode loss and parameter gradients at one precision.
    The default dtype follows: HF mask code calls torch.full(..., finfo(dtype).min)
    without a dtype, which overflows float32 when dtype is float64. Returns the loss,
    {initializer: gradient file}, the kinked calls of the run (kinks.Recorder) and, for
    float64 given float32's calls, {initializer: kink allowance file} and the number of
    near-kink entries (kinks.py)."""
    old = torch.get_default_dtype()
    torch.set_default_dtype(dtype)
    try:
        return _references(model, names, data, labels, mapping, d, dtype, transposed, graph, calls32, axis)
    finally:
        torch.set_default_dtype(old)


def to_initializers(pgrads, mapping, transposed, graph):
    """{parameter: array} -> {initializer: array}: a merged initializer gets the sum of
    its parameters', a transposed one the transpose (dynamo: graph's uses)."""
    out = {}
    if graph is not None:  # dynamo: {initializer: uses} from same_graph.mapping
        for init, (uses, shape) in graph.items():
            g = same_graph.reference_grad(pgrads, uses, shape)
            if g is not None:
                out[init] = g
        return out
    for pname, g in pgrads.items():
        init = mapping.get(pname)
        if init is None:
            continue
        g = g.T if pname in transposed else g
        out[init] = out[init] + g if init in out else g
    return out


def save_per_init(d, sub, arrays):
    files = {}
    for init, g in arrays.items():
        safe = "".join(c if c.isalnum() or c in ".-_" else "_" for c in init)
        save(os.path.join(d, sub, safe + ".npy"), g)
        files[init] = f"{sub}/{safe}.npy"
    return files


def _references(model, names, data, labels, mapping, d, dtype, transposed, graph=None, calls32=None, axis=-1):
    tag = "f32" if dtype == torch.float32 else "f64"
    model = copy.deepcopy(model).to(dtype)
    args = [data[n].to(dtype) if data[n].is_floating_point() else data[n] for n in names]
    model.eval()
    with torch.no_grad():
        save(os.path.join(d, tag, "eval.npy"), model(*args).numpy())
    model.train()
    if graph is not None:
        same_graph.bn_eval(model)  # the file's BatchNorm is in inference form
    model.zero_grad()
    rec = kinks.Recorder()
    with rec:
        logits = model(*args)
    loss = cross_entropy(logits, labels, axis)
    kfiles, n_kinks = {}, 0
    if calls32 is not None:
        bound, n_kinks = kinks.allowance(calls32, rec.calls, loss, dict(model.named_parameters()))
        kfiles = save_per_init(d, os.path.join(tag, "kink"), to_initializers(bound, mapping, transposed, graph))
    loss.backward()
    save(os.path.join(d, tag, "loss.npy"), np.array(loss.item(), dtype=np.float64))
    pgrads = {n: p.grad.numpy() for n, p in model.named_parameters() if p.grad is not None}
    files = save_per_init(d, os.path.join(tag, "grads"), to_initializers(pgrads, mapping, transposed, graph))
    return float(loss.item()), files, rec.calls, kfiles, n_kinks


def train_lr(model, names, data, labels, graph, axis=-1):
    """The lr of run_zoo's train check (TRAIN_LRS) and PyTorch's losses at it: plain SGD,
    float32, TRAIN_STEPS steps on the one batch, the model as NAME_nodrop.onnx computes it
    (graph: BatchNorm in inference form), every parameter trained; the first lr at which
    every step lowers the loss."""
    args = [data[n] for n in names]
    for lr in TRAIN_LRS:
        m = copy.deepcopy(model).float().train()
        if graph is not None:
            same_graph.bn_eval(m)
        opt = torch.optim.SGD([p for p in m.parameters() if p.requires_grad], lr=lr)
        losses = []
        for _ in range(TRAIN_STEPS):
            opt.zero_grad()
            logits = m(*args)
            loss = cross_entropy(logits, labels, axis)
            loss.backward()
            opt.step()
            losses.append(float(loss.item()))
        if all(np.isfinite(losses)) and all(b < a for a, b in zip(losses, losses[1:])):
            return lr, losses
    raise SystemExit(f"train_lr: PyTorch's loss does not fall at every step at any lr of {TRAIN_LRS}: {losses}")


def build(entry, p):
    torch.manual_seed(0)
    model = entry["make"](p)
    return Logits(model, [n for n, _, _ in entry["inputs"]]).train()


def set_dropout_zero(model):
    """Belt and braces for modules whose probability the builder did not reach."""
    for mod in model.modules():
        if isinstance(mod, nn.Dropout):
            mod.p = 0.0
        if type(mod).__name__ == "StochasticDepth":
            mod.p = 0.0


def export_one(name, out, opset=OPSET, exporter="torchscript", optimize=True):
    entry = zoo_models.ZOO[name]
    d = os.path.join(out, name)
    os.makedirs(d, exist_ok=True)
    names = [n for n, _, _ in entry["inputs"]]
    trace, _ = zoo_models.make_inputs(entry, zoo_models.BATCH, seed=99)
    data, labels = zoo_models.make_inputs(entry, zoo_models.BATCH, seed=1234)
    model = build(entry, DROPOUT)
    strict = exporter == "dynamo"
    if strict:
        # That exporter writes BatchNorm in inference form. Fresh statistics (mean 0,
        # variance 1) fold into a Conv as a zero bias, which its optimizer drops, and
        # leave the activations unnormalised, shrinking layer by layer (MobileNetV3's
        # logits ~1e-6, a loss that cannot fall): one training-mode pass over the trace
        # batch with momentum 1 gives every BatchNorm that batch's statistics, so the
        # inference graph normalises as the training one did.
        bns = [mod for mod in model.modules() if isinstance(mod, same_graph.BN)]
        moms = [bn.momentum for bn in bns]
        for bn in bns:
            bn.momentum = 1.0
        with torch.no_grad():
            model(*(trace[n] for n in names))
        for bn, mom in zip(bns, moms):
            bn.momentum = mom
    m = export(model, trace, os.path.join(d, f"{name}.onnx"), entry, opset, exporter, optimize)
    mapping, unmapped, inits, transposed = map_params(model, m, strict)
    load_initializers(model, mapping, inits, transposed)
    nodrop = build(entry, 0.0)
    nodrop.load_state_dict(model.state_dict())
    set_dropout_zero(nodrop)
    nd = export(nodrop, trace, os.path.join(d, f"{name}_nodrop.onnx"), entry, opset, exporter, optimize)
    nd_map = map_params(nodrop, nd, strict)
    if nd_map[0] != mapping:
        if not strict:
            raise SystemExit(f"{name}: the nodrop export named its initializers differently")
        # dynamo numbers its folded constants (val_N) per graph: the references are for
        # NAME_nodrop.onnx (run_zoo's grad), so they follow its names.
        mapping, unmapped, _, transposed = nd_map
    nodrop.load_state_dict(model.state_dict())  # the running stats of NAME.onnx, for eval
    ref, graph = nodrop, None
    shared = {k: v for k, v in _shared(mapping).items() if len(v) > 1}
    if strict:  # the graph the exporter wrote (same_graph.py), mapped use by use
        ref, graph, unmapped, shared, transposed = dynamo_reference(nodrop, nd, tuple(trace[n] for n in names))
    inputs = []
    for n, kind, _ in entry["inputs"]:
        save(os.path.join(d, "data", f"{n}.npy"), data[n].numpy())
        inputs.append(dict(name=n, file=f"data/{n}.npy", dtype=str(data[n].dtype).replace("torch.", "")))
    save(os.path.join(d, "data", "labels.npy"), labels.numpy())
    axis = None if entry.get("loss") == "mse" else entry["class_axis"]
    loss32, g32, calls32, _, _ = references(ref, names, data, labels, mapping, d, torch.float32, transposed, graph,
                                            axis=axis)
    loss64, g64, _, k64, n_kinks = references(ref, names, data, labels, mapping, d, torch.float64, transposed, graph,
                                              calls32, axis=axis)
    params = {k: dict(f32=g32[k], f64=g64[k], **({"kink": k64[k]} if k in k64 else {})) for k in sorted(g32)}
    lr, torch_losses = train_lr(ref, names, data, labels, graph, axis)
    manifest = dict(name=name, family=entry["family"], onnx=f"{name}.onnx", nodrop_onnx=f"{name}_nodrop.onnx",
                    inputs=inputs, labels="data/labels.npy", classes=entry["classes"],
                    loss="mse, mean over every element" if axis is None else
                         "cross-entropy, mean, class axis %s (logits reshaped to [-1, classes])"
                         % ("last" if axis == -1 else axis), class_axis=-1 if axis is None else axis,
                    loss_kind="mse" if axis is None else "cross-entropy",
                    loss_f32=loss32, loss_f64=loss64, eval=dict(f32="f32/eval.npy", f64="f64/eval.npy"),
                    batch=zoo_models.BATCH,
                    seq=zoo_models.SEQ if (entry["label_shape"] and axis == -1) or entry["dynseq"] else None,
                    dynseq=entry["dynseq"], dropout=DROPOUT, params=params, kink_entries=n_kinks,
                    train=dict(lr=lr, steps=TRAIN_STEPS, torch_losses=torch_losses,
                               onnx="onnx" if lr == TRAIN_LRS[0] else "nodrop_onnx"),
                    opset=next(o.version for o in m.opset_import if o.domain in ("", "ai.onnx")),
                    exporter=exporter, optimize=optimize, torch=torch.__version__,
                    shared=shared, functions=len(m.functions),
                    unmapped=unmapped, transposed=sorted(transposed),
                    n_params=sum(p.numel() for p in model.parameters()), nodes=len(m.graph.node),
                    bytes=os.path.getsize(os.path.join(d, f"{name}.onnx")))
    if entry.get("train_regex"):  # a parameter onnxtrain's rule keeps constant (a scalar): --train
        manifest["train_regex"] = entry["train_regex"]
    with open(os.path.join(d, "manifest.json"), "w") as f:
        json.dump(manifest, f, indent=1, sort_keys=True)
    return manifest


def dynamo_reference(nodrop, nd, args):
    """The PyTorch model computing the graph of nd (same_graph.py) and, per float
    initializer, the parameter uses it stands for and its shape; also the parameters no
    initializer stands for (dropped or folded away), the merged initializers and the
    transposed ones, for the manifest."""
    ref = copy.deepcopy(nodrop)
    same_graph.bn_eval(ref)
    same_graph.untie(ref)
    inits = {t.name: onnx.numpy_helper.to_array(t) for t in nd.graph.initializer}
    same_graph.fold_parametrizations(ref, inits)
    folded = same_graph.fold_bn(ref, inits, args)
    gmap = same_graph.mapping(ref, nd, folded, same_graph.same_computations(ref, args))
    # A table holding some rows of a parameter (GPT-2's position rows for the traced
    # length) was computed from it by the exporter: in the file it is a constant, which
    # onnxtrain does not train (docs/training.md, "Which initializers train"), so the
    # graph's reference has no gradient for it; the parameter is then unmapped.
    gmap = {k: v for k, v in gmap.items() if any(f != "rows" for _, f in v)}
    used = {p for uses in gmap.values() for p, _ in uses}
    unmapped = [n for n, p in ref.named_parameters() if n not in used and p.requires_grad]
    shared = {k: [p for p, _ in v] for k, v in gmap.items() if len(v) > 1}
    transposed = {k for k, v in gmap.items() if any(f == "T" for _, f in v)}
    return ref, {k: (v, inits[k].shape) for k, v in gmap.items()}, unmapped, shared, transposed


def _shared(mapping):
    inv = {}
    for pname, init in mapping.items():
        inv.setdefault(init, []).append(pname)
    return inv


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", default="/tmp/onnxtrain-zoo", help="output folder (default /tmp/onnxtrain-zoo)")
    ap.add_argument("--only", help="comma-separated model names (default: all; --list shows them)")
    ap.add_argument("--list", action="store_true", help="print the model names and families, then exit")
    ap.add_argument("--exporter", choices=("torchscript", "dynamo"), default="torchscript",
                    help="torchscript (PyTorch 1.13, the default) or dynamo (torch.onnx.export(dynamo=True), "
                         "PyTorch >= 2.5)")
    ap.add_argument("--opset", type=int, choices=range(13, 24), metavar="13..23",
                    help=f"ONNX opset to export (default: {OPSET} for torchscript, up to 17; the exporter's own "
                         "for dynamo)")
    ap.add_argument("--no-optimize", action="store_true", help="dynamo: optimize=False (no constant folding, "
                    "no initializer merging)")
    ap.add_argument("--keep-going", action="store_true", help="report a model that fails to export and go on")
    args = ap.parse_args()
    if args.exporter == "torchscript":
        if args.opset is not None and args.opset > OPSET:
            ap.error(f"the TorchScript exporter of PyTorch 1.13 stops at opset {OPSET}")
        args.opset = args.opset or OPSET
    if args.list:
        for n, e in zoo_models.ZOO.items():
            print(f"{n:20s} {e['family']}")
        return 0
    names = args.only.split(",") if args.only else list(zoo_models.ZOO)
    bad = [n for n in names if n not in zoo_models.ZOO]
    if bad:
        ap.error(f"unknown model(s) {', '.join(bad)}; --list shows the names")
    # Warnings about traced Python values and BN's num_batches_tracked do not change the files.
    warnings.filterwarnings("ignore")
    torch.use_deterministic_algorithms(True)
    torch.set_num_threads(1)
    # oneDNN's Conv1d weight gradient changes its summation order from run to run even
    # on one thread (seen on Whisper's encoder); PyTorch's own kernels do not.
    torch.backends.mkldnn.enabled = False
    failed = 0
    for n in names:
        t0 = time.time()
        try:
            man = export_one(n, args.out, args.opset, args.exporter, not args.no_optimize)
        except Exception as e:  # noqa: BLE001 (reported, then the next model)
            if not args.keep_going:
                raise
            failed += 1
            print(f"{n}: EXPORT FAILED: {type(e).__name__}: {str(e).splitlines()[0][:200]}")
            continue
        extra = f", {len(man['unmapped'])} unmapped ({man['unmapped'][0]}...)" if man["unmapped"] else ""
        extra += f", {len(man['shared'])} merged initializers" if man["shared"] else ""
        print(f"{n}: {man['nodes']} nodes, {man['n_params']} params, {man['bytes'] // 1024} KiB, "
              f"{len(man['params'])} grads{extra}, {man['kink_entries']} near kinks, train lr {man['train']['lr']} "
              f"({time.time() - t0:.1f}s)")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
