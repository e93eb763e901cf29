/* cpu_spatial.c — CPU kernels of Resize / Upsample (X, roi, scales, sizes) and their
 * gradient ResizeGrad (dY, X, roi, scales, sizes), float32, and of DepthToSpace /
 * SpaceToDepth (any dtype: they move elements): one output element per iteration
 * through spatial_geometry.h's element code, which the CUDA kernels run too (Resize's
 * taps come from a table in the workspace here, computed by the same rule).
 * The gradient is a gather (each dX element sums its outputs in order): no atomics,
 * the same bits on any thread count. */
#include "kernels/cpu/cpu_common.h"
#include "kernels/cpu/grad_kernels.h"
#include "kernels/spatial_geometry.h"

/* The geometry from the operands at in[first ..] (roi, scales, sizes), host data. */
static ot_status cpu_resize_geom(const ot_node *node, const ot_tensor *in, int first, const ot_shape *xs,
                                 const ot_shape *ys, ot_resize_geom *g, ot_error *err) {
    ot_op_params scratch;
    const ot_op_params *pp = NULL;
    ot_status st = ot_node_params(node, &scratch, &pp, err);
    if (st) return st;
    double scales[OT_MAX_RANK];
    int64_t sizes[OT_MAX_RANK];
    int ns = 0, nz = 0;
    const ot_tensor *st_t = node->n_inputs > first + 1 ? &in[first + 1] : NULL;
    const ot_tensor *sz_t = node->n_inputs > first + 2 ? &in[first + 2] : NULL;
    if (st_t && st_t->data && ot_kernel_numel(st_t) > 0) {
        if (ot_kernel_numel(st_t) > OT_MAX_RANK) return ot_fail(err, OT_E_MODEL, "node '%s' (%s): too many scales", node->name, node->op_type);
        ns = (int)ot_kernel_numel(st_t);
        for (int k = 0; k < ns; k++)
            if (st_t->dtype != OT_F32 || !ot_kernel_load_double(st_t->dtype, st_t->data, k, &scales[k]))
                return ot_cpu_bad_dtype(node, "scales", st_t->dtype, err);
    }
    if (sz_t && sz_t->data && ot_kernel_numel(sz_t) > 0) {
        if (ot_kernel_numel(sz_t) > OT_MAX_RANK) return ot_fail(err, OT_E_MODEL, "node '%s' (%s): too many sizes", node->name, node->op_type);
        nz = (int)ot_kernel_numel(sz_t);
        for (int k = 0; k < nz; k++)
            if (sz_t->dtype != OT_I64 || !ot_kernel_load_int(sz_t->dtype, sz_t->data, k, &sizes[k]))
                return ot_cpu_bad_dtype(node, "sizes", sz_t->dtype, err);
    }
    return ot_resize_geometry(node, &pp->u.resize, xs, ys, ns ? scales : NULL, ns, nz ? sizes : NULL, nz, g, err);
}

/* The tap table of every axis of Y (dY for ResizeGrad), in the workspace: the taps
 * are worked out once per output coordinate instead of once per element. */
size_t ot_cpu_resize_workspace(const ot_node *node, const ot_tensor *in, const ot_tensor *out) {
    const ot_shape *ys = node->op == OT_OP_RESIZE_GRAD ? &in[0].shape : &out[0].shape;
    return (size_t)ot_resize_tab_entries(ys) * sizeof(ot_resize_tap);
}

static ot_status use_table(const ot_node *node, ot_resize_geom *g, const ot_shape *ys, const ot_kernel_ctx *ctx,
                           ot_error *err) {
    size_t need = (size_t)ot_resize_tab_entries(ys) * sizeof(ot_resize_tap);
    if (!ctx->workspace || ctx->workspace_bytes < need)
        return ot_fail(err, OT_E_INTERNAL, "node '%s' (%s): needs %zu bytes of workspace, given %zu", node->name,
                       node->op_type, need, ctx->workspace_bytes);
    ot_resize_fill_taps(g, ctx->workspace);
    return OT_OK;
}

ot_status ot_cpu_resize(const ot_node *node, const ot_tensor *in, ot_tensor *out, const ot_kernel_ctx *ctx,
                        ot_error *err) {
    if (in[0].dtype != OT_F32 || out[0].dtype != OT_F32) return ot_cpu_bad_dtype(node, "X", in[0].dtype, err);
    ot_resize_geom g;
    ot_status st = cpu_resize_geom(node, in, 1, &in[0].shape, &out[0].shape, &g, err);
    if (!st) st = use_table(node, &g, &out[0].shape, ctx, err);
    if (st) return st;
    int64_t n = ot_kernel_numel(&out[0]);
    const float *x = in[0].data;
    float *y = out[0].data;
    int nt = ot_cpu_threads(ctx);
#pragma omp parallel for schedule(static) num_threads(nt) if (n >= OT_CPU_PAR_MIN / 4)
    for (int64_t o = 0; o < n; o++) y[o] = ot_resize_at(&g, x, o);
    return OT_OK;
}

OT_GRAD_KERNEL(ot_cpu_resize_grad) {
    if (in[0].dtype != OT_F32) return ot_cpu_bad_dtype(node, "dY", in[0].dtype, err);
    ot_resize_geom g;
    ot_status st = cpu_resize_geom(node, in, 2, &out[0].shape, &in[0].shape, &g, err);
    if (!st) st = use_table(node, &g, &in[0].shape, ctx, err);
    if (st) return st;
    int64_t n = ot_kernel_numel(&out[0]);
    const float *dy = in[0].data;
    float *dx = out[0].data;
    int nt = ot_cpu_threads(ctx);
#pragma omp parallel for schedule(static) num_threads(nt) if (n >= OT_CPU_PAR_MIN / 4)
    for (int64_t i = 0; i < n; i++) dx[i] = ot_resize_grad_at(&g, dy, i);
    return OT_OK;
}

/* DepthToSpace / SpaceToDepth (and, with mode CRD, the SpaceToDepth of DepthToSpace's
 * gradient). */
ot_status ot_cpu_depth_space(const ot_node *node, const ot_tensor *in, ot_tensor *out, const ot_kernel_ctx *ctx,
                             ot_error *err) {
    size_t es = ot_dtype_size(in[0].dtype);
    if (!es || in[0].dtype != out[0].dtype) return ot_cpu_bad_dtype(node, "input", in[0].dtype, err);
    ot_op_params scratch;
    const ot_op_params *pp = NULL;
    ot_depth_geom g;
    ot_status st = ot_node_params(node, &scratch, &pp, err);
    if (!st)
        st = ot_depth_geometry(node, &pp->u.depth, node->op == OT_OP_DEPTH_TO_SPACE, &in[0].shape, &out[0].shape, &g,
                               err);
    if (st) return st;
    int64_t n = ot_kernel_numel(&out[0]);
    const char *src = in[0].data;
    char *dst = out[0].data;
    int nt = ot_cpu_threads(ctx);
#pragma omp parallel for schedule(static) num_threads(nt) if (n >= OT_CPU_PAR_MIN)
    for (int64_t o = 0; o < n; o++) memcpy(dst + (size_t)o * es, src + (size_t)ot_depth_src(&g, o) * es, es);
    return OT_OK;
}
