/* group_norm.h — InstanceNormalization and GroupNormalization (issue 26) for both
 * backends: the geometry (kernels/group_norm.c checks a node's tensors and derives it)
 * and the row rules, written once as inline functions for the CPU kernels
 * (kernels/cpu/cpu_group_norm.c) and the CUDA functors (kernels/cuda/cuda_group_norm.cu),
 * so the CUDA host mode gives the CPU's bits.
 *
 * X is [N, C, spatial...] with S spatial elements per channel; the C channels fall in G
 * groups of C / G; a row is one (sample, group): M = (C / G) * S contiguous elements,
 * normalised by their mean and variance (biased, in double) plus epsilon. The scale and
 * bias hold one value per channel (InstanceNormalization, GroupNormalization-21) or
 * per group (GroupNormalization-18). One thread folds a row, a channel or a group in a
 * fixed order: no atomics, the same result on any thread count. */
#ifndef OT_KERNELS_GROUP_NORM_H
#define OT_KERNELS_GROUP_NORM_H

#include <math.h>
#include <stdbool.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif
#include "ir.h"

typedef struct ot_gn_geom {
    int64_t N, C, G, S, cpg, M; /* cpg = C / G channels per group, M = cpg * S */
    int64_t n_param;            /* scale / bias elements: C, or G (per_group) */
    bool per_group;
    float eps;
} ot_gn_geom;

/* From the node's params (epsilon, num_groups; InstanceNormalization: G = C), X's
 * shape and the scale's and bias's element counts. OT_E_SHAPE / OT_E_MODEL naming the
 * node: rank below 2, C not a multiple of num_groups, a scale or bias of neither C nor G
 * elements. */
ot_status ot_gn_geom_init(ot_gn_geom *g, const ot_node *node, const ot_shape *x, int64_t n_scale, int64_t n_bias,
                          ot_error *err);

#ifdef __cplusplus
}
#endif

#if defined(__CUDACC__)
#define OT_GN_FN static __host__ __device__ __forceinline__
#else
#define OT_GN_FN static inline
#endif

/* The scale / bias index of element j of a row of group gr. */
OT_GN_FN int64_t ot_gn_param(const ot_gn_geom *g, int64_t gr, int64_t j) {
    return g->per_group ? gr : gr * g->cpg + j / g->S;
}

/* Mean and 1 / sqrt(var + eps) of row r (biased variance, two passes in double). */
OT_GN_FN void ot_gn_stats(const float *x, const ot_gn_geom *g, int64_t r, float *mean, float *rstd) {
    const float *xr = x + r * g->M;
    double s = 0.0, v = 0.0;
    for (int64_t j = 0; j < g->M; j++) s += xr[j];
    double mu = g->M ? s / (double)g->M : 0.0;
    for (int64_t j = 0; j < g->M; j++) {
        double d = (double)xr[j] - mu;
        v += d * d;
    }
    v = g->M ? v / (double)g->M : 0.0;
    *mean = (float)mu;
    *rstd = (float)(1.0 / sqrt(v + (double)g->eps));
}

/* Y of row r. */
OT_GN_FN void ot_gn_forward_row(const float *x, const float *scale, const float *bias, float *y, const ot_gn_geom *g,
                                int64_t r) {
    float mean, rstd;
    ot_gn_stats(x, g, r, &mean, &rstd);
    int64_t gr = r % g->G;
    for (int64_t j = 0; j < g->M; j++) {
        int64_t k = ot_gn_param(g, gr, j), i = r * g->M + j;
        y[i] = (x[i] - mean) * rstd * scale[k] + bias[k];
    }
}

/* dX of row r: rstd * (dy * scale - mean(dy * scale) - xhat * mean(dy * scale * xhat)). */
OT_GN_FN void ot_gn_dx_row(const float *dy, const float *x, const float *scale, float *dx, const ot_gn_geom *g,
                           int64_t r) {
    float mean, rstd;
    ot_gn_stats(x, g, r, &mean, &rstd);
    int64_t gr = r % g->G;
    double s1 = 0.0, s2 = 0.0;
    for (int64_t j = 0; j < g->M; j++) {
        int64_t i = r * g->M + j;
        float d = dy[i] * scale[ot_gn_param(g, gr, j)];
        s1 += d;
        s2 += (double)d * (double)((x[i] - mean) * rstd);
    }
    float m1 = (float)(s1 / (double)g->M), m2 = (float)(s2 / (double)g->M);
    for (int64_t j = 0; j < g->M; j++) {
        int64_t i = r * g->M + j;
        float xh = (x[i] - mean) * rstd, d = dy[i] * scale[ot_gn_param(g, gr, j)];
        dx[i] = rstd * (d - m1 - xh * m2);
    }
}

/* dScale[k] = sum dy * xhat and dBias[k] = sum dy over the elements parameter k scales
 * (its channel in every sample, or its group), samples in order; the rows' statistics
 * are recomputed (no workspace). Either output may be NULL. */
OT_GN_FN void ot_gn_param_grad(const float *dy, const float *x, float *dscale, float *dbias, const ot_gn_geom *g,
                               int64_t k) {
    int64_t gr = g->per_group ? k : k / g->cpg;
    int64_t j0 = g->per_group ? 0 : (k % g->cpg) * g->S, len = g->per_group ? g->M : g->S;
    double ss = 0.0, sb = 0.0;
    for (int64_t n = 0; n < g->N; n++) {
        int64_t r = n * g->G + gr;
        float mean, rstd;
        ot_gn_stats(x, g, r, &mean, &rstd);
        for (int64_t j = j0; j < j0 + len; j++) {
            int64_t i = r * g->M + j;
            ss += (double)dy[i] * (double)((x[i] - mean) * rstd);
            sb += dy[i];
        }
    }
    if (dscale) dscale[k] = (float)ss;
    if (dbias) dbias[k] = (float)sb;
}

#endif
