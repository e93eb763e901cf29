/* cpu_shape_ops.c — data movement and shape-computing CPU kernels: Shape, the view
 * ops (Identity, Reshape, Flatten, Squeeze, Unsqueeze: a byte copy, since the output
 * shape comes from shape inference), Gather, Concat, Split, Slice, Transpose, Cast,
 * Range, Constant and ConstantOfShape. Shape inference constant-folds PyTorch's shape
 * subgraphs with these, so they take every dtype that the spec allows and move
 * elements by byte size. */
#include <math.h>

#include "kernels/cpu/cpu_common.h"
#include "kernels/cpu/cpu_lowp.h" /* Cast between float32 and bfloat16/float16 */
#include "kernels/half_float.h"
#include "kernels/index_geometry.h"

static ot_status shape_mismatch(const ot_node *node, const char *what, ot_error *err) {
    return ot_fail(err, OT_E_SHAPE, "node '%s' (%s): %s", node->name, node->op_type, what);
}

ot_status ot_cpu_shape(const ot_node *node, const ot_tensor *in, ot_tensor *out, const ot_kernel_ctx *ctx,
                       ot_error *err) {
    (void)ctx;
    ot_op_params scratch;
    const ot_op_params *pp;
    ot_status pst = ot_node_params(node, &scratch, &pp, err);
    if (pst) return pst;
    const ot_layout_params *lp = &pp->u.layout;
    int r = in[0].shape.rank;
    int64_t start = lp->start, end = lp->has_end ? lp->end : r;
    if (start < 0) start += r;
    if (end < 0) end += r;
    start = start < 0 ? 0 : (start > r ? r : start);
    end = end < 0 ? 0 : (end > r ? r : end);
    int64_t n = end > start ? end - start : 0;
    if (out[0].dtype != OT_I64) return ot_cpu_bad_dtype(node, "output", out[0].dtype, err);
    if (ot_kernel_numel(&out[0]) != n) return shape_mismatch(node, "output length differs from start/end", err);
    for (int64_t i = 0; i < n; i++) ((int64_t *)out[0].data)[i] = in[0].shape.dim[start + i];
    return OT_OK;
}

ot_status ot_cpu_copy_view(const ot_node *node, const ot_tensor *in, ot_tensor *out, const ot_kernel_ctx *ctx,
                           ot_error *err) {
    (void)ctx;
    size_t es = ot_dtype_size(in[0].dtype);
    if (!es || in[0].dtype != out[0].dtype) return ot_cpu_bad_dtype(node, "input 0", in[0].dtype, err);
    if (ot_kernel_numel(&in[0]) != ot_kernel_numel(&out[0]))
        return shape_mismatch(node, "output element count differs from the input's", err);
    if (out[0].data != in[0].data && ot_kernel_numel(&in[0]) > 0)
        memmove(out[0].data, in[0].data, (size_t)ot_kernel_numel(&in[0]) * es);
    return OT_OK;
}

/* ---- Gather ---------------------------------------------------------------------- */

ot_status ot_cpu_gather(const ot_node *node, const ot_tensor *in, ot_tensor *out, const ot_kernel_ctx *ctx,
                        ot_error *err) {
    const ot_tensor *x = &in[0], *ind = &in[1];
    size_t es = ot_dtype_size(x->dtype);
    if (!es || x->dtype != out[0].dtype) return ot_cpu_bad_dtype(node, "data", x->dtype, err);
    if (ind->dtype != OT_I64 && ind->dtype != OT_I32) return ot_cpu_bad_dtype(node, "indices", ind->dtype, err);
    ot_gather_geom gg;
    ot_status pst = ot_gather_geometry(node, &x->shape, ind, ot_kernel_numel(&out[0]), &gg, err);
    if (pst) return pst;
    int64_t outer = gg.outer, inner = gg.inner, n_axis = gg.n_axis, n_idx = gg.n_idx;
    for (int64_t j = 0; j < n_idx; j++) {
        int64_t v;
        ot_kernel_load_int(ind->dtype, ind->data, j, &v);
        if (v < -n_axis || v >= n_axis)
            return ot_fail(err, OT_E_DATA, "node '%s' (Gather): index %lld out of range for axis of size %lld",
                           node->name, (long long)v, (long long)n_axis);
    }
    int nt = ot_cpu_threads(ctx);
    size_t row = (size_t)inner * es;
    const char *src = x->data;
    char *dst = out[0].data;
    bool par = outer * n_idx * inner >= OT_CPU_PAR_MIN;
#pragma omp parallel for schedule(static) num_threads(nt) if (par)
    for (int64_t k = 0; k < outer * n_idx; k++) {
        int64_t o = k / n_idx, j = k % n_idx, v;
        ot_kernel_load_int(ind->dtype, ind->data, j, &v);
        if (v < 0) v += n_axis;
        memcpy(dst + (size_t)k * row, src + (size_t)(o * n_axis + v) * row, row);
    }
    return OT_OK;
}

