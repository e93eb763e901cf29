/* cuda_layout.cu — data movement on the GPU, the counterparts of cpu_shape_ops.c
 * (Transpose, Concat, Split, Slice, Gather) and grad_layout.c (SliceGrad,
 * GatherGrad, also onto a base). Everything but Gather is one strided copy: iterate
 * a shape, read at
 * src_base + sum(c_d * src_stride_d), write at dst_base + sum(c_d * dst_stride_d);
 * the host works out bases and strides with the CPU kernels' rules. Elements move
 * by size (1, 2, 4 or 8 bytes), so every dtype and bit pattern survives. */
#include <string.h>

#include "kernels/cuda/cuda_device.cuh"
#include "kernels/index_geometry.h"

struct strided {
    int rank;
    int64_t dim[OT_MAX_RANK], sst[OT_MAX_RANK], dst[OT_MAX_RANK];
    int64_t sbase, dbase;
};

template <typename T> struct strided_op {
    const T *src;
    T *dst;
    strided s;
    __host__ __device__ void operator()(int64_t i) const {
        int64_t q = i, so = s.sbase, d = s.dbase;
        for (int k = s.rank - 1; k >= 0; k--) {
            int64_t c = q % s.dim[k];
            q /= s.dim[k];
            so += c * s.sst[k];
            d += c * s.dst[k];
        }
        dst[d] = src[so];
    }
};

static ot_status bad(const ot_node *node, const char *what, ot_error *err) {
    return ot_fail(err, OT_E_SHAPE, "node '%s' (%s): %s", node->name, node->op_type, what);
}

static ot_status strided_copy(ot_cuda_ctx *cx, const ot_node *node, size_t es, const void *src, void *dst,
                              const strided &s, ot_error *err) {
    int64_t n = 1;
    for (int k = 0; k < s.rank; k++) n *= s.dim[k];
    switch (es) {
    case 1: return ot_cu_map(cx, strided_op<uint8_t>{(const uint8_t *)src, (uint8_t *)dst, s}, n, err);
    case 2: return ot_cu_map(cx, strided_op<uint16_t>{(const uint16_t *)src, (uint16_t *)dst, s}, n, err);
    case 4: return ot_cu_map(cx, strided_op<uint32_t>{(const uint32_t *)src, (uint32_t *)dst, s}, n, err);
    case 8: return ot_cu_map(cx, strided_op<uint64_t>{(const uint64_t *)src, (uint64_t *)dst, s}, n, err);
    default: return ot_fail(err, OT_E_UNSUPPORTED, "node '%s' (%s): element size %zu", node->name, node->op_type, es);
    }
}

static void contiguous_strides(const ot_shape *s, int64_t *st) {
    int64_t acc = 1;
    for (int d = s->rank - 1; d >= 0; d--) st[d] = acc, acc *= s->dim[d];
}

OT_CUDA_LAUNCHER(ot_cuda_transpose) {
    (void)ctx;
    const ot_shape *xs = &in[0].shape;
    int r = xs->rank;
    size_t es = ot_dtype_size(in[0].dtype);
    if (!es || in[0].dtype != out[0].dtype) return bad(node, "dtype differs or unsupported", err);
    int perm[OT_MAX_RANK];
    ot_status pst = ot_transpose_perm(node, xs, &out[0].shape, perm, err);
    if (pst) return pst;
    strided s;
    memset(&s, 0, sizeof s);
    int64_t instr[OT_MAX_RANK];
    contiguous_strides(xs, instr);
    s.rank = r;
    for (int d = 0; d < r; d++) {
        s.dim[d] = out[0].shape.dim[d];
        s.sst[d] = instr[perm[d]];
    }
    contiguous_strides(&out[0].shape, s.dst);
    if (r == 0) { /* a scalar: one element */
        s.rank = 1;
        s.dim[0] = 1;
        s.sst[0] = s.dst[0] = 1;
    }
    return strided_copy(cx, node, es, in[0].data, out[0].data, s, err);
}

