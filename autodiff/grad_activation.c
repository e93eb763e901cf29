/* grad_activation.c — gradient rules of issue 26's pointwise ops. Elu, Selu and Celu
 * share one backward op, EluGrad, given PyTorch's elu_backward parameters (alpha,
 * scale, input_scale) as attributes; ThresholdedRelu and Softsign have a backward op
 * each; PRelu's PReluGrad gives dX and the slope's per-element share, which is summed
 * to the slope's shape like any broadcast input's gradient.
 *
 * Sign, Floor, Ceil and Round are piecewise constant: their derivative is 0 wherever
 * it exists, and PyTorch's autograd returns zeros through them. Their rule emits
 * nothing, so no gradient flows back through them (a parameter reached only through
 * one gets ZerosLike, the zeros PyTorch reports) and no backward node is spent on it. */
#include "autodiff/grad_rules.h"

/* (dY, X) -> dX through op, shaped like X; returns the node through *node_out. */
static int x_grad(ot_grad_ctx *c, const ot_node *n, ot_op op, int dy, int *node_out) {
    int in[2] = {dy, n->inputs[0]};
    ot_shape s = ot_gb_shape(c, n->inputs[0]);
    return ot_gb_op_s(c, op, in, 2, ot_gb_dtype(c, n->inputs[0]), &s, node_out);
}

/* EluGrad with the forward node's resolved parameters written out as attributes, so
 * the backward op computes negcoef and input_scale from the same floats. */
static ot_status elu(ot_grad_ctx *c, const ot_node *n, int dy) {
    ot_op_params scratch;
    const ot_op_params *pp;
    ot_status st = ot_node_params(n, &scratch, &pp, c->err);
    if (st) return st;
    int node = -1;
    int g = x_grad(c, n, OT_OP_ELU_GRAD, dy, &node);
    ot_gb_set_float(c, node, "alpha", pp->u.unary.alpha);
    ot_gb_set_float(c, node, "scale", pp->u.unary.scale);
    ot_gb_set_float(c, node, "input_scale", pp->u.unary.input_scale);
    ot_gb_add(c, n->inputs[0], g);
    return OT_OK;
}

/* PRelu: PReluGrad(dY, X, slope) for X (index 0) and for the slope (index 1), each
 * shaped like Y and reduced to its input's shape. */
static void prelu(ot_grad_ctx *c, const ot_node *n, int dy) {
    int in[3] = {dy, n->inputs[0], n->inputs[1]};
    ot_shape ys = ot_gb_shape(c, n->outputs[0]);
    for (int k = 0; k < 2; k++) {
        if (!ot_gb_needs(c, n->inputs[k])) continue;
        int node = -1;
        int g = ot_gb_op_s(c, OT_OP_PRELU_GRAD, in, 3, ot_gb_dtype(c, n->outputs[0]), &ys, &node);
        ot_gb_set_int(c, node, "index", k);
        ot_gb_add_like(c, n->inputs[k], g, &ys);
    }
}

ot_status ot_grad_activation(ot_grad_ctx *c, const ot_node *n, const int *dyv) {
    int dy = dyv[0], node = -1;
    if (dy < 0) return OT_OK;
    switch (n->op) {
    case OT_OP_ELU:
    case OT_OP_SELU:
    case OT_OP_CELU: return elu(c, n, dy);
    case OT_OP_THRESHOLDED_RELU: {
        int g = x_grad(c, n, OT_OP_THRESHOLDED_RELU_GRAD, dy, &node);
        ot_gb_copy_attrs(c, node, n);
        ot_gb_add(c, n->inputs[0], g);
        return OT_OK;
    }
    case OT_OP_SOFTSIGN: ot_gb_add(c, n->inputs[0], x_grad(c, n, OT_OP_SOFTSIGN_GRAD, dy, &node)); return OT_OK;
    case OT_OP_PRELU: prelu(c, n, dy); return OT_OK;
    case OT_OP_SIGN:
    case OT_OP_FLOOR:
    case OT_OP_CEIL:
    case OT_OP_ROUND: return OT_OK; /* zero gradient: nothing flows back (see above) */
    default:
        return ot_fail(c->err, OT_E_UNSUPPORTED, "autodiff: node '%s': no gradient rule for %s", n->name,
                       n->op_type);
    }
}
