/* loss_geometry.h — the class losses' shapes and options (SoftmaxCrossEntropyLoss,
 * NegativeLogLikelihoodLoss and, on the CUDA side, their gradients), from the typed
 * params (ir/op_params.h), in one place for the CPU kernels (cpu_reduce.c) and the
 * CUDA host code and kernels (cuda_loss.cu): scores [N, C, D...] flattened to D after
 * the class axis, M = N x D samples, the ignored label and the reduction. */
#ifndef OT_KERNELS_LOSS_GEOMETRY_H
#define OT_KERNELS_LOSS_GEOMETRY_H

#include <stdbool.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif
#include "ir.h"

typedef struct ot_loss_geometry {
    int64_t N, C, D, M;
    bool has_ignore;
    int64_t ignore;
    int reduction; /* 0 none, 1 sum, 2 mean */
} ot_loss_geometry;

/* s: the scores' shape; labels: [N, D...]. OT_E_SHAPE for shapes that disagree,
 * OT_E_MODEL for an unknown reduction, naming the node. */
ot_status ot_loss_geometry_init(ot_loss_geometry *g, const ot_node *node, const ot_shape *s, const ot_tensor *labels,
                                ot_error *err);

/* The element-wise losses (MSE's siblings BceWithLogitsLoss and L1Loss): the targets t
 * and, when given, the gradient dx have as many elements as the prediction x; else
 * OT_E_DATA naming the node. Both backends check through this. */
ot_status ot_loss_pair_check(const ot_node *node, const ot_tensor *x, const ot_tensor *t, const ot_tensor *dx,
                             ot_error *err);

#ifdef __cplusplus
}
#endif

#endif