/* ---- Concat / Split --------------------------------------------------------------- */

ot_status ot_cpu_concat(const ot_node *node, const ot_tensor *in, ot_tensor *out, const ot_kernel_ctx *ctx,
                        ot_error *err) {
    (void)ctx;
    const ot_shape *ys = &out[0].shape;
    size_t es = ot_dtype_size(out[0].dtype);
    ot_op_params scratch;
    const ot_layout_params *lp;
    int axis;
    ot_status pst = ot_kernel_concat_axis(node, ys, es, &scratch, &lp, &axis, err);
    if (pst) return pst;
    int64_t outer = 1, inner = 1, total = 0;
    for (int d = 0; d < axis; d++) outer *= ys->dim[d];
    for (int d = axis + 1; d < ys->rank; d++) inner *= ys->dim[d];
    for (int k = 0; k < node->n_inputs; k++) {
        if (in[k].dtype != out[0].dtype) return ot_cpu_bad_dtype(node, "an input", in[k].dtype, err);
        if (in[k].shape.rank != ys->rank) return shape_mismatch(node, "input ranks differ", err);
        total += in[k].shape.dim[axis];
    }
    if (total != ys->dim[axis]) return shape_mismatch(node, "inputs' sizes along axis do not add up", err);
    char *dst = out[0].data;
    size_t out_row = (size_t)(ys->dim[axis] * inner) * es;
    size_t at = 0;
    for (int k = 0; k < node->n_inputs; k++) {
        size_t chunk = (size_t)(in[k].shape.dim[axis] * inner) * es;
        const char *src = in[k].data;
        if (chunk == 0) continue; /* empty inputs may have no buffer */
        for (int64_t o = 0; o < outer; o++) memcpy(dst + (size_t)o * out_row + at, src + (size_t)o * chunk, chunk);
        at += chunk;
    }
    return OT_OK;
}

ot_status ot_cpu_split(const ot_node *node, const ot_tensor *in, ot_tensor *out, const ot_kernel_ctx *ctx,
                       ot_error *err) {
    (void)ctx;
    const ot_shape *xs = &in[0].shape;
    size_t es = ot_dtype_size(in[0].dtype);
    ot_op_params scratch;
    const ot_layout_params *lp;
    int axis;
    ot_status pst = ot_kernel_concat_axis(node, xs, es, &scratch, &lp, &axis, err);
    if (pst) return pst;
    int64_t outer = 1, inner = 1, total = 0;
    for (int d = 0; d < axis; d++) outer *= xs->dim[d];
    for (int d = axis + 1; d < xs->rank; d++) inner *= xs->dim[d];
    /* output shapes (from shape inference, which read "split") decide the sizes */
    for (int k = 0; k < node->n_outputs; k++) {
        if (!out[k].data) continue;
        if (out[k].dtype != in[0].dtype) return ot_cpu_bad_dtype(node, "an output", out[k].dtype, err);
    }
    size_t in_row = (size_t)(xs->dim[axis] * inner) * es, at = 0;
    for (int k = 0; k < node->n_outputs; k++) {
        int64_t len = ot_kernel_split_len(node, lp, out, k, axis, xs->dim[axis]);
        total += len;
        if (total > xs->dim[axis]) return shape_mismatch(node, "split sizes exceed the input along axis", err);
        size_t chunk = (size_t)(len * inner) * es;
        if (out[k].data && chunk > 0) {
            if ((size_t)ot_kernel_numel(&out[k]) * es != chunk * (size_t)outer)
                return shape_mismatch(node, "an output's size differs from its split", err);
            char *dst = out[k].data;
            const char *src = in[0].data;
            for (int64_t o = 0; o < outer; o++) memcpy(dst + (size_t)o * chunk, src + (size_t)o * in_row + at, chunk);
        }
        at += chunk;
    }
    return OT_OK;
}