OT_CUDA_LAUNCHER(ot_cuda_concat) {
    (void)ctx;
    const ot_shape *ys = &out[0].shape;
    size_t es = ot_dtype_size(out[0].dtype);
    ot_op_params scratch;
    const ot_layout_params *lp;
    int axis;
    ot_status pst = ot_kernel_concat_axis(node, ys, es, &scratch, &lp, &axis, err);
    if (pst) return pst;
    int64_t total = 0;
    for (int k = 0; k < node->n_inputs; k++) {
        if (in[k].dtype != out[0].dtype || in[k].shape.rank != ys->rank) return bad(node, "input dtypes or ranks differ", err);
        total += in[k].shape.dim[axis];
    }
    if (total != ys->dim[axis]) return bad(node, "inputs' sizes along axis do not add up", err);
    int64_t ost[OT_MAX_RANK];
    contiguous_strides(ys, ost);
    int64_t at = 0;
    for (int k = 0; k < node->n_inputs; k++) {
        strided s;
        memset(&s, 0, sizeof s);
        s.rank = ys->rank;
        contiguous_strides(&in[k].shape, s.sst);
        for (int d = 0; d < s.rank; d++) {
            s.dim[d] = in[k].shape.dim[d];
            s.dst[d] = ost[d];
        }
        s.dbase = at * ost[axis];
        at += in[k].shape.dim[axis];
        if (!in[k].data) continue; /* empty inputs may have no buffer */
        ot_status st = strided_copy(cx, node, es, in[k].data, out[0].data, s, err);
        if (st) return st;
    }
    return OT_OK;
}

OT_CUDA_LAUNCHER(ot_cuda_split) {
    (void)ctx;
    const ot_shape *xs = &in[0].shape;
    size_t es = ot_dtype_size(in[0].dtype);
    ot_op_params scratch;
    const ot_layout_params *lp;
    int axis;
    ot_status pst = ot_kernel_concat_axis(node, xs, es, &scratch, &lp, &axis, err);
    if (pst) return pst;
    int64_t ist[OT_MAX_RANK];
    contiguous_strides(xs, ist);
    int64_t at = 0;
    for (int k = 0; k < node->n_outputs; k++) {
        int64_t len = ot_kernel_split_len(node, lp, out, k, axis, xs->dim[axis]);
        if (at + len > xs->dim[axis]) return bad(node, "split sizes exceed the input along axis", err);
        if (out[k].data) {
            if (out[k].dtype != in[0].dtype || out[k].shape.rank != xs->rank || out[k].shape.dim[axis] != len)
                return bad(node, "an output's dtype or shape differs from its split", err);
            strided s;
            memset(&s, 0, sizeof s);
            s.rank = xs->rank;
            contiguous_strides(&out[k].shape, s.dst);
            for (int d = 0; d < s.rank; d++) {
                s.dim[d] = out[k].shape.dim[d];
                s.sst[d] = ist[d];
            }
            s.sbase = at * ist[axis];
            ot_status st = strided_copy(cx, node, es, in[0].data, out[k].data, s, err);
            if (st) return st;
        }
        at += len;
    }
    return OT_OK;
}

/* Slice geometry (start and step per axis, ot_slice_axis's clamping, as the
 * CPU's); the int inputs are read to the host. */
static ot_status slice_geometry(ot_cuda_ctx *cx, const ot_node *node, const ot_tensor *starts_t,
                                const ot_tensor *ends_t, const ot_tensor *axes_t, const ot_tensor *steps_t,
                                const ot_shape *xs, const ot_shape *ys, int64_t *st, int64_t *sp, ot_error *err) {
    int r = xs->rank;
    int64_t starts[OT_MAX_RANK], ends[OT_MAX_RANK], axes[OT_MAX_RANK], steps[OT_MAX_RANK];
    int ns = 0, ne = 0, na = 0, nst = 0;
    ot_status s;
    if ((s = ot_cuda_read_ints(cx, starts_t, starts, OT_MAX_RANK, &ns, err)) ||
        (s = ot_cuda_read_ints(cx, ends_t, ends, OT_MAX_RANK, &ne, err)))
        return s;
    if (ns != ne) return bad(node, "starts/ends must have equal length", err);
    if (axes_t && ((s = ot_cuda_read_ints(cx, axes_t, axes, OT_MAX_RANK, &na, err)) || na != ns))
        return s ? s : bad(node, "axes must be as long as starts", err);
    if (steps_t && ((s = ot_cuda_read_ints(cx, steps_t, steps, OT_MAX_RANK, &nst, err)) || nst != ns))
        return s ? s : bad(node, "steps must be as long as starts", err);
    for (int d = 0; d < r; d++) st[d] = 0, sp[d] = 1;
    for (int i = 0; i < ns; i++) {
        int a = ot_kernel_axis(axes_t ? axes[i] : i, r);
        if (a < 0) return bad(node, "axis out of range", err);
        int64_t step = steps_t ? steps[i] : 1, b;
        if (step == 0) return ot_fail(err, OT_E_MODEL, "node '%s' (%s): step 0", node->name, node->op_type);
        int64_t cnt = ot_slice_axis(xs->dim[a], starts[i], ends[i], step, &b);
        if (cnt != ys->dim[a]) return bad(node, "output shape differs from the slice", err);
        st[a] = b;
        sp[a] = step;
    }
    return OT_OK;
}

