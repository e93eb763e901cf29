/* cpu_index.c — CPU kernels of the layout and indexing ops of issue 13: Pad (constant,
 * reflect, edge, wrap), Tile, Trilu, GatherElements and CumSum. The data movers take
 * every dtype (they move elements by byte size: shape inference folds them on int64
 * shape data and masks); CumSum adds float32 / float64 / int32 / int64. The geometry
 * and element code are shared with the CUDA kernels (kernels/index_geometry.h). */
#include "kernels/cpu/cpu_common.h"
#include "kernels/index_geometry.h"

static ot_status fail_shape(const ot_node *node, const char *what, ot_error *err) {
    return ot_fail(err, OT_E_SHAPE, "node '%s' (%s): %s", node->name, node->op_type, what);
}

/* Reads a 1-D int tensor of at most max elements (host data). */
static bool read_ints(const ot_tensor *t, int64_t *v, int max, int *n) {
    if (!t || !t->data) return false;
    int64_t c = ot_kernel_numel(t);
    if (c > max) return false;
    for (int64_t i = 0; i < c; i++)
        if (!ot_kernel_load_int(t->dtype, t->data, i, &v[i])) return false;
    *n = (int)c;
    return true;
}

static const ot_index_params *index_params(const ot_node *node, ot_op_params *scratch, ot_error *err, ot_status *st) {
    const ot_op_params *pp = NULL;
    *st = ot_node_params(node, scratch, &pp, err);
    return *st ? NULL : &pp->u.index;
}

/* The constant_value scalar (host data) as element bytes of dtype t; zero when absent. */
static ot_status pad_value(const ot_node *node, const ot_tensor *cv, ot_dtype t, unsigned char *bytes, ot_error *err) {
    double v = 0.0;
    if (cv && cv->data && ot_kernel_numel(cv) > 0 && !ot_kernel_load_double(cv->dtype, cv->data, 0, &v))
        return ot_cpu_bad_dtype(node, "constant_value", cv->dtype, err);
    return ot_pad_fill_bytes(node, v, t, bytes, err);
}

/* Pad geometry from the node's inputs (pads, axes) and params; shared with PadGrad,
 * whose pads / axes sit one slot later (after dY, X). */
ot_status ot_cpu_pad_geom(const ot_node *node, const ot_tensor *pads_t, const ot_tensor *axes_t, const ot_shape *xs,
                          const ot_shape *ys, ot_pad_geom *g, ot_error *err) {
    ot_op_params scratch;
    ot_status st;
    const ot_index_params *ip = index_params(node, &scratch, err, &st);
    if (!ip) return st;
    int64_t pads[2 * OT_MAX_RANK], axes[OT_MAX_RANK];
    int np = 0, na = 0;
    if (!read_ints(pads_t, pads, 2 * OT_MAX_RANK, &np)) return fail_shape(node, "pads must be an int tensor of at most 2 x rank entries", err);
    bool has_axes = axes_t && axes_t->data;
    if (has_axes && !read_ints(axes_t, axes, OT_MAX_RANK, &na)) return fail_shape(node, "axes must be an int tensor", err);
    return ot_pad_geometry(node, ip->pad_mode, pads, np, has_axes ? axes : NULL, na, xs, ys, g, err);
}

ot_status ot_cpu_pad(const ot_node *node, const ot_tensor *in, ot_tensor *out, const ot_kernel_ctx *ctx,
                     ot_error *err) {
    size_t es = ot_dtype_size(in[0].dtype);
    if (!es || es > 8 || in[0].dtype != out[0].dtype) return ot_cpu_bad_dtype(node, "data", in[0].dtype, err);
    const ot_tensor *cv = node->n_inputs > 2 ? &in[2] : NULL, *ax = node->n_inputs > 3 ? &in[3] : NULL;
    ot_pad_geom g;
    ot_status st = ot_cpu_pad_geom(node, &in[1], ax, &in[0].shape, &out[0].shape, &g, err);
    unsigned char fill[8];
    if (!st) st = pad_value(node, cv, out[0].dtype, fill, err);
    if (st) return st;
    int64_t n = ot_kernel_numel(&out[0]);
    const char *src = in[0].data;
    char *dst = out[0].data;
    int nt = ot_cpu_threads(ctx);
#pragma omp parallel for schedule(static) num_threads(nt) if (n >= OT_CPU_PAR_MIN)
    for (int64_t o = 0; o < n; o++) {
        int64_t s = ot_pad_src_offset(&g, o);
        memcpy(dst + (size_t)o * es, s < 0 ? (const char *)fill : src + (size_t)s * es, es);
    }
    return OT_OK;
}

