/* linear_ce_geometry.c — the chunked cross-entropy's geometry (see linear_ce_geometry.h). */
#include "kernels/linear_ce_geometry.h"

#include "kernels/kernel_common.h"

ot_status ot_linear_ce_geometry_init(ot_linear_ce_geometry *g, const ot_node *node, const ot_tensor *in,
                                     ot_error *err) {
    ot_op_params scratch;
    const ot_op_params *pp;
    ot_status st = ot_node_params(node, &scratch, &pp, err);
    if (st) return st;
    const ot_loss_params *lp = &pp->u.loss;
    if (lp->reduction != OT_REDUCTION_MEAN)
        return ot_fail(err, OT_E_MODEL, "node '%s' (%s): reduction '%s'; only mean is supported", node->name,
                       node->op_type, lp->reduction_name);
    const ot_shape *hs = &in[0].shape, *ws = &in[1].shape;
    g->trans_w = lp->trans_w;
    g->has_ignore = lp->has_ignore_index;
    g->ignore = lp->ignore_index;
    g->chunk = lp->chunk_rows;
    bool grad = node->op == OT_OP_LINEAR_CROSS_ENTROPY_GRAD;
    int bias_slot = grad ? 4 : 3;
    g->has_bias = node->n_inputs > bias_slot && node->inputs[bias_slot] >= 0;
    if (hs->rank < 1 || ws->rank != 2)
        return ot_fail(err, OT_E_SHAPE, "node '%s' (%s): hidden states must have rank >= 1 and the weight 2 dims",
                       node->name, node->op_type);
    g->D = hs->dim[hs->rank - 1];
    g->V = ws->dim[g->trans_w ? 0 : 1];
    g->rows = g->D > 0 ? ot_kernel_numel(&in[0]) / g->D : 0;
    if (ws->dim[g->trans_w ? 1 : 0] != g->D || ot_kernel_numel(&in[2]) != g->rows ||
        (g->has_bias && ot_kernel_numel(&in[3]) != g->V))
        return ot_fail(err, OT_E_SHAPE,
                       "node '%s' (%s): hidden [%lld rows, %lld], weight [%lld, %lld], %lld labels%s do not agree",
                       node->name, node->op_type, (long long)g->rows, (long long)g->D, (long long)ws->dim[0],
                       (long long)ws->dim[1], (long long)ot_kernel_numel(&in[2]), g->has_bias ? " and the bias" : "");
    if (g->chunk > g->rows) g->chunk = g->rows;
    if (g->chunk < 1) g->chunk = 1;
    return OT_OK;
}

size_t ot_linear_ce_workspace_bytes(const ot_node *node, const ot_tensor *in) {
    ot_linear_ce_geometry g;
    bool grad = node->op == OT_OP_LINEAR_CROSS_ENTROPY_GRAD;
    if (ot_linear_ce_geometry_init(&g, node, grad ? in + 1 : in, NULL) != OT_OK) return 0;
    return ot_linear_ce_doubles_offset(&g) + (size_t)(g.chunk * 2 + 2) * sizeof(double);
}

size_t ot_linear_ce_doubles_offset(const ot_linear_ce_geometry *g) {
    size_t fl = (size_t)(g->chunk * g->V) * sizeof(float);
    return (fl + sizeof(double) - 1) / sizeof(double) * sizeof(double);
}
