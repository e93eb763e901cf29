/* cuda_index.cu — the layout and indexing ops of issue 13 on the GPU, counterparts of
 * kernels/cpu/cpu_index.c and grad_index.c: Pad, Tile, Trilu, GatherElements,
 * CumSum, PadGrad / TileGrad and GatherElementsGrad. The host works out the geometry
 * with the CPU kernels' rules (kernels/index_geometry.c); every kernel is one thread
 * per output element (CumSum: per line) running index_geometry.h's element code, in
 * the CPU's order, so the results are the CPU's bit for bit. All have a host mode. */
#include <string.h>

#include "kernels/cuda/cuda_device.cuh"
extern "C" {
#include "kernels/index_geometry.h"
}

static ot_status bad(const ot_node *node, const char *what, ot_error *err) {
    return ot_fail(err, OT_E_SHAPE, "node '%s' (%s): %s", node->name, node->op_type, what);
}

static ot_status index_params(const ot_node *node, ot_op_params *scratch, const ot_index_params **ip, ot_error *err) {
    const ot_op_params *pp = NULL;
    ot_status st = ot_node_params(node, scratch, &pp, err);
    if (!st) *ip = &pp->u.index;
    return st;
}

/* ---- Pad / Tile: out[o] = in[src(o)], or the fill ---------------------------------- */

template <typename T> struct pad_op {
    const T *src;
    T *dst;
    ot_pad_geom g;
    T fill;
    __host__ __device__ void operator()(int64_t o) const {
        int64_t s = ot_pad_src_offset(&g, o);
        dst[o] = s < 0 ? fill : src[s];
    }
};

static ot_status pad_run(ot_cuda_ctx *cx, const ot_node *node, size_t es, const void *src, void *dst,
                         const ot_pad_geom &g, const unsigned char *fill, int64_t n, ot_error *err) {
    switch (es) {
    case 1: {
        uint8_t f;
        memcpy(&f, fill, 1);
        return ot_cu_map(cx, pad_op<uint8_t>{(const uint8_t *)src, (uint8_t *)dst, g, f}, n, err);
    }
    case 2: {
        uint16_t f;
        memcpy(&f, fill, 2);
        return ot_cu_map(cx, pad_op<uint16_t>{(const uint16_t *)src, (uint16_t *)dst, g, f}, n, err);
    }
    case 4: {
        uint32_t f;
        memcpy(&f, fill, 4);
        return ot_cu_map(cx, pad_op<uint32_t>{(const uint32_t *)src, (uint32_t *)dst, g, f}, n, err);
    }
    case 8: {
        uint64_t f;
        memcpy(&f, fill, 8);
        return ot_cu_map(cx, pad_op<uint64_t>{(const uint64_t *)src, (uint64_t *)dst, g, f}, n, err);
    }
    default: return bad(node, "unsupported element size", err);
    }
}

/* Pad geometry from device int tensors (pads, optional axes). */
static ot_status pad_geom(ot_cuda_ctx *cx, const ot_node *node, const ot_tensor *pads_t, const ot_tensor *axes_t,
                          const ot_shape *xs, const ot_shape *ys, ot_pad_geom *g, ot_error *err) {
    ot_op_params scratch;
    const ot_index_params *ip = NULL;
    ot_status st = index_params(node, &scratch, &ip, err);
    int64_t pads[2 * OT_MAX_RANK], axes[OT_MAX_RANK];
    int np = 0, na = 0;
    bool has_axes = axes_t && axes_t->data;
    if (!st) st = ot_cuda_read_ints(cx, pads_t, pads, 2 * OT_MAX_RANK, &np, err);
    if (!st && has_axes) st = ot_cuda_read_ints(cx, axes_t, axes, OT_MAX_RANK, &na, err);
    if (st) return st;
    return ot_pad_geometry(node, ip->pad_mode, pads, np, has_axes ? axes : NULL, na, xs, ys, g, err);
}