/* ---- Slice -------------------------------------------------------------------------- */

static bool read_ints(const ot_tensor *t, int64_t *v, int max, int *n) {
    if (!t || !t->data) return false;
    int64_t c = ot_kernel_numel(t);
    if (c > max) return false;
    for (int64_t i = 0; i < c; i++)
        if (!ot_kernel_load_int(t->dtype, t->data, i, &v[i])) return false;
    *n = (int)c;
    return true;
}

ot_status ot_cpu_slice(const ot_node *node, const ot_tensor *in, ot_tensor *out, const ot_kernel_ctx *ctx,
                       ot_error *err) {
    const ot_shape *xs = &in[0].shape;
    int r = xs->rank;
    size_t es = ot_dtype_size(in[0].dtype);
    if (!es || in[0].dtype != out[0].dtype) return ot_cpu_bad_dtype(node, "data", in[0].dtype, err);
    if (out[0].shape.rank != r) return shape_mismatch(node, "output rank differs from data rank", err);
    int64_t starts[OT_MAX_RANK], ends[OT_MAX_RANK], axes[OT_MAX_RANK], steps[OT_MAX_RANK];
    int ns = 0, ne = 0, na = 0, nst = 0;
    if (!read_ints(&in[1], starts, OT_MAX_RANK, &ns) || !read_ints(&in[2], ends, OT_MAX_RANK, &ne) || ns != ne)
        return shape_mismatch(node, "starts/ends must be int32/int64 tensors of equal length", err);
    bool has_axes = node->n_inputs > 3 && in[3].data, has_steps = node->n_inputs > 4 && in[4].data;
    if (has_axes && (!read_ints(&in[3], axes, OT_MAX_RANK, &na) || na != ns))
        return shape_mismatch(node, "axes must be an int tensor as long as starts", err);
    if (has_steps && (!read_ints(&in[4], steps, OT_MAX_RANK, &nst) || nst != ns))
        return shape_mismatch(node, "steps must be an int tensor as long as starts", err);
    int64_t st[OT_MAX_RANK], sp[OT_MAX_RANK];
    for (int d = 0; d < r; d++) st[d] = 0, sp[d] = 1;
    for (int i = 0; i < ns; i++) {
        int a = ot_kernel_axis(has_axes ? axes[i] : i, r);
        if (a < 0) return shape_mismatch(node, "axis out of range", err);
        int64_t step = has_steps ? steps[i] : 1, s;
        if (step == 0) return ot_fail(err, OT_E_MODEL, "node '%s' (Slice): step 0", node->name);
        int64_t cnt = ot_slice_axis(xs->dim[a], starts[i], ends[i], step, &s);
        if (cnt != out[0].shape.dim[a]) return shape_mismatch(node, "output shape differs from the slice", err);
        st[a] = s;
        sp[a] = step;
    }
    for (int d = 0; d < r; d++)
        if (sp[d] == 1 && st[d] == 0 && out[0].shape.dim[d] > xs->dim[d])
            return shape_mismatch(node, "output larger than data on an unsliced axis", err);
    int64_t instr[OT_MAX_RANK], base = 0, acc = 1;
    for (int d = r - 1; d >= 0; d--) {
        instr[d] = acc;
        acc *= xs->dim[d];
        base += st[d] * instr[d];
    }
    int64_t n = ot_kernel_numel(&out[0]);
    if (n == 0) return OT_OK;
    int64_t inner = r ? out[0].shape.dim[r - 1] : 1, rows = n / inner;
    int64_t istep = r ? sp[r - 1] * instr[r - 1] : 1;
    const char *src = in[0].data;
    char *dst = out[0].data;
    int nt = ot_cpu_threads(ctx);
    bool par = n >= OT_CPU_PAR_MIN && rows > 1;
#pragma omp parallel for schedule(static) num_threads(nt) if (par)
    for (int64_t row = 0; row < rows; row++) {
        int64_t off = base, q = row;
        for (int d = r - 2; d >= 0; d--) {
            off += (q % out[0].shape.dim[d]) * sp[d] * instr[d];
            q /= out[0].shape.dim[d];
        }
        char *o = dst + (size_t)(row * inner) * es;
        if (istep == 1) {
            memcpy(o, src + (size_t)off * es, (size_t)inner * es);
        } else {
            for (int64_t i = 0; i < inner; i++) memcpy(o + (size_t)i * es, src + (size_t)(off + i * istep) * es, es);
        }
    }
    return OT_OK;
}

