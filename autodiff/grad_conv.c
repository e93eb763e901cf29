/* grad_conv.c — gradient rule of Conv: ConvGradInput (dY, W, X) -> dX and
 * ConvGradWeight (dY, X, W) -> dW with the Conv's attributes, and the bias gradient
 * as a ReduceSum of dY over every axis but the channel. */
#include "autodiff/grad_rules.h"

ot_status ot_grad_conv(ot_grad_ctx *c, const ot_node *n, const int *dyv) {
    if (n->op != OT_OP_CONV)
        return ot_fail(c->err, OT_E_UNSUPPORTED, "autodiff: node '%s': no gradient rule for %s", n->name, n->op_type);
    int dy = dyv[0], x = n->inputs[0], w = n->inputs[1], b = n->n_inputs > 2 ? n->inputs[2] : -1;
    if (ot_gb_needs(c, x)) {
        int in[3] = {dy, w, x}, node = -1;
        ot_shape s = ot_gb_shape(c, x);
        int out = ot_gb_op_s(c, OT_OP_CONV_GRAD_INPUT, in, 3, ot_gb_dtype(c, x), &s, &node);
        ot_gb_copy_attrs(c, node, n);
        ot_gb_add(c, x, out);
    }
    if (ot_gb_needs(c, w)) {
        int in[3] = {dy, x, w}, node = -1;
        ot_shape s = ot_gb_shape(c, w);
        int out = ot_gb_op_s(c, OT_OP_CONV_GRAD_WEIGHT, in, 3, ot_gb_dtype(c, w), &s, &node);
        ot_gb_copy_attrs(c, node, n);
        ot_gb_add(c, w, out);
    }
    if (ot_gb_needs(c, b)) {
        ot_shape ys = ot_gb_shape(c, dy);
        if (ys.rank < 2)
            return ot_fail(c->err, OT_E_SHAPE, "autodiff: Conv '%s': output rank unknown; run shape inference first",
                           n->name);
        int64_t axes[OT_MAX_RANK];
        int na = 0;
        for (int i = 0; i < ys.rank; i++)
            if (i != 1) axes[na++] = i;
        int node = -1;
        ot_shape bs = ot_gb_shape(c, b);
        int out = ot_gb_op_s(c, OT_OP_REDUCE_SUM, &dy, 1, ot_gb_dtype(c, b), &bs, &node);
        ot_gb_set_ints(c, node, "axes", axes, na);
        ot_gb_set_int(c, node, "keepdims", 0);
        ot_gb_add(c, b, out);
    }
    return OT_OK;
}
