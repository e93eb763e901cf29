"""gemm_lowp_torch.py — PyTorch's CPU matmul on the shapes of bench/gemm_lowp.c, in
float32 and bfloat16 (oneDNN underneath), timed the same way: per round the best of
enough calls for ~0.2 s, the median over rounds, GFLOP/s. Run with torch 2.x
(/work/venvs/ops3 here) by bench/gemm_lowp.sh. Not part of onnxtrain.

    python gemm_lowp_torch.py THREADS ROUNDS < shapes   (lines "OP M N K")
"""
import statistics
import sys
import time

import torch


def timed(fn, reps):
    best = 1e30
    for _ in range(reps):
        t0 = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t0)
    return best


def main():
    threads, rounds = int(sys.argv[1]), int(sys.argv[2])
    torch.set_num_threads(threads)
    print(f"# torch {torch.__version__}, threads {torch.get_num_threads()}, rounds {rounds}")
    print(f"{'op':3} {'M':>5} {'N':>5} {'K':>5} {'torch_f32':>10} {'torch_bf16':>10}")
    for line in sys.stdin:
        f = line.split()
        if len(f) < 4:
            continue
        op, m, n, k = f[0], int(f[1]), int(f[2]), int(f[3])
        g = torch.Generator().manual_seed(0)
        fns = []
        for dt in (torch.float32, torch.bfloat16):
            a = torch.randn((k, m) if op[0] == "T" else (m, k), generator=g).to(dt)
            b = torch.randn((n, k) if op[1] == "T" else (k, n), generator=g).to(dt)
            aa = a.t() if op[0] == "T" else a
            bb = b.t() if op[1] == "T" else b
            out = torch.empty((m, n), dtype=dt)
            fns.append(lambda aa=aa, bb=bb, out=out: torch.matmul(aa, bb, out=out))
        once = sum(timed(fn, 1) + timed(fn, 1) for fn in fns) / 2
        reps = 1 if once > 0.2 else int(0.2 / (once + 1e-9)) + 1
        times = [[], []]
        for _ in range(rounds):
            for i, fn in enumerate(fns):
                times[i].append(timed(fn, reps))
        flop = 2.0 * m * n * k
        gf = [flop / statistics.median(t) / 1e9 for t in times]
        print(f"{op:3} {m:5} {n:5} {k:5} {gf[0]:10.1f} {gf[1]:10.1f}", flush=True)


if __name__ == "__main__":
    main()
