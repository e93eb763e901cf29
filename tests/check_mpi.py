#!/usr/bin/env python3
"""check_mpi.py — data-parallel `train` under mpirun (issue 17, train/dist.h):

- `mpirun -np 2 onnxtrain train ... --batch-size 2B` writes the tuned model and the
  loss history of `onnxtrain train ... --batch-size B --accum 2` byte for byte, on mlp
  (Adam, clipping), tinygpt (Dropout on) and resnet (BatchNorm running statistics);
  with --accum 2 per rank it equals --accum 4;
- a checkpoint written by 2 ranks resumes in one process (--accum 2) to the same model;
- a rank killed mid-run ends the other within 30 s, non-zero, naming the rank, and the
  last checkpoint resumes; a rank that hangs ends the others after
  ONNXTRAIN_DIST_TIMEOUT with exit 13 naming it;
- a global batch the ranks cannot share is a usage error (2).
A build without MPI (argument "nompi") instead checks that a launcher with 2 ranks is
refused (exit 6) and skips the rest. Exits 77 (skipped) without mpirun.

    check_mpi.py ONNXTRAIN_BINARY SOURCE_DIR SCRATCH_DIR mpi|nompi
"""
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time

FAILS = []


def check(cond, what):
    print(("ok    " if cond else "FAIL  ") + what, flush=True)
    if not cond:
        FAILS.append(what)


def mpirun(n):
    return ["mpirun", "--allow-run-as-root", "--oversubscribe", "-np", str(n)]


def run(cmd, **kw):
    return subprocess.run(cmd, capture_output=True, text=True, timeout=120, **kw)


def history(path):
    r = json.load(open(path))
    return {k: r[k] for k in ("loss", "lr", "grad_norm") if k in r}


