/* select_geometry.c — the host half of kernels/select_geometry.h. */
#include "kernels/select_geometry.h"

#include "kernels/kernel_common.h"

ot_status ot_topk_geometry(const ot_node *node, const ot_shape *xs, int64_t k, const ot_shape *ys, const ot_shape *is,
                           ot_topk_geom *g, ot_error *err) {
    ot_op_params scratch;
    const ot_op_params *pp;
    ot_status st = ot_node_params(node, &scratch, &pp, err);
    if (st) return st;
    int ax = ot_kernel_axis(pp->u.select.axis, xs->rank);
    if (ax < 0)
        return ot_fail(err, OT_E_MODEL, "node '%s' (%s): axis %d out of range for rank %d", node->name, node->op_type,
                       pp->u.select.axis, xs->rank);
    if (k < 0 || k > xs->dim[ax])
        return ot_fail(err, OT_E_SHAPE, "node '%s' (%s): K = %lld outside [0, %lld], the size of axis %d", node->name,
                       node->op_type, (long long)k, (long long)xs->dim[ax], ax);
    g->outer = g->inner = 1;
    for (int d = 0; d < ax; d++)
        g->outer *= xs->dim[d];
    for (int d = ax + 1; d < xs->rank; d++)
        g->inner *= xs->dim[d];
    g->n = xs->dim[ax];
    g->k = k;
    g->largest = pp->u.select.largest;
    for (int o = 0; o < 2; o++) {
        const ot_shape *s = o ? is : ys;
        bool ok = s->rank == xs->rank;
        for (int d = 0; ok && d < xs->rank; d++)
            ok = s->dim[d] == (d == ax ? k : xs->dim[d]);
        if (!ok)
            return ot_fail(err, OT_E_SHAPE, "node '%s' (%s): output %d is not X's shape with K = %lld on axis %d",
                           node->name, node->op_type, o, (long long)k, ax);
    }
    return OT_OK;
}

ot_status ot_onehot_geometry(const ot_node *node, const ot_shape *is, int64_t depth, const ot_shape *ys,
                             ot_onehot_geom *g, ot_error *err) {
    ot_op_params scratch;
    const ot_op_params *pp;
    ot_status st = ot_node_params(node, &scratch, &pp, err);
    if (st) return st;
    int ax = ot_kernel_axis(pp->u.select.axis, is->rank + 1);
    if (ax < 0)
        return ot_fail(err, OT_E_MODEL, "node '%s' (%s): axis %d out of range for rank %d", node->name, node->op_type,
                       pp->u.select.axis, is->rank + 1);
    if (depth < 1)
        return ot_fail(err, OT_E_MODEL, "node '%s' (%s): depth %lld is not positive", node->name, node->op_type,
                       (long long)depth);
    g->outer = g->inner = 1;
    for (int d = 0; d < ax; d++)
        g->outer *= is->dim[d];
    for (int d = ax; d < is->rank; d++)
        g->inner *= is->dim[d];
    g->depth = depth;
    bool ok = ys->rank == is->rank + 1;
    for (int d = 0; ok && d < ys->rank; d++)
        ok = ys->dim[d] == (d == ax ? depth : is->dim[d < ax ? d : d - 1]);
    if (!ok)
        return ot_fail(err, OT_E_SHAPE, "node '%s' (%s): output is not the indices' shape with depth %lld at axis %d",
                       node->name, node->op_type, (long long)depth, ax);
    return OT_OK;
}
