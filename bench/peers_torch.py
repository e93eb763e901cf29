#!/usr/bin/python3
"""peers_torch.py — the PyTorch side of bench/peers.py (issue 14): the real-size cases,
their export, and PyTorch's own training step on them.

    PY bench/peers_torch.py export --case NAME --dir DIR
    PY bench/peers_torch.py train  --case NAME --dir DIR --steps N --warmup W --threads T
                                   --result R.json [--remat none|block]

PY is Debian's /usr/bin/python3 (PyTorch 1.13, torchvision 0.14) or, for the BERT case,
/work/venvs/hf/bin/python (the same torch with transformers<4.40). peers.py runs both
sub-commands in child processes; they are not meant to be run by hand, except to debug.

export builds the case's model with seed 0 in training mode, exports it once with the
TorchScript exporter (opset 17, training mode, no constant folding, every shape static,
as samples/export_samples.py does), and writes DIR/model.onnx, the initial weights
DIR/weights.pt (so the PyTorch run starts from exactly the exported weights), one batch of
data DIR/x.npy and DIR/y.npy (the same batch every step, for every tool), and
DIR/case.json (inputs, loss, the names of the trained parameters, the checkpoint blocks).

train runs W + N SGD steps (forward, loss, backward, update, zero_grad) on that batch and
writes the wall time of each step, the process's CPU time (all threads, process_time) over
the N measured steps, and the losses. --remat block checkpoints every block of the model
(torch.utils.checkpoint, use_reentrant=False: RNG state preserved, so a recomputed
Dropout draws the masks it drew in the forward) — the GPT cases only.
"""
import argparse
import json
import os
import sys
import time
import warnings

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.checkpoint import checkpoint

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "samples"))
import export_samples as es  # noqa: E402  (TinyGPT, Chain: the sample model classes)

OPSET = 17
LR = 0.01


class MLP(nn.Module):
    """6 hidden Linear(512) + ReLU layers and a 10-class head: the issue's "6x512 MLP"."""

    def __init__(self, d=512, depth=6, classes=10):
        super().__init__()
        self.layers = nn.ModuleList([nn.Linear(d, d) for _ in range(depth)])
        self.out = nn.Linear(d, classes)

    def forward(self, x):
        for layer in self.layers:
            x = F.relu(layer(x))
        return self.out(x)


class HiddenStates(nn.Module):
    """A HuggingFace encoder with one tensor output: last_hidden_state."""

    def __init__(self, inner):
        super().__init__()
        self.inner = inner

    def forward(self, input_ids):
        return self.inner(input_ids=input_ids).last_hidden_state


def _tv(name, **kw):
    import torchvision.models as tvm  # noqa: PLC0415 (only the CNN cases need it)
    return getattr(tvm, name)(**kw)


def _bert_base():
    import transformers  # noqa: PLC0415 (only the BERT case needs it)
    config = transformers.BertConfig()  # bert-base-uncased's sizes: 12 x 768, 12 heads, 3072, vocab 30522
    config._attn_implementation = "eager"  # what torch 1.13 exports (no SDPA)
    return HiddenStates(transformers.BertModel(config, add_pooling_layer=False))


