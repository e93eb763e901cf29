#!/usr/bin/env python3
"""export_bench.py — writes the GPU benchmark models (GPT-2 small, ResNet-50) for
tests/gpu/check.sh through samples/export_samples.py's own export_gpu_bench, with the
exporter the samples were made with.

Why a wrapper: the GPU machine's PyTorch is 2.x, where torch.onnx.export defaults to
the torch.export-based exporter (dynamo=True, from PyTorch 2.9). That exporter ignores
`training=TrainingMode.TRAINING`, runs for minutes on a 124M-parameter model and writes
a different graph from the samples' (PyTorch 1.13, TorchScript-based). Passing
dynamo=False keeps the TorchScript-based exporter wherever the argument exists; on
PyTorch 1.13 nothing changes. Unlike export_samples.py's main(), the export is not
limited to one thread: nothing here is a bitwise fixture.

    python3 tests/gpu/export_bench.py OUT_DIR
"""
import functools
import inspect
import os
import sys
import time
import warnings

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "samples"))


def main():
    if len(sys.argv) != 2:
        print(__doc__.strip().splitlines()[-1].strip(), file=sys.stderr)
        return 2
    import torch
    import export_samples as es

    orig = torch.onnx.export
    if "dynamo" in inspect.signature(orig).parameters:
        @functools.wraps(orig)
        def legacy_export(*a, **k):
            k.setdefault("dynamo", False)
            return orig(*a, **k)

        torch.onnx.export = legacy_export
    warnings.filterwarnings("ignore", message=".*num_batches_tracked.*")
    warnings.filterwarnings("ignore", category=DeprecationWarning)
    warnings.filterwarnings("ignore", category=torch.jit.TracerWarning)
    t0 = time.time()
    es.export_gpu_bench(sys.argv[1])
    print(f"export_bench.py: exported in {time.time() - t0:.0f} s (PyTorch {torch.__version__})", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
