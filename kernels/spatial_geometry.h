/* spatial_geometry.h — geometry and element code of Resize, Upsample and ResizeGrad,
 * DepthToSpace and SpaceToDepth (issue 26), in one place for both backends (kernels/cpu/cpu_spatial.c and
 * kernels/cuda/cuda_spatial.cu). The host works out an ot_resize_geom from the node's
 * params, the shapes and the scales / sizes inputs; the element functions below
 * (host and device) compute one output element.
 *
 * Per axis, output coordinate o maps to the source coordinate x of ONNX's reference
 * (onnx/reference/ops/op_resize.py, computed in double like it) and reads 1 (nearest),
 * 2 (linear) or 4 (cubic) taps at raw indices base + t, clamped to the axis (edge
 * padding), with weights in float. An axis whose size and scale are 1:1 is an
 * identity and takes no taps. The forward sums the taps' products in a fixed order.
 *
 * The gradient is the adjoint, computed as a gather: for each input element, the
 * outputs that read it are, per axis, one interval of o (base(o) is nondecreasing in
 * o; the edge indices also collect the clamped taps), found by binary search, and
 * dY is summed over them in increasing output order. No scatter, no atomics: every
 * backend and thread count gives the same bits, and a recompute the first bits. */
#ifndef OT_KERNELS_SPATIAL_GEOMETRY_H
#define OT_KERNELS_SPATIAL_GEOMETRY_H

#include <math.h>
#include <stdbool.h>
#include <stdint.h>

#ifdef __CUDACC__
#define OT_RESIZE_FN static inline __host__ __device__
#else
#define OT_RESIZE_FN static inline
#endif

