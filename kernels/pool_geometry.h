/* pool_geometry.h — the window rules of Conv, MaxPool, AveragePool and their
 * gradients, in one place for the CPU kernels (cpu_conv.c, grad_conv.c, cpu_pool.c,
 * grad_pool.c) and the CUDA host code and kernels (cuda_blas.c, cuda_pool.cu):
 *  - the window itself (ot_window): spatial rank, kernel, strides, dilations and
 *    pads resolved from the typed params (ir/op_params.h; auto_pad included) and the
 *    input/output sizes.
 *  - the window as 3-D: kernel_shape, strides, dilations and pads (auto_pad included,
 *    through ot_window_init) with leading dims of 1 for 1-D and 2-D pools (the
 *    CPU convolution gradients, grad_conv.c, lift their window the same way). Output
 *    sizes come from shape inference, so ceil_mode only shows as windows that hang over
 *    the padded input; they are clipped.
 *  - MaxPool's argmax: the first maximum in window order; NaN wins, as in PyTorch.
 *  - AveragePool's mean: the window's input positions summed in window order, over
 *    the divisor. The divisor: count_include_pad=1 counts the whole kernel, also where a
 *    ceil_mode window hangs past the end pad (the ONNX reference pads the input that
 *    far); count_include_pad=0 counts the window positions inside the input (PyTorch
 *    exports only this, with an explicit Pad).
 * The small rules are inline and __host__ __device__ under nvcc, so the GPU kernels
 * run the very code the CPU runs. */
#ifndef OT_KERNELS_POOL_GEOMETRY_H
#define OT_KERNELS_POOL_GEOMETRY_H

#include <math.h>
#include <stdbool.h>
#include <stdint.h>

#ifdef __CUDACC__
#define OT_POOL_FN static inline __host__ __device__
#else
#define OT_POOL_FN static inline
#endif

#ifdef __cplusplus
extern "C" {
#endif
#include "ir.h"

/* in/out: spatial sizes; k kernel, s strides, d dilations, pb/pe begin/end pads;
 * in_sz/out_sz: elements of one input/output plane; planes = N * C (pools). */
typedef struct ot_window3 {
    int64_t in[3], out[3], k[3], s[3], d[3], pb[3], pe[3];
    int64_t planes, in_sz, out_sz;
    /* pools only (ot_pool_window_init): count_include_pad, storage_order */
    bool include_pad, col_major;
} ot_window3;

/* A conv / pool window: spatial rank (1..3), kernel, strides, dilations and begin /
 * end pads per spatial dim. */
typedef struct ot_window {
    int nd;
    int64_t in[3], out[3], k[3], stride[3], dil[3], pad_begin[3], pad_end[3];
    int group; /* Conv's attribute (1 when absent), range-checked when resolved */
} ot_window;
/* x, y: NC... shapes; kernel: spatial kernel sizes (from W or attribute). OT_E_MODEL
 * for non-positive kernel, strides or dilations; OT_E_UNSUPPORTED outside 1-D..3-D. */
ot_status ot_window_init(ot_window *w, const ot_node *node, const ot_shape *x, const ot_shape *y,
                         const int64_t *kernel, ot_error *err);
/* The 3-D form of w: the spatial fields, in_sz, out_sz. */
void ot_window3_lift(ot_window3 *p, const ot_window *w);
/* The window of pool node `node` from input x (N, C, spatial...) to output y (the
 * output of a pool, or dY of its gradient): OT_E_MODEL for a missing or misshapen
 * kernel_shape, OT_E_SHAPE when y's N, C differ from x's. */
ot_status ot_pool_window_init(ot_window3 *p, const ot_node *node, const ot_tensor *x, const ot_tensor *y,
                              ot_error *err);

#ifdef __cplusplus
}
#endif

/* One tap of the ordered argmax walk (ot_pool_window_argmax's rule: the first maximum,
 * or the first NaN): takes v at index ii when it is the first tap, larger, or NaN;
 * true when the walk stops there (a NaN). */
OT_POOL_FN bool ot_pool_argmax_take(float v, int64_t ii, float *best, int64_t *bi) {
    if (*bi < 0 || v > *best || isnan(v)) {
        *best = v;
        *bi = ii;
        return isnan(v);
    }
    return false;
}

/* Argmax of output o over plane xp: the flat spatial index (-1 when the window holds
 * no input position), its value in *best. */
