/* cuda_scatter.cu — ScatterND, ScatterElements and GatherND on the GPU, counterparts
 * of kernels/cpu/cpu_scatter.c (layout and indexing, issue 13). The scatters copy
 * data to the output, then combine the updates in the CPU's index order without
 * atomics: ScatterND with one thread per slice element walking the index tuples in
 * order, ScatterElements with one thread per line along axis walking it in order
 * (a data element is only reached from one line). Out-of-range indices are skipped
 * (GatherND gives zeros): a kernel cannot report them; the CPU backend does. All
 * have a host mode. */
#include <string.h>

#include "kernels/cuda/cuda_device.cuh"
extern "C" {
#include "kernels/index_geometry.h"
}

static ot_status bad(const ot_node *node, const char *what, ot_error *err) {
    return ot_fail(err, OT_E_SHAPE, "node '%s' (%s): %s", node->name, node->op_type, what);
}

template <typename T> __host__ __device__ __forceinline__ void combine(T *o, T u, ot_scatter_reduction red) {
    switch (red) {
    case OT_SCATTER_NONE: *o = u; break;
    case OT_SCATTER_ADD: *o = (T)(*o + u); break;
    case OT_SCATTER_MUL: *o = (T)(*o * u); break;
    case OT_SCATTER_MAX: *o = *o > u ? *o : u; break;
    default: *o = *o < u ? *o : u; break;
    }
}

template <typename T> struct scatter_nd_op {
    T *dst;
    const T *upd;
    const void *idx;
    bool i64;
    ot_nd_geom g;
    ot_scatter_reduction red;
    __host__ __device__ void operator()(int64_t e) const {
        for (int64_t k = 0; k < g.n_tuples; k++) {
            int64_t off = ot_nd_offset(&g, idx, i64, k);
            if (off >= 0) combine(dst + off + e, upd[k * g.slice + e], red);
        }
    }
};

template <typename T> struct scatter_el_op {
    T *dst;
    const T *upd;
    const void *idx;
    bool i64;
    ot_gather_el_geom g;
    int64_t inner; /* indices elements after axis */
    ot_scatter_reduction red;
    __host__ __device__ void operator()(int64_t line) const {
        int64_t n_axis = g.is[g.axis], base = (line / inner) * n_axis * inner + line % inner;
        for (int64_t i = 0; i < n_axis; i++) {
            int64_t at = base + i * inner, v = ot_index_load(idx, i64, at);
            if (v < 0) v += g.d_axis;
            if (v >= 0 && v < g.d_axis) combine(dst + ot_gather_el_offset(&g, at, v), upd[at], red);
        }
    }
};

/* The scatter's reduction after checking dtypes; data copied into the output. */
static ot_status scatter_begin(ot_cuda_ctx *cx, const ot_node *node, const ot_tensor *in, ot_tensor *out,
                               const ot_index_params **ip, ot_op_params *scratch, ot_error *err) {
    ot_dtype t = in[0].dtype;
    if (!ot_dtype_size(t) || ot_dtype_size(t) > 8 || out[0].dtype != t || in[2].dtype != t)
        return bad(node, "data, updates and output dtypes differ or are unsupported", err);
    if (in[1].dtype != OT_I64 && in[1].dtype != OT_I32) return bad(node, "indices must be int32 or int64", err);
    if (!ot_shape_equal(&out[0].shape, &in[0].shape)) return bad(node, "output shape differs from the data's", err);
    const ot_op_params *pp = NULL;
    ot_status st = ot_node_params(node, scratch, &pp, err);
    if (st) return st;
    *ip = &pp->u.index;
    if ((*ip)->reduction == OT_SCATTER_OTHER)
        return ot_fail(err, OT_E_UNSUPPORTED, "node '%s' (%s): reduction '%s' (none, add, mul, max or min)", node->name,
                       node->op_type, (*ip)->reduction_name);
    if ((*ip)->reduction != OT_SCATTER_NONE && t != OT_F32 && t != OT_F64 && t != OT_I32 && t != OT_I64)
        return bad(node, "a reduction needs float32, float64, int32 or int64 data", err);
    return ot_cu_copy(cx, out[0].data, in[0].data, in[0].nbytes, err);
}

template <typename T> static scatter_nd_op<T> nd_op(const ot_tensor *in, ot_tensor *out, const ot_nd_geom &g,
                                                    ot_scatter_reduction red) {
    return scatter_nd_op<T>{(T *)out->data, (const T *)in[2].data, in[1].data, in[1].dtype == OT_I64, g, red};
}

