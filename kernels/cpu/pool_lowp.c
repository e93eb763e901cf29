/* pool_lowp.c — the pools with bfloat16 / float16 X, Y, dY and dX (issue 27: a conv
 * net's activations stay low between its convolutions). One (image, channel) plane
 * at a time: its low operands are converted to float32 in the running thread's slice
 * of the node's workspace, the float32 kernel runs on that one plane (a tensor of
 * shape 1 x 1 x spatial), and its output plane is rounded to nearest even into the
 * node's output. Every plane is independent in the float32 kernels too (one thread
 * per plane, sums inside a plane), so the result is the float32 kernel's bits on the
 * rounded inputs, rounded, on any thread count; MaxPool's is exact (its Indices get
 * the plane's offset added). Workspace: a few planes per core, never a float32 copy
 * of the whole tensor. */
#include "kernels/cpu/pool_lowp.h"

#include <omp.h>

#include "kernels/cpu/cpu_lowp.h"

#define PLANE_ALIGN 64
#define PLANE_MAX_IN 2

static bool is_low(ot_dtype t) { return t == OT_BF16 || t == OT_F16; }
static size_t align_up(size_t n) { return (n + PLANE_ALIGN - 1) / PLANE_ALIGN * PLANE_ALIGN; }

static ot_cpu_kernel_fn f32_kernel(ot_op op) {
    switch (op) {
    case OT_OP_MAX_POOL: return ot_cpu_max_pool;
    case OT_OP_AVERAGE_POOL: return ot_cpu_average_pool;
    case OT_OP_GLOBAL_AVERAGE_POOL: return ot_cpu_global_average_pool;
    default: return ot_cpu_pool_grad; /* MaxPoolGrad, AveragePoolGrad: (dY, X) -> dX */
    }
}

/* Inputs read: X (pools) or dY and X (gradients). */
static int n_read(const ot_node *node) {
    return node->op == OT_OP_MAX_POOL_GRAD || node->op == OT_OP_AVERAGE_POOL_GRAD ? 2 : 1;
}

/* Plane by plane applies: low operands, N x C planes in every one. */
static bool planewise(const ot_node *node, const ot_tensor *in, const ot_tensor *out, int64_t *planes) {
    if (!ot_cpu_lowp_any(node, in, out) || node->n_inputs < n_read(node) || node->n_outputs < 1) return false;
    const ot_shape *s = &in[n_read(node) - 1].shape;
    if (s->rank < 3) return false;
    *planes = s->dim[0] * s->dim[1];
    for (int k = 0; k < n_read(node); k++)
        if (in[k].shape.rank != s->rank || in[k].shape.dim[0] * in[k].shape.dim[1] != *planes) return false;
    return out[0].shape.rank == s->rank && out[0].shape.dim[0] * out[0].shape.dim[1] == *planes;
}

static int64_t plane_of(const ot_tensor *t, int64_t planes) { return planes ? ot_kernel_numel(t) / planes : 0; }

/* Bytes of one thread's planes: every low input's and the output's, as float32. */
static size_t per_thread(const ot_node *node, const ot_tensor *in, const ot_tensor *out, int64_t planes) {
    size_t b = align_up((size_t)plane_of(&out[0], planes) * sizeof(float));
    for (int k = 0; k < n_read(node); k++)
        if (is_low(in[k].dtype)) b += align_up((size_t)plane_of(&in[k], planes) * sizeof(float));
    return b;
}

static int max_threads(void) { return omp_get_num_procs() > 0 ? omp_get_num_procs() : 1; }

size_t ot_cpu_pool_all_workspace(const ot_node *node, const ot_tensor *in, const ot_tensor *out) {
    int64_t planes;
    if (!ot_cpu_lowp_any(node, in, out)) return 0;
    if (!planewise(node, in, out, &planes)) return ot_cpu_lowp_workspace(node, in, out, 0x3u, NULL);
    return per_thread(node, in, out, planes) * (size_t)max_threads();
}

/* A 1 x 1 x spatial view of plane pl of t (float32 data at f). */
static ot_tensor plane_view(const ot_tensor *t, void *f) {
    ot_tensor v = *t;
    v.dtype = OT_F32;
    v.shape.dim[0] = v.shape.dim[1] = 1;
    v.nbytes = (size_t)ot_kernel_numel(&v) * sizeof(float);
    v.data = f;
    return v;
}