def same_run(binary, src, tmp, tag, model, data, global_batch, extra, accum_per_rank=1, env=None, extra2=None):
    """-np 2 at global_batch vs one process at global_batch/2 with --accum 2*accum_per_rank
    (extra2: options of the 2-rank run instead of extra's last two)."""
    m = os.path.join(src, "samples", model + ".onnx")
    d = [a if a.startswith("--") else os.path.join(src, "samples", a) for a in data]
    common = [binary, "train", m, *d, "--threads", "1", "--seed", "5", "--quiet", "--report-grad-norm", *extra]
    one = os.path.join(tmp, tag + "-one.onnx")
    two = os.path.join(tmp, tag + "-two.onnx")
    p1 = run(common + ["--batch-size", str(global_batch // 2), "--accum", str(2 * accum_per_rank),
                       "-o", one, "--report", one + ".json"])
    common2 = common if extra2 is None else common[:-2] + extra2
    p2 = run(mpirun(2) + common2 + ["--batch-size", str(global_batch), "--accum", str(accum_per_rank),
                                    "-o", two, "--report", two + ".json"], env=dict(os.environ, **(env or {})))
    ok = p1.returncode == 0 and p2.returncode == 0
    check(ok, f"{tag}: both runs succeed ({p1.returncode}, {p2.returncode})" +
          ("" if ok else f" {p1.stderr[-300:]} {p2.stderr[-600:]}"))
    if not ok:
        return
    check(open(one, "rb").read() == open(two, "rb").read(), f"{tag}: tuned models are byte-identical")
    check(history(one + ".json") == history(two + ".json"), f"{tag}: loss, lr and grad-norm histories are equal")


def mlp_args(src):
    s = os.path.join(src, "samples")
    return [os.path.join(s, "mlp.onnx"), "--input", os.path.join(s, "mlp/input.npy"),
            "--labels", os.path.join(s, "mlp/labels.npy"), "--threads", "1", "--quiet"]


def gpu_runs(binary, src, tmp):
    """The same equality on GPUs: both ranks on GPU 0 summing through host memory
    (ONNXTRAIN_NCCL=0), and with 2 GPUs one per rank (`--device cuda`: NCCL when the
    module has it). Skipped with a message where no GPU is usable."""
    probe = run([binary, "train", *mlp_args(src), "--steps", "1", "--device", "cuda", "-o", os.path.join(tmp, "p.onnx")])
    if probe.returncode == 12:
        last = probe.stderr.strip().splitlines()[-1] if probe.stderr.strip() else ""
        print(f"skip  --device cuda under mpirun: no usable GPU ({last[:200]})")
        return
    smi = subprocess.run(["nvidia-smi", "-L"], capture_output=True, text=True) if shutil.which("nvidia-smi") else None
    gpus = len([l for l in smi.stdout.splitlines() if l.startswith("GPU ")]) if smi and smi.returncode == 0 else 1
    models = (("tinygpt", ["--input", "tinygpt/input.npy", "--labels", "tinygpt/labels.npy"], 4),
              ("resnet", ["--input", "resnet/input.npy", "--labels", "resnet/labels.npy"], 16))
    for model, data, gb in models:
        opts = ["--steps", "3", "--optim", "adam", "--device", "cuda:0"]
        same_run(binary, src, tmp, "cuda-host-" + model, model, data, gb, opts, env={"ONNXTRAIN_NCCL": "0"})
        if gpus >= 2:
            same_run(binary, src, tmp, "cuda-nccl-" + model, model, data, gb, opts, extra2=["--device", "cuda"])
        else:
            print(f"skip  {model}: one rank per GPU (NCCL) needs 2 GPUs, {gpus} found")


def plan_per_rank(binary, src, tmp):
    """`plan --ranks 2` plans each rank's step: its peak is the 2-rank train's, to the byte."""
    for tag, two, accum in (("mlp", "mlp-two.onnx.json", "1"), ("mlp-accum", "mlp-accum-two.onnx.json", "2")):
        gb = "8" if tag == "mlp" else "4"
        optim = ["--optim", "adam"] if tag == "mlp" else ["--optim", "sgd", "--momentum", "0.9"]
        p = run([binary, "plan", *mlp_args(src)[:5], "--batch-size", gb, "--accum", accum, *optim, "--ranks", "2",
                 "--remat", "none", "--json"])
        ok = p.returncode == 0
        check(ok, f"plan --ranks 2 ({tag}) runs ({p.returncode}) {'' if ok else p.stderr[-300:]}")
        if not ok or not os.path.exists(os.path.join(tmp, two)):
            continue
        plan = json.loads(p.stdout)
        peak = plan["plans"][1]["peak_bytes"]
        train = json.load(open(os.path.join(tmp, two)))["memory"]["planned_peak"]
        check(plan.get("ranks") == 2 and peak == train, f"plan --ranks 2 ({tag}): per-rank peak {peak} = train's {train}")
    # --batch-size auto under mpirun searches the per-rank batch, as plan --ranks does
    s = os.path.join(src, "samples")
    tg = [os.path.join(s, "tinygpt.onnx"), "--input", os.path.join(s, "tinygpt/input.npy"), "--labels",
          os.path.join(s, "tinygpt/labels.npy"), "--batch-size", "auto", "--memory-budget", "640K", "--remat", "none"]
    p = run(mpirun(2) + [binary, "train", *tg, "--steps", "1", "--threads", "1", "-o", os.path.join(tmp, "auto.onnx")])
    q = run([binary, "plan", *tg, "--ranks", "2"])
    ok = p.returncode == 0 and q.returncode == 0 and "per rank (global batch" in p.stderr + q.stdout
    line = [l for l in p.stderr.splitlines() if l.startswith("--batch-size auto")]
    check(ok and line and line[0].split()[2] == q.stdout.split("batch ")[1].split()[0],
          f"--batch-size auto per rank: train and plan --ranks agree ({line[:1]} / {q.stdout[:120]!r})")


def resume_across_ranks(binary, src, tmp):
    """2 ranks write checkpoints; one process resumes at step 3 and ends where 2 ranks end."""
    ck = os.path.join(tmp, "ck")
    shutil.rmtree(ck, ignore_errors=True)
    full = os.path.join(tmp, "full.onnx")
    p = run(mpirun(2) + [binary, "train", *mlp_args(src), "--batch-size", "8", "--steps", "6", "--optim", "adam",
                         "--checkpoint-every", "3", "--keep-checkpoints", "5", "--checkpoint-dir", ck, "-o", full])
    check(p.returncode == 0, f"resume: 2 ranks with checkpoints ({p.returncode})" + (p.stderr[-400:] if p.returncode else ""))
    cks = sorted(os.listdir(ck)) if os.path.isdir(ck) else []
    check(cks == ["ckpt-3.otc", "ckpt-6.otc"], f"resume: rank 0 alone wrote the checkpoints {cks}")
    res = os.path.join(tmp, "resumed.onnx")
    p = run([binary, "train", *mlp_args(src), "--batch-size", "4", "--accum", "2", "--steps", "6", "--optim", "adam",
             "--resume", os.path.join(ck, "ckpt-3.otc"), "-o", res])
    check(p.returncode == 0, f"resume: one process resumes the 2-rank checkpoint ({p.returncode})" +
          (p.stderr[-300:] if p.returncode else ""))
    if p.returncode == 0:
        check(open(full, "rb").read() == open(res, "rb").read(), "resume: the resumed model equals the 2-rank run's")
    # and a one-process checkpoint (--accum 2) resumes under 2 ranks
    ck1 = os.path.join(tmp, "ck1")
    shutil.rmtree(ck1, ignore_errors=True)
    p = run([binary, "train", *mlp_args(src), "--batch-size", "4", "--accum", "2", "--steps", "3", "--optim", "adam",
             "--checkpoint-every", "3", "--checkpoint-dir", ck1, "-o", os.path.join(tmp, "three.onnx")])
    res2 = os.path.join(tmp, "resumed2.onnx")
    q = run(mpirun(2) + [binary, "train", *mlp_args(src), "--batch-size", "8", "--steps", "6", "--optim", "adam",
                         "--resume", ck1, "-o", res2])
    ok = p.returncode == 0 and q.returncode == 0
    check(ok and open(full, "rb").read() == open(res2, "rb").read(),
          f"resume: 2 ranks resume a one-process checkpoint to the same model ({p.returncode}, {q.returncode})")


def start_ranks(binary, src, tmp, tag, extra, env=None):
    """2 ranks of a long mlp run, each writing its pid to tmp/tag.pid.RANK."""
    d = os.path.join(tmp, tag)
    shutil.rmtree(d, ignore_errors=True)
    os.makedirs(d)
    inner = " ".join(["exec", binary, "train", *mlp_args(src), "--batch-size", "8", "--steps", "100000000",
                      "--checkpoint-every", "20", "--checkpoint-dir", os.path.join(d, "ck"),
                      "-o", os.path.join(d, "t.onnx"), *extra])
    cmd = mpirun(2) + ["sh", "-c", f"echo $$ > {d}/pid.$OMPI_COMM_WORLD_RANK; {inner}"]
    p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                         env=dict(os.environ, **(env or {})))
    t0 = time.time()
    while time.time() - t0 < 60 and not (os.path.exists(f"{d}/pid.1") and os.path.isdir(f"{d}/ck") and
                                         len(os.listdir(f"{d}/ck")) >= 2):
        time.sleep(0.1)
    return p, d


