/* linear_ce_geometry.h — the chunked cross-entropy's shapes and options
 * (LinearCrossEntropy and its gradient, issue 28), from the typed params, in one place
 * for the CPU kernels (cpu/cpu_linear_ce.c) and the CUDA host code: H as [rows, D], W
 * [D, V] or [V, D] (trans_w), the chunk of rows, the ignored label, and the workspace
 * both backends ask for (one chunk of logits, then of their gradient, in place). */
#ifndef OT_KERNELS_LINEAR_CE_GEOMETRY_H
#define OT_KERNELS_LINEAR_CE_GEOMETRY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif
#include "ir.h"

typedef struct ot_linear_ce_geometry {
    int64_t rows, D, V, chunk;
    bool trans_w, has_bias, has_ignore;
    int64_t ignore;
} ot_linear_ce_geometry;

/* in: the node's inputs from H on (the gradient's in + 1). OT_E_SHAPE naming the node
 * when the shapes disagree, OT_E_MODEL for a reduction other than mean. */
ot_status ot_linear_ce_geometry_init(ot_linear_ce_geometry *g, const ot_node *node, const ot_tensor *in, ot_error *err);

/* chunk x V floats of logits, then 2 chunk + 2 doubles: each row's (loss, counted) and
 * the running totals (the CUDA kernels keep them on the device). 0 when the node is
 * malformed. */
size_t ot_linear_ce_workspace_bytes(const ot_node *node, const ot_tensor *in);
/* Where the per-row doubles start in that workspace: after chunk x V floats, rounded
 * up to 8 bytes (an odd chunk x V would leave them misaligned). */
size_t ot_linear_ce_doubles_offset(const ot_linear_ce_geometry *g);

/* The gradient's output k (dH, dW, dBias) when the node has it, else NULL. */
static inline void *ot_linear_ce_grad_out(const ot_node *node, ot_tensor *out, int k) {
    if (node->n_outputs <= k || (node->outputs && node->outputs[k] < 0)) return NULL;
    return out[k].data;
}

#ifdef __cplusplus
}
#endif

#endif