/* ---- Transpose ------------------------------------------------------------------------ */

/* Edge of the square tiles a 4-byte transpose copies: 32 x 32 floats touch 32 cache
 * lines on each side, which stay in L1 while the tile is copied. */
#define OT_TRANSPOSE_TILE 32

/* A 4-byte (2-byte) transpose whose last output axis reads the input with stride istep:
 * output axis j (the one read from the input's contiguous axis) and the last one are
 * copied in tiles, so reads and writes both run along cache lines instead of every
 * output row striding through the whole input (a [768, 50257] weight: a TLB miss per
 * element). A copy, so the same bits as the row loop. The 2-byte one is bfloat16's and
 * float16's (--precision), which the per-element loop below ran at a tenth of this. */
#define OT_TRANSPOSE_TILED(NAME, T_)                                                                           \
    static void NAME(const T_ *src, T_ *dst, const ot_shape *ys, const int *perm, const int64_t *instr, int j, \
                     int nt, bool par) {                                                                       \
        int r = ys->rank;                                                                                      \
        int64_t ostr[OT_MAX_RANK], acc = 1;                                                                    \
        for (int d = r - 1; d >= 0; d--) ostr[d] = acc, acc *= ys->dim[d];                                     \
        int64_t A = ys->dim[j], B = ys->dim[r - 1], istep = instr[perm[r - 1]], oj = ostr[j];                  \
        int64_t outer = acc / (A * B), T = OT_TRANSPOSE_TILE;                                                  \
        int64_t ta = (A + T - 1) / T, tb = (B + T - 1) / T, tasks = outer * ta * tb;                           \
        _Pragma("omp parallel for schedule(static) num_threads(nt) if (par && tasks > 1)")                     \
        for (int64_t t = 0; t < tasks; t++) {                                                                  \
            int64_t o = t / (ta * tb), a0 = (t / tb % ta) * T, b0 = t % tb * T;                                \
            int64_t ioff = 0, ooff = 0, q = o;                                                                 \
            for (int d = r - 2; d >= 0; d--) {                                                                 \
                if (d == j) continue;                                                                          \
                ioff += (q % ys->dim[d]) * instr[perm[d]];                                                     \
                ooff += (q % ys->dim[d]) * ostr[d];                                                            \
                q /= ys->dim[d];                                                                               \
            }                                                                                                  \
            int64_t a1 = a0 + T < A ? a0 + T : A, b1 = b0 + T < B ? b0 + T : B;                                \
            for (int64_t b = b0; b < b1; b++) {                                                                \
                const T_ *s = src + ioff + b * istep;                                                          \
                T_ *y = dst + ooff + b;                                                                        \
                for (int64_t a = a0; a < a1; a++) y[a * oj] = s[a];                                            \
            }                                                                                                  \
        }                                                                                                      \
    }
OT_TRANSPOSE_TILED(transpose_tiled4, uint32_t)
OT_TRANSPOSE_TILED(transpose_tiled2, uint16_t)