def end_of(p, limit):
    t0 = time.time()
    try:
        out, _ = p.communicate(timeout=limit)
    except subprocess.TimeoutExpired:
        p.kill()
        out, _ = p.communicate()
        return None, out, time.time() - t0
    return p.returncode, out, time.time() - t0


def resumes(binary, src, ckdir):
    """The newest checkpoint (temporary files of an interrupted write are not counted) resumes."""
    steps = sorted(int(m.group(1)) for m in (re.match(r"^ckpt-(\d+)\.otc$", f) for f in
                                             (os.listdir(ckdir) if os.path.isdir(ckdir) else [])) if m)
    if not steps:
        return False, "no checkpoint"
    step = steps[-1]
    cks = [f"ckpt-{step}.otc"]
    p = run([binary, "train", *mlp_args(src), "--batch-size", "4", "--accum", "2", "--steps", str(step + 1),
             "--resume", ckdir, "-o", os.path.join(ckdir, "..", "resumed.onnx")])
    return p.returncode == 0, cks[-1] + ("" if p.returncode == 0 else ": " + p.stderr[-300:])


def kill_rank(binary, src, tmp):
    p, d = start_ranks(binary, src, tmp, "kill", [])
    os.kill(int(open(f"{d}/pid.1").read()), signal.SIGKILL)
    rc, out, secs = end_of(p, 30)
    check(rc is not None and rc != 0, f"kill: mpirun ends within 30 s, non-zero (rc {rc}, {secs:.1f} s)")
    check("rank 1" in out, "kill: a message names rank 1: " + " | ".join(l for l in out.splitlines() if "rank" in l)[:400])
    ok, why = resumes(binary, src, f"{d}/ck")
    check(ok, "kill: the last checkpoint resumes: " + why)


