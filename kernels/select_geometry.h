/* select_geometry.h — TopK and OneHot for both backends (ops batch 4, issue 26): the
 * host works out the rows (TopK) or the output layout (OneHot) once; the element
 * functions below run the same on the CPU (kernels/cpu/cpu_select.c) and the GPU
 * (kernels/cuda/cuda_select.cu, host mode included).
 *
 * TopK's order: by value (largest or smallest first), NaN above every number (as
 * torch.topk), ties by the lower index first (ONNX); each pick is the first element
 * after the previous one in that order, so a row needs no scratch and O(n k) work. */
#ifndef OT_KERNELS_SELECT_GEOMETRY_H
#define OT_KERNELS_SELECT_GEOMETRY_H

#include <math.h>
#include <stdbool.h>
#include <stdint.h>

#ifdef __CUDACC__
#define OT_SEL_FN static inline __host__ __device__
#else
#define OT_SEL_FN static inline
#endif

#ifdef __cplusplus
extern "C" {
#endif
#include "ir.h"

/* TopK: X viewed as [outer, n, inner] around the axis; k picks per (outer, inner) */
typedef struct ot_topk_geom {
    int64_t outer, n, inner, k;
    bool largest;
} ot_topk_geom;

/* From the node's params, X's shape, K (read by the caller) and the outputs' shapes.
 * OT_E_MODEL / OT_E_SHAPE naming the node. */
ot_status ot_topk_geometry(const ot_node *node, const ot_shape *xs, int64_t k, const ot_shape *ys, const ot_shape *is,
                           ot_topk_geom *g, ot_error *err);

/* OneHot: the output viewed as [outer, depth, inner], the indices as [outer, inner] */
typedef struct ot_onehot_geom {
    int64_t outer, depth, inner;
} ot_onehot_geom;

ot_status ot_onehot_geometry(const ot_node *node, const ot_shape *is, int64_t depth, const ot_shape *ys,
                             ot_onehot_geom *g, ot_error *err);

#ifdef __cplusplus
}
#endif

/* a comes strictly before b (values va, vb at indices ia, ib) in TopK's order */
OT_SEL_FN bool ot_topk_before(float va, int64_t ia, float vb, int64_t ib, bool largest) {
    bool na = va != va, nb = vb != vb;
    if (na || nb) {
        if (na && nb) return ia < ib;
        return largest ? na : nb; /* NaN is the largest */
    }
    if (va != vb) return largest ? va > vb : va < vb;
    return ia < ib;
}

/* Row r (0 .. outer * inner - 1): its k picks into y / yi (strided by inner). */
OT_SEL_FN void ot_topk_row(const ot_topk_geom *g, const float *x, float *y, int64_t *yi, int64_t r) {
    int64_t o = r / g->inner, in = r % g->inner;
    const float *row = x + o * g->n * g->inner + in;
    float *yr = y + o * g->k * g->inner + in;
    int64_t *ir = yi + o * g->k * g->inner + in;
    float pv = 0.0f;
    int64_t pi = -1;
    for (int64_t j = 0; j < g->k; j++) {
        int64_t best = -1;
        float bv = 0.0f;
        for (int64_t i = 0; i < g->n; i++) {
            float v = row[i * g->inner];
            if (pi >= 0 && !ot_topk_before(pv, pi, v, i, g->largest)) continue; /* already picked */
            if (best < 0 || ot_topk_before(v, i, bv, best, g->largest)) best = i, bv = v;
        }
        yr[j * g->inner] = bv;
        ir[j * g->inner] = best;
        pv = bv, pi = best;
    }
}

/* OneHot: an index read as double (any dtype) as a position; NaN or one past int64
 * is INT64_MIN, which no depth reaches */
OT_SEL_FN int64_t ot_onehot_index(double iv) { return iv >= -9.0e18 && iv <= 9.0e18 ? (int64_t)iv : INT64_MIN; }
/* OneHot output element e: on where the (normalised) index is its depth position */
OT_SEL_FN bool ot_onehot_is_on(const ot_onehot_geom *g, int64_t idx, int64_t e) {
    int64_t j = (e / g->inner) % g->depth;
    if (idx < 0) idx += g->depth;
    return idx == j;
}
OT_SEL_FN int64_t ot_onehot_index_of(const ot_onehot_geom *g, int64_t e) {
    return (e / (g->inner * g->depth)) * g->inner + e % g->inner;
}

#endif
