/* grad_conv.c — gradient rules of Conv: ConvGradInput (dY, W, X) -> dX and
 * ConvGradWeight (dY, X, W) -> dW with the Conv's attributes, and the bias gradient
 * as a ReduceSum of dY over every axis but the channel; and of ConvTranspose (issue
 * 26), the input gradient of the convolution whose input is Y: dX = Conv(dY, W) and
 * dW = ConvGradWeight(X, dY, W), both with that convolution's explicit pads
 * (ot_conv_transpose_pads), and the same bias gradient. */
#include "autodiff/grad_rules.h"

/* The bias gradient: dY summed over every axis but the channel. */
static ot_status grad_bias(ot_grad_ctx *c, const ot_node *n, int dy, int b) {
    ot_shape ys = ot_gb_shape(c, dy);
    if (ys.rank < 2)
        return ot_fail(c->err, OT_E_SHAPE, "autodiff: %s '%s': output rank unknown; run shape inference first",
                       n->op_type, n->name);
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
    return OT_OK;
}

/* Conv / ConvGradWeight attributes of the convolution behind ConvTranspose n. */
static ot_status set_conv_attrs(ot_grad_ctx *c, const ot_node *n, int node, const ot_shape *xs, const ot_shape *ys,
                                const ot_shape *ws) {
    ot_op_params scratch;
    const ot_op_params *pp = NULL;
    ot_status st = ot_node_params(n, &scratch, &pp, c->err);
    if (st) return st;
    const ot_window_params *wp = &pp->u.window;
    int nd = xs->rank - 2;
    if (nd < 1 || ys->rank != xs->rank || ws->rank != xs->rank)
        return ot_fail(c->err, OT_E_SHAPE, "autodiff: ConvTranspose '%s': shapes unknown; run shape inference first",
                       n->name);
    int64_t pads[2 * OT_MAX_RANK], strides[OT_MAX_RANK], dil[OT_MAX_RANK];
    for (int i = 0; i < nd; i++) {
        ot_conv_transpose_pads(wp, nd, i, xs->dim[2 + i], ws->dim[2 + i], ys->dim[2 + i], &pads[i], &pads[nd + i]);
        strides[i] = wp->n_strides == nd ? wp->strides[i] : 1;
        dil[i] = wp->n_dilations == nd ? wp->dilations[i] : 1;
    }
    ot_gb_set_ints(c, node, "pads", pads, 2 * nd);
    ot_gb_set_ints(c, node, "strides", strides, nd);
    ot_gb_set_ints(c, node, "dilations", dil, nd);
    ot_gb_set_ints(c, node, "kernel_shape", &ws->dim[2], nd);
    ot_gb_set_int(c, node, "group", wp->group);
    return OT_OK;
}

static ot_status grad_conv_transpose(ot_grad_ctx *c, const ot_node *n, int dy) {
    int x = n->inputs[0], w = n->inputs[1], b = n->n_inputs > 2 ? n->inputs[2] : -1;
    ot_shape xs = ot_gb_shape(c, x), ys = ot_gb_shape(c, dy), ws = ot_gb_shape(c, w);
    ot_status st = OT_OK;
    if (ot_gb_needs(c, x)) {
        int in[2] = {dy, w}, node = -1;
        int out = ot_gb_op_s(c, OT_OP_CONV, in, 2, ot_gb_dtype(c, x), &xs, &node);
        if ((st = set_conv_attrs(c, n, node, &xs, &ys, &ws))) return st;
        ot_gb_add(c, x, out);
    }
    if (ot_gb_needs(c, w)) {
        int in[3] = {x, dy, w}, node = -1;
        int out = ot_gb_op_s(c, OT_OP_CONV_GRAD_WEIGHT, in, 3, ot_gb_dtype(c, w), &ws, &node);
        if ((st = set_conv_attrs(c, n, node, &xs, &ys, &ws))) return st;
        ot_gb_add(c, w, out);
    }
    return ot_gb_needs(c, b) ? grad_bias(c, n, dy, b) : OT_OK;
}

ot_status ot_grad_conv(ot_grad_ctx *c, const ot_node *n, const int *dyv) {
    if (n->op == OT_OP_CONV_TRANSPOSE) return dyv[0] >= 0 ? grad_conv_transpose(c, n, dyv[0]) : OT_OK;
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
    return ot_gb_needs(c, b) ? grad_bias(c, n, dy, b) : OT_OK;
}
