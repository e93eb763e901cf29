/* norm_geometry.c — normalisation shapes from typed params (see norm_geometry.h). */
#include "kernels/norm_geometry.h"

#include "kernels/kernel_common.h"

ot_status ot_softmax_geometry_init(ot_softmax_geometry *g, const ot_node *node, const ot_shape *s, ot_error *err) {
    ot_op_params scratch;
    const ot_op_params *pp;
    ot_status st = ot_node_params(node, &scratch, &pp, err);
    if (st) return st;
    int r = s->rank;
    bool legacy = pp->u.norm.legacy_2d;
    int axis = ot_kernel_axis(pp->u.norm.axis, r);
    if (axis < 0) return ot_fail(err, OT_E_MODEL, "node '%s' (%s): axis out of range", node->name, node->op_type);
    int64_t outer = 1, len = 1, inner = 1;
    for (int d = 0; d < axis; d++) outer *= s->dim[d];
    if (legacy) {
        for (int d = axis; d < r; d++) len *= s->dim[d];
    } else {
        len = s->dim[axis];
        for (int d = axis + 1; d < r; d++) inner *= s->dim[d];
    }
    g->outer = outer;
    g->len = len;
    g->inner = inner;
    g->lines = outer * inner;
    return OT_OK;
}

bool ot_layer_norm_view(const ot_node *node, const ot_shape *x, int64_t *rows, int64_t *cols) {
    ot_op_params scratch;
    const ot_op_params *pp;
    ot_error ignored;
    if (ot_node_params(node, &scratch, &pp, &ignored) != OT_OK) return false;
    int axis = ot_kernel_axis(pp->u.norm.axis, x->rank);
    if (axis < 0) return false;
    *rows = 1;
    *cols = 1;
    for (int d = 0; d < x->rank; d++) *(d < axis ? rows : cols) *= x->dim[d];
    return true;
}

void ot_batch_norm_dims(const ot_shape *x, int64_t *N, int64_t *C, int64_t *S) {
    *N = x->dim[0];
    *C = x->dim[1];
    *S = 1;
    for (int d = 2; d < x->rank; d++) *S *= x->dim[d];
}

ot_status ot_layer_norm_args_init(ot_layer_norm_args *a, const ot_node *node, const ot_tensor *in,
                                  const ot_tensor *out, ot_error *err) {
    ot_op_params scratch;
    const ot_op_params *pp;
    ot_status st = ot_node_params(node, &scratch, &pp, err);
    if (st) return st;
    if (!ot_layer_norm_view(node, &in[0].shape, &a->rows, &a->cols))
        return ot_fail(err, OT_E_MODEL, "node '%s' (LayerNormalization): axis out of range", node->name);
    a->eps = pp->u.norm.epsilon;
    a->has_bias = node->n_inputs > 2 && in[2].data;
    int64_t ns = ot_kernel_numel(&in[1]), nb = a->has_bias ? ot_kernel_numel(&in[2]) : a->cols;
    if ((ns != a->cols && ns != 1) || (nb != a->cols && nb != 1))
        return ot_fail(err, OT_E_SHAPE, "node '%s' (LayerNormalization): Scale/B must have %lld elements", node->name,
                       (long long)a->cols);
    a->scale_step = ns == 1 ? 0 : 1;
    a->bias_step = nb == 1 ? 0 : 1;
    bool has_mean = node->n_outputs > 1 && out[1].data, has_inv = node->n_outputs > 2 && out[2].data;
    if ((has_mean && ot_kernel_numel(&out[1]) != a->rows) || (has_inv && ot_kernel_numel(&out[2]) != a->rows))
        return ot_fail(err, OT_E_SHAPE, "node '%s' (LayerNormalization): Mean/InvStdDev must have %lld elements",
                       node->name, (long long)a->rows);
    return OT_OK;
}
