"""kinks.py — how far a gradient may move when an activation sits on a kink.

ReLU, ReLU6, Hardtanh, Hardswish, Hardsigmoid, LeakyReLU and clamp change slope at a
point (0, 6, ±3, a bound). When a pre-activation lies within float32 rounding of that
point, onnxtrain's float32 forward may put it on the other side than PyTorch's float64
reference does, and the backward then takes the other slope for that one entry: every
gradient upstream of it moves by one whole term. That is not an error of either side,
but judged by float32 rounding it looks like one.

This module measures, for one batch, exactly what such flips can explain. Recorder runs
the model under a TorchFunctionMode that sees every call of those functions and keeps
its input and output. allowance() then takes the float64 run, and for each entry j
whose pre-activation x_j lies within K times the tensor's float32 rounding of a kink
(that rounding measured: PyTorch float32's |x32 - x64|, largest over the tensor, and
at least one ulp of the tensor's largest entry), it adds |jump * dL/dy_j| * |dx_j/dθ|
elementwise to every parameter θ: jump is the change of slope there (1 for ReLU,
0.5 for Hardswish...), dL/dy_j the upstream gradient, dx_j/dθ from one backward pass
per entry. A flip at j changes θ's gradient by ±jump * dL/dy_j * dx_j/dθ, so the sum
bounds every combination of flips; an entry off every kink contributes nothing, and a
wrong gradient rule is not covered (run_zoo.py subtracts the allowance entry by entry
before judging the rest by float32 rounding).
"""
import torch
import torch.nn.functional as F
from torch.overrides import TorchFunctionMode

K = 8  # a flip needs |x64 - kink| below onnxtrain's own rounding: K times PyTorch f32's largest
MAX_ENTRIES = 512  # one backward pass each; the zoo's batches have a few dozen at most
ULP = 2.0 ** -23


def _arg(args, kwargs, i, name, default):
    if len(args) > i:
        return args[i]
    return kwargs.get(name, default)


def _kinks(func, args, kwargs):
    """[(kink, jump)] of the call, or None when func has no kink we know."""
    if func in (F.relu, torch.relu, torch.Tensor.relu, torch.relu_, torch.Tensor.relu_):
        return [(0.0, 1.0)]
    if func is F.relu6:
        return [(0.0, 1.0), (6.0, 1.0)]
    if func is F.hardtanh:
        return [(float(_arg(args, kwargs, 1, "min_val", -1.0)), 1.0), (float(_arg(args, kwargs, 2, "max_val", 1.0)), 1.0)]
    if func is F.hardswish:
        return [(-3.0, 0.5), (3.0, 0.5)]
    if func is F.hardsigmoid:
        return [(-3.0, 1.0 / 6.0), (3.0, 1.0 / 6.0)]
    if func is F.leaky_relu:
        return [(0.0, abs(1.0 - float(_arg(args, kwargs, 1, "negative_slope", 0.01))))]
    if func in (torch.clamp, torch.clip, torch.Tensor.clamp, torch.Tensor.clip):
        lo, hi = _arg(args, kwargs, 1, "min", None), _arg(args, kwargs, 2, "max", None)
        return [(float(b), 1.0) for b in (lo, hi) if isinstance(b, (int, float))]
    return None


_INPLACE = {torch.relu_: torch.relu, torch.Tensor.relu_: torch.Tensor.relu}
# the positional slot of `inplace` in the functional forms
_INPLACE_SLOT = {F.relu: 1, F.relu6: 1, F.hardtanh: 3, F.hardswish: 1, F.hardsigmoid: 1, F.leaky_relu: 2}


class Recorder(TorchFunctionMode):
    """Keeps (x, y, kinks) of every kinked call, in call order. The call runs out of
    place on a copy of its input, and the caller gets a copy of the output, so later
    in-place updates by the model touch neither recorded tensor (their gradients stay
    those of the activation itself); the values are unchanged."""

    def __init__(self):
        super().__init__()
        self.calls = []

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = dict(kwargs or {})
        kinks = _kinks(func, args, kwargs)
        x = args[0] if args else None
        if kinks is None or not isinstance(x, torch.Tensor) or not x.is_floating_point() or not x.requires_grad:
            return func(*args, **kwargs)
        inplace = func in _INPLACE
        func = _INPLACE.get(func, func)
        args = list(args)
        slot = _INPLACE_SLOT.get(func)
        if "inplace" in kwargs:
            inplace |= bool(kwargs["inplace"])
            kwargs["inplace"] = False
        elif slot is not None and len(args) > slot:
            inplace |= bool(args[slot])
            args[slot] = False
        xr = x.clone()
        y = func(xr, *args[1:], **kwargs)
        self.calls.append((xr, y, kinks))
        if inplace:  # the caller may ignore the result: x must hold it, as the op would have left it
            return x.copy_(y)
        return y * 1


def near(calls32, calls64):
    """[(call index, flat entry, jump)] of the float64 entries within K x rounding of a kink."""
    if len(calls32) != len(calls64):
        raise SystemExit(f"kinks: the float32 run made {len(calls32)} kinked calls, the float64 one {len(calls64)}")
    out = []
    for c, ((x32, _, _), (x64, _, kinks)) in enumerate(zip(calls32, calls64)):
        a64 = x64.detach().reshape(-1)
        a32 = x32.detach().reshape(-1).to(a64.dtype)
        err = float((a32 - a64).abs().max()) if a64.numel() else 0.0
        tol = K * max(err, ULP * float(a64.abs().max() if a64.numel() else 0.0))
        for kink, jump in kinks:
            # An entry both precisions put exactly on the kink (a zero-padded border)
            # is on it in onnxtrain too: the same slope everywhere, no flip.
            hit = ((a64 - kink).abs() <= tol) & ~((a64 == kink) & (a32 == kink))
            out += [(c, int(j), jump) for j in torch.nonzero(hit).reshape(-1).tolist()]
    return out


def allowance(calls32, calls64, loss, params):
    """{parameter name: elementwise bound (numpy) of what flips can move} and the number
    of near-kink entries; params: the float64 model's named parameters (dict)."""
    entries = near(calls32, calls64)
    if len(entries) > MAX_ENTRIES:
        raise SystemExit(f"kinks: {len(entries)} pre-activations within rounding of a kink (more than {MAX_ENTRIES}); "
                         "the batch is degenerate")
    if not entries:
        return {}, 0
    names = [n for n, p in params.items() if p.requires_grad]
    ps = [params[n] for n in names]
    ys = [calls64[c][1] for c in sorted({c for c, _, _ in entries})]
    gys = dict(zip(sorted({c for c, _, _ in entries}),
                   torch.autograd.grad(loss, ys, retain_graph=True, allow_unused=True)))
    bound = {}
    for c, j, jump in entries:
        gy = gys[c]
        w = abs(jump * float(gy.reshape(-1)[j])) if gy is not None else 0.0
        if w == 0.0:
            continue
        x = calls64[c][0]
        gs = torch.autograd.grad(x.reshape(-1)[j], ps, retain_graph=True, allow_unused=True)
        for n, g in zip(names, gs):
            if g is not None:
                term = w * g.detach().abs()
                bound[n] = bound[n] + term if n in bound else term
    return {n: b.numpy() for n, b in bound.items()}, len(entries)
