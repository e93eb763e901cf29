/* grad_layout.c — CPU kernels of GatherGrad (dY, indices, data [, base]) -> dData,
 * a scatter-add in index order (into zeros, or accumulated onto base), and SliceGrad
 * (dY, X, starts, ends [, axes, steps]) -> dX, dY written into zeros at the positions
 * Slice read. */
#include "kernels/cpu/grad_kernels.h"
#include "kernels/index_geometry.h"

/* GatherGrad with base replaces Sum(base, GatherGrad(dY, indices, data)) and must give
 * its bits: the scatter summed row v's dY rows in index order starting from +0, and
 * the Sum added base[v] + that (every untouched row: base[v] + 0, which turns a -0 of
 * base into +0 exactly as the Sum did). So each destination row's dY rows are summed
 * first, in index order from +0, and added to base once; the rows are found by a
 * stable sort of the positions by index (workspace: three int64 arrays of n_idx: the
 * normalised indices, the positions and the sort's scratch). */
size_t ot_cpu_gather_grad_workspace(const ot_node *node, const ot_tensor *in, const ot_tensor *out) {
    (void)out;
    if (node->n_inputs < 4 || (node->inputs && node->inputs[3] < 0) || !in) return 0;
    return 3 * (size_t)ot_kernel_numel(&in[1]) * sizeof(int64_t);
}

/* Bottom-up merge sort of pos[0..n) by key[pos]: stable (ties keep position order). */
static int64_t *stable_sort_by_key(int64_t *pos, int64_t *tmp, const int64_t *key, int64_t n) {
    for (int64_t w = 1; w < n; w *= 2) {
        for (int64_t lo = 0; lo < n; lo += 2 * w) {
            int64_t mid = lo + w < n ? lo + w : n, hi = lo + 2 * w < n ? lo + 2 * w : n, a = lo, b = mid, k = lo;
            while (a < mid && b < hi) tmp[k++] = key[pos[b]] < key[pos[a]] ? pos[b++] : pos[a++];
            while (a < mid) tmp[k++] = pos[a++];
            while (b < hi) tmp[k++] = pos[b++];
        }
        int64_t *t = pos;
        pos = tmp;
        tmp = t;
    }
    return pos;
}

static ot_status gather_grad_onto_base(const ot_node *node, const ot_tensor *in, ot_tensor *out,
                                       const ot_gather_geom *gg, const int64_t *keys, const ot_kernel_ctx *ctx,
                                       ot_error *err) {
    const ot_tensor *base = &in[3];
    int64_t outer = gg->outer, inner = gg->inner, D = gg->n_axis, I = gg->n_idx;
    if (base->dtype != OT_F32 || ot_kernel_numel(base) != ot_kernel_numel(&out[0]))
        return ot_fail(err, OT_E_SHAPE, "node '%s' (GatherGrad): base must be float32 shaped like the output",
                       node->name);
    int64_t *pos = NULL;
    if (I > 0) {
        pos = (int64_t *)ctx->workspace + I; /* after keys */
        for (int64_t i = 0; i < I; i++) pos[i] = i;
        pos = stable_sort_by_key(pos, pos + I, keys, I);
    }
    const float *g = in[0].data, *bs = base->data;
    float *dd = out[0].data; /* may be bs: each element is read before it is written */
    /* Tasks = (outer row, block of destination rows): disjoint outputs, each row's
     * sum in index order whatever the thread count. A block finds its first sorted
     * position by binary search. */
    enum { CHUNK = 256, ROWS = 64 };
    int64_t nblk = (D + ROWS - 1) / ROWS, tasks = outer * nblk;
    int nt = ot_cpu_threads(ctx);
#pragma omp parallel for schedule(static) num_threads(nt) if (outer * D * inner >= OT_CPU_PAR_MIN)
    for (int64_t t = 0; t < tasks; t++) {
        int64_t o = t / nblk, j0 = (t % nblk) * ROWS, j1 = j0 + ROWS < D ? j0 + ROWS : D;
        int64_t lo = 0, hi = I; /* first sorted position whose index is >= j0 */
        while (lo < hi) {
            int64_t mid = lo + (hi - lo) / 2;
            if (keys[pos[mid]] < j0) lo = mid + 1;
            else hi = mid;
        }
        float acc[CHUNK];
        for (int64_t j = j0, p = lo; j < j1; j++) {
            int64_t q = p;
            while (q < I && keys[pos[q]] == j) q++; /* [p, q): row j's positions, in index order */
            const float *src = bs + (o * D + j) * inner;
            float *dst = dd + (o * D + j) * inner;
            for (int64_t b0 = 0; b0 < inner; b0 += CHUNK) {
                int64_t b1 = b0 + CHUNK < inner ? b0 + CHUNK : inner;
                for (int64_t b = b0; b < b1; b++) acc[b - b0] = 0.0f;
                for (int64_t r = p; r < q; r++) {
                    const float *row = g + (o * I + pos[r]) * inner;
                    for (int64_t b = b0; b < b1; b++) acc[b - b0] += row[b];
                }
                for (int64_t b = b0; b < b1; b++) dst[b] = src[b] + acc[b - b0];
            }
            p = q;
        }
    }
    return OT_OK;
}

OT_GRAD_KERNEL(ot_cpu_gather_grad) {
    const ot_tensor *dy = &in[0], *idx = &in[1];
    const ot_shape *ds = &out[0].shape;
    if (dy->dtype != OT_F32) return ot_cpu_bad_dtype(node, "dY", dy->dtype, err);
    if (!ot_kernel_is_int_dtype(idx->dtype)) return ot_cpu_bad_dtype(node, "indices", idx->dtype, err);
    ot_gather_geom gg;
    ot_status pst = ot_gather_geometry(node, ds, idx, ot_kernel_numel(dy), &gg, err);
    if (pst) return pst;
    int64_t outer = gg.outer, inner = gg.inner, D = gg.n_axis, I = gg.n_idx;
    bool onto_base = node->n_inputs > 3 && in[3].data;
    int64_t *keys = NULL; /* with base: the normalised indices, sorted on */
    if (onto_base) {
        if (I > 0 && (!ctx || !ctx->workspace || ctx->workspace_bytes < 3 * (size_t)I * sizeof(int64_t)))
            return ot_fail(err, OT_E_INTERNAL, "node '%s' (GatherGrad): workspace missing", node->name);
        keys = ctx->workspace;
    }
    for (int64_t i = 0; i < I; i++) {
        int64_t j;
        ot_kernel_load_int(idx->dtype, idx->data, i, &j);
        if (j < -D || j >= D)
            return ot_fail(err, OT_E_DATA, "node '%s' (GatherGrad): index %lld outside [-%lld, %lld)", node->name,
                           (long long)j, (long long)D, (long long)D);
        if (keys) keys[i] = j < 0 ? j + D : j;
    }
    if (onto_base) return gather_grad_onto_base(node, in, out, &gg, keys, ctx, err);
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
