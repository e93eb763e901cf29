"""same_graph.py — PyTorch references for the graph the dynamo exporter wrote.

torch.onnx.export(dynamo=True) does not write the training graph PyTorch runs:
BatchNorm comes out in inference form (running statistics; with its optimizer, folded
into the Conv before it), and its optimizer also merges identical initializers (zero
biases, LayerNorm scales of one), drops zero biases, splits a tied embedding into the
Gather table and a transposed copy for the output MatMul, and folds position tables
(the rows a fixed length reads). onnxtrain trains the graph in the file, so the zoo
compares it with PyTorch computing that same graph:

  * every BatchNorm module runs in eval mode (the running statistics in the file);
  * where the file folded a BatchNorm into the Conv before it, the reference model
    holds that Conv with the file's folded weight and bias, and the BatchNorm is gone;
  * tied parameters are untied (one copy per module), so each use has its own
    gradient, and every initializer is mapped to the uses it feeds: the module scope
    the exporter records on each consuming node (metadata "pkg.torch.onnx.name_scopes")
    names the module, and bytes (equal or transposed) pick its parameter. A tensor the
    optimizer merged from several parameters gets the sum of their gradients, and a
    parameter it dropped gets none;
  * what no consumer names is mapped by name, by rows (a table holding the first rows
    of a parameter: a folded position embedding), or by unique bytes.

The reference model holds exactly the file's values, so the forward pass is the
graph's. mapping() returns {initializer: [(parameter, form)]} with form "same", "T" or
"rows"; reference_grad() turns the parameters' gradients into the initializer's.
export_zoo.py drops the "rows" ones: a folded table is a constant of the file.
"""
import ast
import re

import numpy as np
import onnx
import onnx.numpy_helper
import torch
import torch.nn as nn

BN = (nn.BatchNorm1d, nn.BatchNorm2d, nn.BatchNorm3d)
CONV = (nn.Conv1d, nn.Conv2d, nn.Conv3d)


def bn_eval(model):
    """BatchNorm in inference form, as the exporter wrote it; the rest keeps its mode."""
    for mod in model.modules():
        if isinstance(mod, BN):
            mod.eval()


def _parent(root, path):
    parent, _, attr = path.rpartition(".")
    return (root.get_submodule(parent) if parent else root), attr


def conv_bn_pairs(model, args):
    """(conv path, bn path) for every BatchNorm whose input is a Conv's output, seen by
    running the model once with hooks (the exporter folds exactly this pattern)."""
    names = {id(m): n for n, m in model.named_modules()}
    made, pairs, hooks = {}, [], []
    for mod in model.modules():
        if isinstance(mod, CONV):
            hooks.append(mod.register_forward_hook(lambda m, i, o: made.__setitem__(id(o), names[id(m)])))
        if isinstance(mod, BN):
            hooks.append(mod.register_forward_pre_hook(
                lambda m, i: pairs.append((made[id(i[0])], names[id(m)])) if id(i[0]) in made else None))
    try:
        with torch.no_grad():
            model(*args)
    finally:
        for h in hooks:
            h.remove()
    return list(dict.fromkeys(pairs))


def fold_bn(model, inits, args):
    """Replaces each Conv -> BatchNorm the file folded by one Conv holding the file's
    folded weight and bias; returns {initializer: reference parameter name}."""
    folded = {}
    for conv_path, bn_path in conv_bn_pairs(model, args):
        conv = model.get_submodule(conv_path)
        w = inits.get(conv_path + ".weight")
        if w is None or np.array_equal(w, conv.weight.detach().numpy()):
            continue  # not folded: the file still has the BatchNorm
        bname = conv_path + ".bias" if conv.bias is not None else conv_path + ".weight_bias"
        bias = inits.get(bname)
        if bias is None:  # a folded bias of zeros is dropped by the optimizer: check it was zero
            bn = model.get_submodule(bn_path)
            scale = bn.weight / torch.sqrt(bn.running_var + bn.eps)
            want = bn.bias - bn.running_mean * scale + (conv.bias * scale if conv.bias is not None else 0)
            if not torch.allclose(want, torch.zeros_like(want), atol=1e-6):
                raise SystemExit(f"same_graph: {conv_path} was folded with {bn_path} but the file has no {bname}")
        with torch.no_grad():
            conv.weight = nn.Parameter(torch.from_numpy(w.copy()))
            conv.bias = None if bias is None else nn.Parameter(torch.from_numpy(bias.copy()))
        parent, attr = _parent(model, bn_path)
        setattr(parent, attr, nn.Identity())
        folded[conv_path + ".weight"] = conv_path + ".weight"
        if bias is not None:
            folded[bname] = conv_path + ".bias"
    return folded


