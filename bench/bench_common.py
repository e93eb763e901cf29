"""bench_common.py — what bench_forward.py and bench_train.py share: the PyTorch twin of
each sample (the model classes of samples/export_samples.py with the exported
initializers loaded, checked against the sample's own forward fixtures), benchmark data,
the onnxtrain binary, medians, and Markdown tables.

Run the benchmarks with Debian's interpreter (/usr/bin/python3: PyTorch 1.13, onnx 1.12).
"""
import math
import os
import statistics
import sys

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
SAMPLES_DIR = os.path.join(ROOT, "samples")
sys.path.insert(0, SAMPLES_DIR)

import export_samples as es  # noqa: E402  (the model classes and SAMPLES table)
import torch  # noqa: E402

# Benchmark order. tinygpt runs with Dropout 0.1 in training mode on both sides (each
# draws its own masks); the *_nodrop file would measure the same kernels minus Dropout.
SAMPLES = ["mlp", "resnet", "mobilenet", "tinygpt", "chain48"]


# OpenBLAS variables that choose its kernels rather than its threads. This workplace's
# shell sets OPENBLAS_CORETYPE=Haswell (AVX2 kernels: about 235 GFLOP/s sgemm on 2 threads
# here, against 430 with the AVX-512 kernels OpenBLAS picks for this CPU by itself).
# ORT's MLAS ignores them, so keeping them compares OpenBLAS at half speed with MLAS.
BLAS_KERNEL_VARS = ("OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE")
BLAS_WAS_VAR = "OT_BENCH_BLAS_ENV_WAS"


def pin_environment(threads, wait_policy, blas_core="machine"):
    """Gives onnxtrain and PyTorch the same threading environment, re-executing this
    script when it must change: OpenMP (libgomp, used by both) and OpenBLAS (the pthread
    build, used by both for GEMM) read their variables once, when they load.
    OPENBLAS_NUM_THREADS: OpenBLAS would otherwise use every core whatever --threads says.
    OMP_WAIT_POLICY: 'passive' puts idle OpenMP workers to sleep at once instead of
    spinning; on a loaded machine spinning workers get descheduled while holding up a
    barrier, which costs both tools 5-20x (see NOTES.md). 'default' leaves it unset.
    blas_core 'machine' drops BLAS_KERNEL_VARS, so OpenBLAS picks the kernels of the CPU
    it runs on; 'env' keeps them. What was dropped is kept in BLAS_WAS_VAR for the
    report (blas_env_line)."""
    want = {"OPENBLAS_NUM_THREADS": str(threads), "OMP_NUM_THREADS": str(threads)}
    if wait_policy != "default":
        want["OMP_WAIT_POLICY"] = wait_policy.upper()
    drop = ["OMP_WAIT_POLICY"] if wait_policy == "default" else []
    if blas_core == "machine":
        drop += [k for k in BLAS_KERNEL_VARS if k in os.environ]
    if all(os.environ.get(k) == v for k, v in want.items()) and not any(k in os.environ for k in drop):
        return
    env = dict(os.environ)
    env.update(want)
    was = [f"{k}={env[k]}" for k in BLAS_KERNEL_VARS if k in drop]
    if was:
        env[BLAS_WAS_VAR] = " ".join(was)
    for k in drop:
        env.pop(k, None)
    os.execve(sys.executable, [sys.executable] + sys.argv, env)


def blas_env_line():
    """One sentence on the OpenBLAS kernel variables the runs had."""
    kept = [f"{k}={os.environ[k]}" for k in BLAS_KERNEL_VARS if k in os.environ]
    if kept:
        return f"OpenBLAS kernels as the environment chose ({' '.join(kept)})"
    was = os.environ.get(BLAS_WAS_VAR)
    if was:
        return f"OpenBLAS kernels of this CPU (the environment's {was} removed for the runs; --blas-core env keeps it)"
    return "OpenBLAS kernels of this CPU"