# name: make, input (kind, shape[, vocab]), loss, label shape/classes, steps, warm-up steps,
# blocks (attribute holding the checkpoint blocks; None: no remat row), dropout (has
# Dropout in training mode: each tool draws its own masks), needs (module).
CASES = {
    "resnet18": dict(make=lambda: _tv("resnet18", num_classes=1000), input=("float", (8, 3, 64, 64)),
                     loss="cross-entropy", classes=1000, label_shape=(8,), steps=10, warmup=2, blocks=None,
                     dropout=False, needs="torchvision", what="torchvision resnet18, 64x64, batch 8"),
    "mobilenet_v2": dict(make=lambda: _tv("mobilenet_v2", width_mult=0.5, num_classes=1000),
                         input=("float", (8, 3, 64, 64)), loss="cross-entropy", classes=1000, label_shape=(8,),
                         steps=10, warmup=2, blocks=None, dropout=True, needs="torchvision",
                         what="torchvision mobilenet_v2 x0.5, 64x64, batch 8"),
    "gpt2_small": dict(make=lambda: gpt2_init(es.TinyGPT(vocab=50257, d=768, heads=12, seq=256, layers=12, p=0.1,
                                                         tie_head=True)),
                       input=("tokens", (2, 256), 50257), loss="cross-entropy", classes=50257, label_shape=(2, 256),
                       steps=4, warmup=1, blocks="blocks", dropout=True, needs=None,
                       what="GPT-2 small shape (12 x 768, 12 heads, vocab 50257, tied head, GPT-2 init), 2x256 tokens"),
    "mlp6x512": dict(make=MLP, input=("float", (32, 512)), loss="cross-entropy", classes=10, label_shape=(32,),
                     steps=40, warmup=5, blocks=None, dropout=False, needs=None, what="6 x (Linear 512 + ReLU) + head, batch 32"),
    "chain48": dict(make=lambda: es.Chain(depth=48, d=512, classes=10), input=("float", (16, 512)),
                    loss="cross-entropy", classes=10, label_shape=(16,), steps=20, warmup=3, blocks=None, dropout=False,
                    needs=None, what="48 x (Linear 512 + Tanh) + head, batch 16"),
    "gpt4_d128": dict(make=lambda: gpt2_init(es.TinyGPT(vocab=512, d=128, heads=4, seq=64, layers=4, p=0.1)),
                      input=("tokens", (8, 64), 512), loss="cross-entropy", classes=512, label_shape=(8, 64),
                      steps=20, warmup=3, blocks="blocks", dropout=True, needs=None,
                      what="4-layer GPT, d128, 4 heads, vocab 512, 8x64 tokens"),
    "bert_base": dict(make=_bert_base, input=("tokens", (2, 128), 30522), loss="mse", label_shape=(2, 128, 768),
                      steps=3, warmup=1, blocks=None, dropout=True, needs="transformers",
                      what="HF BertModel, bert-base config, random weights, 2x128 tokens, MSE on last_hidden_state"),
}


def missing_module(name):
    """The module case `name` needs that this interpreter lacks, or None."""
    need = CASES[name]["needs"]
    if not need:
        return None
    try:
        __import__(need)
    except ImportError:
        return need
    return None


def gpt2_init(model):
    """GPT-2's initialisation (Linear and Embedding weights N(0, 0.02), zero biases): with
    PyTorch's default N(0, 1) embeddings and a tied head, GPT-2 small's first loss is ~450
    instead of ~ln(vocab), and a few SGD steps overflow."""
    for m in model.modules():
        if isinstance(m, (nn.Linear, nn.Embedding)):
            nn.init.normal_(m.weight, 0.0, 0.02)
        if isinstance(m, nn.Linear) and m.bias is not None:
            nn.init.zeros_(m.bias)
    return model


def build(name):
    torch.manual_seed(0)
    model = CASES[name]["make"]()
    model.train()
    return model


def make_data(name, seed=1234):
    c = CASES[name]
    gen = torch.Generator().manual_seed(seed)
    kind = c["input"]
    if kind[0] == "float":
        x = torch.randn(kind[1], generator=gen)
    else:
        x = torch.randint(0, kind[2], kind[1], generator=gen, dtype=torch.int64)
    if c["loss"] == "mse":
        y = torch.randn(c["label_shape"], generator=gen)
    else:
        y = torch.randint(0, c["classes"], c["label_shape"], generator=gen, dtype=torch.int64)
    return x, y


def loss_fn(name, out, y):
    if CASES[name]["loss"] == "mse":
        return F.mse_loss(out, y)
    return F.cross_entropy(out.reshape(-1, out.shape[-1]), y.reshape(-1))  # class axis last


