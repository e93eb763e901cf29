#!/usr/bin/env python3
"""make_train_data.py — a small, learnable training set for the README's main job.

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


if __name__ == "__main__":
    main()