OT_CUDA_LAUNCHER(ot_cuda_slice) {
    (void)ctx;
    const ot_shape *xs = &in[0].shape;
    size_t es = ot_dtype_size(in[0].dtype);
    if (!es || in[0].dtype != out[0].dtype) return bad(node, "data dtype differs or unsupported", err);
    if (out[0].shape.rank != xs->rank) return bad(node, "output rank differs from data rank", err);
    int64_t st[OT_MAX_RANK], sp[OT_MAX_RANK];
    const ot_tensor *axes = node->n_inputs > 3 && in[3].data ? &in[3] : NULL;
    const ot_tensor *steps = node->n_inputs > 4 && in[4].data ? &in[4] : NULL;
    ot_status s0 = slice_geometry(cx, node, &in[1], &in[2], axes, steps, xs, &out[0].shape, st, sp, err);
    if (s0) return s0;
    strided s;
    memset(&s, 0, sizeof s);
    s.rank = xs->rank;
    int64_t instr[OT_MAX_RANK];
    contiguous_strides(xs, instr);
    contiguous_strides(&out[0].shape, s.dst);
    for (int d = 0; d < s.rank; d++) {
        s.dim[d] = out[0].shape.dim[d];
        s.sst[d] = sp[d] * instr[d];
        s.sbase += st[d] * instr[d];
    }
    return strided_copy(cx, node, es, in[0].data, out[0].data, s, err);
}

OT_CUDA_LAUNCHER(ot_cuda_slice_grad) {
    (void)ctx;
    const ot_tensor *dy = &in[0];
    const ot_shape *xs = &out[0].shape;
    if (dy->dtype != OT_F32) return bad(node, "dY must be float32", err);
    if (dy->shape.rank != xs->rank) return bad(node, "dY rank differs from X's", err);
    int64_t st[OT_MAX_RANK], sp[OT_MAX_RANK];
    const ot_tensor *axes = node->n_inputs > 4 && in[4].data ? &in[4] : NULL;
    const ot_tensor *steps = node->n_inputs > 5 && in[5].data ? &in[5] : NULL;
    ot_status s0 = slice_geometry(cx, node, &in[2], &in[3], axes, steps, xs, &dy->shape, st, sp, err);
    if (s0) return s0;
    int64_t n = ot_kernel_numel(&out[0]);
    if (n == 0) return OT_OK;
    ot_status zs = ot_cu_zero(cx, out[0].data, (size_t)n * sizeof(float), err);
    if (zs) return zs;
    strided s;
    memset(&s, 0, sizeof s);
    s.rank = xs->rank;
    int64_t xst[OT_MAX_RANK];
    contiguous_strides(xs, xst);
    contiguous_strides(&dy->shape, s.sst);
    for (int d = 0; d < s.rank; d++) {
        s.dim[d] = dy->shape.dim[d];
        s.dst[d] = sp[d] * xst[d];
        s.dbase += st[d] * xst[d];
    }
    return strided_copy(cx, node, 4, dy->data, out[0].data, s, err);
}

/* ---- Gather / GatherGrad ------------------------------------------------------------ */

