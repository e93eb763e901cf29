/* gemm_lowp.c — times onnxtrain's CPU MatMul / Gemm kernels (ot_cpu_run_node, the
 * node's oneDNN state kept as the executor keeps it) in float32 (ot_cpu_sgemm) against
 * bfloat16 (oneDNN's matmul primitive, kernels/cpu/gemm_lowp.c) into float32 and into
 * bfloat16, and float16 (float32 panels + sgemm), on GPT-2-small-like shapes.
 * Interleaved: each round times every variant once (the best of `reps` calls), and
 * the table gives the median over rounds, in GFLOP/s, and the ratio to float32.
 * bench/gemm_lowp.sh builds and runs it next to PyTorch's bf16 matmul. Not part of
 * onnxtrain.
 *
 *     gemm_lowp THREADS ROUNDS < shapes   (lines "OP M N K": OP NN, NT or TN)
 */
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "bench_node.h"
#include "kernels/cpu/gemm_lowp.h"
#include "kernels/half_float.h"

enum { NV = 4, MAX_ROUNDS = 64 };
static const char *NAMES[NV] = {"f32", "bf16>f32", "bf16>bf16", "f16>f32"};

static ot_tensor tensor(ot_dtype t, int64_t r, int64_t c) {
    ot_tensor x;
    memset(&x, 0, sizeof x);
    int64_t d[2] = {r, c};
    x.dtype = t;
    x.shape = ot_shape_make(2, d);
    x.nbytes = (size_t)(r * c) * ot_dtype_size(t);
    x.data = malloc(x.nbytes);
    for (int64_t i = 0; i < r * c; i++) {
        float v = (float)(rand() % 200 - 100) / 128.0f;
        if (t == OT_F32) ((float *)x.data)[i] = v;
        else if (t == OT_BF16) ((uint16_t *)x.data)[i] = ot_hf_f32_to_bf16(v);
        else ((uint16_t *)x.data)[i] = ot_hf_f32_to_f16(v);
    }
    return x;
}

static void setup(bn_run *v, ot_dtype ab, ot_dtype yt, bool ta, bool tb, int M, int N, int K, int threads) {
    memset(v, 0, sizeof *v);
    v->node = bn_node(OT_OP_GEMM, 2);
    ot_node_set_attr_int(&v->node, "transA", ta);
    ot_node_set_attr_int(&v->node, "transB", tb);
    v->in[0] = ta ? tensor(ab, K, M) : tensor(ab, M, K);
    v->in[1] = tb ? tensor(ab, N, K) : tensor(ab, K, N);
    v->out[0] = tensor(yt, M, N);
    bn_ctx_init(&v->ctx, &v->node, v->in, v->out, threads, &v->slot);
}

int main(int argc, char **argv) {
    int T = argc > 1 ? atoi(argv[1]) : 2, rounds = argc > 2 ? atoi(argv[2]) : 7;
    if (rounds > MAX_ROUNDS) rounds = MAX_ROUNDS;
    omp_set_num_threads(T);
    const char *note = ot_gemm_lowp_isa_note();
    printf("# threads %d, rounds %d; bf16: %s\n", T, rounds, note ? note : "native (AVX512-BF16 or AMX)");
    printf("%-3s %5s %5s %5s", "op", "M", "N", "K");
    for (int k = 0; k < NV; k++) printf(" %10s", NAMES[k]);
    printf("  %8s %8s  %s\n", "bf16/f32", "f16/f32", "oneDNN impl (bf16>f32)");
    char op[8];
    int M, N, K;
    while (scanf("%7s %d %d %d", op, &M, &N, &K) == 4) {
        bool ta = op[0] == 'T', tb = op[1] == 'T';
        const ot_dtype ab[NV] = {OT_F32, OT_BF16, OT_BF16, OT_F16}, yt[NV] = {OT_F32, OT_F32, OT_BF16, OT_F32};
        bn_run v[NV];
        for (int k = 0; k < NV; k++) setup(&v[k], ab[k], yt[k], ta, tb, M, N, K, T);
        double flop = 2.0 * M * N * K, once = 0;
        for (int k = 0; k < NV; k++)
            once += bn_best_of(&v[k], 1); /* builds the primitives */
        int reps = once > 0.2 ? 1 : (int)(0.2 / (once + 1e-9)) + 1;
        double t[NV][MAX_ROUNDS];
        for (int r = 0; r < rounds; r++)
            for (int k = 0; k < NV; k++)
                t[k][r] = bn_best_of(&v[k], reps);
        double med[NV];
        for (int k = 0; k < NV; k++) {
            qsort(t[k], (size_t)rounds, sizeof(double), bn_cmp_double);
            med[k] = t[k][rounds / 2];
        }
        char impl[128];
        ot_gemm_lowp_args g = {.ta = ta, .tb = tb, .M = M, .N = N, .K = K, .alpha = 1.0f, .ab = OT_BF16, .c = OT_F32,
                               .lda = ta ? M : K, .ldb = tb ? K : N, .ldc = N};
        printf("%-3s %5d %5d %5d", op, M, N, K);
        for (int k = 0; k < NV; k++) printf(" %10.1f", flop / med[k] / 1e9);
        printf("  %8.2f %8.2f  %s\n", med[0] / med[1], med[0] / med[3], ot_gemm_lowp_impl_name(&g, T, impl, sizeof impl));
        fflush(stdout);
        for (int k = 0; k < NV; k++)
            bn_run_free(&v[k]);
    }
    return 0;
}
