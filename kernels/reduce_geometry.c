/* reduce_geometry.c — the reduced dims of ReduceMean / ReduceSum (see reduce_geometry.h). */
#include "kernels/reduce_geometry.h"

#include "kernels/kernel_common.h"

ot_status ot_reduce_attr_axes(const ot_node *node, const int64_t **axes, int *n, ot_error *err) {
    ot_op_params scratch;
    const ot_op_params *pp;
    ot_status st = ot_node_params(node, &scratch, &pp, err);
    if (st) return st;
    *axes = pp->u.reduce.n_axes >= 0 ? pp->u.reduce.axes : NULL;
    *n = pp->u.reduce.n_axes >= 0 ? pp->u.reduce.n_axes : 0;
    return OT_OK;
}

ot_status ot_reduce_dims(const ot_node *node, const int64_t *axes, int n, int rank, bool *red, bool *noop,
                         ot_error *err) {
    ot_op_params scratch;
    const ot_op_params *pp;
    ot_status st = ot_node_params(node, &scratch, &pp, err);
    if (st) return st;
    *noop = false;
    for (int d = 0; d < rank; d++) red[d] = false;
    if (!axes || n == 0) {
        if (pp->u.reduce.noop_with_empty_axes) {
            *noop = true;
            return OT_OK;
        }
        for (int d = 0; d < rank; d++) red[d] = true;
        return OT_OK;
    }
    for (int i = 0; i < n; i++) {
        int a = ot_kernel_axis(axes[i], rank);
        if (a < 0) return ot_fail(err, OT_E_MODEL, "node '%s' (%s): axis out of range", node->name, node->op_type);
        red[a] = true;
    }
    return OT_OK;
}