def fold_parametrizations(model, inits):
    """A parametrized weight (Wav2Vec2's weight-normed position Conv) whose originals the
    file does not hold was computed by the exporter's optimizer into one tensor: the
    reference holds that weight as a plain parameter, as the file does."""
    from torch.nn.utils import parametrize  # noqa: PLC0415
    for path, mod in list(model.named_modules()):
        if not parametrize.is_parametrized(mod):
            continue
        for attr in list(mod.parametrizations.keys()):
            prefix = f"{path}.parametrizations.{attr}.original"
            if not any(k.startswith(prefix) for k in inits):
                parametrize.remove_parametrizations(mod, attr, leave_parametrized=True)


def untie(model):
    """One parameter per (module, attribute): a tied weight's uses get their own
    gradients (the exporter's optimizer may have split the tie)."""
    seen = set()
    for mod in model.modules():
        for attr, p in list(mod.named_parameters(recurse=False)):
            if id(p) in seen:
                setattr(mod, attr, nn.Parameter(p.detach().clone(), requires_grad=p.requires_grad))
            seen.add(id(p))


def _meta(node, key):
    return next((p.value for p in node.metadata_props if p.key == key), "")


def _scopes(node):
    try:
        return ast.literal_eval(_meta(node, "pkg.torch.onnx.name_scopes") or "[]")
    except (ValueError, SyntaxError):
        return []


def _placeholders(node, by_mangled):
    """The parameters the node's FX call reads (metadata "pkg.torch.onnx.fx_node":
    `%p_model_x_weight` is model.x.weight), for calls made inside a module's forward
    with another module's parameters (F.linear(x, self.qkv.weight, ...) in Swin)."""
    return [by_mangled[t] for t in re.findall(r"%p_(\w+)", _meta(node, "pkg.torch.onnx.fx_node")) if t in by_mangled]


def same_computations(model, args):
    """Groups of modules that compute the same thing: same type, same input tensor,
    equal parameters (GPT-NeoX's two LayerNorms of one input, once the exporter has
    merged their equal scales, are one node after its common-subexpression pass).
    {module name: [the other names of its group]}."""
    seen, hooks, alive = {}, [], []
    names = {id(m): n for n, m in model.named_modules()}
    for mod in model.modules():
        if next(mod.parameters(recurse=False), None) is None:
            continue

        def pre(m, i):
            if i and isinstance(i[0], torch.Tensor):
                alive.append(i[0])  # so no later tensor reuses its id() during the pass
                key = (type(m), id(i[0]), tuple(p.detach().numpy().tobytes() for p in m.parameters(recurse=False)))
                seen.setdefault(key, []).append(names[id(m)])
        hooks.append(mod.register_forward_pre_hook(pre))
    try:
        with torch.no_grad():
            model(*args)
    finally:
        for h in hooks:
            h.remove()
    groups = {}
    for members in seen.values():
        members = list(dict.fromkeys(members))
        for n in members:
            groups[n] = [o for o in members if o != n]
    return groups


# ONNX's gate order from PyTorch's, per recurrent cell: LSTM i,f,g,o -> i,o,f,c; GRU
# r,z,n -> z,r,h. The exporter writes each layer's weight_ih / weight_hh reordered (W,
# R: [1, gates*H, in]) and its two biases reordered and concatenated (B: [1, 2*gates*H]).
GATES = {"lstm": (0, 3, 1, 2), "gru": (1, 0, 2)}


def _gates(a, perm):
    blocks = np.split(a, len(perm), axis=0)
    return np.concatenate([blocks[k] for k in perm], axis=0)


def _rnn(a, t):
    """Form of t as a recurrent layer's reordered weight ("lstm", "gru") or one half of
    its concatenated bias ("lstm@0": bias_ih, "lstm@1": bias_hh)."""
    if a.ndim not in (1, 2) or t.size not in (a.size, 2 * a.size):
        return None
    for cell, perm in GATES.items():
        if a.shape[0] % len(perm):
            continue
        r = _gates(a, perm).reshape(-1)
        flat = t.reshape(-1)
        if t.size == a.size and a.ndim == 2 and np.array_equal(flat, r):
            return cell
        if t.size == 2 * a.size and a.ndim == 1:
            for half in (0, 1):
                if np.array_equal(flat[half * a.size:(half + 1) * a.size], r):
                    return f"{cell}@{half}"
    return None