OT_CUDA_LAUNCHER(ot_cuda_pad) {
    (void)ctx;
    size_t es = ot_dtype_size(in[0].dtype);
    if (!es || es > 8 || in[0].dtype != out[0].dtype) return bad(node, "data dtype differs or unsupported", err);
    ot_pad_geom g;
    const ot_tensor *ax = node->n_inputs > 3 ? &in[3] : NULL;
    ot_status st = pad_geom(cx, node, &in[1], ax, &in[0].shape, &out[0].shape, &g, err);
    if (st) return st;
    double v = 0.0;
    if (node->n_inputs > 2 && in[2].data && ot_kernel_numel(&in[2]) > 0 && (st = ot_cuda_read_double(cx, &in[2], &v, err)))
        return st;
    unsigned char fill[8];
    if ((st = ot_pad_fill_bytes(node, v, out[0].dtype, fill, err))) return st;
    return pad_run(cx, node, es, in[0].data, out[0].data, g, fill, ot_kernel_numel(&out[0]), err);
}

OT_CUDA_LAUNCHER(ot_cuda_tile) {
    (void)ctx;
    size_t es = ot_dtype_size(in[0].dtype);
    if (!es || es > 8 || in[0].dtype != out[0].dtype) return bad(node, "input dtype differs or unsupported", err);
    int64_t rep[OT_MAX_RANK];
    int nr = 0;
    ot_status st = ot_cuda_read_ints(cx, &in[1], rep, OT_MAX_RANK, &nr, err);
    if (st) return st;
    if (nr != in[0].shape.rank) return bad(node, "repeats must have one entry per input dim", err);
    for (int d = 0; d < nr; d++)
        if (out[0].shape.dim[d] != in[0].shape.dim[d] * rep[d]) return bad(node, "output shape differs from input x repeats", err);
    ot_pad_geom g;
    if ((st = ot_tile_geometry(node, &in[0].shape, &out[0].shape, &g, err))) return st;
    unsigned char fill[8] = {0};
    return pad_run(cx, node, es, in[0].data, out[0].data, g, fill, ot_kernel_numel(&out[0]), err);
}

struct pad_grad_op {
    const float *dy;
    float *dx;
    ot_pad_geom g;
    __host__ __device__ void operator()(int64_t i) const { dx[i] = ot_pad_grad_at(&g, dy, i); }
};

/* PadGrad (dY, X, pads [, axes]) and TileGrad (dY, X). */
OT_CUDA_LAUNCHER(ot_cuda_pad_grad) {
    (void)ctx;
    if (in[0].dtype != OT_F32) return bad(node, "dY must be float32", err);
    ot_pad_geom g;
    const ot_tensor *ax = node->n_inputs > 3 ? &in[3] : NULL;
    ot_status st = node->op == OT_OP_TILE_GRAD ? ot_tile_geometry(node, &out[0].shape, &in[0].shape, &g, err)
                                               : pad_geom(cx, node, &in[2], ax, &out[0].shape, &in[0].shape, &g, err);
    if (st) return st;
    return ot_cu_map(cx, pad_grad_op{(const float *)in[0].data, (float *)out[0].data, g}, ot_kernel_numel(&out[0]), err);
}

/* ---- Trilu --------------------------------------------------------------------------- */

template <typename T> struct trilu_op {
    const T *src;
    T *dst;
    int64_t rows, cols, k;
    bool upper;
    __host__ __device__ void operator()(int64_t i) const {
        dst[i] = ot_trilu_keep(i, rows, cols, k, upper) ? src[i] : (T)0;
    }
};

template <typename T>
static ot_status trilu_run(ot_cuda_ctx *cx, const void *src, void *dst, int64_t rows, int64_t cols, int64_t k,
                           bool upper, int64_t n, ot_error *err) {
    return ot_cu_map(cx, trilu_op<T>{(const T *)src, (T *)dst, rows, cols, k, upper}, n, err);
}

OT_CUDA_LAUNCHER(ot_cuda_trilu) {
    (void)ctx;
    size_t es = ot_dtype_size(in[0].dtype);
    const ot_shape *xs = &in[0].shape;
    if (!es || es > 8 || in[0].dtype != out[0].dtype) return bad(node, "input dtype differs or unsupported", err);
    if (xs->rank < 2 || ot_kernel_numel(&out[0]) != ot_kernel_numel(&in[0])) return bad(node, "input rank below 2 or output size differs", err);
    int64_t k = 0;
    int nk = 0;
    ot_status st;
    if (node->n_inputs > 1 && in[1].data && ot_kernel_numel(&in[1]) > 0 && (st = ot_cuda_read_ints(cx, &in[1], &k, 1, &nk, err)))
        return st;
    ot_op_params scratch;
    const ot_index_params *ip = NULL;
    if ((st = index_params(node, &scratch, &ip, err))) return st;
    int64_t rows = xs->dim[xs->rank - 2], cols = xs->dim[xs->rank - 1], n = ot_kernel_numel(&out[0]);
    switch (es) {
    case 1: return trilu_run<uint8_t>(cx, in[0].data, out[0].data, rows, cols, k, ip->upper, n, err);
    case 2: return trilu_run<uint16_t>(cx, in[0].data, out[0].data, rows, cols, k, ip->upper, n, err);
    case 4: return trilu_run<uint32_t>(cx, in[0].data, out[0].data, rows, cols, k, ip->upper, n, err);
    case 8: return trilu_run<uint64_t>(cx, in[0].data, out[0].data, rows, cols, k, ip->upper, n, err);
    default: return bad(node, "unsupported element size", err);
    }
}

