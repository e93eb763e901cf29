/* reduce_ext.h — geometry and element rules of issue 26's reductions (ReduceMax,
 * ReduceMin, ReduceProd, ReduceL1, ReduceL2, ReduceLogSumExp, ReduceSumSquare, ArgMax,
 * ArgMin) and of their backward op ReduceGrad, written once for the CPU kernels
 * (kernels/cpu/cpu_reduce_ext.c) and the CUDA kernels (kernels/cuda/cuda_reduce_ext.cu).
 *
 * Every output element is folded by one walker over its reduced elements in row-major
 * order, on either backend: the CUDA host mode gives the CPU's bits, and the device
 * differs only by its libm (exp, log, sqrt). Sums run in double. The backward pass first
 * folds each group's auxiliary figures (ties of Max / Min, zeros and the product of the
 * non-zeros of Prod), then maps every input element to its group. */
#ifndef OT_KERNELS_REDUCE_EXT_H
#define OT_KERNELS_REDUCE_EXT_H

#include <math.h>
#include <stdbool.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif
#include "ir.h"
#ifdef __cplusplus
}
#endif

#if defined(__CUDACC__)
#define OT_RX_FN static __host__ __device__ __forceinline__
#else
#define OT_RX_FN static inline
#endif

/* X's dims split into kept (k*) and reduced (r*) ones, size-1 dims dropped, with the
 * element strides of X; xdim / ostr map an input element to its output element. */
typedef struct ot_rx_geom {
    int nk, nr, rank;
    int64_t kdim[OT_MAX_RANK], kst[OT_MAX_RANK], rdim[OT_MAX_RANK], rst[OT_MAX_RANK];
    int64_t xdim[OT_MAX_RANK], ostr[OT_MAX_RANK]; /* ostr 0 for a reduced dim */
    int64_t n_out, n_red, n_in;
} ot_rx_geom;

/* red[d]: dim d of xs is reduced (kernels/reduce_geometry.h's ot_reduce_dims). */
OT_RX_FN void ot_rx_init(ot_rx_geom *g, const ot_shape *xs, const bool *red) {
    int64_t st[OT_MAX_RANK], acc = 1;
    for (int d = xs->rank - 1; d >= 0; d--) st[d] = acc, acc *= xs->dim[d];
    g->nk = g->nr = 0;
    g->rank = xs->rank;
    g->n_out = g->n_red = 1;
    g->n_in = acc;
    for (int d = 0; d < xs->rank; d++) {
        g->xdim[d] = xs->dim[d];
        if (red[d]) g->n_red *= xs->dim[d];
        else g->n_out *= xs->dim[d];
        if (xs->dim[d] == 1) continue;
        if (red[d]) g->rdim[g->nr] = xs->dim[d], g->rst[g->nr++] = st[d];
        else g->kdim[g->nk] = xs->dim[d], g->kst[g->nk++] = st[d];
    }
    int64_t o = 1;
    for (int d = xs->rank - 1; d >= 0; d--) {
        g->ostr[d] = red[d] ? 0 : o;
        if (!red[d]) o *= xs->dim[d];
    }
}

/* The offset in X of output element o's first reduced element. */
OT_RX_FN int64_t ot_rx_base(const ot_rx_geom *g, int64_t o) {
    int64_t base = 0;
    for (int k = g->nk - 1; k >= 0; k--) {
        base += (o % g->kdim[k]) * g->kst[k];
        o /= g->kdim[k];
    }
    return base;
}

/* The offset from the base of the j-th reduced element (row-major over reduced dims). */
OT_RX_FN int64_t ot_rx_off(const ot_rx_geom *g, int64_t j) {
    int64_t off = 0;
    for (int k = g->nr - 1; k >= 0; k--) {
        off += (j % g->rdim[k]) * g->rst[k];
        j /= g->rdim[k];
    }
    return off;
}

/* The output element input element i is folded into. */
OT_RX_FN int64_t ot_rx_out_of(const ot_rx_geom *g, int64_t i) {
    int64_t o = 0;
    for (int d = g->rank - 1; d >= 0; d--) {
        o += (i % g->xdim[d]) * g->ostr[d];
        i /= g->xdim[d];
    }
    return o;
}

/* ---- forward ------------------------------------------------------------------------ */

/* Max / Min with NaN propagating (torch.amax, numpy); an empty set gives -inf / +inf. */
OT_RX_FN float ot_rx_extremum(const float *x, const ot_rx_geom *g, int64_t base, int is_max) {
    float acc = is_max ? -INFINITY : INFINITY;
    for (int64_t j = 0; j < g->n_red && acc == acc; j++) {
        float v = x[base + ot_rx_off(g, j)];
        if (v != v || (is_max ? v > acc : v < acc)) acc = v;
    }
    return acc;
}

/* One output element of mode (ot_reduce_mode: MAX .. SUM_SQUARE). */
OT_RX_FN float ot_rx_reduce(const float *x, const ot_rx_geom *g, int64_t o, int mode) {
    int64_t base = ot_rx_base(g, o);
    if (mode == OT_RMODE_MAX || mode == OT_RMODE_MIN) return ot_rx_extremum(x, g, base, mode == OT_RMODE_MAX);
    if (mode == OT_RMODE_LOG_SUM_EXP) {
        /* max-shifted as PyTorch's logsumexp; an infinite or NaN max is the result */
        float m = ot_rx_extremum(x, g, base, 1);
        if (isinf(m) || m != m) return m;
        double s = 0.0;
        for (int64_t j = 0; j < g->n_red; j++) s += exp((double)x[base + ot_rx_off(g, j)] - (double)m);
        return (float)((double)m + log(s));
    }
    double acc = mode == OT_RMODE_PROD ? 1.0 : 0.0;
    for (int64_t j = 0; j < g->n_red; j++) {
        double v = x[base + ot_rx_off(g, j)];
        switch (mode) {
        case OT_RMODE_PROD: acc *= v; break;
        case OT_RMODE_L1: acc += fabs(v); break;
        default: acc += v * v; break; /* L2, SumSquare */
        }
    }
    return (float)(mode == OT_RMODE_L2 ? sqrt(acc) : acc);
}