def _match(a, t):
    if t.shape == a.shape and np.array_equal(t, a):
        return "same"
    if a.ndim == 2 and t.shape == a.T.shape and np.array_equal(t, a.T):
        return "T"
    if t.shape[:a.ndim] == a.shape and t.size == a.size and t.ndim > a.ndim and np.array_equal(t.reshape(a.shape), a):
        # a GroupNorm's weight as [C, 1, 1] for the Mul after InstanceNormalization (a
        # leading 1 is a folded table's: "rows")
        return "R"
    return _rnn(a, t)


def _rows(a, t):
    """t is the first rows of a (a folded position table, with leading 1 dims)."""
    if a.ndim != 2 or t.size % a.shape[1] or t.size // a.shape[1] > a.shape[0] or t.size == 0:
        return None
    k = t.size // a.shape[1]
    return "rows" if np.array_equal(t.reshape(k, a.shape[1]), a[:k]) else None


def mapping(model, m, folded, groups=None):
    """{initializer: [(parameter, form)]} for the float initializers of m that come from
    parameters of model (see the module docstring); the rest is not in it. groups
    (same_computations): a use found for one module of a group stands for all."""
    params = dict(model.named_parameters())
    by_mangled = {n.replace(".", "_"): n for n in params}
    arrays = {n: p.detach().numpy() for n, p in params.items()}
    modules = dict(model.named_modules())
    inits = {t.name: onnx.numpy_helper.to_array(t) for t in m.graph.initializer}
    users = {}
    for node in m.graph.node:
        for i in node.input:
            if i in inits:
                users.setdefault(i, []).append(node)
    out = {}
    for name, t in inits.items():
        if t.dtype != np.float32 or t.ndim == 0:
            continue
        if name in folded:
            out[name] = [(folded[name], "same")]
            continue
        hits = []
        for node in users.get(name, []):
            sc = _scopes(node)
            mod = modules.get(sc[-2]) if len(sc) >= 2 else None
            if mod is None:
                continue
            prefix = sc[-2] + "." if sc[-2] else ""
            found = [(prefix + a, f) for a, p in mod.named_parameters(recurse=False)
                     if (f := _match(p.detach().numpy(), t))]
            if not found:
                found = [(n, f) for n in _placeholders(node, by_mangled) if (f := _match(arrays[n], t))]
            if len(found) == 1 and found[0] not in hits:
                hits.append(found[0])
            elif found and all("@" in f for _, f in found):  # a recurrent layer's two biases in one B
                hits += [x for x in found if x not in hits]
        if not hits and name in arrays and _match(arrays[name], t) == "same":
            hits = [(name, "same")]
        if not hits:
            rows = [(n, "rows") for n, a in arrays.items() if _rows(a, t) and a.shape != t.shape]
            same = [(n, f) for n, a in arrays.items() if (f := _match(a, t))]
            hits = same if len(same) == 1 else rows if len(rows) == 1 else []
        if hits:
            out[name] = hits
    # A module whose parameters no node reads, computing what a mapped module of its
    # group computes, was merged into that module's node: its uses are that node's.
    used = {p for uses in out.values() for p, _ in uses}
    for uses in out.values():
        for pname, form in list(uses):
            owner, _, attr = pname.rpartition(".")
            for other in (groups or {}).get(owner, []):
                twin = (f"{other}.{attr}", form)
                if twin[0] in params and twin[0] not in used and twin not in uses:
                    uses.append(twin)
    return out


def reference_grad(grads, uses, shape):
    """The initializer's gradient from its parameters' (form: same, T, rows)."""
    total = None
    for pname, form in uses:
        g = grads.get(pname)
        if g is None:
            continue
        cell, _, half = form.partition("@")
        if cell in GATES:  # t = reorder(a) (in one half of B): dt = reorder(da) there, 0 elsewhere
            r = _gates(g, GATES[cell]).reshape(-1)
            flat = np.zeros(int(np.prod(shape)), dtype=g.dtype)
            off = int(half or 0) * r.size
            flat[off:off + r.size] = r
            g = flat.reshape(shape)
        elif form == "T":
            g = g.T
        elif form == "R":
            g = g.reshape(shape)
        elif form == "rows":
            g = g[: int(np.prod(shape)) // g.shape[1]].reshape(shape)
        total = g.copy() if total is None else total + g
    return total
