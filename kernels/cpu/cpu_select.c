/* cpu_select.c — TopK, OneHot and Size on the CPU (ops batch 4, issue 26); the element
 * code is kernels/select_geometry.h's, shared with the CUDA kernels. */
#include "kernels/cpu/cpu_common.h"
#include "kernels/select_geometry.h"

/* (X, K) -> Values, Indices: float32 X, int64 K of one element. */
ot_status ot_cpu_top_k(const ot_node *node, const ot_tensor *in, ot_tensor *out, const ot_kernel_ctx *ctx,
                       ot_error *err) {
    if (in[0].dtype != OT_F32) return ot_cpu_bad_dtype(node, "input 0", in[0].dtype, err);
    if (out[1].dtype != OT_I64) return ot_cpu_bad_dtype(node, "output 1", out[1].dtype, err);
    int64_t k;
    if (ot_kernel_numel(&in[1]) != 1 || !ot_kernel_load_int(in[1].dtype, in[1].data, 0, &k))
        return ot_fail(err, OT_E_MODEL, "node '%s' (%s): K must be one integer", node->name, node->op_type);
    ot_topk_geom g;
    ot_status st = ot_topk_geometry(node, &in[0].shape, k, &out[0].shape, &out[1].shape, &g, err);
    if (st) return st;
    int64_t rows = g.outer * g.inner;
    int nt = ot_cpu_threads(ctx);
    bool par = rows > 1 && rows * g.n * (g.k ? g.k : 1) >= OT_CPU_PAR_MIN;
#pragma omp parallel for schedule(static) num_threads(nt) if (par)
    for (int64_t r = 0; r < rows; r++)
        ot_topk_row(&g, in[0].data, out[0].data, out[1].data, r);
    return OT_OK;
}

/* (indices, depth, values) -> Y: integer or float32 indices, values float32 / int64 /
 * int32 like Y. */
ot_status ot_cpu_one_hot(const ot_node *node, const ot_tensor *in, ot_tensor *out, const ot_kernel_ctx *ctx,
                         ot_error *err) {
    (void)ctx;
    double depth;
    if (ot_kernel_numel(&in[1]) != 1 || !ot_kernel_load_double(in[1].dtype, in[1].data, 0, &depth))
        return ot_fail(err, OT_E_MODEL, "node '%s' (%s): depth must be one number", node->name, node->op_type);
    if (!(depth >= 1 && depth <= 9.0e15))
        return ot_fail(err, OT_E_MODEL, "node '%s' (%s): depth %g is not a positive count", node->name, node->op_type,
                       depth);
    if (ot_kernel_numel(&in[2]) != 2 || in[2].dtype != out[0].dtype)
        return ot_fail(err, OT_E_MODEL, "node '%s' (%s): values must be [off, on] of the output's dtype", node->name,
                       node->op_type);
    ot_onehot_geom g;
    ot_status st = ot_onehot_geometry(node, &in[0].shape, (int64_t)depth, &out[0].shape, &g, err);
    if (st) return st;
    int64_t n = ot_kernel_numel(&out[0]);
    size_t es = ot_dtype_size(out[0].dtype);
    const char *vals = in[2].data;
    char *y = out[0].data;
    for (int64_t e = 0; e < n; e++) {
        double iv;
        ot_kernel_load_double(in[0].dtype, in[0].data, ot_onehot_index_of(&g, e), &iv);
        bool on = ot_onehot_is_on(&g, ot_onehot_index(iv), e);
        memcpy(y + (size_t)e * es, vals + (on ? es : 0), es);
    }
    return OT_OK;
}

/* (X) -> int64 scalar: X's element count (X's shape only is read). */
ot_status ot_cpu_size(const ot_node *node, const ot_tensor *in, ot_tensor *out, const ot_kernel_ctx *ctx,
                      ot_error *err) {
    (void)ctx;
    if (out[0].dtype != OT_I64) return ot_cpu_bad_dtype(node, "output", out[0].dtype, err);
    *(int64_t *)out[0].data = ot_kernel_numel(&in[0]);
    return OT_OK;
}