ot_status ot_cpu_transpose(const ot_node *node, const ot_tensor *in, ot_tensor *out, const ot_kernel_ctx *ctx,
                           ot_error *err) {
    const ot_shape *xs = &in[0].shape;
    int r = xs->rank;
    size_t es = ot_dtype_size(in[0].dtype);
    if (!es || in[0].dtype != out[0].dtype) return ot_cpu_bad_dtype(node, "data", in[0].dtype, err);
    int perm[OT_MAX_RANK];
    ot_status pst = ot_transpose_perm(node, xs, &out[0].shape, perm, err);
    if (pst) return pst;
    int64_t instr[OT_MAX_RANK], acc = 1;
    for (int d = r - 1; d >= 0; d--) instr[d] = acc, acc *= xs->dim[d];
    int64_t n = ot_kernel_numel(&out[0]);
    if (n == 0) return OT_OK;
    if (r == 0) {
        memcpy(out[0].data, in[0].data, es);
        return OT_OK;
    }
    int64_t inner = out[0].shape.dim[r - 1], rows = n / inner, istep = instr[perm[r - 1]];
    int nt = ot_cpu_threads(ctx);
    /* A copy: memory-bound, so the cheap grain (a GPT's [8, 64, 4, 32] head split costs
     * less on one thread than waking and joining a second). */
    bool par = n >= OT_CPU_PAR_MIN_CHEAP && rows > 1;
    const char *src = in[0].data;
    char *dst = out[0].data;
    if (istep != 1 && es == 4) {
        int j = 0;
        while (perm[j] != r - 1) j++;
        transpose_tiled4(in[0].data, out[0].data, &out[0].shape, perm, instr, j, nt, n >= OT_CPU_PAR_MIN_CHEAP);
        return OT_OK;
    }
    if (istep != 1 && es == 2) {
        int j = 0;
        while (perm[j] != r - 1) j++;
        transpose_tiled2(in[0].data, out[0].data, &out[0].shape, perm, instr, j, nt, n >= OT_CPU_PAR_MIN_CHEAP);
        return OT_OK;
    }
#pragma omp parallel for schedule(static) num_threads(nt) if (par)
    for (int64_t row = 0; row < rows; row++) {
        int64_t off = 0, q = row;
        for (int d = r - 2; d >= 0; d--) {
            off += (q % out[0].shape.dim[d]) * instr[perm[d]];
            q /= out[0].shape.dim[d];
        }
        if (istep == 1) { /* last axis stays last: rows move whole */
            memcpy(dst + (size_t)(row * inner) * es, src + (size_t)off * es, (size_t)inner * es);
        } else { /* other element sizes: shape subgraphs and small tensors */
            char *o = dst + (size_t)(row * inner) * es;
            for (int64_t i = 0; i < inner; i++) memcpy(o + (size_t)i * es, src + (size_t)(off + i * istep) * es, es);
        }
    }
    return OT_OK;
}

/* ---- Cast ------------------------------------------------------------------------------- */

static bool is_float_dtype(ot_dtype t) { return t == OT_F32 || t == OT_F64 || t == OT_F16 || t == OT_BF16; }

static void store_double(ot_dtype t, void *p, int64_t i, double v) {
    switch (t) {
    case OT_F32: ((float *)p)[i] = (float)v; break;
    case OT_F64: ((double *)p)[i] = v; break;
    case OT_F16: ((uint16_t *)p)[i] = ot_f32_to_f16((float)v); break;
    case OT_BF16: ((uint16_t *)p)[i] = ot_f32_to_bf16((float)v); break;
    case OT_BOOL: ((uint8_t *)p)[i] = v != 0.0; break;
    default: {
        /* float -> int truncates toward zero; NaN and out-of-range values (undefined
         * in C) saturate instead */
        int64_t iv = isnan(v) ? 0 : v >= 9.2233720368547758e18 ? INT64_MAX : v <= -9.2233720368547758e18 ? INT64_MIN : (int64_t)v;
        if (t == OT_I64) ((int64_t *)p)[i] = iv;
        else if (t == OT_I32) ((int32_t *)p)[i] = (int32_t)iv;
        else if (t == OT_I8) ((int8_t *)p)[i] = (int8_t)iv;
        else if (t == OT_U8) ((uint8_t *)p)[i] = (uint8_t)iv;
    }
    }
}

static void store_int(ot_dtype t, void *p, int64_t i, int64_t v) {
    switch (t) {
    case OT_F32: ((float *)p)[i] = (float)v; break;
    case OT_F64: ((double *)p)[i] = (double)v; break;
    case OT_F16: ((uint16_t *)p)[i] = ot_f32_to_f16((float)v); break;
    case OT_BF16: ((uint16_t *)p)[i] = ot_f32_to_bf16((float)v); break;
    case OT_BOOL: ((uint8_t *)p)[i] = v != 0; break;
    case OT_I64: ((int64_t *)p)[i] = v; break;
    case OT_I32: ((int32_t *)p)[i] = (int32_t)v; break;
    case OT_I8: ((int8_t *)p)[i] = (int8_t)v; break;
    case OT_U8: ((uint8_t *)p)[i] = (uint8_t)v; break;
    default: break;
    }
}

/* bfloat16 / float16 to float32 as the generic path gives it: a signalling NaN comes
 * out quiet (the generic path's trip through double quiets it; the CUDA Cast and the
 * ONNX reference agree) and every other value is exact. */
