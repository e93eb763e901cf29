#!/usr/bin/env python3
"""check_mpi_fuse.py — --fuse-update under mpirun (issue 28, train/train_fuse.c): each
gradient's fixed-order sum over the ranks starts when the gradient is complete and is
waited for just before its update, and the result is still bitwise --accum N.

For mlp (Adam), tinygpt (Adam, Dropout) and resnet (SGD with momentum, BatchNorm
running statistics), under --remat none, all and auto: `mpirun -np 2 ... --fuse-update`
writes the tuned model and the loss/lr/grad-norm history of one process with
--accum 2 byte for byte, and of 2 ranks without --fuse-update. The 2-rank fused run's
measured peak equals its planned one, which `plan --ranks 2 --fuse-update` prints to
the byte (the receive slots of the sums in flight are planned). --fuse-update with
--accum 2 per rank is a usage error (2). Exits 77 (skipped) without mpirun or MPI.

    check_mpi_fuse.py ONNXTRAIN_BINARY SOURCE_DIR SCRATCH_DIR mpi|nompi
"""
import json
import os
import shutil
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import check_mpi as cm  # noqa: E402  (mpirun, run, check, history, FAILS)

MODELS = {  # data, global batch, steps, optimizer
    "mlp": (["--input", "mlp/input.npy", "--labels", "mlp/labels.npy"], 8, 3, ["--optim", "adam"]),
    "tinygpt": (["--input", "tinygpt/input.npy", "--labels", "tinygpt/labels.npy"], 4, 3, ["--optim", "adam"]),
    "resnet": (["--input", "resnet/input.npy", "--labels", "resnet/labels.npy"], 16, 2,
               ["--optim", "sgd", "--momentum", "0.9"]),
}


def args_of(src, model):
    data, gb, steps, optim = MODELS[model]
    d = [a if a.startswith("--") else os.path.join(src, "samples", a) for a in data]
    return [os.path.join(src, "samples", model + ".onnx"), *d, "--threads", "1", "--seed", "5", "--quiet",
            "--report-grad-norm", "--steps", str(steps), *optim], gb


def three_runs(binary, src, tmp, model, remat):
    a, gb = args_of(src, model)
    a = a + ["--remat", remat]
    tag = f"{model}-{remat}"
    out = {k: os.path.join(tmp, f"{tag}-{k}.onnx") for k in ("accum", "fused", "unfused")}
    runs = {
        "accum": cm.run([binary, "train", *a, "--batch-size", str(gb // 2), "--accum", "2", "-o", out["accum"],
                         "--report", out["accum"] + ".json"]),
        "fused": cm.run(cm.mpirun(2) + [binary, "train", *a, "--batch-size", str(gb), "--fuse-update",
                                        "-o", out["fused"], "--report", out["fused"] + ".json"]),
        "unfused": cm.run(cm.mpirun(2) + [binary, "train", *a, "--batch-size", str(gb), "-o", out["unfused"],
                                          "--report", out["unfused"] + ".json"]),
    }
    ok = all(p.returncode == 0 for p in runs.values())
    cm.check(ok, f"{tag}: the three runs succeed " + str({k: p.returncode for k, p in runs.items()}) +
             ("" if ok else " " + " ".join(p.stderr[-400:] for p in runs.values() if p.returncode)))
    if not ok:
        return
    model_bytes = {k: open(v, "rb").read() for k, v in out.items()}
    hist = {k: cm.history(v + ".json") for k, v in out.items()}
    cm.check(model_bytes["fused"] == model_bytes["accum"], f"{tag}: 2 ranks fused = 1 process --accum 2, byte for byte")
    cm.check(model_bytes["fused"] == model_bytes["unfused"], f"{tag}: 2 ranks fused = 2 ranks unfused, byte for byte")
    cm.check(hist["fused"] == hist["accum"] == hist["unfused"], f"{tag}: loss, lr and grad-norm histories are equal")
    mem = json.load(open(out["fused"] + ".json"))["memory"]
    cm.check(mem["planned_peak"] == mem["measured_peak"],
             f"{tag}: fused 2 ranks, measured peak {mem['measured_peak']} = planned {mem['planned_peak']}")
    if remat == "none" and model != "resnet":  # plan's table also plans B/2, which resnet's fixed batch refuses
        p = cm.run([binary, "plan", *a[:5], "--batch-size", str(gb), "--ranks", "2", "--fuse-update",
                    *MODELS[model][3], "--remat", remat, "--json"])
        ok = p.returncode == 0
        j = json.loads(p.stdout) if ok else {}
        peak = j["plans"][1]["peak_bytes"] if ok else None
        cm.check(ok and peak == mem["planned_peak"],
                 f"{tag}: plan --ranks 2 --fuse-update peak {peak} = train's {mem['planned_peak']}" +
                 ("" if ok else " " + p.stderr[-300:]))
        # what fusing saved is measured against the unfused step at the same per-rank batch
        unfused = json.load(open(out["unfused"] + ".json"))["memory"]["planned_peak"]
        base = j.get("without_fuse_update", {}).get("peak_bytes")
        cm.check(base == unfused, f"{tag}: plan's unfused comparison {base} = the unfused 2 ranks' peak {unfused}")


def main():
    binary, src, tmp, kind = sys.argv[1:5]
    os.makedirs(tmp, exist_ok=True)
    if kind == "nompi":
        print("check_mpi_fuse: onnxtrain was built without MPI: skipped")
        return 77
    if not shutil.which("mpirun"):
        print("check_mpi_fuse: mpirun not found (apt install openmpi-bin): skipped")
        return 77
    os.environ.setdefault("OMPI_MCA_btl_vader_single_copy_mechanism", "none")
    supp = os.path.join(os.path.dirname(os.path.abspath(__file__)), "lsan_mpi.supp")
    os.environ["LSAN_OPTIONS"] = ":".join(filter(None, [os.environ.get("LSAN_OPTIONS"), "suppressions=" + supp]))
    os.environ["ASAN_OPTIONS"] = ":".join(filter(None, [os.environ.get("ASAN_OPTIONS"), "fast_unwind_on_malloc=0"]))
    for model in ("mlp", "tinygpt", "resnet"):
        for remat in ("none", "all", "auto"):
            three_runs(binary, src, tmp, model, remat)
    a, _ = args_of(src, "mlp")
    p = cm.run(cm.mpirun(2) + [binary, "train", *a, "--batch-size", "8", "--accum", "2", "--fuse-update",
                               "-o", os.path.join(tmp, "x.onnx"), "--report", os.path.join(tmp, "x.json")])
    cm.check(p.returncode == 2 and "--fuse-update with --accum 2" in p.stderr,
             f"--fuse-update with --accum 2 per rank: usage error ({p.returncode}) {p.stderr[-300:]}")
    print(f"check_mpi_fuse: {len(cm.FAILS)} failure(s)")
    return 1 if cm.FAILS else 0


if __name__ == "__main__":
    sys.exit(main())