/* Plane pl through the float32 kernel with buffers at ws. */
static ot_status run_plane(const ot_node *node, const ot_tensor *in, ot_tensor *out, const ot_kernel_ctx *one,
                           int64_t planes, int64_t pl, char *ws, ot_error *err) {
    ot_tensor pin[PLANE_MAX_IN], pout[2];
    int nr = n_read(node);
    for (int k = 0; k < nr; k++) {
        int64_t n = plane_of(&in[k], planes);
        if (is_low(in[k].dtype)) {
            ot_cpu_lowp_to_f32(in[k].dtype, (const uint16_t *)in[k].data + pl * n, (float *)ws, n, 1);
            pin[k] = plane_view(&in[k], ws);
            ws += align_up((size_t)n * sizeof(float));
        } else {
            pin[k] = plane_view(&in[k], (float *)in[k].data + pl * n);
        }
    }
    int64_t n = plane_of(&out[0], planes);
    bool low = is_low(out[0].dtype);
    pout[0] = plane_view(&out[0], low ? (void *)ws : (void *)((float *)out[0].data + pl * n));
    ot_node one_node = *node;
    one_node.n_inputs = nr; /* the pools read no other input */
    one_node.n_outputs = 1;
    int64_t *idx = node->op == OT_OP_MAX_POOL && node->n_outputs > 1 ? out[1].data : NULL;
    if (idx) { /* MaxPool's Indices: the plane's, then moved to the plane's place */
        if (out[1].dtype != OT_I64) return ot_cpu_bad_dtype(node, "Indices", out[1].dtype, err);
        pout[1] = out[1];
        pout[1].shape.dim[0] = pout[1].shape.dim[1] = 1;
        pout[1].nbytes = (size_t)n * sizeof(int64_t);
        pout[1].data = idx + pl * n;
        one_node.n_outputs = 2;
    }
    ot_status st = f32_kernel(node->op)(&one_node, pin, pout, one, err);
    for (int64_t i = 0; st == OT_OK && idx && i < n; i++)
        if (idx[pl * n + i] >= 0) idx[pl * n + i] += pl * plane_of(&in[0], planes); /* -1: an empty window */
    if (st == OT_OK && low) ot_cpu_lowp_from_f32(out[0].dtype, (const float *)ws, (uint16_t *)out[0].data + pl * n, n, 1);
    return st;
}

ot_status ot_cpu_pool_all(const ot_node *node, const ot_tensor *in, ot_tensor *out, const ot_kernel_ctx *ctx,
                          ot_error *err) {
    int64_t planes;
    if (!ot_cpu_lowp_any(node, in, out)) return f32_kernel(node->op)(node, in, out, ctx, err);
    if (!planewise(node, in, out, &planes)) return ot_cpu_lowp_run(node, in, out, ctx, 0x3u, f32_kernel(node->op), err);
    for (int k = 0; k < n_read(node); k++)
        if (!in[k].data) return ot_fail(err, OT_E_INTERNAL, "node '%s' (%s): input %d has no data", node->name, node->op_type, k);
    size_t each = per_thread(node, in, out, planes);
    int nt = ot_cpu_threads(ctx);
    if (nt > max_threads()) nt = max_threads(); /* the workspace is planned for the cores */
    if (!ctx->workspace || ctx->workspace_bytes < each * (size_t)nt)
        return ot_fail(err, OT_E_INTERNAL, "node '%s' (%s): its planes need %zu bytes of workspace, given %zu",
                       node->name, node->op_type, each * (size_t)nt, ctx->workspace ? ctx->workspace_bytes : (size_t)0);
    if (planes == 0) return OT_OK;
    ot_kernel_ctx one = *ctx;
    one.n_threads = 1;
    one.workspace = NULL;
    one.workspace_bytes = 0;
    /* the first plane alone: any error (a shape, an attribute) is every plane's */
    ot_status st = run_plane(node, in, out, &one, planes, 0, ctx->workspace, err);
    if (st) return st;
    bool par = nt > 1 && ot_kernel_numel(&in[n_read(node) - 1]) >= OT_CPU_PAR_MIN;
#pragma omp parallel for schedule(static) num_threads(nt) if (par)
    for (int64_t pl = 1; pl < planes; pl++)
        run_plane(node, in, out, &one, planes, pl, (char *)ctx->workspace + (size_t)omp_get_thread_num() * each, NULL);
    return OT_OK;
}