__host__ __device__ __forceinline__ int64_t load_index(const void *p, int i64, int64_t j) {
    return i64 ? ((const int64_t *)p)[j] : (int64_t)((const int32_t *)p)[j];
}

/* Out-of-range indices give zeros: a kernel cannot report them (the CPU backend
 * does; `verify` on the CPU names the node). */
template <typename T> struct gather_op {
    const T *src;
    const void *idx;
    int i64;
    T *dst;
    int64_t n_idx, n_axis, inner;
    __host__ __device__ void operator()(int64_t i) const {
        int64_t b = i % inner, k = i / inner, j = k % n_idx, o = k / n_idx;
        int64_t v = load_index(idx, i64, j);
        if (v < 0) v += n_axis;
        dst[i] = (v >= 0 && v < n_axis) ? src[(o * n_axis + v) * inner + b] : (T)0;
    }
};

OT_CUDA_LAUNCHER(ot_cuda_gather) {
    (void)ctx;
    const ot_tensor *x = &in[0], *ind = &in[1];
    size_t es = ot_dtype_size(x->dtype);
    if (!es || x->dtype != out[0].dtype) return bad(node, "data dtype differs or unsupported", err);
    if (ind->dtype != OT_I64 && ind->dtype != OT_I32) return bad(node, "indices must be int32 or int64", err);
    ot_gather_geom gg;
    ot_status pst = ot_gather_geometry(node, &x->shape, ind, ot_kernel_numel(&out[0]), &gg, err);
    if (pst) return pst;
    int64_t outer = gg.outer, inner = gg.inner, n_axis = gg.n_axis, n_idx = gg.n_idx;
    int64_t n = outer * n_idx * inner;
    if (n == 0) return OT_OK;
    int i64 = ind->dtype == OT_I64;
    switch (es) {
    case 1:
        return ot_cu_map(
            cx,
            gather_op<uint8_t>{(const uint8_t *)x->data, ind->data, i64, (uint8_t *)out[0].data, n_idx, n_axis, inner},
            n, err);
    case 2:
        return ot_cu_map(cx,
                         gather_op<uint16_t>{(const uint16_t *)x->data, ind->data, i64, (uint16_t *)out[0].data, n_idx,
                                             n_axis, inner},
                         n, err);
    case 4:
        return ot_cu_map(cx,
                         gather_op<uint32_t>{(const uint32_t *)x->data, ind->data, i64, (uint32_t *)out[0].data, n_idx,
                                             n_axis, inner},
                         n, err);
    case 8:
        return ot_cu_map(cx,
                         gather_op<uint64_t>{(const uint64_t *)x->data, ind->data, i64, (uint64_t *)out[0].data, n_idx,
                                             n_axis, inner},
                         n, err);
    default: return bad(node, "unsupported element size", err);
    }
}

/* One thread per (outer row, inner column) walks the indices in order: repeated
 * indices add up in the CPU's order, without atomics, so results are repeatable. */
struct gather_grad_op {
    const float *g;
    const void *idx;
    int i64;
    float *dd;
    int64_t n_idx, D, inner;
    __host__ __device__ void operator()(int64_t t) const {
        int64_t o = t / inner, b = t % inner;
        for (int64_t i = 0; i < n_idx; i++) {
            int64_t j = load_index(idx, i64, i);
            if (j < 0) j += D;
            if (j < 0 || j >= D) continue;
            dd[(o * D + j) * inner + b] += g[(o * n_idx + i) * inner + b];
        }
    }
};

/* GatherGrad with base (kernels/cpu/grad_layout.c says why: the bits of
 * Sum(base, scatter)). Two steps, no workspace: dd = base + 0 everywhere (an
 * untouched row's value; in place when dd is base), then one thread per (outer row,
 * first position of each distinct index, inner column) sums that index's dY rows in
 * index order from +0 and adds the sum to dd once. (base + 0) + s is base + s
 * bitwise: they differ only for base = -0, where s would have to be -0 too, and a sum
 * started from +0 never is. Cost O(n_idx^2 * inner) per outer row for the scan. */
struct add_zero_op {
    const float *src;
    float *dst;
    __host__ __device__ void operator()(int64_t i) const { dst[i] = src[i] + 0.0f; }
};