static void low_to_f32(ot_dtype t, const uint16_t *s, float *d, int64_t n, int nt, bool par) {
    if (t == OT_BF16) ot_cpu_bf16_to_f32(s, d, n, par ? nt : 1, true);
    else ot_cpu_f16_to_f32(s, d, n, par ? nt : 1, true);
}

static bool cast_dtype_ok(ot_dtype t) { return is_float_dtype(t) || ot_kernel_is_int_dtype(t); }

ot_status ot_cpu_cast(const ot_node *node, const ot_tensor *in, ot_tensor *out, const ot_kernel_ctx *ctx,
                      ot_error *err) {
    ot_dtype ts = in[0].dtype, td = out[0].dtype;
    if (!cast_dtype_ok(ts)) return ot_cpu_bad_dtype(node, "input", ts, err);
    if (!cast_dtype_ok(td)) return ot_cpu_bad_dtype(node, "output", td, err);
    int64_t n = ot_kernel_numel(&in[0]);
    if (n != ot_kernel_numel(&out[0])) return shape_mismatch(node, "output element count differs", err);
    if (ts == td) {
        if (out[0].data != in[0].data) memmove(out[0].data, in[0].data, (size_t)n * ot_dtype_size(ts));
        return OT_OK;
    }
    int nt = ot_cpu_threads(ctx);
    bool par = n >= OT_CPU_PAR_MIN;
    const void *x = in[0].data;
    void *y = out[0].data;
    bool low_s = ts == OT_BF16 || ts == OT_F16, low_d = td == OT_BF16 || td == OT_F16;
    if (ts == OT_F32 && low_d) /* --precision's casts: the same rounding, without the per-element switch */
        ot_cpu_lowp_from_f32(td, x, y, n, nt);
    else if (low_s && td == OT_F32)
        low_to_f32(ts, x, y, n, nt, par);
    else if (ts == OT_F32 && td == OT_I64) { /* the common case of PyTorch's shape arithmetic, kept fast */
#pragma omp parallel for schedule(static) num_threads(nt) if (par)
        for (int64_t i = 0; i < n; i++) store_double(td, y, i, ((const float *)x)[i]);
    } else if (is_float_dtype(ts)) {
#pragma omp parallel for schedule(static) num_threads(nt) if (par)
        for (int64_t i = 0; i < n; i++) {
            double v;
            ot_kernel_load_double(ts, x, i, &v);
            store_double(td, y, i, v);
        }
    } else {
#pragma omp parallel for schedule(static) num_threads(nt) if (par)
        for (int64_t i = 0; i < n; i++) {
            int64_t v;
            ot_kernel_load_int(ts, x, i, &v);
            store_int(td, y, i, v);
        }
    }
    return OT_OK;
}

/* ---- Range, Constant, ConstantOfShape ---------------------------------------------------- */

ot_status ot_cpu_range(const ot_node *node, const ot_tensor *in, ot_tensor *out, const ot_kernel_ctx *ctx,
                       ot_error *err) {
    (void)ctx;
    ot_dtype t = out[0].dtype;
    for (int k = 0; k < 3; k++)
        if (in[k].dtype != t || ot_kernel_numel(&in[k]) != 1) return ot_cpu_bad_dtype(node, "start/limit/delta", in[k].dtype, err);
    int64_t n = ot_kernel_numel(&out[0]);
    if (t == OT_I64 || t == OT_I32) {
        int64_t s, l, d;
        ot_kernel_load_int(t, in[0].data, 0, &s);
        ot_kernel_load_int(t, in[1].data, 0, &l);
        ot_kernel_load_int(t, in[2].data, 0, &d);
        if (d == 0) return ot_fail(err, OT_E_DATA, "node '%s' (Range): delta is 0", node->name);
        int64_t want = d > 0 ? (l > s ? (l - s + d - 1) / d : 0) : (s > l ? (s - l + (-d) - 1) / (-d) : 0);
        if (want != n) return shape_mismatch(node, "output length differs from ceil((limit-start)/delta)", err);
        for (int64_t i = 0; i < n; i++) store_int(t, out[0].data, i, s + i * d);
    } else if (t == OT_F32 || t == OT_F64) {
        double s, l, d;
        ot_kernel_load_double(t, in[0].data, 0, &s);
        ot_kernel_load_double(t, in[1].data, 0, &l);
        ot_kernel_load_double(t, in[2].data, 0, &d);
        if (d == 0) return ot_fail(err, OT_E_DATA, "node '%s' (Range): delta is 0", node->name);
        double w = ceil((l - s) / d);
        int64_t want = w > 0 ? (int64_t)w : 0;
        /* float lengths may round either way depending on the precision shape
         * inference used: within one element the output shape decides */
        if (want - n > 1 || n - want > 1)
            return shape_mismatch(node, "output length differs from ceil((limit-start)/delta)", err);
        for (int64_t i = 0; i < n; i++) { /* start + i * delta in double, as torch.arange */
            if (t == OT_F32) ((float *)out[0].data)[i] = (float)(s + (double)i * d);
            else ((double *)out[0].data)[i] = s + (double)i * d;
        }
    } else {
        return ot_cpu_bad_dtype(node, "output", t, err);
    }
    return OT_OK;
}

