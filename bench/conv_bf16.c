/* conv_bf16.c — issue 27 part 4: one convolution layer's time in float32 against
 * bfloat16 through onnxtrain's CPU kernels (ot_cpu_run_node, as the executor runs a
 * node: a node slot for the kept oneDNN primitive, the workspace the planner would
 * give), for every distinct conv shape of torchvision's ResNet-18 at 224x224 and the
 * given batch, in each direction (Conv, ConvGradInput, ConvGradWeight). Prints the
 * best of R wall times (ms) of each and bf16/fp32. Built and run by
 * bench/conv_bf16.sh; run it with ONEDNN_VERBOSE=1 to see the implementation oneDNN
 * picked for each primitive (avx512_core_amx_bf16, avx512_core_bf16, ... or ref). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "bench_node.h"
#include "exec/backend.h"
#include "kernels/half_float.h"
#include "kernels/kernel.h"

typedef struct shape {
    const char *name;
    int C, H, M, K, S, P; /* input channels and size, output channels, kernel, stride, pad */
} shape;

static const shape SHAPES[] = {
    {"stem 7x7/2 3-64 224", 3, 224, 64, 7, 2, 3},      {"l1 3x3 64-64 56", 64, 56, 64, 3, 1, 1},
    {"l2.0 3x3/2 64-128 56", 64, 56, 128, 3, 2, 1},    {"l2.0 down 1x1/2 64-128", 64, 56, 128, 1, 2, 0},
    {"l2 3x3 128-128 28", 128, 28, 128, 3, 1, 1},      {"l3.0 3x3/2 128-256 28", 128, 28, 256, 3, 2, 1},
    {"l3.0 down 1x1/2 128-256", 128, 28, 256, 1, 2, 0}, {"l3 3x3 256-256 14", 256, 14, 256, 3, 1, 1},
    {"l4.0 3x3/2 256-512 14", 256, 14, 512, 3, 2, 1},  {"l4.0 down 1x1/2 256-512", 256, 14, 512, 1, 2, 0},
    {"l4 3x3 512-512 7", 512, 7, 512, 3, 1, 1},
};

static double clock_ms(clockid_t c) {
    struct timespec t;
    clock_gettime(c, &t);
    return t.tv_sec * 1e3 + t.tv_nsec / 1e6;
}

static ot_tensor tensor(ot_dtype t, void *d, const int64_t *dims) {
    ot_tensor x;
    memset(&x, 0, sizeof x);
    x.dtype = t;
    x.shape = ot_shape_make(4, dims);
    x.data = d;
    x.nbytes = (size_t)ot_shape_numel(&x.shape) * ot_dtype_size(t);
    return x;
}

static void *filled(ot_dtype t, int64_t n) {
    void *p = malloc((size_t)n * 4);
    for (int64_t i = 0; i < n; i++) {
        float v = (float)((i * 2654435761u) % 2001) / 1000.0f - 1.0f;
        if (t == OT_F32) ((float *)p)[i] = v;
        else ((uint16_t *)p)[i] = ot_hf_f32_to_bf16(v);
    }
    return p;
}

/* Best of reps (after one warm-up) of direction op (0 Conv, 1 ConvGradInput, 2 ConvGradWeight) in dtype t:
 * wall time, and the process's CPU time (every thread's) in *cpu. */
static double run(ot_backend *be, const shape *s, int N, int op, ot_dtype t, int nt, int reps, double *cpu) {
    static const ot_op ops[3] = {OT_OP_CONV, OT_OP_CONV_GRAD_INPUT, OT_OP_CONV_GRAD_WEIGHT};
    int64_t oh = (s->H + 2 * s->P - s->K) / s->S + 1;
    int64_t xd[4] = {N, s->C, s->H, s->H}, wd[4] = {s->M, s->C, s->K, s->K}, yd[4] = {N, s->M, oh, oh};
    ot_node n = bn_node(ops[op], op == 0 ? 2 : 3);
    bn_conv_attrs(&n, s->K, s->S, s->P);
    void *x = filled(t, N * s->C * s->H * s->H), *w = filled(t, s->M * s->C * s->K * s->K);
    void *y = filled(t, N * s->M * oh * oh);
    ot_tensor X = tensor(t, x, xd), W = tensor(t, w, wd), Y = tensor(t, y, yd);
    ot_tensor in[3], out[1];
    if (op == 0) in[0] = X, in[1] = W, out[0] = Y;
    if (op == 1) in[0] = Y, in[1] = W, in[2] = X, out[0] = X;
    if (op == 2) in[0] = Y, in[1] = X, in[2] = W, out[0] = W;
    void *state = NULL;
    ot_kernel_ctx ctx;
    bn_ctx_init(&ctx, &n, in, out, nt, &state);
    ot_error e = {0};
    double best = 1e30;
    *cpu = 1e30;
    for (int r = 0; r <= reps; r++) {
        double t0 = clock_ms(CLOCK_MONOTONIC), c0 = clock_ms(CLOCK_PROCESS_CPUTIME_ID);
        if (ot_cpu_run_node(&n, in, out, &ctx, &e)) {
            fprintf(stderr, "%s: %s\n", s->name, e.msg);
            exit(1);
        }
        double dt = clock_ms(CLOCK_MONOTONIC) - t0, dc = clock_ms(CLOCK_PROCESS_CPUTIME_ID) - c0;
        if (r && dt < best) best = dt;
        if (r && dc < *cpu) *cpu = dc;
    }
    free(ctx.workspace);
    if (state) be->free_node_state(be, state);
    bn_node_free(&n);
    free(x), free(w), free(y);
    return best;
}

int main(int argc, char **argv) {
    int nt = argc > 1 ? atoi(argv[1]) : 2, reps = argc > 2 ? atoi(argv[2]) : 5, N = argc > 3 ? atoi(argv[3]) : 8;
    ot_error berr = {0};
    ot_backend *be = ot_backend_cpu_new(nt, &berr);
    if (!be) {
        fprintf(stderr, "%s\n", berr.msg);
        return 1;
    }
    static const char *dir[3] = {"fwd", "dX", "dW"};
    double tot[4] = {0, 0, 0, 0};
    printf("ResNet-18 conv shapes, batch %d, %d threads, best of %d (ms; CPU: every thread's)\n", N, nt, reps);
    printf("%-26s %-4s %9s %9s %7s %9s %9s %7s\n", "shape", "dir", "fp32", "bf16", "ratio", "fp32 CPU", "bf16 CPU",
           "ratio");
    for (size_t i = 0; i < sizeof SHAPES / sizeof SHAPES[0]; i++)
        for (int op = 0; op < 3; op++) {
            if (i == 0 && op == 1) continue; /* the stem's dX is never computed (the input needs none) */
            double fc, bc;
            double f = run(be, &SHAPES[i], N, op, OT_F32, nt, reps, &fc);
            double b = run(be, &SHAPES[i], N, op, OT_BF16, nt, reps, &bc);
            tot[0] += f, tot[1] += b, tot[2] += fc, tot[3] += bc;
            printf("%-26s %-4s %9.3f %9.3f %6.2fx %9.3f %9.3f %6.2fx\n", SHAPES[i].name, dir[op], f, b, b / f, fc, bc,
                   bc / fc);
        }
    printf("%-26s %-4s %9.3f %9.3f %6.2fx %9.3f %9.3f %6.2fx (each shape once)\n", "sum", "", tot[0], tot[1],
           tot[1] / tot[0], tot[2], tot[3], tot[3] / tot[2]);
    return 0;
}
