/* reduce_geometry.h — which dims ReduceMean / ReduceSum reduce, from the typed params
 * (ir/op_params.h: axes, noop_with_empty_axes) or the axes the kernel read from the
 * optional input (opset 18: host data on the CPU, a device copy on CUDA), in one place
 * for both backends (cpu_reduce.c, cuda_reduce.cu). */
#ifndef OT_KERNELS_REDUCE_GEOMETRY_H
#define OT_KERNELS_REDUCE_GEOMETRY_H

#include <stdbool.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif
#include "ir.h"

/* The axes attribute of a Reduce node (NULL, 0 when absent), for the kernel to decide
 * whether to read input 1 instead. */
ot_status ot_reduce_attr_axes(const ot_node *node, const int64_t **axes, int *n, ot_error *err);

/* red[d] for d < rank: whether dim d is reduced. No axes (NULL or n == 0): every dim,
 * or, with noop_with_empty_axes, none and *noop true (the node copies its input).
 * OT_E_MODEL "axis out of range" naming the node. */
ot_status ot_reduce_dims(const ot_node *node, const int64_t *axes, int n, int rank, bool *red, bool *noop,
                         ot_error *err);

#ifdef __cplusplus
}
#endif

#endif