struct gather_grad_onto_op {
    const float *g;
    const void *idx;
    int i64;
    float *dd;
    int64_t n_idx, D, inner;
    __host__ __device__ void operator()(int64_t t) const {
        int64_t b = t % inner, k = t / inner, i = k % n_idx, o = k / n_idx;
        int64_t j = load_index(idx, i64, i);
        if (j < 0) j += D;
        if (j < 0 || j >= D) return;
        for (int64_t e = 0; e < i; e++) { /* only the first position of index j sums */
            int64_t je = load_index(idx, i64, e);
            if ((je < 0 ? je + D : je) == j) return;
        }
        float acc = 0.0f;
        for (int64_t e = i; e < n_idx; e++) {
            int64_t je = load_index(idx, i64, e);
            if ((je < 0 ? je + D : je) == j) acc += g[(o * n_idx + e) * inner + b];
        }
        float *d = dd + (o * D + j) * inner + b;
        *d = *d + acc;
    }
};

OT_CUDA_LAUNCHER(ot_cuda_gather_grad) {
    (void)ctx;
    const ot_tensor *dy = &in[0], *idx = &in[1];
    const ot_shape *ds = &out[0].shape;
    if (dy->dtype != OT_F32) return bad(node, "dY must be float32", err);
    if (idx->dtype != OT_I64 && idx->dtype != OT_I32) return bad(node, "indices must be int32 or int64", err);
    ot_gather_geom gg;
    ot_status pst = ot_gather_geometry(node, ds, idx, ot_kernel_numel(dy), &gg, err);
    if (pst) return pst;
    int64_t outer = gg.outer, inner = gg.inner, D = gg.n_axis, I = gg.n_idx;
    int64_t n = ot_kernel_numel(&out[0]);
    if (n == 0) return OT_OK;
    if (node->n_inputs > 3 && in[3].data) {
        if (in[3].dtype != OT_F32 || ot_kernel_numel(&in[3]) != n) return bad(node, "base must be float32 like dData", err);
        ot_status st = ot_cu_map(cx, add_zero_op{(const float *)in[3].data, (float *)out[0].data}, n, err);
        if (st || I == 0) return st;
        return ot_cu_map(cx,
                         gather_grad_onto_op{(const float *)dy->data, idx->data, idx->dtype == OT_I64,
                                             (float *)out[0].data, I, D, inner},
                         outer * I * inner, err);
    }
    ot_status st = ot_cu_zero(cx, out[0].data, (size_t)n * sizeof(float), err);
    if (st) return st;
    return ot_cu_map(
        cx, gather_grad_op{(const float *)dy->data, idx->data, idx->dtype == OT_I64, (float *)out[0].data, I, D, inner},
        outer * inner, err);
}

/* ---- explicit zero padding (asymmetric convolution pads, cuda_blas.c) ------------- */

ot_status ot_cuda_pad_copy(ot_cuda_ctx *cx, const ot_node *node, const float *src, float *dst, int rank,
                           const int64_t *small, const int64_t *big, const int64_t *begin, bool crop, ot_error *err) {
    strided s;
    memset(&s, 0, sizeof s);
    s.rank = rank;
    int64_t sst[OT_MAX_RANK], bst[OT_MAX_RANK], acc_s = 1, acc_b = 1, base = 0;
    for (int d = rank - 1; d >= 0; d--) {
        sst[d] = acc_s, acc_s *= small[d];
        bst[d] = acc_b, acc_b *= big[d];
        base += begin[d] * bst[d];
    }
    for (int d = 0; d < rank; d++) {
        s.dim[d] = small[d];
        s.sst[d] = crop ? bst[d] : sst[d];
        s.dst[d] = crop ? sst[d] : bst[d];
    }
    if (crop) {
        s.sbase = base;
    } else {
        /* the border is zero; the interior is overwritten next, on the same stream */
        ot_status st = ot_cu_zero(cx, dst, (size_t)acc_b * sizeof(float), err);
        if (st) return st;
        s.dbase = base;
    }
    return strided_copy(cx, node, sizeof(float), src, dst, s, err);
}