OT_POOL_FN int64_t ot_pool_window_argmax(const ot_window3 *p, const float *xp, int64_t o, float *best_out) {
    int64_t o2 = o % p->out[2], o1 = (o / p->out[2]) % p->out[1], o0 = o / (p->out[2] * p->out[1]);
    float best = -INFINITY;
    int64_t bi = -1;
    for (int64_t a = 0; a < p->k[0]; a++) {
        int64_t i0 = o0 * p->s[0] - p->pb[0] + a * p->d[0];
        if (i0 < 0 || i0 >= p->in[0]) continue;
        for (int64_t b = 0; b < p->k[1]; b++) {
            int64_t i1 = o1 * p->s[1] - p->pb[1] + b * p->d[1];
            if (i1 < 0 || i1 >= p->in[1]) continue;
            for (int64_t c = 0; c < p->k[2]; c++) {
                int64_t i2 = o2 * p->s[2] - p->pb[2] + c * p->d[2];
                if (i2 < 0 || i2 >= p->in[2]) continue;
                int64_t ii = (i0 * p->in[1] + i1) * p->in[2] + i2;
                if (ot_pool_argmax_take(xp[ii], ii, &best, &bi)) { /* a NaN: the walk stops */
                    *best_out = best;
                    return bi;
                }
            }
        }
    }
    *best_out = best;
    return bi;
}

/* MaxPool's Indices value for argmax bi (from ot_pool_window_argmax) of plane pl: -1
 * for an empty window, else the offset into the whole input, pl * in_sz + spatial
 * index. col_major (storage_order 1) counts the spatial dims first-fastest, as ONNX
 * Runtime does; the leading size-1 dims of 1-D/2-D pools drop out (2-D: h + w * H). */
OT_POOL_FN int64_t ot_pool_window_index(const ot_window3 *p, int64_t pl, int64_t bi, bool col_major) {
    if (bi < 0) return -1;
    int64_t sp = bi;
    if (col_major) {
        int64_t i2 = bi % p->in[2], i1 = (bi / p->in[2]) % p->in[1], i0 = bi / (p->in[2] * p->in[1]);
        sp = i0 + i1 * p->in[0] + i2 * p->in[0] * p->in[1];
    }
    return pl * p->in_sz + sp;
}

/* Divisor of output o of an AveragePool (0 when the window holds no input position
 * and include_pad is off). */
OT_POOL_FN int64_t ot_pool_window_divisor(const ot_window3 *p, int64_t o, bool include_pad) {
    if (include_pad) return p->k[0] * p->k[1] * p->k[2];
    int64_t oi[3] = {o / (p->out[2] * p->out[1]), (o / p->out[2]) % p->out[1], o % p->out[2]};
    int64_t n = 1;
    for (int dd = 0; dd < 3; dd++) {
        int64_t cnt = 0;
        for (int64_t a = 0; a < p->k[dd]; a++) {
            int64_t i = oi[dd] * p->s[dd] - p->pb[dd] + a * p->d[dd];
            if (i >= 0 && i < p->in[dd]) cnt++;
        }
        n *= cnt;
    }
    return n;
}

/* AveragePool's output o over plane xp (0 for a window without input positions). */
OT_POOL_FN float ot_pool_window_mean(const ot_window3 *p, const float *xp, int64_t o, bool include_pad) {
    int64_t o2 = o % p->out[2], o1 = (o / p->out[2]) % p->out[1], o0 = o / (p->out[2] * p->out[1]);
    float s = 0.0f;
    for (int64_t a = 0; a < p->k[0]; a++) {
        int64_t i0 = o0 * p->s[0] - p->pb[0] + a * p->d[0];
        if (i0 < 0 || i0 >= p->in[0]) continue;
        for (int64_t b = 0; b < p->k[1]; b++) {
            int64_t i1 = o1 * p->s[1] - p->pb[1] + b * p->d[1];
            if (i1 < 0 || i1 >= p->in[1]) continue;
            for (int64_t c = 0; c < p->k[2]; c++) {
                int64_t i2 = o2 * p->s[2] - p->pb[2] + c * p->d[2];
                if (i2 < 0 || i2 >= p->in[2]) continue;
                s += xp[(i0 * p->in[1] + i1) * p->in[2] + i2];
            }
        }
    }
    int64_t div = ot_pool_window_divisor(p, o, include_pad);
    return div > 0 ? s / (float)div : 0.0f;
}

#endif
