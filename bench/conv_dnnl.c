/* conv_dnnl.c — issue 14's measurement of oneDNN (libdnnl, the library PyTorch's CPU
 * convolutions use) against onnxtrain's own Conv, ConvGradInput and ConvGradWeight
 * kernels on ResNet-18's and MobileNetV2's layer shapes (batch 8, 64x64 input).
 * Built and run by bench/conv_dnnl.sh. For each shape and direction it prints the
 * best of R wall times (ms) of: onnxtrain's kernel (through ot_cpu_run_node, the
 * workspace the planner would give it); oneDNN with plain NCHW / OIHW memory (no
 * reorders: what a drop-in kernel would see); oneDNN with the layouts it prefers
 * (format any, usually nChw16c) plus the reorders from and to NCHW that onnxtrain's
 * NCHW tensors would need, each timed as part of the call. It also runs each oneDNN
 * primitive twice on the same inputs and says whether the two results have the same
 * bits (the determinism the issue asks for, at a fixed thread count). Primitives are
 * created once per shape, outside the timing, as a per-node cache would. */
#include <oneapi/dnnl/dnnl.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "bench_node.h"
#include "exec/backend.h"
#include "kernels/kernel.h"

#define CHECK(x)                                                                                                     \
    do {                                                                                                             \
        dnnl_status_t s_ = (x);                                                                                      \
        if (s_ != dnnl_success) {                                                                                    \
            fprintf(stderr, "%s:%d: %s -> %d\n", __FILE__, __LINE__, #x, (int)s_);                                 \
            exit(1);                                                                                                 \
        }                                                                                                            \
    } while (0)

typedef struct shape {
    const char *name;
    int N, C, H, W, M, K, S, P, G;
} shape;

static const shape SHAPES[] = {
    {"rn conv1 7x7s2 3-64 64x64", 8, 3, 64, 64, 64, 7, 2, 3, 1},
    {"rn l1 3x3 64-64 16x16", 8, 64, 16, 16, 64, 3, 1, 1, 1},
    {"rn l2.0 3x3s2 64-128 16x16", 8, 64, 16, 16, 128, 3, 2, 1, 1},
    {"rn l2 3x3 128-128 8x8", 8, 128, 8, 8, 128, 3, 1, 1, 1},
    {"rn l2 ds 1x1s2 64-128", 8, 64, 16, 16, 128, 1, 2, 0, 1},
    {"rn l3.0 3x3s2 128-256 8x8", 8, 128, 8, 8, 256, 3, 2, 1, 1},
    {"rn l3 3x3 256-256 4x4", 8, 256, 4, 4, 256, 3, 1, 1, 1},
    {"rn l4.0 3x3s2 256-512 4x4", 8, 256, 4, 4, 512, 3, 2, 1, 1},
    {"rn l4 3x3 512-512 2x2", 8, 512, 2, 2, 512, 3, 1, 1, 1},
    {"mb pw 1x1 48-8 32x32", 8, 48, 32, 32, 8, 1, 1, 0, 1},
    {"mb pw 1x1 16-96 16x16", 8, 16, 16, 16, 96, 1, 1, 0, 1},
    {"mb pw 1x1 96-24 8x8", 8, 96, 8, 8, 24, 1, 1, 0, 1},
    {"mb dw 3x3 96 16x16", 8, 96, 16, 16, 96, 3, 1, 1, 96},
    {"mb dw 3x3s2 144 16x16", 8, 144, 16, 16, 144, 3, 2, 1, 144},
    /* bench/peers.py's mobilenet_v2 (x0.5, 64x64, batch 8): every depthwise shape */
    {"mb dw 3x3 16 32x32", 8, 16, 32, 32, 16, 3, 1, 1, 16},
    {"mb dw 3x3s2 48 32x32", 8, 48, 32, 32, 48, 3, 2, 1, 48},
    {"mb dw 3x3s2 96 16x16", 8, 96, 16, 16, 96, 3, 2, 1, 96},
    {"mb dw 3x3 96 8x8", 8, 96, 8, 8, 96, 3, 1, 1, 96},
    {"mb dw 3x3s2 96 8x8", 8, 96, 8, 8, 96, 3, 2, 1, 96},
    {"mb dw 3x3 192 4x4", 8, 192, 4, 4, 192, 3, 1, 1, 192},
    {"mb dw 3x3 288 4x4", 8, 288, 4, 4, 288, 3, 1, 1, 288},
    {"mb dw 3x3s2 288 4x4", 8, 288, 4, 4, 288, 3, 2, 1, 288},
    {"mb dw 3x3 480 2x2", 8, 480, 2, 2, 480, 3, 1, 1, 480},
};

static double now_ms(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec * 1e3 + t.tv_nsec * 1e-6;
}

static void fill(float *x, size_t n, unsigned seed) {
    unsigned s = seed * 2654435761u + 12345u;
    for (size_t i = 0; i < n; i++) {
        s = s * 1664525u + 1013904223u;
        x[i] = (float)(s >> 8) / 16777216.0f - 0.5f;
    }
}

/* ---- onnxtrain's kernels ---- */

static ot_tensor tensor(void *data, int rank, const int64_t *d) {
    ot_tensor x;
    memset(&x, 0, sizeof x);
    x.dtype = OT_F32;
    x.shape = ot_shape_make(rank, d);
    x.data = data;
    x.nbytes = (size_t)ot_shape_numel(&x.shape) * sizeof(float);
    return x;
}

typedef struct bufs {
    float *x, *w, *y, *dy, *dx, *dw, *tmp;
    int64_t xd[4], wd[4], yd[4];
    size_t nx, nw, ny;
} bufs;

/* Best of reps wall times of one onnxtrain kernel (op 0 Conv, 1 ConvGradInput, 2 ConvGradWeight):
 * slot false: our own kernels only (no_dnnl); true: as the executor runs it, with a node
 * slot (oneDNN where kernels/cpu/conv_dnnl.c's rule picks it). */
static double ot_time(ot_backend *be, const shape *s, bufs *b, int op, int nt, int reps, bool slot) {
    static const ot_op ops[3] = {OT_OP_CONV, OT_OP_CONV_GRAD_INPUT, OT_OP_CONV_GRAD_WEIGHT};
    ot_node n = bn_node(ops[op], op == 0 ? 2 : 3);
    bn_conv_attrs(&n, s->K, s->S, s->P);
    ot_node_set_attr_int(&n, "group", s->G);
    ot_tensor X = tensor(b->x, 4, b->xd), W = tensor(b->w, 4, b->wd), Y = tensor(b->y, 4, b->yd);
    ot_tensor dY = tensor(b->dy, 4, b->yd), dX = tensor(b->dx, 4, b->xd), dW = tensor(b->dw, 4, b->wd);
    ot_tensor in[3], out[1];
    if (op == 0) in[0] = X, in[1] = W, out[0] = Y;
    if (op == 1) in[0] = dY, in[1] = W, in[2] = X, out[0] = dX;
    if (op == 2) in[0] = dY, in[1] = X, in[2] = W, out[0] = dW;
    void *state = NULL;
    ot_kernel_ctx ctx;
    bn_ctx_init(&ctx, &n, in, out, nt, slot ? &state : NULL);
    ctx.no_dnnl = !slot;
    ot_error e = {0};
    double best = 1e30;
    for (int r = 0; r < reps; r++) {
        double t0 = now_ms();
        if (ot_cpu_run_node(&n, in, out, &ctx, &e)) {
            fprintf(stderr, "%s: %s\n", s->name, e.msg);
            exit(1);
        }
        double t = now_ms() - t0;
        if (r && t < best) best = t; /* the first run warms caches and OpenBLAS */
    }
    free(ctx.workspace);
    if (state) be->free_node_state(be, state);
    bn_node_free(&n);
    return best;
}

/* ---- oneDNN ---- */

typedef struct dnn {
    dnnl_engine_t eng;
    dnnl_stream_t st;
} dnn;

static dnnl_memory_t mem(const dnn *d, const dnnl_memory_desc_t *md, void *data) {
    dnnl_memory_t m;
    CHECK(dnnl_memory_create(&m, md, d->eng, data ? data : DNNL_MEMORY_ALLOCATE));
    return m;
}

/* One primitive with its arguments; `user[i]` (NCHW memory) is reordered into
 * `inner[i]` before (inputs) or after (outputs) the primitive when they differ. */
typedef struct call {
    dnnl_primitive_t prim;
    int n;
    int arg[4];
    dnnl_memory_t user[4], inner[4];
    dnnl_primitive_t reorder[4]; /* NULL: same layout */
    int is_out[4];
} call;

static void call_arg(const dnn *d, call *c, dnnl_primitive_desc_t pd, dnnl_query_t q, int arg, dnnl_memory_t user,
                     int is_out) {
    int i = c->n++;
    const dnnl_memory_desc_t *want = dnnl_primitive_desc_query_md(pd, q, 0);
    const dnnl_memory_desc_t *have;
    CHECK(dnnl_memory_get_memory_desc(user, &have));
    c->arg[i] = arg;
    c->user[i] = user;
    c->is_out[i] = is_out;
    c->reorder[i] = NULL;
    c->inner[i] = user;
    if (dnnl_memory_desc_equal(want, have)) return;
    c->inner[i] = mem(d, want, NULL);
    dnnl_primitive_desc_t rpd;
    if (is_out)
        CHECK(dnnl_reorder_primitive_desc_create(&rpd, want, d->eng, have, d->eng, NULL));
    else
        CHECK(dnnl_reorder_primitive_desc_create(&rpd, have, d->eng, want, d->eng, NULL));
    CHECK(dnnl_primitive_create(&c->reorder[i], rpd));
    dnnl_primitive_desc_destroy(rpd);
}

static void call_run(const dnn *d, const call *c) {
    for (int i = 0; i < c->n; i++)
        if (c->reorder[i] && !c->is_out[i]) {
            dnnl_exec_arg_t a[2] = {{DNNL_ARG_FROM, c->user[i]}, {DNNL_ARG_TO, c->inner[i]}};
            CHECK(dnnl_primitive_execute(c->reorder[i], d->st, 2, a));
        }
    dnnl_exec_arg_t args[4];
    for (int i = 0; i < c->n; i++) args[i] = (dnnl_exec_arg_t){c->arg[i], c->inner[i]};
    CHECK(dnnl_primitive_execute(c->prim, d->st, c->n, args));
    for (int i = 0; i < c->n; i++)
        if (c->reorder[i] && c->is_out[i]) {
            dnnl_exec_arg_t a[2] = {{DNNL_ARG_FROM, c->inner[i]}, {DNNL_ARG_TO, c->user[i]}};
            CHECK(dnnl_primitive_execute(c->reorder[i], d->st, 2, a));
        }
    CHECK(dnnl_stream_wait(d->st));
}

typedef struct dnn_result {
    double ms[3];
    int same_bits[3];
    char impl[3][48];
} dnn_result;

static double time_call(const dnn *d, const call *c, int reps) {
    double best = 1e30;
    for (int r = 0; r < reps; r++) {
        double t0 = now_ms();
        call_run(d, c);
        double t = now_ms() - t0;
        if (r && t < best) best = t;
    }
    return best;
}

static void impl_name(dnnl_primitive_desc_t pd, char *out) {
    const char *s = NULL;
    dnnl_primitive_desc_query(pd, dnnl_query_impl_info_str, 0, &s);
    snprintf(out, 48, "%s", s ? s : "?");
}

/* The three directions with memory of tag `t` (dnnl_nchw or dnnl_format_tag_any). */
static void dnn_time(const dnn *d, const shape *s, bufs *b, dnnl_format_tag_t t, int reps, dnn_result *res) {
    dnnl_dims_t xd = {s->N, s->C, s->H, s->W}, yd = {b->yd[0], b->yd[1], b->yd[2], b->yd[3]};
    dnnl_dims_t wd5 = {s->G, s->M / s->G, s->C / s->G, s->K, s->K}, wd4 = {s->M, s->C, s->K, s->K};
    int grouped = s->G > 1;
    dnnl_memory_desc_t xm, ym, wm, xu, yu, wu;
    CHECK(dnnl_memory_desc_init_by_tag(&xu, 4, xd, dnnl_f32, dnnl_nchw));
    CHECK(dnnl_memory_desc_init_by_tag(&yu, 4, yd, dnnl_f32, dnnl_nchw));
    if (grouped)
        CHECK(dnnl_memory_desc_init_by_tag(&wu, 5, wd5, dnnl_f32, dnnl_goihw));
    else
        CHECK(dnnl_memory_desc_init_by_tag(&wu, 4, wd4, dnnl_f32, dnnl_oihw));
    CHECK(dnnl_memory_desc_init_by_tag(&xm, 4, xd, dnnl_f32, t));
    CHECK(dnnl_memory_desc_init_by_tag(&ym, 4, yd, dnnl_f32, t));
    if (t == dnnl_format_tag_any)
        CHECK(dnnl_memory_desc_init_by_tag(&wm, grouped ? 5 : 4, grouped ? wd5 : wd4, dnnl_f32, t));
    else
        wm = wu;
    dnnl_dims_t strides = {s->S, s->S}, pads = {s->P, s->P};
    dnnl_memory_t X = mem(d, &xu, b->x), W = mem(d, &wu, b->w), Y = mem(d, &yu, b->y);
    dnnl_memory_t dY = mem(d, &yu, b->dy), dX = mem(d, &xu, b->dx), dW = mem(d, &wu, b->dw);
    dnnl_convolution_desc_t fd, bd, wdsc;
    CHECK(dnnl_convolution_forward_desc_init(&fd, dnnl_forward_training, dnnl_convolution_direct, &xm, &wm, NULL, &ym,
                                             strides, pads, pads));
    CHECK(dnnl_convolution_backward_data_desc_init(&bd, dnnl_convolution_direct, &xm, &wm, &ym, strides, pads, pads));
    CHECK(dnnl_convolution_backward_weights_desc_init(&wdsc, dnnl_convolution_direct, &xm, &wm, NULL, &ym, strides,
                                                      pads, pads));
    dnnl_primitive_desc_t fpd, bpd, wpd;
    CHECK(dnnl_primitive_desc_create(&fpd, &fd, NULL, d->eng, NULL));
    CHECK(dnnl_primitive_desc_create(&bpd, &bd, NULL, d->eng, fpd));
    CHECK(dnnl_primitive_desc_create(&wpd, &wdsc, NULL, d->eng, fpd));
    call c[3];
    memset(c, 0, sizeof c);
    CHECK(dnnl_primitive_create(&c[0].prim, fpd));
    call_arg(d, &c[0], fpd, dnnl_query_src_md, DNNL_ARG_SRC, X, 0);
    call_arg(d, &c[0], fpd, dnnl_query_weights_md, DNNL_ARG_WEIGHTS, W, 0);
    call_arg(d, &c[0], fpd, dnnl_query_dst_md, DNNL_ARG_DST, Y, 1);
    CHECK(dnnl_primitive_create(&c[1].prim, bpd));
    call_arg(d, &c[1], bpd, dnnl_query_diff_dst_md, DNNL_ARG_DIFF_DST, dY, 0);
    call_arg(d, &c[1], bpd, dnnl_query_weights_md, DNNL_ARG_WEIGHTS, W, 0);
    call_arg(d, &c[1], bpd, dnnl_query_diff_src_md, DNNL_ARG_DIFF_SRC, dX, 1);
    CHECK(dnnl_primitive_create(&c[2].prim, wpd));
    call_arg(d, &c[2], wpd, dnnl_query_diff_dst_md, DNNL_ARG_DIFF_DST, dY, 0);
    call_arg(d, &c[2], wpd, dnnl_query_src_md, DNNL_ARG_SRC, X, 0);
    call_arg(d, &c[2], wpd, dnnl_query_diff_weights_md, DNNL_ARG_DIFF_WEIGHTS, dW, 1);
    dnnl_primitive_desc_t pds[3] = {fpd, bpd, wpd};
    float *outs[3] = {b->y, b->dx, b->dw};
    size_t nout[3] = {b->ny, b->nx, b->nw};
    for (int k = 0; k < 3; k++) {
        impl_name(pds[k], res->impl[k]);
        res->ms[k] = time_call(d, &c[k], reps);
        call_run(d, &c[k]);
        memcpy(b->tmp, outs[k], nout[k] * sizeof(float));
        call_run(d, &c[k]);
        res->same_bits[k] = !memcmp(b->tmp, outs[k], nout[k] * sizeof(float));
        for (int i = 0; i < c[k].n; i++)
            if (c[k].reorder[i]) {
                dnnl_primitive_destroy(c[k].reorder[i]);
                dnnl_memory_destroy(c[k].inner[i]);
            }
        dnnl_primitive_destroy(c[k].prim);
        dnnl_primitive_desc_destroy(pds[k]);
    }
    dnnl_memory_t all[6] = {X, W, Y, dY, dX, dW};
    for (int i = 0; i < 6; i++) dnnl_memory_destroy(all[i]);
}

int main(int argc, char **argv) {
    int nt = argc > 1 ? atoi(argv[1]) : 2, reps = argc > 2 ? atoi(argv[2]) : 20;
    omp_set_num_threads(nt);
    dnn d;
    CHECK(dnnl_engine_create(&d.eng, dnnl_cpu, 0));
    CHECK(dnnl_stream_create(&d.st, d.eng, dnnl_stream_default_flags));
    ot_error e = {0};
    ot_backend *be = ot_backend_cpu_new(nt, &e);
    if (!be) return 1;
    printf("threads %d, best of %d (ms); dnnl-nchw: plain layouts; dnnl-any+reorders: oneDNN's layouts, reorders "
           "from/to NCHW included; run: onnxtrain's kernels as the executor runs them (oneDNN where "
           "kernels/cpu/conv_dnnl.c's rule picks it, primitives kept in the node slot); bits: two runs equal (F/D/W)\n",
           nt, reps - 1);
    printf("| shape | ot fwd | ot dX | ot dW | ot sum | run fwd | run dX | run dW | run sum | nchw fwd | nchw dX | nchw dW | nchw sum | any fwd | any dX | "
           "any dW | any sum | bits nchw | bits any | impl (any: fwd / dX / dW) |\n");
    printf("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|\n");
    double tot[4] = {0};
    for (size_t i = 0; i < sizeof SHAPES / sizeof SHAPES[0]; i++) {
        const shape *s = &SHAPES[i];
        bufs b;
        memset(&b, 0, sizeof b);
        int OH = (s->H + 2 * s->P - s->K) / s->S + 1, OW = (s->W + 2 * s->P - s->K) / s->S + 1;
        int64_t xd[4] = {s->N, s->C, s->H, s->W}, wd[4] = {s->M, s->C / s->G, s->K, s->K},
                yd[4] = {s->N, s->M, OH, OW};
        memcpy(b.xd, xd, sizeof xd);
        memcpy(b.wd, wd, sizeof wd);
        memcpy(b.yd, yd, sizeof yd);
        b.nx = (size_t)(xd[0] * xd[1] * xd[2] * xd[3]);
        b.nw = (size_t)(wd[0] * wd[1] * wd[2] * wd[3]);
        b.ny = (size_t)(yd[0] * yd[1] * yd[2] * yd[3]);
        size_t big = b.nx > b.ny ? b.nx : b.ny;
        big = big > b.nw ? big : b.nw;
        b.x = malloc(b.nx * 4), b.dx = malloc(b.nx * 4), b.w = malloc(b.nw * 4), b.dw = malloc(b.nw * 4);
        b.y = malloc(b.ny * 4), b.dy = malloc(b.ny * 4), b.tmp = malloc(big * 4);
        fill(b.x, b.nx, 1), fill(b.w, b.nw, 2), fill(b.dy, b.ny, 3);
        double ot[3], run[3];
        for (int k = 0; k < 3; k++) ot[k] = ot_time(be, s, &b, k, nt, reps, false);
        for (int k = 0; k < 3; k++) run[k] = ot_time(be, s, &b, k, nt, reps, true);
        dnn_result rn, ra;
        dnn_time(&d, s, &b, dnnl_nchw, reps, &rn);
        dnn_time(&d, s, &b, dnnl_format_tag_any, reps, &ra);
        printf("| %s | %.3f | %.3f | %.3f | %.3f | %.3f | %.3f | %.3f | %.3f | %.3f | %.3f | %.3f | %.3f | %.3f | "
               "%.3f | %.3f | %.3f | %c%c%c | %c%c%c | %s / %s / %s |\n",
               s->name, ot[0], ot[1], ot[2], ot[0] + ot[1] + ot[2], run[0], run[1], run[2],
               run[0] + run[1] + run[2], rn.ms[0], rn.ms[1], rn.ms[2],
               rn.ms[0] + rn.ms[1] + rn.ms[2], ra.ms[0], ra.ms[1], ra.ms[2], ra.ms[0] + ra.ms[1] + ra.ms[2],
               rn.same_bits[0] ? 'y' : 'n', rn.same_bits[1] ? 'y' : 'n', rn.same_bits[2] ? 'y' : 'n',
               ra.same_bits[0] ? 'y' : 'n', ra.same_bits[1] ? 'y' : 'n', ra.same_bits[2] ? 'y' : 'n', ra.impl[0],
               ra.impl[1], ra.impl[2]);
        fflush(stdout);
        tot[0] += ot[0] + ot[1] + ot[2];
        tot[1] += rn.ms[0] + rn.ms[1] + rn.ms[2];
        tot[2] += ra.ms[0] + ra.ms[1] + ra.ms[2];
        tot[3] += run[0] + run[1] + run[2];
        free(b.x), free(b.dx), free(b.w), free(b.dw), free(b.y), free(b.dy), free(b.tmp);
    }
    printf("sum over shapes (each once): ot %.3f, run %.3f, dnnl-nchw %.3f, dnnl-any+reorders %.3f ms\n", tot[0],
           tot[3], tot[1], tot[2]);
    ot_backend_free(be);
    dnnl_stream_destroy(d.st);
    dnnl_engine_destroy(d.eng);
    return 0;
}
