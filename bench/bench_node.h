/* bench_node.h — what the kernel benchmarks (conv_lowp.c, gemm_lowp.c, conv_bf16.c,
 * conv_dnnl.c) share to time one CPU kernel as the executor runs it: a stand-alone
 * node, a square convolution's attributes, the kernel context with the workspace the
 * planner would give and a slot for the node's kept state (oneDNN's primitives), and
 * for the interleaved benches the best of `reps` calls and the comparison qsort takes
 * for medians. Header only: each benchmark is one file built by its own script
 * (bench/NAME.sh), not part of onnxtrain. */
#ifndef OT_BENCH_NODE_H
#define OT_BENCH_NODE_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "kernels/cpu/cpu_common.h" /* ot_cpu_run_node, ot_cpu_workspace_bytes, ot_cpu_node_state */

/* A node named "bench" of op with n_in inputs and one output, no attributes yet. */
static inline ot_node bn_node(ot_op op, int n_in) {
    ot_node n;
    memset(&n, 0, sizeof n);
    n.op = op;
    n.op_type = (char *)ot_op_name(op);
    n.domain = (char *)"";
    n.name = (char *)"bench";
    n.n_inputs = n_in;
    n.n_outputs = 1;
    n.orig_node = -1;
    return n;
}

/* A k x k kernel, stride s and pad p on every side (Conv and its gradients). */
static inline void bn_conv_attrs(ot_node *n, int64_t k, int64_t s, int64_t p) {
    int64_t ks[2] = {k, k}, st[2] = {s, s}, pd[4] = {p, p, p, p};
    ot_node_set_attr_ints(n, "kernel_shape", ks, 2);
    ot_node_set_attr_ints(n, "strides", st, 2);
    ot_node_set_attr_ints(n, "pads", pd, 4);
}

static inline void bn_node_free(ot_node *n) {
    for (int i = 0; i < n->n_attrs; i++)
        ot_attr_free(&n->attrs[i]);
    free(n->attrs);
}

/* The context of a run on `threads` threads: the node's planned workspace (malloc'd:
 * free ctx->workspace), and slot (may be NULL) for its kept state. */
static inline void bn_ctx_init(ot_kernel_ctx *ctx, const ot_node *n, ot_tensor *in, ot_tensor *out, int threads,
                               void **slot) {
    memset(ctx, 0, sizeof *ctx);
    ctx->n_threads = threads;
    ctx->node_state = slot;
    ctx->workspace_bytes = ot_cpu_workspace_bytes(n, in, out);
    ctx->workspace = ctx->workspace_bytes ? malloc(ctx->workspace_bytes) : NULL;
}

static inline double bn_seconds(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

/* For qsort of doubles (the medians over rounds). */
static inline int bn_cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* One timed variant of the interleaved benches: its node, tensors (malloc'd data),
 * context and kept state. */
typedef struct bn_run {
    ot_node node;
    ot_tensor in[3], out[1];
    ot_kernel_ctx ctx;
    void *slot;
} bn_run;

/* The best of reps calls, in seconds; a failing kernel ends the bench. */
static inline double bn_best_of(bn_run *r, int reps) {
    ot_error e;
    double best = 1e30;
    for (int i = 0; i < reps; i++) {
        double t0 = bn_seconds();
        if (ot_cpu_run_node(&r->node, r->in, r->out, &r->ctx, &e)) {
            fprintf(stderr, "%s\n", e.msg);
            exit(1);
        }
        double t = bn_seconds() - t0;
        if (t < best) best = t;
    }
    return best;
}

static inline void bn_run_free(bn_run *r) {
    for (int k = 0; k < 3; k++)
        free(r->in[k].data);
    free(r->out[0].data);
    free(r->ctx.workspace);
    if (r->slot) ((ot_cpu_node_state *)r->slot)->free(r->slot);
    bn_node_free(&r->node);
}

#endif
