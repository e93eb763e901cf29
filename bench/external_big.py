#!/usr/bin/python3
"""external_big.py — acceptance run for models over protobuf's 2 GB limit (issue 15, item 2).

    /usr/bin/python3 bench/external_big.py ONNXTRAIN ORT_PYTHON WORK_DIR [--keep] [--small] [--blocks N]

ORT_PYTHON is a Python with onnxruntime and numpy (a venv outside the repo:
`python3 -m venv V && V/bin/pip install onnxruntime numpy`). The script
1. writes a GPT-shaped model (LayerNorm + MLP blocks with residuals, d=4096, hidden
   16384, 5 blocks: 2.68 GB of float32 weights) straight to ONNX external data (one
   file), chunk by chunk, so building it holds no copy of the weights;
2. trains 2 SGD steps with a checkpoint after each (`--checkpoint-every 1`), sampling
   the process's VmRSS every 20 ms: its peak during the steps, and while writing: from
   the log line that ends a step ("step k/T") until the checkpoint's temporary file has
   come and gone (then the next step runs), and after the last step until the process
   exits (checkpoint and tuned model), so any copy made before a file is opened counts
   as writing;
3. resumes from the step-1 checkpoint into another folder: the tuned model must be
   byte-identical (same .onnx, same .data);
4. runs the tuned model in ONNX Runtime and compares its output with `onnxtrain eval
   --dump-outputs` (max abs diff <= 1e-5), and runs onnx.checker on it by path;
5. deletes WORK_DIR (unless --keep).
Not in ctest: it needs ~12 GB of disk and ~6 GB of memory and takes minutes.
"""
import glob
import os
import re
import shutil
import subprocess
import sys
import threading
import time

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

D, H, L, SEQ = 4096, 16384, 5, 8
if "--small" in sys.argv:  # a dry run of the whole pipeline in seconds (not the acceptance figures)
    D, H = 64, 256
if "--blocks" in sys.argv:  # fewer blocks: a model under 2 GB, to measure a build that cannot write one over it
    L = int(sys.argv[sys.argv.index("--blocks") + 1])


def build(path):
    """Weights written to PATH.data as they are drawn; the proto only points at them."""
    data_name = os.path.basename(path) + ".data"
    rng = np.random.default_rng(0)
    inits, nodes, off = [], [], 0
    with open(os.path.join(os.path.dirname(path), data_name), "wb") as f:
        def external(name, rows, cols, scale):
            nonlocal off
            t = TensorProto(name=name, data_type=TensorProto.FLOAT, dims=[rows, cols])
            t.data_location = TensorProto.EXTERNAL
            for r0 in range(0, rows, 512):  # 512 rows at a time: at most 32 MiB held
                f.write((rng.standard_normal((min(512, rows - r0), cols), dtype=np.float32) * scale).tobytes())
            n = rows * cols * 4
            for k, v in (("location", data_name), ("offset", str(off)), ("length", str(n))):
                t.external_data.add(key=k, value=v)
            off += n
            pad = (-off) % 4096
            f.write(b"\0" * pad)
            off += pad
            inits.append(t)

        x = "x"
        for b in range(L):
            inits.append(numpy_helper.from_array(np.ones(D, np.float32), f"h.{b}.ln.weight"))
            inits.append(numpy_helper.from_array(np.zeros(D, np.float32), f"h.{b}.ln.bias"))
            external(f"h.{b}.mlp.fc.weight", D, H, D ** -0.5)
            external(f"h.{b}.mlp.proj.weight", H, D, H ** -0.5)
            nodes += [
                helper.make_node("LayerNormalization", [x, f"h.{b}.ln.weight", f"h.{b}.ln.bias"], [f"ln{b}"],
                                 name=f"ln{b}", axis=-1, epsilon=1e-5),
                helper.make_node("MatMul", [f"ln{b}", f"h.{b}.mlp.fc.weight"], [f"fc{b}"], name=f"fc{b}"),
                helper.make_node("Relu", [f"fc{b}"], [f"act{b}"], name=f"act{b}"),
                helper.make_node("MatMul", [f"act{b}", f"h.{b}.mlp.proj.weight"], [f"proj{b}"], name=f"proj{b}"),
                helper.make_node("Add", [x, f"proj{b}"], [f"res{b}"], name=f"res{b}"),
            ]
            x = f"res{b}"
    nodes.append(helper.make_node("Identity", [x], ["y"], name="out"))
    g = helper.make_graph(nodes, "gpt_big", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, SEQ, D])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, SEQ, D])], inits)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)], producer_name="external_big")
    with open(path, "wb") as f:
        f.write(m.SerializeToString())
    return off


def rss_kib(pid, key):
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith(key):
                    return int(line.split()[1])
    except OSError:
        pass
    return 0


