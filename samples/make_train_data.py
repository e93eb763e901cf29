#!/usr/bin/env python3
"""make_train_data.py — small, learnable training sets for the README's main job
and for the other samples (classification_sets below).

Writes samples/data/tinygpt_tokens.npy and tinygpt_labels.npy: 512 sequences of 16
tokens (vocab 64), each an arithmetic progression mod 64 with a random start and a
step in 1..4; the label of each position is the next token of the progression. A
next-token model must read the previous tokens to find the step, so attention has
something to learn and the loss falls well below log(64) = 4.16 within a few epochs.
Deterministic (fixed seed). Run: /usr/bin/python3 samples/make_train_data.py
"""
import os

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))


def main():
    rng = np.random.default_rng(1234)
    n, seq, vocab = 512, 16, 64
    start = rng.integers(0, vocab, size=(n, 1))
    step = rng.integers(1, 5, size=(n, 1))
    pos = np.arange(seq + 1)[None, :]
    full = (start + step * pos) % vocab
    tokens = full[:, :seq].astype(np.int64)
    labels = full[:, 1:].astype(np.int64)
    out = os.path.join(HERE, "data")
    os.makedirs(out, exist_ok=True)
    np.save(os.path.join(out, "tinygpt_tokens.npy"), tokens)
    np.save(os.path.join(out, "tinygpt_labels.npy"), labels)
    print(f"wrote {n} sequences to {out}")
    classification_sets(out)


def classification_sets(out):
    """Learnable sets for the classifier samples: each label is the argmax of a fixed
    random linear teacher over the input (for images, over its 4x4 average-pooled
    pixels), so a model that learns anything lowers the loss within a few epochs.
    mlp and chain48 (symbolic batch): 512 samples; resnet and mobilenet (fixed batch
    8): 256."""
    rng = np.random.default_rng(4321)
    for name, shape, n in (("mlp", (64,), 512), ("chain48", (32,), 512),
                           ("resnet", (3, 16, 16), 256), ("mobilenet", (3, 16, 16), 256)):
        x = rng.standard_normal((n,) + shape).astype(np.float32)
        feats = x.reshape(n, 3, 4, 4, 4, 4).mean(axis=(3, 5)).reshape(n, -1) if len(shape) == 3 else x
        teacher = rng.standard_normal((feats.shape[1], 10))
        labels = np.argmax(feats @ teacher, axis=1).astype(np.int64)
        np.save(os.path.join(out, f"{name}_x.npy"), x)
        np.save(os.path.join(out, f"{name}_labels.npy"), labels)
        print(f"wrote {n} samples for {name} to {out}")


if __name__ == "__main__":
    main()
