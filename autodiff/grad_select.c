/* grad_select.c — gradient rules of ops batch 4 (issue 26): Einsum by the equation
 * swap, TopK by scattering dValues to the picked indices.
 *
 * Einsum: dX_k is the Einsum of dY and the other operands onto X_k's labels; one
 * backward op, EinsumGrad (dY, X_0 .. X_n-1) with the forward equation and index k,
 * also sums over the labels X_k alone has (dY broadcast along them, as torch.einsum's
 * backward) and over X_k's broadcast ellipsis dims, and writes only the diagonal of a
 * label X_k repeats (kernels/einsum_geometry.h). X_k itself is read for its shape.
 *
 * TopK: dX = GatherElementsGrad(dValues, Indices, X) along the TopK's axis (ONNX
 * Runtime training's rule and torch.topk's); Indices carry no gradient. */
#include "autodiff/grad_rules.h"
#include "ir/einsum.h"

static ot_status grad_einsum(ot_grad_ctx *c, const ot_node *n, int dy) {
    int in[OT_EIN_MAX_IN + 1];
    if (n->n_inputs > OT_EIN_MAX_IN)
        return ot_fail(c->err, OT_E_UNSUPPORTED, "autodiff: node '%s' (Einsum): %d operands (at most %d)", n->name,
                       n->n_inputs, OT_EIN_MAX_IN);
    in[0] = dy;
    for (int k = 0; k < n->n_inputs; k++)
        in[1 + k] = n->inputs[k];
    for (int k = 0; k < n->n_inputs; k++) {
        int x = n->inputs[k];
        if (!ot_gb_needs(c, x)) continue;
        ot_shape xs = ot_gb_shape(c, x);
        int node = -1;
        int g = ot_gb_op_s(c, OT_OP_EINSUM_GRAD, in, n->n_inputs + 1, ot_gb_dtype(c, x), &xs, &node);
        ot_gb_set_string(c, node, "equation", ot_node_attr_string(n, "equation", ""));
        ot_gb_set_int(c, node, "index", k);
        ot_gb_add(c, x, g);
    }
    return OT_OK;
}

static ot_status grad_top_k(ot_grad_ctx *c, const ot_node *n, int dy) {
    int x = n->inputs[0];
    if (!ot_gb_needs(c, x)) return OT_OK;
    ot_shape xs = ot_gb_shape(c, x);
    if (xs.rank < 0)
        return ot_fail(c->err, OT_E_SHAPE, "autodiff: node '%s' (TopK): its gradient needs a known rank", n->name);
    int64_t axis = ot_node_attr_int(n, "axis", -1);
    if (axis < 0) axis += xs.rank;
    int in[3] = {dy, n->outputs[1], x}, node = -1;
    int g = ot_gb_op_s(c, OT_OP_GATHER_ELEMENTS_GRAD, in, 3, ot_gb_dtype(c, x), &xs, &node);
    ot_gb_set_int(c, node, "axis", axis);
    ot_gb_add(c, x, g);
    return OT_OK;
}

ot_status ot_grad_select(ot_grad_ctx *c, const ot_node *n, const int *dy) {
    if (dy[0] < 0) return OT_OK; /* nothing flows back to the values */
    if (n->op == OT_OP_EINSUM) return grad_einsum(c, n, dy[0]);
    if (n->op == OT_OP_TOP_K) return grad_top_k(c, n, dy[0]);
    return ot_fail(c->err, OT_E_INTERNAL, "autodiff: node '%s': no rule for %s in grad_select.c", n->name, n->op_type);
}