/* ---- GatherElements / GatherElementsGrad --------------------------------------------- */

__host__ __device__ __forceinline__ int64_t load_index(const void *p, int i64, int64_t j) {
    return i64 ? ((const int64_t *)p)[j] : (int64_t)((const int32_t *)p)[j];
}

/* Out-of-range indices give zeros: a kernel cannot report them (the CPU backend does;
 * `verify` on the CPU names the node). */
template <typename T> struct gather_el_op {
    const T *src;
    const void *idx;
    int i64;
    T *dst;
    ot_gather_el_geom g;
    __host__ __device__ void operator()(int64_t i) const {
        int64_t v = load_index(idx, i64, i);
        if (v < 0) v += g.d_axis;
        dst[i] = (v >= 0 && v < g.d_axis) ? src[ot_gather_el_offset(&g, i, v)] : (T)0;
    }
};

template <typename T>
static ot_status gather_el_run(ot_cuda_ctx *cx, const void *src, const ot_tensor *ind, void *dst,
                               const ot_gather_el_geom &g, int64_t n, ot_error *err) {
    return ot_cu_map(cx, gather_el_op<T>{(const T *)src, ind->data, ind->dtype == OT_I64, (T *)dst, g}, n, err);
}

OT_CUDA_LAUNCHER(ot_cuda_gather_elements) {
    (void)ctx;
    const ot_tensor *x = &in[0], *ind = &in[1];
    size_t es = ot_dtype_size(x->dtype);
    if (!es || es > 8 || x->dtype != out[0].dtype) return bad(node, "data dtype differs or unsupported", err);
    if (ind->dtype != OT_I64 && ind->dtype != OT_I32) return bad(node, "indices must be int32 or int64", err);
    ot_op_params scratch;
    const ot_index_params *ip = NULL;
    ot_status st = index_params(node, &scratch, &ip, err);
    ot_gather_el_geom g;
    if (!st) st = ot_gather_el_geometry(node, ip->axis, &x->shape, &ind->shape, &g, err);
    if (st) return st;
    if (!ot_shape_equal(&out[0].shape, &ind->shape)) return bad(node, "output shape differs from the indices'", err);
    int64_t n = ot_kernel_numel(ind);
    switch (es) {
    case 1: return gather_el_run<uint8_t>(cx, x->data, ind, out[0].data, g, n, err);
    case 2: return gather_el_run<uint16_t>(cx, x->data, ind, out[0].data, g, n, err);
    case 4: return gather_el_run<uint32_t>(cx, x->data, ind, out[0].data, g, n, err);
    case 8: return gather_el_run<uint64_t>(cx, x->data, ind, out[0].data, g, n, err);
    default: return bad(node, "unsupported element size", err);
    }
}

/* One thread per data element walks its line of indices in order (grad_index.c). */
struct gather_el_grad_op {
    const float *gy;
    const void *idx;
    int i64;
    float *dd;
    ot_gather_el_geom g;
    int64_t ddim[OT_MAX_RANK];
    __host__ __device__ void operator()(int64_t j) const {
        int64_t q = j, base = 0, acc = 1, ja = 0, istride = 1;
        bool inside = true;
        for (int d = g.rank - 1; d >= 0; d--) {
            int64_t c = q % ddim[d];
            q /= ddim[d];
            if (d == g.axis) ja = c;
            else if (c >= g.is[d]) inside = false;
            else base += c * acc;
            if (d > g.axis) istride *= g.is[d];
            acc *= g.is[d];
        }
        float sum = 0.0f;
        for (int64_t i = 0; inside && i < g.is[g.axis]; i++) {
            int64_t v = load_index(idx, i64, base + i * istride);
            if (v < 0) v += g.d_axis;
            if (v == ja) sum += gy[base + i * istride];
        }
        dd[j] = sum;
    }
};