def run_sampled(cmd, watch):
    """Runs cmd; VmRSS peaks after setup: during the steps and while writing (a *.tmp-* in watch)."""
    t0 = time.time()
    p = subprocess.Popen(cmd, stderr=subprocess.PIPE, text=True)
    lines, started, steps_logged = [], threading.Event(), []

    def reader():
        for line in p.stderr:
            lines.append(line)
            if line.startswith("training "):
                started.set()
            m = re.search(r"\bstep (\d+)/(\d+)", line)  # "epoch E/N  step k/T  loss ..."
            if m:
                steps_logged.append((int(m.group(1)), int(m.group(2))))
    th = threading.Thread(target=reader)
    th.start()
    peak = {"steps": 0, "write": 0}
    hwm, phase, seen_tmp, n_seen = 0, "steps", False, 0
    while p.poll() is None:
        hwm = max(hwm, rss_kib(p.pid, "VmHWM:"))
        rss = rss_kib(p.pid, "VmRSS:")
        if started.is_set():
            if phase == "steps" and len(steps_logged) > n_seen:
                phase, seen_tmp, n_seen = "write", False, len(steps_logged)
            elif phase == "write":
                tmp = any(glob.glob(os.path.join(d, "*.tmp-*")) for d in watch)
                k, total = steps_logged[n_seen - 1]
                if tmp:
                    seen_tmp = True
                elif seen_tmp and k < total:
                    phase = "steps"
            peak[phase] = max(peak[phase], rss)
        time.sleep(0.02)
    th.join()
    if p.returncode != 0:
        sys.exit(f"FAIL: {' '.join(cmd)} exited {p.returncode}:\n{''.join(lines)}")
    return peak, hwm, time.time() - t0, "".join(lines)


def main():
    onnxtrain, ort_python, work = sys.argv[1:4]
    keep = "--keep" in sys.argv[4:]
    shutil.rmtree(work, ignore_errors=True)
    os.makedirs(work)
    try:
        src = os.path.join(work, "gpt_big.onnx")
        t = time.time()
        nbytes = build(src)
        print(f"model: {nbytes / 1e9:.3f} GB of weights as external data, built in {time.time() - t:.1f} s")
        rng = np.random.default_rng(1)
        x, y = os.path.join(work, "x.npy"), os.path.join(work, "y.npy")
        np.save(x, rng.standard_normal((2, SEQ, D), dtype=np.float32))
        np.save(y, rng.standard_normal((2, SEQ, D), dtype=np.float32))
        out_a, out_b = os.path.join(work, "a"), os.path.join(work, "b")
        ck_a, ck_b = os.path.join(work, "ck_a"), os.path.join(work, "ck_b")
        for d in (out_a, out_b):
            os.makedirs(d)
        common = [onnxtrain, "train", src, "--input", x, "--labels", y, "--loss", "mse", "--batch-size", "1",
                  "--lr", "0.001", "--log-every", "1"]
        peak, hwm, secs, log = run_sampled(
            common + ["--steps", "2", "--checkpoint-every", "1", "--keep-checkpoints", "2",
                      "--checkpoint-dir", ck_a, "-o", os.path.join(out_a, "tuned.onnx")], [out_a, ck_a])
        print(log, end="")
        print(f"train (2 steps, 2 checkpoints, tuned model): {secs:.1f} s; peak RSS during the steps "
              f"{peak['steps'] / 1024:.1f} MiB, while writing {peak['write'] / 1024:.1f} MiB "
              f"(+{(peak['write'] - peak['steps']) / 1024:.1f} MiB); VmHWM {hwm / 1024:.1f} MiB (loading)")
        ok_rss = peak["write"] - peak["steps"] <= 64 * 1024
        sizes = {f: os.path.getsize(os.path.join(out_a, f)) for f in sorted(os.listdir(out_a))}
        print("tuned model files:", sizes)
        print("checkpoints:", {f: os.path.getsize(os.path.join(ck_a, f)) for f in sorted(os.listdir(ck_a))})
        peak_b, _, secs_b, _ = run_sampled(
            common + ["--steps", "2", "--resume", os.path.join(ck_a, "ckpt-1.otc"), "--checkpoint-dir", ck_b,
                      "-o", os.path.join(out_b, "tuned.onnx")], [out_b, ck_b])
        same = all(subprocess.run(["cmp", "-s", os.path.join(out_a, f), os.path.join(out_b, f)]).returncode == 0
                   for f in sizes) and sorted(os.listdir(out_b)) == sorted(sizes)
        print(f"resume from ckpt-1 ({secs_b:.1f} s): tuned model byte-identical to the uninterrupted run: {same}")
        shutil.rmtree(out_b)
        shutil.rmtree(ck_b, ignore_errors=True)
        shutil.rmtree(ck_a)
        tuned = os.path.join(out_a, "tuned.onnx")
        onnx.checker.check_model(tuned)
        dump = os.path.join(work, "dump")
        t = time.time()
        subprocess.run([onnxtrain, "eval", tuned, "--input", x, "--batch-size", "1", "--dump-outputs", dump],
                       check=True, capture_output=True)
        print(f"onnxtrain eval: {time.time() - t:.1f} s")
        ort = (
            "import sys, numpy as np, onnxruntime as ort\n"
            "s = ort.InferenceSession(sys.argv[1], providers=['CPUExecutionProvider'])\n"
            "x = np.load(sys.argv[2]); ref = np.load(sys.argv[3])\n"
            "out = np.concatenate([s.run(None, {'x': x[i:i + 1]})[0] for i in range(len(x))])\n"
            "d = np.abs(out.astype(np.float64) - ref); print(f'{d.max():.3e} {np.abs(ref).max():.3e}')\n")
        t = time.time()
        r = subprocess.run([ort_python, "-c", ort, tuned, x, os.path.join(dump, "y.npy")], capture_output=True,
                           text=True)
        if r.returncode != 0:
            sys.exit(f"FAIL: onnxruntime: {r.stderr}")
        diff, scale = (float(v) for v in r.stdout.split())
        print(f"onnxruntime ({time.time() - t:.1f} s): max abs diff {diff:.3e} against onnxtrain eval "
              f"(outputs up to {scale:.3g})")
        ok = ok_rss and same and diff <= 1e-5
        print("external_big:", "PASS" if ok else "FAIL")
        return 0 if ok else 1
    finally:
        if not keep:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
