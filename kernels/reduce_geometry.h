/* reduce_geometry.h — which dims ReduceMean / ReduceSum reduce, from the typed params
 * (ir/op_params.h: axes, noop_with_empty_axes) or the axes the kernel read from the
 * optional input (opset 18: host data on the CPU, a device copy on CUDA), in one place
 * for both backends (cpu_reduce.c, cuda_reduce.cu); and the host-side checks of issue
 * 26's reductions (cpu_reduce_ext.c, cuda_reduce_ext.cu), whose element rules are in
 * kernels/reduce_ext.h. */
#ifndef OT_KERNELS_REDUCE_GEOMETRY_H
#define OT_KERNELS_REDUCE_GEOMETRY_H

#include <stdbool.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif
#include "ir.h"
#include "kernels/kernel_common.h"

struct ot_rx_geom;

/* The axes attribute of a Reduce node (NULL, 0 when absent), for the kernel to decide
 * whether to read input 1 instead. */
ot_status ot_reduce_attr_axes(const ot_node *node, const int64_t **axes, int *n, ot_error *err);

/* red[d] for d < rank: whether dim d is reduced. No axes (NULL or n == 0): every dim,
 * or, with noop_with_empty_axes, none and *noop true (the node copies its input).
 * OT_E_MODEL "axis out of range" naming the node. */
ot_status ot_reduce_dims(const ot_node *node, const int64_t *axes, int n, int rank, bool *red, bool *noop,
                         ot_error *err);

/* Reads an integer tensor to the host (at most max values into v, *n of them): the
 * CPU reads its data in place, the CUDA module copies it from the device. */
typedef ot_status (*ot_kernel_read_ints_fn)(void *user, const ot_tensor *t, int64_t *v, int max, int *n, ot_error *err);

/* The reduced dims of issue 26's reductions over xs: the axes attribute, else input
 * axes_slot (opset 18) when given and not empty, read through `read` (more than
 * OT_MAX_RANK values: OT_E_MODEL naming the node), else every dim (none with
 * noop_with_empty_axes); then as ot_reduce_dims. */
ot_status ot_reduce_ext_dims(const ot_node *node, const ot_tensor *in, int axes_slot, const ot_shape *xs,
                             ot_kernel_read_ints_fn read, void *user, bool *red, bool *noop, ot_error *err);

/* The reduction mode of a ReduceMax .. ReduceSumSquare node or its ReduceGrad
 * (OT_RMODE_*): OT_E_MODEL naming the node and the mode when unknown. */
ot_status ot_reduce_ext_mode(const ot_node *node, int *mode, ot_error *err);

/* ArgMax / ArgMin's checks and geometry for both backends: X float32, int64 or int32
 * and Y int64 (else `bad`, the backend's dtype error), the axis in range and not
 * empty, Y of the reduced size; *g over that one axis, *is_max (ArgMax) and *last
 * (select_last_index). */
ot_status ot_reduce_arg_geom(const ot_node *node, const ot_tensor *in, const ot_tensor *out,
                             ot_kernel_bad_dtype_fn bad, struct ot_rx_geom *g, int *is_max, int *last,
                             ot_error *err);

#ifdef __cplusplus
}
#endif

#endif
