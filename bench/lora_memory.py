#!/usr/bin/python3
"""lora_memory.py — the README's table: the largest GPT-2-small batch (sequence 256)
whose planned training step fits 1, 2 and 4 GiB, with and without LoRA, under
--remat none and --remat auto. Each cell is `onnxtrain plan --batch-size auto`
(plan-only sessions over one import: nothing runs, the weights are not read), Adam.

    /usr/bin/python3 bench/lora_memory.py BUILD/onnxtrain SCRATCH_DIR [--rank R]

The model (GPT-2 small's shapes: vocab 50257, d 768, 12 heads, 12 layers, tied head,
Dropout 0.1; 256 positions instead of 1024, so 0.59 M fewer params) is exported to
SCRATCH_DIR/gpt2_small_256.onnx with random weights unless it exists; it is ~500 MB
and never committed.
"""
import argparse
import os
import re
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
GIB = 1 << 30


def export(path):
    sys.path.insert(0, os.path.join(HERE, "..", "samples"))
    import torch
    import export_samples as es
    torch.manual_seed(0)
    gpt = es.TinyGPT(vocab=50257, d=768, heads=12, seq=256, layers=12, p=0.1, tie_head=True).train()
    tokens = torch.randint(0, 50257, (1, 256), dtype=torch.int64)
    es.export(gpt, tokens, path, "tokens", True)
    print("exported %s: %d params" % (path, sum(p.numel() for p in gpt.parameters())), file=sys.stderr)


def largest_batch(binary, model, budget, remat, lora):
    args = [binary, "plan", model, "--optimizer", "adam", "--batch-size", "auto", "--memory-budget", str(budget),
            "--remat", remat] + (["--lora", lora] if lora else [])
    t0 = time.time()
    p = subprocess.run(args, capture_output=True, text=True)
    if p.returncode == 9:
        return 0, None, time.time() - t0  # not even batch 1
    if p.returncode != 0:
        sys.exit("%s\n%s" % (" ".join(args), p.stderr))
    batch = int(re.search(r"batch (\d+) \(auto\)", p.stdout).group(1))
    peaks = re.findall(r"^--remat .*?: peak .*?\((\d+) bytes\)", p.stdout, re.M)
    return batch, int(peaks[-1]), time.time() - t0


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("binary")
    ap.add_argument("scratch")
    ap.add_argument("--rank", default="8:16")
    a = ap.parse_args()
    os.makedirs(a.scratch, exist_ok=True)
    model = os.path.join(a.scratch, "gpt2_small_256.onnx")
    if not os.path.exists(model):
        export(model)
    print("| budget | remat | full fine-tuning | LoRA %s |" % a.rank)
    print("|---|---|---|---|")
    for gib in (1, 2, 4):
        for remat in ("none", "auto"):
            cells = []
            for lora in (None, a.rank):
                b, peak, secs = largest_batch(a.binary, model, gib * GIB, remat, lora)
                cells.append("%d (peak %.2f GiB)" % (b, peak / GIB) if b else "none fits")
                print("  %d GiB remat %s lora %s: batch %d, %.0f s" % (gib, remat, lora, b, secs), file=sys.stderr)
            print("| %d GiB | %s | %s | %s |" % (gib, remat, cells[0], cells[1]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
