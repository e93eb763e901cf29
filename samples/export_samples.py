#!/usr/bin/python3
"""export_samples.py — exports onnxtrain's sample models from PyTorch and writes the
reference fixtures (inputs, labels, forward outputs, loss, gradients, BatchNorm state,
SGD loss curve) that the end-to-end tests compare against.

Run with Debian's interpreter (PyTorch 1.13 + onnx 1.12):

    /usr/bin/python3 samples/export_samples.py              # writes samples/NAME.onnx + samples/NAME/
    /usr/bin/python3 samples/export_samples.py --only mlp   # one sample
    /usr/bin/python3 samples/export_samples.py --gpu-bench OUT_DIR   # big benchmark models, not for git

Everything is deterministic (fixed seeds, deterministic algorithms, one thread), so
re-running it reproduces the committed files bit for bit on the same PyTorch build.
See samples/README.md for the fixture layout and the conventions behind it.
"""
import argparse
import json
import math
import os
import sys
import warnings

import numpy as np
import onnx
import onnx.numpy_helper
import torch
import torch.nn as nn
import torch.nn.functional as F

HERE = os.path.dirname(os.path.abspath(__file__))
OPSET = 17
SGD_LR = 0.05
SGD_STEPS = 20


# ---- models ----------------------------------------------------------------------