OT_CUDA_LAUNCHER(ot_cuda_gather_elements_grad) {
    (void)ctx;
    const ot_tensor *dy = &in[0], *idx = &in[1];
    if (dy->dtype != OT_F32) return bad(node, "dY must be float32", err);
    if (idx->dtype != OT_I64 && idx->dtype != OT_I32) return bad(node, "indices must be int32 or int64", err);
    ot_op_params scratch;
    const ot_index_params *ip = NULL;
    ot_status st = index_params(node, &scratch, &ip, err);
    gather_el_grad_op op;
    memset(&op, 0, sizeof op);
    if (!st) st = ot_gather_el_geometry(node, ip->axis, &out[0].shape, &idx->shape, &op.g, err);
    if (st) return st;
    if (!ot_shape_equal(&dy->shape, &idx->shape)) return bad(node, "dY shape differs from the indices'", err);
    op.gy = (const float *)dy->data;
    op.idx = idx->data;
    op.i64 = idx->dtype == OT_I64;
    op.dd = (float *)out[0].data;
    for (int d = 0; d < out[0].shape.rank; d++) op.ddim[d] = out[0].shape.dim[d];
    return ot_cu_map(cx, op, ot_kernel_numel(&out[0]), err);
}

/* ---- CumSum: one thread per line, in the CPU's order and precision -------------------- */

template <typename T, typename A> struct cumsum_op {
    const T *x;
    T *y;
    int64_t len, inner;
    bool excl, rev;
    __host__ __device__ void operator()(int64_t line) const {
        int64_t o = line / inner, b = line % inner;
        A acc = 0;
        for (int64_t s = 0; s < len; s++) {
            int64_t j = rev ? len - 1 - s : s, at = (o * len + j) * inner + b;
            A v = (A)x[at];
            if (excl) {
                y[at] = (T)acc;
                acc = (A)(acc + v);
            } else {
                acc = (A)(acc + v);
                y[at] = (T)acc;
            }
        }
    }
};

template <typename T, typename A>
static ot_status cumsum_run(ot_cuda_ctx *cx, const ot_tensor *in, ot_tensor *out, int64_t outer, int64_t len,
                            int64_t inner, bool excl, bool rev, ot_error *err) {
    return ot_cu_map(cx, cumsum_op<T, A>{(const T *)in->data, (T *)out->data, len, inner, excl, rev}, outer * inner, err);
}

OT_CUDA_LAUNCHER(ot_cuda_cumsum) {
    (void)ctx;
    ot_dtype t = in[0].dtype;
    if ((t != OT_F32 && t != OT_F64 && t != OT_I64 && t != OT_I32) || out[0].dtype != t)
        return bad(node, "input must be float32, float64, int32 or int64", err);
    int64_t axis = 0;
    int na = 0;
    ot_status st = ot_cuda_read_ints(cx, &in[1], &axis, 1, &na, err);
    if (st) return st;
    if (na != 1) return bad(node, "axis must be an int scalar", err);
    ot_op_params scratch;
    const ot_index_params *ip = NULL;
    int64_t outer, len, inner;
    if ((st = index_params(node, &scratch, &ip, err)) ||
        (st = ot_cumsum_geometry(node, axis, &in[0].shape, &outer, &len, &inner, err)))
        return st;
    if (!ot_shape_equal(&out[0].shape, &in[0].shape)) return bad(node, "output shape differs from the input's", err);
    if (outer * len * inner == 0) return OT_OK;
    switch (t) {
    case OT_F32: return cumsum_run<float, double>(cx, &in[0], &out[0], outer, len, inner, ip->exclusive, ip->reverse, err);
    case OT_F64: return cumsum_run<double, double>(cx, &in[0], &out[0], outer, len, inner, ip->exclusive, ip->reverse, err);
    case OT_I32: return cumsum_run<int32_t, int64_t>(cx, &in[0], &out[0], outer, len, inner, ip->exclusive, ip->reverse, err);
    default: return cumsum_run<int64_t, int64_t>(cx, &in[0], &out[0], outer, len, inner, ip->exclusive, ip->reverse, err);
    }
}
