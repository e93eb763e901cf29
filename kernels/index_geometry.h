/* index_geometry.h — geometry of the layout and indexing ops of issue 13 (Pad,
 * PadGrad, Tile, TileGrad, Trilu, GatherElements, CumSum), in one place for both
 * backends (kernels/cpu/cpu_index.c, grad_index.c and kernels/cuda/cuda_index.cu).
 * The host works out a geometry struct from the node and its int inputs; the element
 * functions below (host and device) map one output element to its source.
 *
 * Pad and Tile share one description: per axis the input size n, the output size m
 * and the begin pad b (negative crops); output coordinate c reads input coordinate
 * src(c - b). Tile is the wrap mode with b = 0. The gradient of either sums, for
 * each input element, dY over every output coordinate that read it, enumerated in
 * increasing output order (so the sum is the same on every backend and thread
 * count): per axis those coordinates are an interval (constant, edge) or one or two
 * arithmetic progressions (wrap, reflect), found by ot_pad_next. */
#ifndef OT_KERNELS_INDEX_GEOMETRY_H
#define OT_KERNELS_INDEX_GEOMETRY_H

#include <stdbool.h>
#include <stdint.h>

#ifdef __CUDACC__
#define OT_INDEX_FN static inline __host__ __device__
#else
#define OT_INDEX_FN static inline
#endif