class MLP(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(64, 128)
        self.fc2 = nn.Linear(128, 128)
        self.fc3 = nn.Linear(128, 10)

    def forward(self, x):
        return self.fc3(F.relu(self.fc2(F.relu(self.fc1(x)))))


class BasicBlock(nn.Module):
    def __init__(self, cin, cout, stride):
        super().__init__()
        self.conv1 = nn.Conv2d(cin, cout, 3, stride, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(cout)
        self.conv2 = nn.Conv2d(cout, cout, 3, 1, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(cout)
        self.down = None
        if stride != 1 or cin != cout:
            self.down = nn.Sequential(nn.Conv2d(cin, cout, 1, stride, bias=False), nn.BatchNorm2d(cout))

    def forward(self, x):
        y = F.relu(self.bn1(self.conv1(x)))
        y = self.bn2(self.conv2(y))
        skip = x if self.down is None else self.down(x)
        return F.relu(y + skip)


class ResNetSmall(nn.Module):
    def __init__(self):
        super().__init__()
        self.stem = nn.Conv2d(3, 16, 3, 1, 1, bias=False)
        self.bn = nn.BatchNorm2d(16)
        self.pool = nn.MaxPool2d(2)  # 16x16 -> 8x8
        self.block1 = BasicBlock(16, 16, 1)
        self.block2 = BasicBlock(16, 32, 2)  # 8x8 -> 4x4, 1x1 downsample on the skip
        self.fc = nn.Linear(32, 10)

    def forward(self, x):
        x = self.pool(F.relu(self.bn(self.stem(x))))
        x = self.block2(self.block1(x))
        x = F.adaptive_avg_pool2d(x, 1)  # exports GlobalAveragePool
        return self.fc(torch.flatten(x, 1))


class DepthwiseSeparable(nn.Module):
    def __init__(self, cin, cout, stride):
        super().__init__()
        self.dw = nn.Conv2d(cin, cin, 3, stride, 1, groups=cin, bias=False)
        self.bn1 = nn.BatchNorm2d(cin)
        self.pw = nn.Conv2d(cin, cout, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(cout)
        self.act = nn.ReLU6()  # exports Clip(0, 6)

    def forward(self, x):
        return self.act(self.bn2(self.pw(self.act(self.bn1(self.dw(x))))))


class MobileNetSmall(nn.Module):
    def __init__(self):
        super().__init__()
        self.stem = nn.Conv2d(3, 32, 3, 2, 1, bias=False)  # 16x16 -> 8x8
        self.bn = nn.BatchNorm2d(32)
        self.act = nn.ReLU6()
        self.block1 = DepthwiseSeparable(32, 64, 1)
        self.block2 = DepthwiseSeparable(64, 128, 2)  # 8x8 -> 4x4
        self.pool = nn.AvgPool2d(4, count_include_pad=False)  # AveragePool alone (the default adds a Pad)
        self.fc = nn.Linear(128, 10)

    def forward(self, x):
        x = self.act(self.bn(self.stem(x)))
        x = self.pool(self.block2(self.block1(x)))
        return self.fc(torch.flatten(x, 1))


class CausalSelfAttention(nn.Module):
    def __init__(self, d, heads, seq, p):
        super().__init__()
        self.heads = heads
        self.scale = 1.0 / math.sqrt(d // heads)  # a Python float: exported as a constant
        self.qkv = nn.Linear(d, 3 * d)
        self.proj = nn.Linear(d, d)
        self.attn_drop = nn.Dropout(p)
        self.resid_drop = nn.Dropout(p)
        # A float mask compared with 0 exports Equal + Where (a bool mask would add Not).
        self.register_buffer("mask", torch.tril(torch.ones(seq, seq)).view(1, 1, seq, seq), persistent=False)

    def forward(self, x):
        # x.size() calls trace into Shape -> Gather -> Concat -> Reshape subgraphs: kept on purpose.
        B, T, C = x.size()
        q, k, v = self.qkv(x).split(C, dim=2)
        hd = C // self.heads
        q = q.view(B, T, self.heads, hd).transpose(1, 2)
        k = k.view(B, T, self.heads, hd).transpose(1, 2)
        v = v.view(B, T, self.heads, hd).transpose(1, 2)
        att = (q @ k.transpose(-2, -1)) * self.scale
        att = att.masked_fill(self.mask[:, :, :T, :T] == 0, float("-inf"))
        att = self.attn_drop(F.softmax(att, dim=-1))
        y = (att @ v).transpose(1, 2).contiguous().view(B, T, C)
        return self.resid_drop(self.proj(y))


class GPTBlock(nn.Module):
    def __init__(self, d, heads, seq, p):
        super().__init__()
        self.ln1 = nn.LayerNorm(d)
        self.attn = CausalSelfAttention(d, heads, seq, p)
        self.ln2 = nn.LayerNorm(d)
        self.mlp = nn.Sequential(nn.Linear(d, 4 * d), nn.GELU(), nn.Linear(4 * d, d), nn.Dropout(p))

    def forward(self, x):
        x = x + self.attn(self.ln1(x))
        return x + self.mlp(self.ln2(x))


class TinyGPT(nn.Module):
    def __init__(self, vocab=64, d=32, heads=2, seq=16, layers=2, p=0.1, tie_head=False):
        super().__init__()
        self.tok = nn.Embedding(vocab, d)
        self.pos = nn.Embedding(seq, d)
        self.drop = nn.Dropout(p)
        self.blocks = nn.ModuleList([GPTBlock(d, heads, seq, p) for _ in range(layers)])
        self.ln_f = nn.LayerNorm(d)
        self.head = nn.Linear(d, vocab, bias=False)
        if tie_head:  # GPT-2 shares the token embedding with the LM head
            self.head.weight = self.tok.weight

    def forward(self, tokens):
        T = tokens.size(1)
        pos = torch.arange(T, dtype=torch.long, device=tokens.device).unsqueeze(0)
        x = self.drop(self.tok(tokens) + self.pos(pos))
        for b in self.blocks:
            x = b(x)
        return self.head(self.ln_f(x))


class Chain(nn.Module):
    def __init__(self, depth=48, d=32, classes=10):
        super().__init__()
        self.layers = nn.ModuleList([nn.Linear(d, d) for _ in range(depth)])
        self.out = nn.Linear(d, classes)

    def forward(self, x):
        for layer in self.layers:
            x = torch.tanh(layer(x))
        return self.out(x)


class Bottleneck(nn.Module):
    def __init__(self, cin, mid, stride):
        super().__init__()
        cout = mid * 4
        self.conv1 = nn.Conv2d(cin, mid, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(mid)
        self.conv2 = nn.Conv2d(mid, mid, 3, stride, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(mid)
        self.conv3 = nn.Conv2d(mid, cout, 1, bias=False)
        self.bn3 = nn.BatchNorm2d(cout)
        self.down = None
        if stride != 1 or cin != cout:
            self.down = nn.Sequential(nn.Conv2d(cin, cout, 1, stride, bias=False), nn.BatchNorm2d(cout))

    def forward(self, x):
        y = F.relu(self.bn1(self.conv1(x)))
        y = F.relu(self.bn2(self.conv2(y)))
        y = self.bn3(self.conv3(y))
        return F.relu(y + (x if self.down is None else self.down(x)))


class ResNet50(nn.Module):
    """ResNet-50 layout (3-4-6-3 bottlenecks, 25.6M params) without torchvision."""

    def __init__(self, classes=1000):
        super().__init__()
        self.stem = nn.Conv2d(3, 64, 7, 2, 3, bias=False)
        self.bn = nn.BatchNorm2d(64)
        self.pool = nn.MaxPool2d(3, 2, 1)
        layers, cin = [], 64
        for mid, n, stride in ((64, 3, 1), (128, 4, 2), (256, 6, 2), (512, 3, 2)):
            for i in range(n):
                layers.append(Bottleneck(cin, mid, stride if i == 0 else 1))
                cin = mid * 4
        self.layers = nn.Sequential(*layers)
        self.fc = nn.Linear(cin, classes)

    def forward(self, x):
        x = self.pool(F.relu(self.bn(self.stem(x))))
        x = F.adaptive_avg_pool2d(self.layers(x), 1)
        return self.fc(torch.flatten(x, 1))


# ---- sample table ------------------------------------------------------------------
# batches: reference forward outputs are written for input[:n] for every n listed; the
# training references (loss, grads, state, SGD curve) use the full input (max batch).

def _float_input(gen, shape):
    return torch.randn(*shape, generator=gen)


SAMPLES = {
    "mlp": dict(make=MLP, input_name="x", input_kind=("float", (64,)), classes=10, label_shape=(),
                batches=(4, 7), dynamic=True),
    "resnet": dict(make=ResNetSmall, input_name="x", input_kind=("float", (3, 16, 16)), classes=10,
                   label_shape=(), batches=(8,), dynamic=False),
    "mobilenet": dict(make=MobileNetSmall, input_name="x", input_kind=("float", (3, 16, 16)), classes=10,
                      label_shape=(), batches=(8,), dynamic=False),
    "tinygpt": dict(make=TinyGPT, input_name="tokens", input_kind=("tokens", (16,), 64), classes=64,
                    label_shape=(16,), batches=(4, 7), dynamic=True, nodrop_variant=True),
    "chain48": dict(make=Chain, input_name="x", input_kind=("float", (32,)), classes=10, label_shape=(),
                    batches=(4, 7), dynamic=True),
}


def set_dropout(model, p):
    for m in model.modules():
        if isinstance(m, nn.Dropout):
            m.p = p


def cross_entropy(logits, labels):
    """Mean cross-entropy with the class axis last (tokens) or axis 1 (images, [N,C])."""
    return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), labels.reshape(-1))


def make_batch(spec, n, seed):
    gen = torch.Generator().manual_seed(seed)
    kind = spec["input_kind"]
    if kind[0] == "float":
        x = torch.randn((n,) + kind[1], generator=gen)
    else:
        x = torch.randint(0, kind[2], (n,) + kind[1], generator=gen, dtype=torch.int64)
    y = torch.randint(0, spec["classes"], (n,) + spec["label_shape"], generator=gen, dtype=torch.int64)
    return x, y


def export(model, x, path, input_name, dynamic):
    axes = {input_name: {0: "batch"}, "logits": {0: "batch"}} if dynamic else None
    torch.onnx.export(model, (x,), path, input_names=[input_name], output_names=["logits"],
                      dynamic_axes=axes, opset_version=OPSET, do_constant_folding=False,
                      training=torch.onnx.TrainingMode.TRAINING, export_params=True)
    # The exporter names output dims it could not infer through the traced shape
    # subgraphs ("MatMullogits_dim_1"); every dim but batch is fixed by the model, so
    # record the traced size instead.
    m = onnx.load(path)
    with torch.no_grad():
        shape = tuple(model(x).shape)
    for dim, size in zip(m.graph.output[0].type.tensor_type.shape.dim, shape):
        if dim.dim_param and dim.dim_param != "batch":
            dim.dim_value = size
    onnx.save(m, path)


def param_to_initializer(model, onnx_path):
    """Maps every PyTorch parameter / buffer name to the ONNX initializer holding it.

    With do_constant_folding=False PyTorch 1.13 keeps state-dict names for initializers;
    this checks that (name present, same shape, same bytes) instead of assuming it."""
    inits = {t.name: onnx.numpy_helper.to_array(t) for t in onnx.load(onnx_path).graph.initializer}
    mapping = {}
    for name, t in list(model.named_parameters()) + list(model.named_buffers()):
        if name.endswith("num_batches_tracked") or name.endswith(".mask"):
            continue
        a = t.detach().numpy()
        if name in inits and inits[name].shape == a.shape:
            mapping[name] = name
            continue
        hits = [k for k, v in inits.items() if v.shape == a.shape and np.array_equal(v, a)]
        if len(hits) != 1:
            raise SystemExit(f"{onnx_path}: cannot map parameter {name} to an initializer (candidates {hits})")
        mapping[name] = hits[0]
    return mapping, inits


def load_initializers(model, mapping, inits):
    """Sets the model's parameters and BN running stats to the exported initializers:
    export traces a training-mode forward that already moved the running stats."""
    with torch.no_grad():
        for name, t in list(model.named_parameters()) + list(model.named_buffers()):
            if name in mapping:
                t.copy_(torch.from_numpy(inits[mapping[name]].copy()))


def save(path, array):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    np.save(path, np.ascontiguousarray(array))


def write_fixtures(name, spec, model, mapping, out_dir, ref_dropout):
    d = os.path.join(out_dir, name)
    nmax = max(spec["batches"])
    x, y = make_batch(spec, nmax, seed=1234)
    save(os.path.join(d, "input.npy"), x.numpy())
    save(os.path.join(d, "labels.npy"), y.numpy())
    set_dropout(model, ref_dropout)
    model.train()
    state0 = {k: v.clone() for k, v in model.state_dict().items()}

    # Forward references: train mode (BN uses batch statistics), dropout as ref_dropout.
    for n in spec["batches"]:
        model.load_state_dict(state0)
        with torch.no_grad():
            out = model(x[:n])
        save(os.path.join(d, f"output_b{n}.npy"), out.numpy())

    # One training-mode forward + backward on the full batch: loss, grads, BN state.
    model.load_state_dict(state0)
    model.zero_grad()
    loss = cross_entropy(model(x), y)
    loss.backward()
    save(os.path.join(d, "ref_loss.npy"), np.array(loss.item(), dtype=np.float32))
    index = {}
    for pname, p in model.named_parameters():
        init = mapping[pname]
        fname = f"grads/{init}.npy"
        save(os.path.join(d, fname), p.grad.numpy())
        index[init] = fname
    with open(os.path.join(d, "grads", "index.json"), "w") as f:
        json.dump(index, f, indent=1, sort_keys=True)
    state_index = {}
    for bname, b in model.named_buffers():
        if bname in mapping:
            fname = f"state/{mapping[bname]}.npy"
            save(os.path.join(d, fname), b.detach().numpy())
            state_index[mapping[bname]] = fname
    if state_index:
        with open(os.path.join(d, "state", "index.json"), "w") as f:
            json.dump(state_index, f, indent=1, sort_keys=True)

    # Plain SGD from the exported weights on the same batch: loss before each step.
    model.load_state_dict(state0)
    opt = torch.optim.SGD(model.parameters(), lr=SGD_LR, momentum=0.0)
    losses = []
    for _ in range(SGD_STEPS):
        opt.zero_grad()
        loss = cross_entropy(model(x), y)
        losses.append(loss.item())
        loss.backward()
        opt.step()
    save(os.path.join(d, "sgd_losses.npy"), np.array(losses, dtype=np.float32))
    model.load_state_dict(state0)

    meta = dict(input=spec["input_name"], input_file="input.npy", output="logits",
                labels="labels.npy", batches=list(spec["batches"]), dynamic_batch=spec["dynamic"],
                loss="cross-entropy (mean; class axis last, logits reshaped to [-1, classes])",
                params=sum(p.numel() for p in model.parameters()), reference_dropout=ref_dropout,
                sgd=dict(lr=SGD_LR, momentum=0.0, steps=SGD_STEPS))
    with open(os.path.join(d, "meta.json"), "w") as f:
        json.dump(meta, f, indent=1, sort_keys=True)


def export_sample(name, out_dir):
    spec = SAMPLES[name]
    torch.manual_seed(0)
    model = spec["make"]()
    model.train()
    xs, _ = make_batch(spec, max(spec["batches"]), seed=99)  # trace input; not a fixture
    path = os.path.join(out_dir, f"{name}.onnx")
    export(model, xs, path, spec["input_name"], spec["dynamic"])
    mapping, inits = param_to_initializer(model, path)
    load_initializers(model, mapping, inits)
    ref_dropout = 0.0
    if spec.get("nodrop_variant"):
        # Same weights, every Dropout ratio 0: the model the gradient references match.
        nd = spec["make"]()
        nd.load_state_dict(model.state_dict())
        set_dropout(nd, 0.0)
        nd.train()
        nd_path = os.path.join(out_dir, f"{name}_nodrop.onnx")
        export(nd, xs, nd_path, spec["input_name"], spec["dynamic"])
        nd_map, _ = param_to_initializer(nd, nd_path)
        assert nd_map == mapping, "nodrop export named its initializers differently"
    write_fixtures(name, spec, model, mapping, out_dir, ref_dropout)
    print(f"{name}: {sum(p.numel() for p in model.parameters())} params -> {path}")


def export_gpu_bench(out_dir):
    os.makedirs(out_dir, exist_ok=True)
    torch.manual_seed(0)
    gpt = TinyGPT(vocab=50257, d=768, heads=12, seq=1024, layers=12, p=0.1, tie_head=True).train()
    tokens = torch.randint(0, 50257, (1, 1024), dtype=torch.int64)
    path = os.path.join(out_dir, "gpt2_small.onnx")
    export(gpt, tokens, path, "tokens", True)
    print(f"gpt2_small: {sum(p.numel() for p in gpt.parameters())} params -> {path}")
    torch.manual_seed(0)
    rn = ResNet50().train()
    x = torch.randn(2, 3, 224, 224)
    path = os.path.join(out_dir, "resnet50.onnx")
    export(rn, x, path, "x", True)
    print(f"resnet50: {sum(p.numel() for p in rn.parameters())} params -> {path}")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", default=HERE, help="output folder (default: samples/)")
    ap.add_argument("--only", action="append", choices=sorted(SAMPLES), help="export only these samples")
    ap.add_argument("--gpu-bench", metavar="OUT_DIR",
                    help="instead: write GPT-2-small- and ResNet-50-sized models with random weights to OUT_DIR")
    args = ap.parse_args()
    # PyTorch's exporter warns about dropping BN's num_batches_tracked update (onnxtrain
    # does not need it) and about traced Python values; neither affects the files.
    warnings.filterwarnings("ignore", message=".*num_batches_tracked.*")
    warnings.filterwarnings("ignore", category=torch.jit.TracerWarning)
    torch.use_deterministic_algorithms(True)
    torch.set_num_threads(1)
    if args.gpu_bench:
        export_gpu_bench(args.gpu_bench)
        return 0
    for name in args.only or SAMPLES:
        export_sample(name, args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
