/* norm_geometry.h — the shapes the normalisations work on, from the typed params
 * (ir/op_params.h), in one place for the CPU kernels (cpu_norm.c, grad_norm.c,
 * grad_reduce.c) and the CUDA host code (cuda_reduce.cu, cuda_loss.cu):
 *  - Softmax / LogSoftmax and their gradients: `lines` independent lines of `len`
 *    elements `inner` apart (outer x len x inner); with legacy_2d the line is the
 *    flattened [axis, rank) and inner is 1.
 *  - LayerNormalization and LayerNormGrad: a rows x cols view, cols = the dims
 *    [axis, rank).
 *  - BatchNormalization and BatchNormGrad: N, C and the spatial size S. */
#ifndef OT_KERNELS_NORM_GEOMETRY_H
#define OT_KERNELS_NORM_GEOMETRY_H

#include <stdbool.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif
#include "ir.h"

typedef struct ot_softmax_geometry {
    int64_t outer, len, inner, lines;
} ot_softmax_geometry;

/* s: rank >= 1. OT_E_MODEL "axis out of range" naming the node. */
ot_status ot_softmax_geometry_init(ot_softmax_geometry *g, const ot_node *node, const ot_shape *s, ot_error *err);

/* False when the axis is out of range (or the node's params do not resolve). */
bool ot_layer_norm_view(const ot_node *node, const ot_shape *x, int64_t *rows, int64_t *cols);

/* What both backends' LayerNormalization kernels check and derive, once: the rows x
 * cols view, epsilon, Scale and B of cols elements or one (step 1 or 0), Mean and
 * InvStdDev (when present) of rows elements. Dtypes are checked by the callers (their
 * messages name the backend's own dtype rule). OT_E_MODEL / OT_E_SHAPE naming the node. */
typedef struct ot_layer_norm_args {
    int64_t rows, cols;
    float eps;
    int64_t scale_step, bias_step; /* 1: one value per column; 0: one value for all */
    bool has_bias;
} ot_layer_norm_args;
ot_status ot_layer_norm_args_init(ot_layer_norm_args *a, const ot_node *node, const ot_tensor *in,
                                  const ot_tensor *out, ot_error *err);

/* N = dim 0, C = dim 1, S = the product of the rest; x: rank >= 2 (checked by the
 * kernels, whose messages differ). */
void ot_batch_norm_dims(const ot_shape *x, int64_t *N, int64_t *C, int64_t *S);

#ifdef __cplusplus
}
#endif

#endif
