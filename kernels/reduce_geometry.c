/* reduce_geometry.c — the reduced dims of ReduceMean / ReduceSum and the host-side
 * checks of issue 26's reductions (see reduce_geometry.h). */
#include "kernels/reduce_geometry.h"

#include "kernels/kernel_common.h"
#include "kernels/reduce_ext.h"

ot_status ot_reduce_attr_axes(const ot_node *node, const int64_t **axes, int *n, ot_error *err) {
    ot_op_params scratch;
    const ot_op_params *pp;
    ot_status st = ot_node_params(node, &scratch, &pp, err);
    if (st) return st;
    *axes = pp->u.reduce.n_axes >= 0 ? pp->u.reduce.axes : NULL;
    *n = pp->u.reduce.n_axes >= 0 ? pp->u.reduce.n_axes : 0;
    return OT_OK;
}

ot_status ot_reduce_ext_dims(const ot_node *node, const ot_tensor *in, int axes_slot, const ot_shape *xs,
                             ot_kernel_read_ints_fn read, void *user, bool *red, bool *noop, ot_error *err) {
    int na = 0;
    const int64_t *axes;
    ot_status st = ot_reduce_attr_axes(node, &axes, &na, err);
    if (st) return st;
    int64_t in_axes[OT_MAX_RANK];
    if ((!axes || na == 0) && axes_slot >= 0 && node->n_inputs > axes_slot && in[axes_slot].data &&
        ot_kernel_numel(&in[axes_slot]) > 0) {
        if (ot_kernel_numel(&in[axes_slot]) > OT_MAX_RANK)
            return ot_fail(err, OT_E_MODEL, "node '%s' (%s): %lld axes for rank %d", node->name, node->op_type,
                           (long long)ot_kernel_numel(&in[axes_slot]), xs->rank);
        if ((st = read(user, &in[axes_slot], in_axes, OT_MAX_RANK, &na, err))) return st;
        axes = in_axes;
    }
    return ot_reduce_dims(node, axes, na, xs->rank, red, noop, err);
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

ot_status ot_reduce_ext_mode(const ot_node *node, int *mode, ot_error *err) {
    ot_op_params scratch;
    const ot_op_params *pp;
    ot_status st = ot_node_params(node, &scratch, &pp, err);
    if (st) return st;
    *mode = pp->u.reduce.mode;
    if (*mode < OT_RMODE_MAX || *mode > OT_RMODE_SUM_SQUARE)
        return ot_fail(err, OT_E_MODEL, "node '%s' (%s): unknown reduction mode '%s'", node->name, node->op_type,
                       pp->u.reduce.mode_name ? pp->u.reduce.mode_name : "?");
    return OT_OK;
}

ot_status ot_reduce_arg_geom(const ot_node *node, const ot_tensor *in, const ot_tensor *out,
                             ot_kernel_bad_dtype_fn bad, struct ot_rx_geom *g, int *is_max, int *last,
                             ot_error *err) {
    ot_dtype t = in[0].dtype;
    if (t != OT_F32 && t != OT_I64 && t != OT_I32) return bad(node, "input", t, err);
    if (out[0].dtype != OT_I64) return bad(node, "output", out[0].dtype, err);
    ot_op_params scratch;
    const ot_op_params *pp;
    ot_status st = ot_node_params(node, &scratch, &pp, err);
    if (st) return st;
    const ot_shape *xs = &in[0].shape;
    int ax = ot_kernel_axis(pp->u.reduce.axis, xs->rank);
    if (ax < 0)
        return ot_fail(err, OT_E_MODEL, "node '%s' (%s): axis %d out of range for rank %d", node->name, node->op_type,
                       pp->u.reduce.axis, xs->rank);
    if (xs->dim[ax] == 0)
        return ot_fail(err, OT_E_SHAPE, "node '%s' (%s): axis %d is empty: no index to return", node->name,
                       node->op_type, ax);
    bool red[OT_MAX_RANK] = {0};
    red[ax] = true;
    ot_rx_init(g, xs, red);
    if (ot_kernel_numel(&out[0]) != g->n_out)
        return ot_fail(err, OT_E_SHAPE, "node '%s' (%s): output size differs from the reduced shape", node->name,
                       node->op_type);
    *is_max = node->op == OT_OP_ARG_MAX;
    *last = pp->u.reduce.select_last_index;
    return OT_OK;
}
