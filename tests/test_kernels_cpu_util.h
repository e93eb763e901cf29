/* test_kernels_cpu_util.h — small helpers for the CPU kernel tests
 * (test_kernels_cpu*.c): a stand-alone node with attributes, tensor wrappers over
 * caller arrays, and a runner that sizes the workspace like the planner would. */
#ifndef OT_TEST_KERNELS_CPU_UTIL_H
#define OT_TEST_KERNELS_CPU_UTIL_H

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/cpu/cpu_common.h" /* ot_cpu_node_state */
#include "kernels/kernel.h"

static inline ot_node tk_node(ot_op op, int n_in, int n_out) {
    ot_node n;
    memset(&n, 0, sizeof n);
    n.op = op;
    n.op_type = (char *)ot_op_name(op);
    n.domain = (char *)"";
    n.name = (char *)"k";
    n.n_inputs = n_in;
    n.n_outputs = n_out;
    n.orig_node = -1;
    return n;
}

static inline void tk_node_free(ot_node *n) {
    for (int i = 0; i < n->n_attrs; i++) ot_attr_free(&n->attrs[i]);
    free(n->attrs);
    n->attrs = NULL;
    n->n_attrs = 0;
}

/* A tensor over caller memory; dims as a literal list: tk_t(OT_F32, x, 2, 3, 4). */
static inline ot_tensor tk_t(ot_dtype t, void *data, int rank, ...) {
    ot_tensor x;
    memset(&x, 0, sizeof x);
    int64_t d[OT_MAX_RANK];
    va_list ap;
    va_start(ap, rank);
    for (int i = 0; i < rank; i++) d[i] = va_arg(ap, int);
    va_end(ap);
    x.dtype = t;
    x.shape = ot_shape_make(rank, d);
    x.data = data;
    x.nbytes = (size_t)ot_shape_numel(&x.shape) * ot_dtype_size(t);
    return x;
}

/* The same over a dims array: tk_ta(OT_BF16, x, 4, dims). */
static inline ot_tensor tk_ta(ot_dtype t, void *data, int rank, const int64_t *dims) {
    ot_tensor x;
    memset(&x, 0, sizeof x);
    x.dtype = t;
    x.shape = ot_shape_make(rank, dims);
    x.data = data;
    x.nbytes = (size_t)ot_shape_numel(&x.shape) * ot_dtype_size(t);
    return x;
}

static inline ot_tensor tk_absent(void) {
    ot_tensor x;
    memset(&x, 0, sizeof x);
    x.shape = ot_shape_make(0, NULL);
    return x;
}

/* A kernel context for one run on `threads` threads with a workspace of exactly
 * ot_cpu_workspace_bytes (malloc'd: free ctx->workspace after the run). */
static inline void tk_ctx_init(ot_kernel_ctx *ctx, const ot_node *n, ot_tensor *in, ot_tensor *out, int threads) {
    memset(ctx, 0, sizeof *ctx);
    ctx->n_threads = threads;
    ctx->workspace_bytes = ot_cpu_workspace_bytes(n, in, out);
    ctx->workspace = ctx->workspace_bytes ? malloc(ctx->workspace_bytes) : NULL;
}

/* Runs the node with `threads` OpenMP threads and a workspace of exactly
 * ot_cpu_workspace_bytes; err may be NULL. */
static inline ot_status tk_run_ex(const ot_node *n, ot_tensor *in, ot_tensor *out, int threads, uint64_t seed,
                                  uint64_t step, int rng_node, ot_error *err) {
    ot_kernel_ctx ctx;
    tk_ctx_init(&ctx, n, in, out, threads);
    ctx.seed = seed;
    ctx.step = step;
    ctx.rng_node = rng_node;
    /* These tests pin our own kernels' summation order; test_conv_dnnl checks oneDNN's. */
    ctx.no_dnnl = true;
    ot_error e = {0};
    ot_status st = ot_cpu_run_node(n, in, out, &ctx, err ? err : &e);
    free(ctx.workspace);
    return st;
}

static inline ot_status tk_run(const ot_node *n, ot_tensor *in, ot_tensor *out) {
    ot_error e = {0};
    ot_status st = tk_run_ex(n, in, out, 2, 1, 0, 0, &e);
    if (st) print_error("kernel failed: %s\n", e.msg);
    return st;
}

/* Runs the node as the low-precision kernels run in a session: oneDNN allowed unless
 * no_dnnl, on `threads` threads, a workspace of exactly ot_cpu_workspace_bytes and,
 * when slot is given, the node's kept state (ot_kernel_ctx.node_state: oneDNN's
 * primitives), which a second run reuses and tk_state_free frees. Prints a failure's
 * message. */
static inline ot_status tk_run_kept(const ot_node *n, ot_tensor *in, ot_tensor *out, int threads, bool no_dnnl,
                                    void **slot) {
    ot_kernel_ctx ctx;
    tk_ctx_init(&ctx, n, in, out, threads);
    ctx.no_dnnl = no_dnnl;
    ctx.node_state = slot;
    ot_error e = {0};
    ot_status st = ot_cpu_run_node(n, in, out, &ctx, &e);
    if (st) print_error("%s\n", e.msg);
    free(ctx.workspace);
    return st;
}

static inline void tk_state_free(void **slot) {
    if (*slot) ((ot_cpu_node_state *)*slot)->free(*slot);
    *slot = NULL;
}

/* Max |a - b| relative to max(1, |b|). */
static inline double tk_max_rel(const float *a, const double *b, int64_t n) {
    double m = 0.0;
    for (int64_t i = 0; i < n; i++) {
        double d = fabs((double)a[i] - b[i]) / (fabs(b[i]) > 1.0 ? fabs(b[i]) : 1.0);
        if (isnan(a[i]) != isnan(b[i])) d = INFINITY;
        else if (isnan(a[i])) d = 0;
        if (d > m) m = d;
    }
    return m;
}

/* Deterministic pseudo-random floats in [lo, hi) (an LCG, independent of the kernels' RNG). */
static inline void tk_fill(float *x, int64_t n, uint32_t seed, float lo, float hi) {
    uint32_t s = seed * 2654435761u + 12345u;
    for (int64_t i = 0; i < n; i++) {
        s = s * 1664525u + 1013904223u;
        x[i] = lo + (hi - lo) * (float)(s >> 8) / 16777216.0f;
    }
}

#endif
