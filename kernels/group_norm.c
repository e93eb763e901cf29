/* group_norm.c — the geometry of InstanceNormalization / GroupNormalization and their
 * backward op (see group_norm.h), checked once for both backends. */
#include "kernels/group_norm.h"

#include "kernels/kernel_common.h"

ot_status ot_gn_geom_init(ot_gn_geom *g, const ot_node *node, const ot_shape *x, int64_t n_scale, int64_t n_bias,
                          ot_error *err) {
    ot_op_params scratch;
    const ot_op_params *pp;
    ot_status st = ot_node_params(node, &scratch, &pp, err);
    if (st) return st;
    if (x->rank < 2)
        return ot_fail(err, OT_E_SHAPE, "node '%s' (%s): X has rank %d; it needs [N, C, ...]", node->name,
                       node->op_type, x->rank);
    g->N = x->dim[0];
    g->C = x->dim[1];
    g->S = 1;
    for (int d = 2; d < x->rank; d++) g->S *= x->dim[d];
    bool instance = node->op == OT_OP_INSTANCE_NORM || (node->op == OT_OP_GROUP_NORM_GRAD && pp->u.norm.num_groups <= 0);
    g->G = instance ? g->C : pp->u.norm.num_groups;
    if (g->G <= 0 || g->C % g->G != 0)
        return ot_fail(err, OT_E_MODEL, "node '%s' (%s): num_groups %lld does not divide the %lld channels", node->name,
                       node->op_type, (long long)g->G, (long long)g->C);
    g->cpg = g->C / g->G;
    g->M = g->cpg * g->S;
    g->eps = pp->u.norm.epsilon;
    /* per channel (InstanceNormalization, GroupNormalization-21) or per group (-18) */
    g->per_group = n_scale == g->G && g->G != g->C;
    g->n_param = g->per_group ? g->G : g->C;
    if (n_scale != g->n_param || (n_bias >= 0 && n_bias != g->n_param))
        return ot_fail(err, OT_E_SHAPE, "node '%s' (%s): scale has %lld and bias %lld elements; both need C = %lld (or "
                       "num_groups = %lld before opset 21)", node->name, node->op_type, (long long)n_scale,
                       (long long)n_bias, (long long)g->C, (long long)g->G);
    return OT_OK;
}
