/* conv_lowp.c — what the CPU's bfloat16 convolutions cost (kernels/cpu/cpu_lowp.c:
 * float32 copies in the workspace, the float32 kernel, rounding back) against the
 * float32 kernels themselves, at ResNet-18-like shapes (batch 8, 64x64 input): Conv,
 * ConvGradInput and ConvGradWeight, with the node's oneDNN state kept as the executor
 * keeps it. Interleaved rounds (each times every variant once, the best of `reps`
 * calls); prints the median ms and the ratio bf16 / f32. Not part of onnxtrain.
 *
 *     conv_lowp THREADS ROUNDS
 */
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "bench_node.h"
#include "kernels/half_float.h"

enum { MAX_ROUNDS = 64 };

static ot_tensor t4(ot_dtype t, const int64_t *d) {
    ot_tensor x;
    memset(&x, 0, sizeof x);
    x.dtype = t;
    x.shape = ot_shape_make(4, d);
    int64_t n = ot_shape_numel(&x.shape);
    x.nbytes = (size_t)n * ot_dtype_size(t);
    x.data = malloc(x.nbytes);
    for (int64_t i = 0; i < n; i++) {
        float v = (float)(rand() % 200 - 100) / 128.0f;
        if (t == OT_F32) ((float *)x.data)[i] = v;
        else ((uint16_t *)x.data)[i] = ot_hf_f32_to_bf16(v);
    }
    return x;
}

static void setup(bn_run *r, ot_op op, ot_dtype t, const int64_t *x, const int64_t *w, const int64_t *y, int64_t k,
                  int64_t s, int64_t p, int threads) {
    memset(r, 0, sizeof *r);
    r->node = bn_node(op, op == OT_OP_CONV ? 2 : 3);
    bn_conv_attrs(&r->node, k, s, p);
    if (op == OT_OP_CONV) r->in[0] = t4(t, x), r->in[1] = t4(t, w), r->out[0] = t4(t, y);
    else if (op == OT_OP_CONV_GRAD_INPUT) r->in[0] = t4(t, y), r->in[1] = t4(t, w), r->in[2] = t4(t, x), r->out[0] = t4(t, x);
    else r->in[0] = t4(t, y), r->in[1] = t4(t, x), r->in[2] = t4(t, w), r->out[0] = t4(t, w);
    bn_ctx_init(&r->ctx, &r->node, r->in, r->out, threads, &r->slot);
}

int main(int argc, char **argv) {
    int T = argc > 1 ? atoi(argv[1]) : 2, rounds = argc > 2 ? atoi(argv[2]) : 7;
    if (rounds > MAX_ROUNDS) rounds = MAX_ROUNDS;
    omp_set_num_threads(T);
    /* N, Cin, Cout, H (input), k, stride, pad: ResNet-18 at 64x64 (after the stem) */
    static const int64_t shapes[][7] = {{8, 64, 64, 16, 3, 1, 1}, {8, 128, 128, 8, 3, 1, 1}, {8, 64, 128, 16, 3, 2, 1},
                                        {8, 256, 256, 4, 3, 1, 1}, {8, 3, 64, 64, 7, 2, 3}};
    const ot_op ops[3] = {OT_OP_CONV, OT_OP_CONV_GRAD_INPUT, OT_OP_CONV_GRAD_WEIGHT};
    printf("# threads %d, rounds %d; median ms\n", T, rounds);
    printf("%-15s %-28s %9s %9s %9s\n", "op", "shape (N C O H k s p)", "f32", "bf16", "bf16/f32");
    for (size_t si = 0; si < sizeof shapes / sizeof shapes[0]; si++) {
        const int64_t *v = shapes[si];
        int64_t oh = (v[3] + 2 * v[6] - v[4]) / v[5] + 1;
        int64_t x[4] = {v[0], v[1], v[3], v[3]}, w[4] = {v[2], v[1], v[4], v[4]}, y[4] = {v[0], v[2], oh, oh};
        for (int o = 0; o < 3; o++) {
            bn_run r[2];
            setup(&r[0], ops[o], OT_F32, x, w, y, v[4], v[5], v[6], T);
            setup(&r[1], ops[o], OT_BF16, x, w, y, v[4], v[5], v[6], T);
            double once = bn_best_of(&r[0], 1) + bn_best_of(&r[1], 1);
            int reps = once > 0.1 ? 1 : (int)(0.1 / (once + 1e-9)) + 1;
            double t[2][MAX_ROUNDS];
            for (int k = 0; k < rounds; k++)
                for (int j = 0; j < 2; j++)
                    t[j][k] = bn_best_of(&r[j], reps);
            qsort(t[0], (size_t)rounds, sizeof(double), bn_cmp_double);
            qsort(t[1], (size_t)rounds, sizeof(double), bn_cmp_double);
            double a = t[0][rounds / 2], b = t[1][rounds / 2];
            char shp[64];
            snprintf(shp, sizeof shp, "%lld %lld %lld %lld %lld %lld %lld", (long long)v[0], (long long)v[1],
                     (long long)v[2], (long long)v[3], (long long)v[4], (long long)v[5], (long long)v[6]);
            printf("%-15s %-28s %9.3f %9.3f %9.2f\n", ot_op_name(ops[o]), shp, a * 1e3, b * 1e3, b / a);
            fflush(stdout);
            bn_run_free(&r[0]), bn_run_free(&r[1]);
        }
    }
    return 0;
}