#ifdef __cplusplus
extern "C" {
#endif
#include "ir.h"

/* The taps of one output coordinate along one axis, and its base (below). */
typedef struct ot_resize_tap {
    int64_t base, idx[4];
    float w[4];
} ot_resize_tap;

typedef struct ot_resize_geom {
    int rank, n_active;
    int mode, ctm, nearest; /* ot_resize_mode, ot_resize_ctm, ot_resize_nearest */
    bool exclude_outside;
    float cubic_a;
    int active[OT_MAX_RANK];               /* the axes that are not 1:1, outer first */
    int64_t in[OT_MAX_RANK], out[OT_MAX_RANK];
    int64_t in_stride[OT_MAX_RANK], out_stride[OT_MAX_RANK];
    double scale[OT_MAX_RANK], out_f[OT_MAX_RANK]; /* out_f: scale x in, ONNX's output_width */
    /* The CPU kernels' table of every active axis's taps (ot_resize_fill_taps), axis d
     * from tab_off[d]; NULL: the element code computes them (the CUDA kernels). The
     * same function fills the table, so either way the same values. */
    const ot_resize_tap *tab;
    int64_t tab_off[OT_MAX_RANK];
} ot_resize_geom;

/* From the params, the input and output shapes, and the scales (n_scales entries, or
 * NULL) or sizes (n_sizes, or NULL) inputs; both given or neither is the model's
 * error. Checks that ys is what the scales / sizes give. OT_E_MODEL / OT_E_SHAPE /
 * OT_E_UNSUPPORTED naming the node (tf_crop_and_resize, antialias when downscaling). */
ot_status ot_resize_geometry(const ot_node *node, const ot_resize_params *p, const ot_shape *xs, const ot_shape *ys,
                             const double *scales, int n_scales, const int64_t *sizes, int n_sizes,
                             ot_resize_geom *g, ot_error *err);

/* Entries of the tap table for output shape ys (every axis, an upper bound), and the
 * table itself, written to mem (that many entries) and set as g->tab. */
int64_t ot_resize_tab_entries(const ot_shape *ys);
void ot_resize_fill_taps(ot_resize_geom *g, ot_resize_tap *mem);

/* The mode / transform / rounding / aspect policy / antialias checks alone (the shape
 * rule uses them to refuse a model at import). */
ot_status ot_resize_check_params(const ot_node *node, const ot_resize_params *p, ot_error *err);

/* ONNX's x_original: the source coordinate of output coordinate o along axis d. */
OT_RESIZE_FN double ot_resize_src(const ot_resize_geom *g, int d, int64_t o) {
    double x = (double)o, s = g->scale[d], n = (double)g->in[d], w = g->out_f[d];
    switch (g->ctm) {
    case OT_CTM_ALIGN_CORNERS: return w == 1.0 ? 0.0 : x * (n - 1) / (w - 1);
    case OT_CTM_ASYMMETRIC: return x / s;
    case OT_CTM_PYTORCH_HALF_PIXEL: return w == 1.0 ? -0.5 : (x + 0.5) / s - 0.5;
    case OT_CTM_HALF_PIXEL_SYMMETRIC: {
        double adj = (double)g->out[d] / w, center = n / 2;
        return center * (1 - adj) + (x + 0.5) / s - 0.5;
    }
    default: return (x + 0.5) / s - 0.5;
    }
}

/* The first tap's offset from base: nearest 0, linear 0 (floor, floor + 1), cubic -1. */
OT_RESIZE_FN int ot_resize_tap0(const ot_resize_geom *g) { return g->mode == OT_RESIZE_CUBIC ? -1 : 0; }
OT_RESIZE_FN int ot_resize_ntaps(const ot_resize_geom *g) {
    return g->mode == OT_RESIZE_NEAREST ? 1 : g->mode == OT_RESIZE_LINEAR ? 2 : 4;
}

/* base(o): the nearest index (nearest) or floor(x) (linear, cubic), unclamped; *r the
 * fraction x - floor(x). Nondecreasing in o. */
OT_RESIZE_FN int64_t ot_resize_base(const ot_resize_geom *g, int d, int64_t o, double *r) {
    double x = ot_resize_src(g, d, o), f = floor(x);
    int64_t fi = (int64_t)f;
    *r = x - f;
    if (g->mode != OT_RESIZE_NEAREST || *r == 0.0) return fi;
    switch (g->nearest) {
    case OT_NEAREST_ROUND_PREFER_CEIL: return *r < 0.5 ? fi : fi + 1;
    case OT_NEAREST_FLOOR: return fi;
    case OT_NEAREST_CEIL: return fi + 1;
    default: return *r <= 0.5 ? fi : fi + 1;
    }
}

/* The taps of output coordinate o along axis d: clamped indices and weights; returns
 * their count. Cubic: Keys' kernel with a = cubic_coeff_a, as ONNX writes it. */
OT_RESIZE_FN int ot_resize_taps(const ot_resize_geom *g, int d, int64_t o, int64_t *idx, float *w) {
    double r, c[4] = {1.0, 0.0, 0.0, 0.0};
    int64_t base = ot_resize_base(g, d, o, &r), n = g->in[d];
    int nt = ot_resize_ntaps(g);
    int64_t first = base + ot_resize_tap0(g);
    if (g->mode == OT_RESIZE_LINEAR) {
        c[0] = 1 - r;
        c[1] = r;
    } else if (g->mode == OT_RESIZE_CUBIC) {
        double A = g->cubic_a, p = r + 1, q = 1 - r, q1 = q + 1;
        c[0] = ((A * p - 5 * A) * p + 8 * A) * p - 4 * A;
        c[1] = ((A + 2) * r - (A + 3)) * r * r + 1;
        c[2] = ((A + 2) * q - (A + 3)) * q * q + 1;
        c[3] = ((A * q1 - 5 * A) * q1 + 8 * A) * q1 - 4 * A;
    }
    if (g->exclude_outside && nt > 1) {
        double sum = 0;
        for (int k = 0; k < nt; k++) {
            if (first + k < 0 || first + k >= n) c[k] = 0;
            sum += c[k];
        }
        for (int k = 0; k < nt; k++) c[k] = sum != 0 ? c[k] / sum : 0;
    }
    for (int k = 0; k < nt; k++) {
        int64_t i = first + k;
        idx[k] = i < 0 ? 0 : i >= n ? n - 1 : i;
        w[k] = (float)c[k];
    }
    return nt;
}

/* ot_resize_taps and ot_resize_base through the table when there is one. */
OT_RESIZE_FN int ot_resize_taps_of(const ot_resize_geom *g, int d, int64_t o, int64_t *idx, float *w) {
    if (!g->tab) return ot_resize_taps(g, d, o, idx, w);
    const ot_resize_tap *t = &g->tab[g->tab_off[d] + o];
    int nt = ot_resize_ntaps(g);
    for (int k = 0; k < nt; k++) {
        idx[k] = t->idx[k];
        w[k] = t->w[k];
    }
    return nt;
}

OT_RESIZE_FN int64_t ot_resize_base_of(const ot_resize_geom *g, int d, int64_t o) {
    double r;
    return g->tab ? g->tab[g->tab_off[d] + o].base : ot_resize_base(g, d, o, &r);
}

/* Y at output element o. */
OT_RESIZE_FN float ot_resize_at(const ot_resize_geom *g, const float *x, int64_t o) {
    int64_t c[OT_MAX_RANK], ti[OT_MAX_RANK][4], base = 0;
    float tw[OT_MAX_RANK][4];
    int nt[OT_MAX_RANK], k[OT_MAX_RANK];
    for (int d = g->rank - 1; d >= 0; d--) {
        c[d] = o % g->out[d];
        o /= g->out[d];
    }
    for (int d = 0; d < g->rank; d++) base += c[d] * g->in_stride[d];
    for (int a = 0; a < g->n_active; a++) {
        int d = g->active[a];
        base -= c[d] * g->in_stride[d];
        nt[a] = ot_resize_taps_of(g, d, c[d], ti[a], tw[a]);
        k[a] = 0;
    }
    float sum = 0.0f;
    for (;;) {
        float w = 1.0f;
        int64_t off = base;
        for (int a = 0; a < g->n_active; a++) {
            w *= tw[a][k[a]];
            off += ti[a][k[a]] * g->in_stride[g->active[a]];
        }
        sum += w * x[off];
        int a = g->n_active - 1;
        while (a >= 0 && ++k[a] == nt[a]) k[a--] = 0;
        if (a < 0) break;
    }
    return sum;
}

/* The weight with which output coordinate o along axis d reads input index i (the sum
 * of its taps that clamp to i). */
OT_RESIZE_FN float ot_resize_weight(const ot_resize_geom *g, int d, int64_t o, int64_t i) {
    int64_t idx[4];
    float w[4], s = 0.0f;
    int nt = ot_resize_taps_of(g, d, o, idx, w);
    for (int k = 0; k < nt; k++)
        if (idx[k] == i) s += w[k];
    return s;
}

/* The first o in [0, out) with base(o) >= v (out when none). */
OT_RESIZE_FN int64_t ot_resize_lower(const ot_resize_geom *g, int d, int64_t v) {
    int64_t lo = 0, hi = g->out[d];
    while (lo < hi) {
        int64_t mid = lo + (hi - lo) / 2;
        if (ot_resize_base_of(g, d, mid) >= v) hi = mid;
        else lo = mid + 1;
    }
    return lo;
}

/* ot_resize_grad_at keeps the weights of the first OT_RESIZE_CACHE_AXES active axes
 * for up to OT_RESIZE_CACHE outputs each (an 8x bilinear upsample reads ~17), so the
 * inner loop does not recompute taps; longer ranges recompute them (same values). */
#define OT_RESIZE_CACHE 32
#define OT_RESIZE_CACHE_AXES 4

/* dX at input element i: dY summed over the outputs that read it, weighted. */
OT_RESIZE_FN float ot_resize_grad_at(const ot_resize_geom *g, const float *dy, int64_t i) {
    int64_t c[OT_MAX_RANK], lo[OT_MAX_RANK], hi[OT_MAX_RANK], o[OT_MAX_RANK], base = 0;
    float pw[OT_MAX_RANK + 1], wc[OT_RESIZE_CACHE_AXES][OT_RESIZE_CACHE];
    bool cached[OT_MAX_RANK];
    for (int d = g->rank - 1; d >= 0; d--) {
        c[d] = i % g->in[d];
        i /= g->in[d];
    }
    for (int d = 0; d < g->rank; d++) base += c[d] * g->out_stride[d];
    int t0 = ot_resize_tap0(g), t1 = t0 + ot_resize_ntaps(g) - 1;
    for (int a = 0; a < g->n_active; a++) {
        int d = g->active[a];
        int64_t ci = c[d], n = g->in[d];
        base -= ci * g->out_stride[d];
        /* o reads ci when some clamp(base(o) + t) == ci: an interval of base(o) */
        lo[a] = ci == 0 ? 0 : ot_resize_lower(g, d, ci - t1);
        hi[a] = ci == n - 1 ? g->out[d] : ot_resize_lower(g, d, ci - t0 + 1);
        if (lo[a] >= hi[a]) return 0.0f;
        o[a] = lo[a];
        cached[a] = a < OT_RESIZE_CACHE_AXES && hi[a] - lo[a] <= OT_RESIZE_CACHE;
        for (int64_t k = lo[a]; cached[a] && k < hi[a]; k++) wc[a][k - lo[a]] = ot_resize_weight(g, d, k, ci);
    }
    float sum = 0.0f;
    int from = 0; /* partial weight products pw[a] = prod of the weights of axes < a */
    pw[0] = 1.0f;
    for (;;) {
        for (int a = from; a < g->n_active; a++)
            pw[a + 1] = pw[a] * (cached[a] ? wc[a][o[a] - lo[a]] : ot_resize_weight(g, g->active[a], o[a], c[g->active[a]]));
        int64_t off = base;
        for (int a = 0; a < g->n_active; a++) off += o[a] * g->out_stride[g->active[a]];
        sum += pw[g->n_active] * dy[off];
        int a = g->n_active - 1;
        while (a >= 0 && ++o[a] == hi[a]) {
            o[a] = lo[a];
            a--;
        }
        if (a < 0) break;
        from = a;
    }
    return sum;
}

/* DepthToSpace / SpaceToDepth: input dims n, c, h, w, block b; crd: DepthToSpace's
 * CRD order (and the SpaceToDepth that inverts it). */
typedef struct ot_depth_geom {
    int64_t n, c, h, w, b;
    bool to_space, crd;
} ot_depth_geom;

/* From the params and the [N, C, H, W] input and output shapes (OT_E_MODEL /
 * OT_E_SHAPE naming the node). */
ot_status ot_depth_geometry(const ot_node *node, const ot_depth_params *p, bool to_space, const ot_shape *xs,
                            const ot_shape *ys, ot_depth_geom *g, ot_error *err);

/* The input element output element o reads. */
OT_RESIZE_FN int64_t ot_depth_src(const ot_depth_geom *g, int64_t o) {
    int64_t b = g->b, ch, y, x;
    if (g->to_space) { /* out [n, c / b^2, h b, w b] */
        int64_t W = g->w * b, H = g->h * b, C = g->c / (b * b);
        int64_t ox = o % W, oy = (o / W) % H, oc = (o / (W * H)) % C, on = o / (W * H * C);
        int64_t ij = (oy % b) * b + ox % b;
        ch = g->crd ? oc * b * b + ij : ij * C + oc;
        y = oy / b;
        x = ox / b;
        return ((on * g->c + ch) * g->h + y) * g->w + x;
    }
    /* out [n, c b^2, h / b, w / b] */
    int64_t W = g->w / b, H = g->h / b, C = g->c * b * b;
    int64_t ox = o % W, oy = (o / W) % H, oc = (o / (W * H)) % C, on = o / (W * H * C);
    int64_t ij = g->crd ? oc % (b * b) : oc / g->c;
    ch = g->crd ? oc / (b * b) : oc % g->c;
    y = oy * b + ij / b;
    x = ox * b + ij % b;
    return ((on * g->c + ch) * g->h + y) * g->w + x;
}

#ifdef __cplusplus
}
#endif

#endif
