/* attn_lowp.c — what the CPU's bfloat16 Attention costs against the float32 fallback
 * autocast ran before it (issue 27): Casts of Q, K, V (and dY) up to float32 over the
 * whole tensors, the float32 kernel, Casts of its outputs down; against the low
 * kernel (kernels/cpu/cpu_xfmr.c: a head's operands converted in the workspace), at
 * GPT-2 small's shape (batch 8, 12 heads, 256 positions, head size 64, causal, the
 * absorbed dropout 0.1), forward and backward. Interleaved rounds (each times both
 * variants once); prints the median ms of wall time and of the process's CPU time,
 * and the ratios low / fallback. Not part of onnxtrain.
 *
 *     attn_lowp THREADS ROUNDS
 */
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "kernels/cpu/cpu_common.h"
#include "kernels/cpu/cpu_lowp.h"
#include "kernels/half_float.h"

enum { MAX_ROUNDS = 64 };

static double clock_of(clockid_t c) {
    struct timespec t;
    clock_gettime(c, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

static int cmp(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static ot_tensor t4(ot_dtype t, const int64_t *d, bool fill) {
    ot_tensor x;
    memset(&x, 0, sizeof x);
    x.dtype = t;
    x.shape = ot_shape_make(4, d);
    int64_t n = ot_shape_numel(&x.shape);
    x.nbytes = (size_t)n * ot_dtype_size(t);
    x.data = calloc(1, x.nbytes);
    for (int64_t i = 0; i < n && fill; i++) {
        float v = (float)(rand() % 200 - 100) / 128.0f;
        if (t == OT_F32) ((float *)x.data)[i] = v;
        else ((uint16_t *)x.data)[i] = ot_hf_f32_to_bf16(v);
    }
    return x;
}

/* One node (Attention or AttentionGrad) in one dtype with its workspace. */
typedef struct run {
    ot_node node;
    ot_tensor in[4], out[3];
    ot_kernel_ctx ctx;
} run;

static void setup(run *r, bool grad, ot_dtype t, const int64_t *d, int threads) {
    memset(r, 0, sizeof *r);
    static char name[] = "bench", dom[] = "";
    r->node.op = grad ? OT_OP_ATTENTION_GRAD : OT_OP_ATTENTION;
    r->node.op_type = (char *)ot_op_name(r->node.op);
    r->node.name = name;
    r->node.domain = dom;
    r->node.n_inputs = grad ? 4 : 3;
    r->node.n_outputs = grad ? 3 : 1;
    r->node.orig_node = -1;
    ot_node_set_attr_int(&r->node, "is_causal", 1);
    ot_node_set_attr_float(&r->node, "dropout_ratio", 0.1f);
    for (int k = 0; k < r->node.n_inputs; k++) r->in[k] = t4(t, d, true);
    for (int k = 0; k < r->node.n_outputs; k++) r->out[k] = t4(t, d, false);
    r->ctx.n_threads = threads;
    r->ctx.rng_node = 7;
    r->ctx.workspace_bytes = ot_cpu_workspace_bytes(&r->node, r->in, r->out);
    r->ctx.workspace = r->ctx.workspace_bytes ? malloc(r->ctx.workspace_bytes) : NULL;
}

static void release(run *r) {
    for (int k = 0; k < 4; k++) free(r->in[k].data);
    for (int k = 0; k < 3; k++) free(r->out[k].data);
    free(r->ctx.workspace);
    for (int i = 0; i < r->node.n_attrs; i++) ot_attr_free(&r->node.attrs[i]);
    free(r->node.attrs);
}

static void node(run *r) {
    ot_error e;
    if (ot_cpu_run_node(&r->node, r->in, r->out, &r->ctx, &e)) {
        fprintf(stderr, "%s\n", e.msg);
        exit(1);
    }
}

/* The fallback: lo's inputs cast up into f32's, f32's node, its outputs cast down
 * into lo's (the Casts' own converters, on all threads). */
static void fallback(run *f32, run *lo, int threads) {
    for (int k = 0; k < lo->node.n_inputs; k++)
        ot_cpu_lowp_to_f32(OT_BF16, lo->in[k].data, f32->in[k].data, ot_kernel_numel(&lo->in[k]), threads);
    node(f32);
    for (int k = 0; k < lo->node.n_outputs; k++)
        ot_cpu_lowp_from_f32(OT_BF16, f32->out[k].data, lo->out[k].data, ot_kernel_numel(&lo->out[k]), threads);
}

int main(int argc, char **argv) {
    int T = argc > 1 ? atoi(argv[1]) : 2, rounds = argc > 2 ? atoi(argv[2]) : 5;
    if (rounds > MAX_ROUNDS) rounds = MAX_ROUNDS;
    omp_set_num_threads(T);
    const int64_t d[4] = {8, 12, 256, 64};
    printf("# threads %d, rounds %d, [B H S D] = [8 12 256 64], causal, dropout 0.1; median ms\n", T, rounds);
    printf("%-14s %10s %10s %8s %10s %10s %8s\n", "op", "fb wall", "low wall", "ratio", "fb cpu", "low cpu", "ratio");
    for (int grad = 0; grad < 2; grad++) {
        run f32, lo;
        setup(&f32, grad, OT_F32, d, T);
        setup(&lo, grad, OT_BF16, d, T);
        fallback(&f32, &lo, T), node(&lo); /* warm-up: pages touched */
        double w[2][MAX_ROUNDS], c[2][MAX_ROUNDS];
        for (int k = 0; k < rounds; k++)
            for (int j = 0; j < 2; j++) {
                double w0 = clock_of(CLOCK_MONOTONIC), c0 = clock_of(CLOCK_PROCESS_CPUTIME_ID);
                if (j == 0) fallback(&f32, &lo, T);
                else node(&lo);
                w[j][k] = clock_of(CLOCK_MONOTONIC) - w0, c[j][k] = clock_of(CLOCK_PROCESS_CPUTIME_ID) - c0;
            }
        for (int j = 0; j < 2; j++) {
            qsort(w[j], (size_t)rounds, sizeof(double), cmp);
            qsort(c[j], (size_t)rounds, sizeof(double), cmp);
        }
        int m = rounds / 2;
        printf("%-14s %10.1f %10.1f %8.3f %10.1f %10.1f %8.3f\n", ot_op_name(lo.node.op), w[0][m] * 1e3, w[1][m] * 1e3,
               w[1][m] / w[0][m], c[0][m] * 1e3, c[1][m] * 1e3, c[1][m] / c[0][m]);
        fflush(stdout);
        release(&f32), release(&lo);
    }
    return 0;
}