#ifdef __cplusplus
extern "C" {
#endif
#include "ir.h"

typedef struct ot_pad_geom {
    int rank;
    ot_pad_mode mode;
    int64_t n[OT_MAX_RANK], m[OT_MAX_RANK], b[OT_MAX_RANK];
} ot_pad_geom;

/* Pad: begin pads from the pads / axes inputs (host copies), checked against the
 * input and output shapes. OT_E_MODEL / OT_E_SHAPE naming the node. */
ot_status ot_pad_geometry(const ot_node *node, ot_pad_mode mode, const int64_t *pads, int n_pads, const int64_t *axes,
                          int n_axes, const ot_shape *xs, const ot_shape *ys, ot_pad_geom *g, ot_error *err);
/* Pad's constant_value v as the element bytes of dtype t (at most 8). OT_E_UNSUPPORTED
 * for a nonzero value in a dtype without a conversion here. */
ot_status ot_pad_fill_bytes(const ot_node *node, double v, ot_dtype t, unsigned char *bytes, ot_error *err);
/* Tile / TileGrad: repeats implied by the shapes (ys = xs * repeats). */
ot_status ot_tile_geometry(const ot_node *node, const ot_shape *xs, const ot_shape *ys, ot_pad_geom *g,
                           ot_error *err);

/* Trilu over the last two dims: rows x cols matrices; keep (i, j) when
 * upper ? j - i >= k : j - i <= k. */
OT_INDEX_FN bool ot_trilu_keep(int64_t idx, int64_t rows, int64_t cols, int64_t k, bool upper) {
    int64_t j = idx % cols, i = (idx / cols) % rows;
    return upper ? j - i >= k : j - i <= k;
}

/* GatherElements: indices of shape is, data of shape ds, along axis. */
typedef struct ot_gather_el_geom {
    int rank, axis;
    int64_t is[OT_MAX_RANK], dst[OT_MAX_RANK]; /* indices dims; data strides */
    int64_t d_axis;                            /* data dim along axis */
} ot_gather_el_geom;
ot_status ot_gather_el_geometry(const ot_node *node, int axis, const ot_shape *ds, const ot_shape *is,
                                ot_gather_el_geom *g, ot_error *err);

/* Data offset of indices element idx holding index v (already normalised to >= 0). */
OT_INDEX_FN int64_t ot_gather_el_offset(const ot_gather_el_geom *g, int64_t idx, int64_t v) {
    int64_t off = 0;
    for (int d = g->rank - 1; d >= 0; d--) {
        int64_t c = idx % g->is[d];
        idx /= g->is[d];
        off += (d == g->axis ? v : c) * g->dst[d];
    }
    return off;
}

/* GatherND / ScatterND: index tuples of length q address slices of `slice` elements
 * of data; with batch_dims b the first b dims of data and indices are batch dims
 * (tuple k belongs to batch k / tuples_per_batch). */
typedef struct ot_nd_geom {
    int q;
    int64_t n_tuples, slice, tuples_per_batch, batch_stride;
    int64_t dim[OT_MAX_RANK], stride[OT_MAX_RANK]; /* indexed dims of data and their element strides */
} ot_nd_geom;
ot_status ot_nd_geometry(const ot_node *node, const ot_shape *ds, const ot_shape *is, int batch_dims, ot_nd_geom *g,
                         ot_error *err);

OT_INDEX_FN int64_t ot_index_load(const void *p, bool i64, int64_t j) {
    return i64 ? ((const int64_t *)p)[j] : (int64_t)((const int32_t *)p)[j];
}

/* Data offset of the slice index tuple k addresses; -1 when an index is out of range. */
OT_INDEX_FN int64_t ot_nd_offset(const ot_nd_geom *g, const void *idx, bool i64, int64_t k) {
    int64_t off = (k / g->tuples_per_batch) * g->batch_stride;
    for (int j = 0; j < g->q; j++) {
        int64_t v = ot_index_load(idx, i64, k * g->q + j);
        if (v < 0) v += g->dim[j];
        if (v < 0 || v >= g->dim[j]) return -1;
        off += v * g->stride[j];
    }
    return off;
}

/* CumSum lines: outer x n x inner. */
ot_status ot_cumsum_geometry(const ot_node *node, int64_t axis, const ot_shape *xs, int64_t *outer, int64_t *n,
                             int64_t *inner, ot_error *err);

/* ---- Pad / Tile element code ------------------------------------------------------ */

OT_INDEX_FN int64_t ot_pad_mod(int64_t a, int64_t p) {
    int64_t r = a % p;
    return r < 0 ? r + p : r;
}

/* Input coordinate that offset t (= c - b) reads along an axis of size n; -1 for the
 * constant border. */
OT_INDEX_FN int64_t ot_pad_src(int64_t t, int64_t n, ot_pad_mode mode) {
    if (t >= 0 && t < n) return t;
    switch (mode) {
    case OT_PAD_EDGE: return t < 0 ? 0 : n - 1;
    case OT_PAD_WRAP: return ot_pad_mod(t, n);
    case OT_PAD_REFLECT: {
        if (n == 1) return 0;
        int64_t p = 2 * (n - 1), r = ot_pad_mod(t, p);
        return r < n ? r : p - r;
    }
    default: return -1;
    }
}

/* The smallest offset t >= t0 that reads input coordinate i (INT64_MAX: none). */
OT_INDEX_FN int64_t ot_pad_next(int64_t t0, int64_t i, int64_t n, ot_pad_mode mode) {
    const int64_t none = INT64_MAX;
    switch (mode) {
    case OT_PAD_EDGE: { /* the interval [i == 0 ? -inf : i, i == n-1 ? +inf : i] */
        int64_t lo = i == 0 ? t0 : i, hi = i == n - 1 ? none - 1 : i;
        int64_t t = t0 > lo ? t0 : lo;
        return t <= hi ? t : none;
    }
    case OT_PAD_WRAP: return t0 + ot_pad_mod(i - t0, n);
    case OT_PAD_REFLECT: {
        if (n == 1) return t0;
        int64_t p = 2 * (n - 1), a = t0 + ot_pad_mod(i - t0, p), b = t0 + ot_pad_mod(p - i - t0, p);
        return a < b ? a : b;
    }
    default: return t0 <= i ? i : none;
    }
}

/* Input offset that output element o reads (contiguous layouts), -1 for the border. */
OT_INDEX_FN int64_t ot_pad_src_offset(const ot_pad_geom *g, int64_t o) {
    int64_t off = 0, stride = 1;
    for (int d = g->rank - 1; d >= 0; d--) {
        int64_t c = o % g->m[d];
        o /= g->m[d];
        int64_t s = ot_pad_src(c - g->b[d], g->n[d], g->mode);
        if (s < 0) return -1;
        off += s * stride;
        stride *= g->n[d];
    }
    return off;
}

/* dX at input element x: the sum of dY over the output elements that read it, in
 * increasing output order. */
OT_INDEX_FN float ot_pad_grad_at(const ot_pad_geom *g, const float *dy, int64_t x) {
    int64_t i[OT_MAX_RANK], t[OT_MAX_RANK], ost[OT_MAX_RANK], acc = 1;
    int r = g->rank;
    for (int d = r - 1; d >= 0; d--) {
        i[d] = x % g->n[d];
        x /= g->n[d];
        ost[d] = acc;
        acc *= g->m[d];
    }
    for (int d = 0; d < r; d++) {
        t[d] = ot_pad_next(-g->b[d], i[d], g->n[d], g->mode);
        if (t[d] >= g->m[d] - g->b[d]) return 0.0f;
    }
    float sum = 0.0f;
    for (;;) {
        int64_t off = 0;
        for (int d = 0; d < r; d++) off += (t[d] + g->b[d]) * ost[d];
        sum += dy[off];
        int d = r - 1;
        for (; d >= 0; d--) { /* odometer: the innermost axis first */
            t[d] = ot_pad_next(t[d] + 1, i[d], g->n[d], g->mode);
            if (t[d] < g->m[d] - g->b[d]) break;
            t[d] = ot_pad_next(-g->b[d], i[d], g->n[d], g->mode);
        }
        if (d < 0) return sum;
    }
}

/* Gather and GatherGrad: data (Gather's input 0, GatherGrad's output) viewed as
 * outer x n_axis x inner around the node's axis, n_idx indices; the gathered tensor
 * (Gather's output, GatherGrad's dY) must hold outer x n_idx x inner elements. Index
 * values are checked by the callers (CPU: before running; CUDA: in the kernel).
 * OT_E_SHAPE naming the node. */
typedef struct ot_gather_geom {
    int axis;
    int64_t outer, inner, n_axis, n_idx;
} ot_gather_geom;
ot_status ot_gather_geometry(const ot_node *node, const ot_shape *data, const ot_tensor *indices,
                             int64_t gathered_numel, ot_gather_geom *g, ot_error *err);

#ifdef __cplusplus
}
#endif

#endif
