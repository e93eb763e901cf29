/* pool_fast.h — private to kernels/cpu: MaxPool's argmax for the common window (at
 * most two spatial dims, no dilation), shared by the forward (cpu_pool.c) and
 * MaxPoolGrad (grad_pool.c), which recomputes it. ot_pool_window_argmax
 * (kernels/pool_geometry.h) splits the output index with a division and a modulo
 * and bounds-checks every tap; here the window's rows and columns inside the input
 * are clipped once per output and walked in the same order (rows, then columns), so
 * the first maximum, NaN's early win and the index are the same. MaxPool forward and
 * grad were 6% of a ResNet-18 step (issue 14). */
#ifndef OT_POOL_FAST_H
#define OT_POOL_FAST_H

#include "kernels/cpu/cpu_common.h"
#include "kernels/pool_geometry.h"

/* The window is 2-D (leading lifted dim of size 1) without dilation. */
static inline bool ot_cpu_pool_plain2d(const ot_window3 *p) {
    return p->in[0] == 1 && p->out[0] == 1 && p->k[0] == 1 && p->pb[0] == 0 && p->d[1] == 1 && p->d[2] == 1;
}

/* The window [ha, hb) x [wa, wb) walked in order: the first maximum, or the first NaN
 * (ot_pool_window_argmax's rule). */
static inline int64_t ot_cpu_pool_argmax_ordered(const float *xp, int64_t W, int64_t ha, int64_t hb, int64_t wa,
                                                 int64_t wb, float *best_out) {
    float best = -INFINITY;
    int64_t bi = -1;
    for (int64_t h = ha; h < hb; h++)
        for (int64_t w = wa; w < wb; w++)
            if (ot_pool_argmax_take(xp[h * W + w], h * W + w, &best, &bi)) { /* a NaN: the walk stops */
                *best_out = best;
                return bi;
            }
    *best_out = best;
    return bi;
}

/* ot_pool_window_argmax of output (o1, o2) for a plain 2-D window. Without a branch
 * per tap: the ordered walk's `v > best` was a mispredicted branch on most taps (the
 * stem pool of ResNet-18 took 4 ms of a 100 ms step forward and again in the grad).
 * From the first tap, `v > best` selects the value and the index (strict, so the
 * first of equal values, -0 and +0 included, stays): the ordered walk's result while
 * no tap after the first is NaN; a NaN first tap stays too (every compare with it is
 * false). Where a later tap is NaN, the ordered walk decides. */
static inline int64_t ot_cpu_pool_argmax2d(const ot_window3 *p, const float *xp, int64_t o1, int64_t o2,
                                           float *best_out) {
    int64_t h0 = o1 * p->s[1] - p->pb[1], w0 = o2 * p->s[2] - p->pb[2], W = p->in[2];
    int64_t ha = h0 < 0 ? 0 : h0, hb = h0 + p->k[1] < p->in[1] ? h0 + p->k[1] : p->in[1];
    int64_t wa = w0 < 0 ? 0 : w0, wb = w0 + p->k[2] < W ? w0 + p->k[2] : W;
    if (ha >= hb || wa >= wb) {
        *best_out = -INFINITY;
        return -1;
    }
    int64_t bi = ha * W + wa;
    float best = xp[bi];
    bool nan = false;
    for (int64_t h = ha; h < hb; h++)
        for (int64_t w = h == ha ? wa + 1 : wa; w < wb; w++) {
            int64_t ii = h * W + w;
            float v = xp[ii];
            bool gt = v > best;
            nan |= v != v;
            best = gt ? v : best;
            bi = gt ? ii : bi;
        }
    if (nan) return ot_cpu_pool_argmax_ordered(xp, W, ha, hb, wa, wb, best_out);
    *best_out = best;
    return bi;
}

#endif