ot_status ot_cpu_tile(const ot_node *node, const ot_tensor *in, ot_tensor *out, const ot_kernel_ctx *ctx,
                      ot_error *err) {
    size_t es = ot_dtype_size(in[0].dtype);
    if (!es || in[0].dtype != out[0].dtype) return ot_cpu_bad_dtype(node, "input", in[0].dtype, err);
    int64_t rep[OT_MAX_RANK];
    int nr = 0;
    if (!read_ints(&in[1], rep, OT_MAX_RANK, &nr) || nr != in[0].shape.rank)
        return fail_shape(node, "repeats must be an int tensor with one entry per input dim", err);
    for (int d = 0; d < nr; d++)
        if (out[0].shape.dim[d] != in[0].shape.dim[d] * rep[d]) return fail_shape(node, "output shape differs from input x repeats", err);
    ot_pad_geom g;
    ot_status st = ot_tile_geometry(node, &in[0].shape, &out[0].shape, &g, err);
    if (st) return st;
    int64_t n = ot_kernel_numel(&out[0]);
    const char *src = in[0].data;
    char *dst = out[0].data;
    int nt = ot_cpu_threads(ctx);
#pragma omp parallel for schedule(static) num_threads(nt) if (n >= OT_CPU_PAR_MIN)
    for (int64_t o = 0; o < n; o++) memcpy(dst + (size_t)o * es, src + (size_t)ot_pad_src_offset(&g, o) * es, es);
    return OT_OK;
}

ot_status ot_cpu_trilu(const ot_node *node, const ot_tensor *in, ot_tensor *out, const ot_kernel_ctx *ctx,
                       ot_error *err) {
    size_t es = ot_dtype_size(in[0].dtype);
    if (!es || in[0].dtype != out[0].dtype) return ot_cpu_bad_dtype(node, "input", in[0].dtype, err);
    const ot_shape *xs = &in[0].shape;
    if (xs->rank < 2 || ot_kernel_numel(&out[0]) != ot_kernel_numel(&in[0])) return fail_shape(node, "input rank below 2 or output size differs", err);
    int64_t k = 0;
    if (node->n_inputs > 1 && in[1].data && !ot_kernel_load_int(in[1].dtype, in[1].data, 0, &k))
        return ot_cpu_bad_dtype(node, "k", in[1].dtype, err);
    ot_op_params scratch;
    ot_status st;
    const ot_index_params *ip = index_params(node, &scratch, err, &st);
    if (!ip) return st;
    int64_t rows = xs->dim[xs->rank - 2], cols = xs->dim[xs->rank - 1], n = ot_kernel_numel(&out[0]);
    bool upper = ip->upper;
    const char *src = in[0].data;
    char *dst = out[0].data;
    int nt = ot_cpu_threads(ctx);
#pragma omp parallel for schedule(static) num_threads(nt) if (n >= OT_CPU_PAR_MIN)
    for (int64_t i = 0; i < n; i++) {
        if (ot_trilu_keep(i, rows, cols, k, upper)) memmove(dst + (size_t)i * es, src + (size_t)i * es, es);
        else memset(dst + (size_t)i * es, 0, es);
    }
    return OT_OK;
}