OT_CUDA_LAUNCHER(ot_cuda_scatter_nd) {
    (void)ctx;
    ot_op_params scratch;
    const ot_index_params *ip = NULL;
    ot_nd_geom g;
    ot_status st = scatter_begin(cx, node, in, out, &ip, &scratch, err);
    if (!st) st = ot_nd_geometry(node, &in[0].shape, &in[1].shape, 0, &g, err);
    if (st) return st;
    if (ot_kernel_numel(&in[2]) != g.n_tuples * g.slice) return bad(node, "updates do not match indices and data", err);
    int64_t n = g.slice;
    ot_dtype t = in[0].dtype;
    ot_scatter_reduction red = ip->reduction;
    if (red != OT_SCATTER_NONE) {
        if (t == OT_F32) return ot_cu_map(cx, nd_op<float>(in, out, g, red), n, err);
        if (t == OT_F64) return ot_cu_map(cx, nd_op<double>(in, out, g, red), n, err);
        if (t == OT_I32) return ot_cu_map(cx, nd_op<int32_t>(in, out, g, red), n, err);
        return ot_cu_map(cx, nd_op<int64_t>(in, out, g, red), n, err);
    }
    switch (ot_dtype_size(t)) {
    case 1: return ot_cu_map(cx, nd_op<uint8_t>(in, out, g, red), n, err);
    case 2: return ot_cu_map(cx, nd_op<uint16_t>(in, out, g, red), n, err);
    case 4: return ot_cu_map(cx, nd_op<uint32_t>(in, out, g, red), n, err);
    default: return ot_cu_map(cx, nd_op<uint64_t>(in, out, g, red), n, err);
    }
}

template <typename T> static scatter_el_op<T> el_op(const ot_tensor *in, ot_tensor *out, const ot_gather_el_geom &g,
                                                    int64_t inner, ot_scatter_reduction red) {
    return scatter_el_op<T>{(T *)out->data, (const T *)in[2].data, in[1].data, in[1].dtype == OT_I64, g, inner, red};
}

OT_CUDA_LAUNCHER(ot_cuda_scatter_elements) {
    (void)ctx;
    ot_op_params scratch;
    const ot_index_params *ip = NULL;
    ot_gather_el_geom g;
    ot_status st = scatter_begin(cx, node, in, out, &ip, &scratch, err);
    if (!st) st = ot_gather_el_geometry(node, ip->axis, &in[0].shape, &in[1].shape, &g, err);
    if (st) return st;
    if (!ot_shape_equal(&in[2].shape, &in[1].shape)) return bad(node, "updates shape differs from the indices'", err);
    int64_t inner = 1;
    for (int d = g.axis + 1; d < g.rank; d++) inner *= g.is[d];
    int64_t n = g.is[g.axis] ? ot_kernel_numel(&in[1]) / g.is[g.axis] : 0;
    ot_dtype t = in[0].dtype;
    ot_scatter_reduction red = ip->reduction;
    if (red != OT_SCATTER_NONE) {
        if (t == OT_F32) return ot_cu_map(cx, el_op<float>(in, out, g, inner, red), n, err);
        if (t == OT_F64) return ot_cu_map(cx, el_op<double>(in, out, g, inner, red), n, err);
        if (t == OT_I32) return ot_cu_map(cx, el_op<int32_t>(in, out, g, inner, red), n, err);
        return ot_cu_map(cx, el_op<int64_t>(in, out, g, inner, red), n, err);
    }
    switch (ot_dtype_size(t)) {
    case 1: return ot_cu_map(cx, el_op<uint8_t>(in, out, g, inner, red), n, err);
    case 2: return ot_cu_map(cx, el_op<uint16_t>(in, out, g, inner, red), n, err);
    case 4: return ot_cu_map(cx, el_op<uint32_t>(in, out, g, inner, red), n, err);
    default: return ot_cu_map(cx, el_op<uint64_t>(in, out, g, inner, red), n, err);
    }
}

template <typename T> struct gather_nd_op {
    const T *src;
    T *dst;
    const void *idx;
    bool i64;
    ot_nd_geom g;
    __host__ __device__ void operator()(int64_t i) const {
        int64_t off = ot_nd_offset(&g, idx, i64, i / g.slice);
        dst[i] = off < 0 ? (T)0 : src[off + i % g.slice];
    }
};

template <typename T> static gather_nd_op<T> gnd_op(const ot_tensor *in, ot_tensor *out, const ot_nd_geom &g) {
    return gather_nd_op<T>{(const T *)in[0].data, (T *)out->data, in[1].data, in[1].dtype == OT_I64, g};
}

OT_CUDA_LAUNCHER(ot_cuda_gather_nd) {
    (void)ctx;
    size_t es = ot_dtype_size(in[0].dtype);
    if (!es || es > 8 || out[0].dtype != in[0].dtype) return bad(node, "data dtype differs or unsupported", err);
    if (in[1].dtype != OT_I64 && in[1].dtype != OT_I32) return bad(node, "indices must be int32 or int64", err);
    ot_op_params scratch;
    const ot_op_params *pp = NULL;
    ot_status st = ot_node_params(node, &scratch, &pp, err);
    ot_nd_geom g;
    if (!st) st = ot_nd_geometry(node, &in[0].shape, &in[1].shape, pp->u.index.batch_dims, &g, err);
    if (st) return st;
    int64_t n = g.n_tuples * g.slice;
    if (ot_kernel_numel(&out[0]) != n) return bad(node, "output size differs from indices and data", err);
    switch (es) {
    case 1: return ot_cu_map(cx, gnd_op<uint8_t>(in, out, g), n, err);
    case 2: return ot_cu_map(cx, gnd_op<uint16_t>(in, out, g), n, err);
    case 4: return ot_cu_map(cx, gnd_op<uint32_t>(in, out, g), n, err);
    default: return ot_cu_map(cx, gnd_op<uint64_t>(in, out, g), n, err);
    }
}