def export(name, d):
    """Writes DIR/model.onnx, weights.pt, x.npy, y.npy and case.json for case `name`."""
    import onnx  # noqa: PLC0415 (Debian's python3-onnx; only export needs it)
    warnings.filterwarnings("ignore", category=torch.jit.TracerWarning)
    warnings.filterwarnings("ignore", message=".*num_batches_tracked.*")
    os.makedirs(d, exist_ok=True)
    model = build(name)
    x, y = make_data(name)
    torch.save(model.state_dict(), os.path.join(d, "weights.pt"))
    path = os.path.join(d, "model.onnx")
    in_name = "tokens" if CASES[name]["input"][0] == "tokens" else "x"
    torch.onnx.export(model, (x,), path, input_names=[in_name], output_names=["logits"], opset_version=OPSET,
                      do_constant_folding=False, training=torch.onnx.TrainingMode.TRAINING, export_params=True)
    np.save(os.path.join(d, "x.npy"), x.numpy())
    np.save(os.path.join(d, "y.npy"), y.numpy())
    inits = {t.name for t in onnx.load(path, load_external_data=False).graph.initializer}
    params = [n for n, _ in model.named_parameters()]
    with torch.no_grad():
        out_shape = list(model(x).shape)
    c = CASES[name]
    meta = dict(case=name, what=c["what"], input_name=in_name, loss=c["loss"], lr=LR,
                batch=int(c["input"][1][0]), output_shape=out_shape, steps=c["steps"], warmup=c["warmup"],
                params=[p for p in params if p in inits], params_not_in_model=[p for p in params if p not in inits],
                n_params=sum(p.numel() for p in model.parameters()), blocks=c["blocks"],
                n_blocks=len(getattr(model, c["blocks"])) if c["blocks"] else 0)
    with open(os.path.join(d, "case.json"), "w") as f:
        json.dump(meta, f, indent=1)
    return meta


def forward_blocks(model, tokens):
    """TinyGPT's forward (export_samples.TinyGPT.forward) with every block checkpointed."""
    T = tokens.size(1)
    pos = torch.arange(T, dtype=torch.long).unsqueeze(0)
    x = model.drop(model.tok(tokens) + model.pos(pos))
    for b in model.blocks:
        x = checkpoint(b, x, use_reentrant=False)
    return model.head(model.ln_f(x))


def train(args):
    torch.set_num_threads(args.threads)
    name = args.case
    model = build(name)
    model.load_state_dict(torch.load(os.path.join(args.dir, "weights.pt")))
    model.train()
    x = torch.from_numpy(np.load(os.path.join(args.dir, "x.npy")))
    y = torch.from_numpy(np.load(os.path.join(args.dir, "y.npy")))
    if args.remat == "block" and not CASES[name]["blocks"]:
        sys.exit(f"peers_torch: case {name} has no blocks to checkpoint")
    fwd = (lambda t: forward_blocks(model, t)) if args.remat == "block" else model
    opt = torch.optim.SGD(model.parameters(), lr=LR)
    times, losses, cpu0 = [], [], None
    for s in range(args.warmup + args.steps):
        if s == args.warmup:
            cpu0 = time.process_time()
        t0 = time.perf_counter()
        loss = loss_fn(name, fwd(x), y)
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        times.append(time.perf_counter() - t0)
        losses.append(float(loss))
    cpu = (time.process_time() - cpu0) / args.steps
    with open(args.result, "w") as f:
        json.dump({"step_seconds": times[args.warmup:], "cpu_seconds_per_step": cpu, "loss": losses,
                   "threads": torch.get_num_threads(), "torch": torch.__version__}, f)
    return 0


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("command", choices=["export", "train"])
    ap.add_argument("--case", required=True, choices=sorted(CASES))
    ap.add_argument("--dir", required=True)
    ap.add_argument("--steps", type=int, default=3)
    ap.add_argument("--warmup", type=int, default=1)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--remat", choices=["none", "block"], default="none")
    ap.add_argument("--result")
    args = ap.parse_args()
    miss = missing_module(args.case)
    if miss:
        print(f"peers_torch: case {args.case} needs the module '{miss}', which {sys.executable} lacks", file=sys.stderr)
        return 77
    if args.command == "export":
        meta = export(args.case, args.dir)
        print(json.dumps({k: meta[k] for k in ("case", "n_params", "output_shape")}))
        return 0
    if not args.result:
        ap.error("train needs --result")
    return train(args)


if __name__ == "__main__":
    sys.exit(main())