ot_status ot_cpu_constant(const ot_node *node, const ot_tensor *in, ot_tensor *out, const ot_kernel_ctx *ctx,
                          ot_error *err) {
    (void)in;
    (void)ctx;
    size_t es = ot_dtype_size(out[0].dtype);
    int64_t n = ot_kernel_numel(&out[0]);
    const ot_attr *a;
    if ((a = ot_node_attr(node, "value")) && a->type == OT_ATTR_TENSOR && a->t) {
        if (a->t->dtype != out[0].dtype || a->t->nbytes != (size_t)n * es)
            return shape_mismatch(node, "attribute 'value' differs from the output in dtype or size", err);
        memcpy(out[0].data, a->t->data, a->t->nbytes);
    } else if ((a = ot_node_attr(node, "value_float")) && a->type == OT_ATTR_FLOAT && out[0].dtype == OT_F32 && n == 1) {
        ((float *)out[0].data)[0] = a->f;
    } else if ((a = ot_node_attr(node, "value_int")) && a->type == OT_ATTR_INT && out[0].dtype == OT_I64 && n == 1) {
        ((int64_t *)out[0].data)[0] = a->i;
    } else if ((a = ot_node_attr(node, "value_floats")) && a->type == OT_ATTR_FLOATS && out[0].dtype == OT_F32 &&
               n == a->n) {
        memcpy(out[0].data, a->floats, (size_t)n * 4);
    } else if ((a = ot_node_attr(node, "value_ints")) && a->type == OT_ATTR_INTS && out[0].dtype == OT_I64 &&
               n == a->n) {
        memcpy(out[0].data, a->ints, (size_t)n * 8);
    } else {
        return ot_fail(err, OT_E_UNSUPPORTED, "node '%s' (Constant): no value attribute matching the output %s[%lld]",
                       node->name, ot_dtype_name(out[0].dtype), (long long)n);
    }
    return OT_OK;
}

ot_status ot_cpu_constant_of_shape(const ot_node *node, const ot_tensor *in, ot_tensor *out,
                                   const ot_kernel_ctx *ctx, ot_error *err) {
    (void)ctx;
    if (in[0].dtype != OT_I64) return ot_cpu_bad_dtype(node, "input", in[0].dtype, err);
    int64_t n = ot_kernel_numel(&out[0]), want = 1;
    for (int64_t i = 0; i < ot_kernel_numel(&in[0]); i++) want *= ((const int64_t *)in[0].data)[i];
    if (want != n) return shape_mismatch(node, "output size differs from the shape input", err);
    size_t es = ot_dtype_size(out[0].dtype);
    if (!es) return ot_cpu_bad_dtype(node, "output", out[0].dtype, err);
    const ot_attr *a = ot_node_attr(node, "value");
    char zero[8] = {0};
    const char *v = zero;
    if (a && a->type == OT_ATTR_TENSOR && a->t) {
        if (a->t->dtype != out[0].dtype || a->t->nbytes < es)
            return shape_mismatch(node, "attribute 'value' differs from the output dtype", err);
        v = a->t->data;
    } else if (out[0].dtype != OT_F32) {
        return shape_mismatch(node, "without 'value' the output must be float32", err);
    }
    char *o = out[0].data;
    for (int64_t i = 0; i < n; i++) memcpy(o + (size_t)i * es, v, es);
    return OT_OK;
}
