/* loss_geometry.c — the class losses' geometry from typed params (see loss_geometry.h). */
#include "kernels/loss_geometry.h"

#include "kernels/kernel_common.h"

ot_status ot_loss_geometry_init(ot_loss_geometry *g, const ot_node *node, const ot_shape *s, const ot_tensor *labels,
                                ot_error *err) {
    if (s->rank < 2)
        return ot_fail(err, OT_E_SHAPE, "node '%s' (%s): scores must be [N, C, ...]", node->name, node->op_type);
    g->N = s->dim[0];
    g->C = s->dim[1];
    g->D = 1;
    for (int d = 2; d < s->rank; d++) g->D *= s->dim[d];
    g->M = g->N * g->D;
    if (ot_kernel_numel(labels) != g->M)
        return ot_fail(err, OT_E_SHAPE, "node '%s' (%s): labels must be [N, D...] matching scores", node->name,
                       node->op_type);
    ot_op_params scratch;
    const ot_op_params *pp;
    ot_status st = ot_node_params(node, &scratch, &pp, err);
    if (st) return st;
    const ot_loss_params *lp = &pp->u.loss;
    g->has_ignore = lp->has_ignore_index;
    g->ignore = lp->ignore_index;
    switch (lp->reduction) {
    case OT_REDUCTION_NONE: g->reduction = 0; break;
    case OT_REDUCTION_SUM: g->reduction = 1; break;
    case OT_REDUCTION_MEAN: g->reduction = 2; break;
    default:
        return ot_fail(err, OT_E_MODEL, "node '%s' (%s): unknown reduction '%s'", node->name, node->op_type,
                       lp->reduction_name);
    }
    return OT_OK;
}

ot_status ot_loss_pair_check(const ot_node *node, const ot_tensor *x, const ot_tensor *t, const ot_tensor *dx,
                             ot_error *err) {
    int64_t n = ot_kernel_numel(x);
    if (ot_kernel_numel(t) != n || (dx && ot_kernel_numel(dx) != n))
        return ot_fail(err, OT_E_DATA, "node '%s' (%s): the targets have %lld elements, the prediction %lld",
                       node->name, ot_op_name(node->op), (long long)ot_kernel_numel(t), (long long)n);
    return OT_OK;
}