ot_status ot_cpu_gather_elements(const ot_node *node, const ot_tensor *in, ot_tensor *out, const ot_kernel_ctx *ctx,
                                 ot_error *err) {
    const ot_tensor *x = &in[0], *ind = &in[1];
    size_t es = ot_dtype_size(x->dtype);
    if (!es || x->dtype != out[0].dtype) return ot_cpu_bad_dtype(node, "data", x->dtype, err);
    if (ind->dtype != OT_I64 && ind->dtype != OT_I32) return ot_cpu_bad_dtype(node, "indices", ind->dtype, err);
    ot_op_params scratch;
    ot_status st;
    const ot_index_params *ip = index_params(node, &scratch, err, &st);
    if (!ip) return st;
    ot_gather_el_geom g;
    if ((st = ot_gather_el_geometry(node, ip->axis, &x->shape, &ind->shape, &g, err))) return st;
    if (!ot_shape_equal(&out[0].shape, &ind->shape)) return fail_shape(node, "output shape differs from the indices'", err);
    int64_t n = ot_kernel_numel(ind);
    for (int64_t i = 0; i < n; i++) {
        int64_t v;
        ot_kernel_load_int(ind->dtype, ind->data, i, &v);
        if (v < -g.d_axis || v >= g.d_axis)
            return ot_fail(err, OT_E_DATA, "node '%s' (GatherElements): index %lld out of range for axis of size %lld",
                           node->name, (long long)v, (long long)g.d_axis);
    }
    const char *src = x->data;
    char *dst = out[0].data;
    int nt = ot_cpu_threads(ctx);
#pragma omp parallel for schedule(static) num_threads(nt) if (n >= OT_CPU_PAR_MIN)
    for (int64_t i = 0; i < n; i++) {
        int64_t v;
        ot_kernel_load_int(ind->dtype, ind->data, i, &v);
        if (v < 0) v += g.d_axis;
        memcpy(dst + (size_t)i * es, src + (size_t)ot_gather_el_offset(&g, i, v) * es, es);
    }
    return OT_OK;
}

/* One line of CumSum: float types accumulate in double (as PyTorch's CPU kernel),
 * integers wrap in int64. */
#define CUMSUM_LINE(T, ACC)                                                            \
    do {                                                                               \
        const T *xp = (const T *)in[0].data;                                           \
        T *yp = (T *)out[0].data;                                                      \
        ACC acc = 0;                                                                   \
        for (int64_t s = 0; s < len; s++) {                                            \
            int64_t j = rev ? len - 1 - s : s, at = (o * len + j) * inner + b;         \
            ACC v = (ACC)xp[at];                                                       \
            if (excl) {                                                                \
                yp[at] = (T)acc;                                                       \
                acc = (ACC)(acc + v);                                                  \
            } else {                                                                   \
                acc = (ACC)(acc + v);                                                  \
                yp[at] = (T)acc;                                                       \
            }                                                                          \
        }                                                                              \
    } while (0)

ot_status ot_cpu_cumsum(const ot_node *node, const ot_tensor *in, ot_tensor *out, const ot_kernel_ctx *ctx,
                        ot_error *err) {
    ot_dtype t = in[0].dtype;
    if ((t != OT_F32 && t != OT_F64 && t != OT_I64 && t != OT_I32) || out[0].dtype != t)
        return ot_cpu_bad_dtype(node, "input", t, err);
    int64_t axis = 0;
    if (ot_kernel_numel(&in[1]) != 1 || !ot_kernel_is_int_dtype(in[1].dtype) || !ot_kernel_load_int(in[1].dtype, in[1].data, 0, &axis))
        return fail_shape(node, "axis must be an int scalar", err);
    ot_op_params scratch;
    ot_status st;
    const ot_index_params *ip = index_params(node, &scratch, err, &st);
    if (!ip) return st;
    int64_t outer, len, inner;
    if ((st = ot_cumsum_geometry(node, axis, &in[0].shape, &outer, &len, &inner, err))) return st;
    if (!ot_shape_equal(&out[0].shape, &in[0].shape)) return fail_shape(node, "output shape differs from the input's", err);
    bool excl = ip->exclusive, rev = ip->reverse;
    int nt = ot_cpu_threads(ctx);
#pragma omp parallel for schedule(static) num_threads(nt) if (outer * len * inner >= OT_CPU_PAR_MIN)
    for (int64_t line = 0; line < outer * inner; line++) {
        int64_t o = line / inner, b = line % inner;
        switch (t) {
        case OT_F32: CUMSUM_LINE(float, double); break;
        case OT_F64: CUMSUM_LINE(double, double); break;
        case OT_I32: CUMSUM_LINE(int32_t, int64_t); break;
        default: CUMSUM_LINE(int64_t, int64_t); break;
        }
    }
    return OT_OK;
}
