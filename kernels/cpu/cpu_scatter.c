/* cpu_scatter.c — CPU kernels of ScatterND, ScatterElements (reduction none, add,
 * mul, max, min) and GatherND (with batch_dims), part of the layout and indexing ops
 * of issue 13. Scatters run their updates in index order, so repeated indices
 * combine the same way every run (and as the CUDA kernels do); indices out of range
 * are OT_E_DATA naming the node. Reduction none moves any dtype; the others take
 * float32, float64, int32 and int64. */
#include "kernels/cpu/cpu_common.h"
#include "kernels/index_geometry.h"

static ot_status fail_shape(const ot_node *node, const char *what, ot_error *err) {
    return ot_fail(err, OT_E_SHAPE, "node '%s' (%s): %s", node->name, node->op_type, what);
}

static ot_status out_of_range(const ot_node *node, ot_error *err) {
    return ot_fail(err, OT_E_DATA, "node '%s' (%s): an index is out of range", node->name, node->op_type);
}

#define COMBINE(T)                                                                  \
    do {                                                                            \
        T *o = (T *)dst + at;                                                       \
        T u = ((const T *)upd)[from];                                               \
        switch (red) {                                                              \
        case OT_SCATTER_ADD: *o = (T)(*o + u); break;                               \
        case OT_SCATTER_MUL: *o = (T)(*o * u); break;                               \
        case OT_SCATTER_MAX: *o = *o > u ? *o : u; break;                           \
        default: *o = *o < u ? *o : u; break;                                       \
        }                                                                           \
    } while (0)

/* out[at] = combine(out[at], updates[from]) for a reduction other than none. */
static void combine(ot_dtype t, ot_scatter_reduction red, void *dst, int64_t at, const void *upd, int64_t from) {
    switch (t) {
    case OT_F32: COMBINE(float); break;
    case OT_F64: COMBINE(double); break;
    case OT_I32: COMBINE(int32_t); break;
    default: COMBINE(int64_t); break;
    }
}

/* The scatter's params, dtypes and the copy of data into the output. */
static ot_status scatter_begin(const ot_node *node, const ot_tensor *in, ot_tensor *out, ot_scatter_reduction *red,
                               int *axis, ot_error *err) {
    ot_dtype t = in[0].dtype;
    if (!ot_dtype_size(t) || ot_dtype_size(t) > 8 || out[0].dtype != t || in[2].dtype != t)
        return ot_cpu_bad_dtype(node, "data / updates", t, err);
    if (in[1].dtype != OT_I64 && in[1].dtype != OT_I32) return ot_cpu_bad_dtype(node, "indices", in[1].dtype, err);
    if (!ot_shape_equal(&out[0].shape, &in[0].shape)) return fail_shape(node, "output shape differs from the data's", err);
    ot_op_params scratch;
    const ot_op_params *pp;
    ot_status st = ot_node_params(node, &scratch, &pp, err);
    if (st) return st;
    *red = pp->u.index.reduction;
    *axis = pp->u.index.axis;
    if (*red == OT_SCATTER_OTHER)
        return ot_fail(err, OT_E_UNSUPPORTED, "node '%s' (%s): reduction '%s' (none, add, mul, max or min)", node->name,
                       node->op_type, pp->u.index.reduction_name);
    if (*red != OT_SCATTER_NONE && t != OT_F32 && t != OT_F64 && t != OT_I32 && t != OT_I64)
        return ot_cpu_bad_dtype(node, "data (with a reduction)", t, err);
    if (out[0].data != in[0].data && in[0].nbytes) memmove(out[0].data, in[0].data, in[0].nbytes);
    return OT_OK;
}