def error_on_one_rank(binary, src, tmp):
    """Rank 1 alone gets a label out of range: it says so and mpirun exits 8 (its code)."""
    s = os.path.join(src, "samples", "mlp")
    bad = os.path.join(tmp, "bad_labels.npy")
    with open(os.path.join(s, "labels.npy"), "rb") as f:
        raw = bytearray(f.read())
    raw[-8:] = (99).to_bytes(8, "little")  # the last int64 label (the header is fixed-size text)
    open(bad, "wb").write(raw)
    args = mlp_args(src)
    args[4] = "$L"
    inner = " ".join(["exec", binary, "train", *args, "--batch-size", "8", "--steps", "50",
                      "-o", os.path.join(tmp, "err.onnx")])
    cmd = mpirun(2) + ["sh", "-c", f"L={os.path.join(s, 'labels.npy')}; [ $OMPI_COMM_WORLD_RANK = 1 ] && L={bad}; {inner}"]
    p = run(cmd)
    check(p.returncode == 8 and "rank 1: " in p.stderr and "out of range" in p.stderr,
          f"error on rank 1: mpirun exits with its code 8 ({p.returncode}), the message names rank 1")


def hang_rank(binary, src, tmp):
    p, d = start_ranks(binary, src, tmp, "hang", [], env={"ONNXTRAIN_DIST_TIMEOUT": "2"})
    pid = int(open(f"{d}/pid.1").read())
    os.kill(pid, signal.SIGSTOP)
    rc, out, secs = end_of(p, 30)
    try:
        os.kill(pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    check(rc == 13, f"hang: the waiting rank gives up with exit 13 (rc {rc}, {secs:.1f} s)")
    check("for rank 1" in out and "ONNXTRAIN_DIST_TIMEOUT" in out, "hang: the message names rank 1 and the timeout")


def main():
    binary, src, tmp, kind = sys.argv[1:5]
    os.makedirs(tmp, exist_ok=True)
    if kind == "nompi":
        p = run([binary, "train", *mlp_args(src), "-o", os.path.join(tmp, "x.onnx")],
                env=dict(os.environ, OMPI_COMM_WORLD_SIZE="2", OMPI_COMM_WORLD_RANK="0"))
        check(p.returncode == 6 and "built without MPI" in p.stderr, f"no MPI: 2 ranks refused ({p.returncode})")
        print("check_mpi: onnxtrain was built without MPI: the data-parallel tests are skipped")
        return 1 if FAILS else 77
    if not shutil.which("mpirun"):
        print("check_mpi: mpirun not found (apt install openmpi-bin): skipped")
        return 77
    # containers often forbid the cross-process memory copy Open MPI's shared-memory transport prefers
    os.environ.setdefault("OMPI_MCA_btl_vader_single_copy_mechanism", "none")
    # under AddressSanitizer (.ci/sanitize): Open MPI never frees what its startup allocates;
    # full stacks let tests/lsan_mpi.supp drop those and still report onnxtrain's own leaks
    supp = os.path.join(os.path.dirname(os.path.abspath(__file__)), "lsan_mpi.supp")
    os.environ["LSAN_OPTIONS"] = ":".join(filter(None, [os.environ.get("LSAN_OPTIONS"), "suppressions=" + supp]))
    os.environ["ASAN_OPTIONS"] = ":".join(filter(None, [os.environ.get("ASAN_OPTIONS"), "fast_unwind_on_malloc=0"]))
    same_run(binary, src, tmp, "mlp", "mlp", ["--input", "mlp/input.npy", "--labels", "mlp/labels.npy"], 8,
             ["--steps", "5", "--optim", "adam", "--clip-grad-norm", "0.5"])
    same_run(binary, src, tmp, "mlp-accum", "mlp", ["--input", "mlp/input.npy", "--labels", "mlp/labels.npy"], 4,
             ["--steps", "4", "--optim", "sgd", "--momentum", "0.9"], accum_per_rank=2)
    same_run(binary, src, tmp, "tinygpt", "tinygpt", ["--input", "tinygpt/input.npy", "--labels", "tinygpt/labels.npy"],
             4, ["--steps", "4", "--optim", "adam"])
    same_run(binary, src, tmp, "resnet", "resnet", ["--input", "resnet/input.npy", "--labels", "resnet/labels.npy"], 16,
             ["--steps", "3", "--optim", "sgd", "--momentum", "0.9"])
    plan_per_rank(binary, src, tmp)
    gpu_runs(binary, src, tmp)
    resume_across_ranks(binary, src, tmp)
    p = run(mpirun(2) + [binary, "train", *mlp_args(src), "--batch-size", "7", "-o", os.path.join(tmp, "x.onnx")])
    check(p.returncode == 2 and "not divisible by the 2 ranks" in p.stderr, f"odd batch: usage error ({p.returncode})")
    error_on_one_rank(binary, src, tmp)
    kill_rank(binary, src, tmp)
    hang_rank(binary, src, tmp)
    print(f"check_mpi: {len(FAILS)} failure(s)")
    return 1 if FAILS else 0


if __name__ == "__main__":
    sys.exit(main())