def find_onnxtrain(path):
    """The onnxtrain binary: --onnxtrain, else build/onnxtrain, else the newest build-*/."""
    if path:
        if not os.access(path, os.X_OK):
            sys.exit(f"bench: --onnxtrain {path} is not an executable file")
        return os.path.abspath(path)
    default = os.path.join(ROOT, "build", "onnxtrain")
    if os.access(default, os.X_OK):
        return default
    sys.exit(f"bench: {default} not found; build it (cmake -S . -B build && cmake --build build) "
             "or pass --onnxtrain PATH")


def default_batch(name):
    """The batch each sample is benchmarked at: the fixed batch of the image models, 32
    rows for the others (tinygpt: 32 sequences of 16 tokens)."""
    return 8 if not es.SAMPLES[name]["dynamic"] else 32


def torch_model(name, dropout=None):
    """The PyTorch module of sample `name` with exactly the exported weights (and
    BatchNorm running statistics), in training mode like the exported graph."""
    spec = es.SAMPLES[name]
    torch.manual_seed(0)
    model = spec["make"]()
    path = os.path.join(SAMPLES_DIR, f"{name}.onnx")
    mapping, inits = es.param_to_initializer(model, path)
    es.load_initializers(model, mapping, inits)
    if dropout is not None:
        es.set_dropout(model, dropout)
    model.train()
    return model, spec


def check_twin(name, model):
    """Checks the PyTorch twin against the sample's forward fixtures (Dropout off, as the
    fixtures were made), so the benchmark provably times the same model. Returns the max
    relative L2 error over the fixture batches."""
    d = os.path.join(SAMPLES_DIR, name)
    x = torch.from_numpy(np.load(os.path.join(d, "input.npy")))
    saved = {k: v.clone() for k, v in model.state_dict().items()}
    ps = {m: m.p for m in model.modules() if isinstance(m, torch.nn.Dropout)}
    es.set_dropout(model, 0.0)
    worst = 0.0
    try:
        for n in es.SAMPLES[name]["batches"]:
            model.load_state_dict(saved)
            with torch.no_grad():
                out = model(x[:n]).numpy()
            ref = np.load(os.path.join(d, f"output_b{n}.npy"))
            worst = max(worst, float(np.linalg.norm(out - ref) / max(np.linalg.norm(ref), 1e-30)))
    finally:
        for m, p in ps.items():
            m.p = p
        model.load_state_dict(saved)
    if worst > 1e-5:
        sys.exit(f"bench: the PyTorch twin of {name} does not reproduce samples/{name}/output_b*.npy "
                 f"(rel. L2 error {worst:.2e}); was the sample re-exported with other code?")
    return worst


def make_data(name, rows, seed=4321):
    """`rows` samples of random input and labels in the sample's form (float images or
    rows, int64 tokens), from the export script's own generator."""
    x, y = es.make_batch(es.SAMPLES[name], rows, seed)
    return x, y


def median(xs):
    return statistics.median(xs) if xs else float("nan")


def fmt(v, digits=3):
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return "n/a"
    if isinstance(v, str):
        return v
    return f"{v:.{digits}f}"


def fmt_bytes(b):
    if b is None:
        return "n/a"
    if b >= 1 << 20:
        return f"{b / (1 << 20):.1f} MiB"
    return f"{b / 1024:.1f} KiB"


def markdown_table(header, rows):
    out = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    out += ["| " + " | ".join(str(c) for c in r) + " |" for r in rows]
    return "\n".join(out) + "\n"


def machine_line(threads):
    cpu = "unknown CPU"
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    cpu = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    wp = os.environ.get("OMP_WAIT_POLICY", "default")
    return (f"{cpu}, {os.cpu_count()} logical CPUs; {threads} threads; OMP_WAIT_POLICY {wp}; "
            f"PyTorch {torch.__version__}")