ot_status ot_cpu_scatter_nd(const ot_node *node, const ot_tensor *in, ot_tensor *out, const ot_kernel_ctx *ctx,
                            ot_error *err) {
    (void)ctx;
    ot_scatter_reduction red;
    int axis;
    ot_status st = scatter_begin(node, in, out, &red, &axis, err);
    ot_nd_geom g;
    if (!st) st = ot_nd_geometry(node, &in[0].shape, &in[1].shape, 0, &g, err);
    if (st) return st;
    if (ot_kernel_numel(&in[2]) != g.n_tuples * g.slice) return fail_shape(node, "updates do not match indices and data", err);
    bool i64 = in[1].dtype == OT_I64;
    for (int64_t k = 0; k < g.n_tuples; k++)
        if (ot_nd_offset(&g, in[1].data, i64, k) < 0) return out_of_range(node, err);
    size_t es = ot_dtype_size(in[0].dtype);
    char *dst = out[0].data;
    const char *upd = in[2].data;
    for (int64_t k = 0; k < g.n_tuples; k++) {
        int64_t off = ot_nd_offset(&g, in[1].data, i64, k);
        if (red == OT_SCATTER_NONE) memcpy(dst + (size_t)off * es, upd + (size_t)(k * g.slice) * es, (size_t)g.slice * es);
        else
            for (int64_t e = 0; e < g.slice; e++) combine(in[0].dtype, red, dst, off + e, upd, k * g.slice + e);
    }
    return OT_OK;
}

ot_status ot_cpu_scatter_elements(const ot_node *node, const ot_tensor *in, ot_tensor *out, const ot_kernel_ctx *ctx,
                                  ot_error *err) {
    (void)ctx;
    ot_scatter_reduction red;
    int axis;
    ot_status st = scatter_begin(node, in, out, &red, &axis, err);
    ot_gather_el_geom g;
    if (!st) st = ot_gather_el_geometry(node, axis, &in[0].shape, &in[1].shape, &g, err);
    if (st) return st;
    if (!ot_shape_equal(&in[2].shape, &in[1].shape)) return fail_shape(node, "updates shape differs from the indices'", err);
    int64_t n = ot_kernel_numel(&in[1]);
    bool i64 = in[1].dtype == OT_I64;
    for (int64_t i = 0; i < n; i++) {
        int64_t v = ot_index_load(in[1].data, i64, i);
        if (v < -g.d_axis || v >= g.d_axis) return out_of_range(node, err);
    }
    size_t es = ot_dtype_size(in[0].dtype);
    char *dst = out[0].data;
    const char *upd = in[2].data;
    for (int64_t i = 0; i < n; i++) {
        int64_t v = ot_index_load(in[1].data, i64, i);
        int64_t off = ot_gather_el_offset(&g, i, v < 0 ? v + g.d_axis : v);
        if (red == OT_SCATTER_NONE) memcpy(dst + (size_t)off * es, upd + (size_t)i * es, es);
        else combine(in[0].dtype, red, dst, off, upd, i);
    }
    return OT_OK;
}

ot_status ot_cpu_gather_nd(const ot_node *node, const ot_tensor *in, ot_tensor *out, const ot_kernel_ctx *ctx,
                           ot_error *err) {
    ot_dtype t = in[0].dtype;
    size_t es = ot_dtype_size(t);
    if (!es || out[0].dtype != t) return ot_cpu_bad_dtype(node, "data", t, err);
    if (in[1].dtype != OT_I64 && in[1].dtype != OT_I32) return ot_cpu_bad_dtype(node, "indices", in[1].dtype, err);
    ot_op_params scratch;
    const ot_op_params *pp;
    ot_status st = ot_node_params(node, &scratch, &pp, err);
    ot_nd_geom g;
    if (!st) st = ot_nd_geometry(node, &in[0].shape, &in[1].shape, pp->u.index.batch_dims, &g, err);
    if (st) return st;
    if (ot_kernel_numel(&out[0]) != g.n_tuples * g.slice) return fail_shape(node, "output size differs from indices and data", err);
    bool i64 = in[1].dtype == OT_I64;
    for (int64_t k = 0; k < g.n_tuples; k++)
        if (ot_nd_offset(&g, in[1].data, i64, k) < 0) return out_of_range(node, err);
    const char *src = in[0].data;
    char *dst = out[0].data;
    int nt = ot_cpu_threads(ctx);
#pragma omp parallel for schedule(static) num_threads(nt) if (g.n_tuples * g.slice >= OT_CPU_PAR_MIN)
    for (int64_t k = 0; k < g.n_tuples; k++)
        memcpy(dst + (size_t)(k * g.slice) * es, src + (size_t)ot_nd_offset(&g, in[1].data, i64, k) * es,
               (size_t)g.slice * es);
    return OT_OK;
}
