/* grad_layout.c — CPU kernels of GatherGrad (dY, indices, data) -> dData, a
 * scatter-add in index order, and SliceGrad (dY, X, starts, ends [, axes, steps])
 * -> dX, dY written into zeros at the positions Slice read. */
#include "kernels/cpu/grad_kernels.h"
#include "kernels/index_geometry.h"

OT_GRAD_KERNEL(ot_cpu_gather_grad) {
    const ot_tensor *dy = &in[0], *idx = &in[1];
    const ot_shape *ds = &out[0].shape;
    if (dy->dtype != OT_F32) return ot_cpu_bad_dtype(node, "dY", dy->dtype, err);
    if (!ot_kernel_is_int_dtype(idx->dtype)) return ot_cpu_bad_dtype(node, "indices", idx->dtype, err);
    ot_gather_geom gg;
    ot_status pst = ot_gather_geometry(node, ds, idx, ot_kernel_numel(dy), &gg, err);
    if (pst) return pst;
    int64_t outer = gg.outer, inner = gg.inner, D = gg.n_axis, I = gg.n_idx;
    for (int64_t i = 0; i < I; i++) {
        int64_t j;
        ot_kernel_load_int(idx->dtype, idx->data, i, &j);
        if (j < -D || j >= D)
            return ot_fail(err, OT_E_DATA, "node '%s' (GatherGrad): index %lld outside [-%lld, %lld)", node->name,
                           (long long)j, (long long)D, (long long)D);
    }
    const float *g = dy->data;
    float *dd = out[0].data;
    memset(dd, 0, (size_t)ot_kernel_numel(&out[0]) * sizeof(float));
    /* Tasks = (outer row, chunk of inner): disjoint outputs; each walks the indices
     * in order, so repeated indices add up in the same order on any thread count. */
    const int64_t chunk = 256;
    int64_t nchunk = (inner + chunk - 1) / chunk, tasks = outer * nchunk;
    int nt = ot_cpu_threads(ctx);
#pragma omp parallel for schedule(static) num_threads(nt) if (outer * I * inner >= OT_CPU_PAR_MIN)
    for (int64_t t = 0; t < tasks; t++) {
        int64_t o = t / nchunk, b0 = (t % nchunk) * chunk, b1 = b0 + chunk < inner ? b0 + chunk : inner;
        for (int64_t i = 0; i < I; i++) {
            int64_t j;
            ot_kernel_load_int(idx->dtype, idx->data, i, &j);
            if (j < 0) j += D;
            const float *src = g + (o * I + i) * inner;
            float *dst = dd + (o * D + j) * inner;
            for (int64_t b = b0; b < b1; b++) dst[b] += src[b];
        }
    }
    return OT_OK;
}

static bool load_vec(const ot_tensor *t, int64_t i, int64_t *v) {
    return t && t->data && ot_kernel_load_int(t->dtype, t->data, i, v);
}

OT_GRAD_KERNEL(ot_cpu_slice_grad) {
    const ot_tensor *dy = &in[0];
    const ot_shape *xs = &out[0].shape;
    int r = xs->rank;
    if (dy->dtype != OT_F32) return ot_cpu_bad_dtype(node, "dY", dy->dtype, err);
    const ot_tensor *st = &in[2], *en = &in[3];
    const ot_tensor *ax = node->n_inputs > 4 && in[4].data ? &in[4] : NULL;
    const ot_tensor *sp = node->n_inputs > 5 && in[5].data ? &in[5] : NULL;
    int64_t start[OT_MAX_RANK], step[OT_MAX_RANK];
    for (int d = 0; d < r; d++) {
        start[d] = 0;
        step[d] = 1;
    }
    int64_t n = ot_kernel_numel(st);
    for (int64_t i = 0; i < n; i++) {
        int64_t a = i, s, e, k = 1;
        if (ax && !load_vec(ax, i, &a)) return ot_cpu_bad_dtype(node, "axes", ax->dtype, err);
        int d = ot_kernel_axis(a, r);
        if (d < 0 || !load_vec(st, i, &s) || !load_vec(en, i, &e) || (sp && !load_vec(sp, i, &k)) || k == 0)
            return ot_fail(err, OT_E_MODEL, "node '%s' (SliceGrad): bad starts / ends / axes / steps", node->name);
        int64_t dim = xs->dim[d];
        if (s < 0) s += dim;
        if (k > 0) s = s < 0 ? 0 : s > dim ? dim : s;
        else s = s < 0 ? 0 : s > dim - 1 ? dim - 1 : s;
        start[d] = s;
        step[d] = k;
        (void)e; /* the extent is dY's shape */
    }
    if (dy->shape.rank != r)
        return ot_fail(err, OT_E_SHAPE, "node '%s' (SliceGrad): dY rank differs from X's", node->name);
    int64_t xst[OT_MAX_RANK], acc = 1;
    for (int d = r - 1; d >= 0; d--) {
        xst[d] = acc;
        acc *= xs->dim[d];
    }
    float *dx = out[0].data;
    const float *g = dy->data;
    memset(dx, 0, (size_t)ot_kernel_numel(&out[0]) * sizeof(float));
    int64_t m = ot_kernel_numel(dy);
    int nt = ot_cpu_threads(ctx);
#pragma omp parallel for schedule(static) num_threads(nt) if (m >= OT_CPU_PAR_MIN)
    for (int64_t i = 0; i < m; i++) {
        int64_t rem = i, off = 0;
        for (int d = r - 1; d >= 0; d--) {
            int64_t c = rem % dy->shape.dim[d];
            rem /= dy->shape.dim[d];
            off += (start[d] + c * step[d]) * xst[d];
        }
        dx[off] = g[i];
    }
    return OT_OK;
}