/* ArgMax / ArgMin over the reduced dims (one axis): the first extremum, or the last
 * with select_last; NaN counts as the extremum (numpy, PyTorch). T: float, int64_t,
 * int32_t. */
#define OT_RX_ARG_BODY(T, ISNAN)                                                           \
    int64_t best = 0;                                                                      \
    T bv = x[base];                                                                        \
    for (int64_t j = 1; j < g->n_red; j++) {                                               \
        T v = x[base + ot_rx_off(g, j)];                                                   \
        bool bnan = ISNAN(bv), vnan = ISNAN(v);                                            \
        bool take = bnan ? (vnan && last)                                                  \
                         : vnan || (is_max ? v > bv : v < bv) || (last && v == bv);        \
        if (take) best = j, bv = v;                                                        \
    }                                                                                      \
    return best;

#define OT_RX_ISNAN_F(v) ((v) != (v))
#define OT_RX_ISNAN_I(v) false
OT_RX_FN int64_t ot_rx_arg_f(const float *x, const ot_rx_geom *g, int64_t base, int is_max, int last) {
    OT_RX_ARG_BODY(float, OT_RX_ISNAN_F)
}
OT_RX_FN int64_t ot_rx_arg_i64(const int64_t *x, const ot_rx_geom *g, int64_t base, int is_max, int last) {
    OT_RX_ARG_BODY(int64_t, OT_RX_ISNAN_I)
}
OT_RX_FN int64_t ot_rx_arg_i32(const int32_t *x, const ot_rx_geom *g, int64_t base, int is_max, int last) {
    OT_RX_ARG_BODY(int32_t, OT_RX_ISNAN_I)
}

/* ReduceMax / ReduceMin on int64 / int32 (shape arithmetic): an empty set gives the
 * dtype's lowest (Max) or highest (Min) value, as ONNX specifies. */
#define OT_RX_INT_EXTREMUM(T, NAME, LO, HI)                                             \
    OT_RX_FN T NAME(const T *x, const ot_rx_geom *g, int64_t o, int is_max) {           \
        int64_t base = ot_rx_base(g, o);                                                \
        T acc = is_max ? LO : HI;                                                       \
        for (int64_t j = 0; j < g->n_red; j++) {                                        \
            T v = x[base + ot_rx_off(g, j)];                                            \
            if (is_max ? v > acc : v < acc) acc = v;                                    \
        }                                                                               \
        return acc;                                                                     \
    }
OT_RX_INT_EXTREMUM(int64_t, ot_rx_extremum_i64, INT64_MIN, INT64_MAX)
OT_RX_INT_EXTREMUM(int32_t, ot_rx_extremum_i32, INT32_MIN, INT32_MAX)

/* ---- backward ----------------------------------------------------------------------- */

/* Whether x is one of Max / Min's selected elements y (a NaN result selects the NaNs). */
OT_RX_FN bool ot_rx_selected(float x, float y) { return x == y || (x != x && y != y); }

/* A group's auxiliary figures: Max / Min: a[0] the number of selected elements; Prod:
 * a[0] the number of zeros, a[1] the product of the others (double). */
OT_RX_FN void ot_rx_grad_aux(const float *x, const float *y, const ot_rx_geom *g, int64_t o, int mode, double *a) {
    int64_t base = ot_rx_base(g, o);
    a[0] = 0.0;
    a[1] = 1.0;
    if (mode != OT_RMODE_MAX && mode != OT_RMODE_MIN && mode != OT_RMODE_PROD) return;
    for (int64_t j = 0; j < g->n_red; j++) {
        float v = x[base + ot_rx_off(g, j)];
        if (mode == OT_RMODE_PROD) {
            if (v == 0.0f) a[0] += 1.0;
            else a[1] *= (double)v;
        } else if (ot_rx_selected(v, y[o])) {
            a[0] += 1.0;
        }
    }
}

/* dX at one element: dY and Y of its group, a its group's figures (ot_rx_grad_aux).
 * PyTorch 1.13's rules: amax / amin split dY evenly between the selected elements;
 * prod: dY * (Y / x) without zeros, the product of the others at a lone zero, 0 where
 * two or more are zero; norm p=1: dY * sign(x); norm p=2: x * (dY / Y), 0 where Y = 0;
 * x^2 summed: dY * 2x; logsumexp: dY * exp(x - Y). */
OT_RX_FN float ot_rx_grad(float gy, float x, float y, const double *a, int mode) {
    switch (mode) {
    case OT_RMODE_MAX:
    case OT_RMODE_MIN: return ot_rx_selected(x, y) ? gy / (float)a[0] : 0.0f;
    case OT_RMODE_PROD:
        if (a[0] == 0.0) return gy * (y / x);
        return (a[0] == 1.0 && x == 0.0f) ? gy * (float)a[1] : 0.0f;
    case OT_RMODE_L1: return gy * (x > 0.0f ? 1.0f : x < 0.0f ? -1.0f : 0.0f);
    case OT_RMODE_L2: return y == 0.0f ? 0.0f : x * (gy / y);
    case OT_RMODE_SUM_SQUARE: return gy * (2.0f * x);
    default: return gy * expf(x - y); /* LOG_SUM_EXP */
    }
}

#endif
