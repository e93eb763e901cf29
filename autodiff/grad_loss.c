/* grad_loss.c — gradient rules of the losses: SoftmaxCrossEntropyLoss (and its
 * optional log_prob output), NegativeLogLikelihoodLoss, MseLoss, BceWithLogitsLoss,
 * L1Loss and the chunked LinearCrossEntropy (issue 28). Labels and weights get no
 * gradient; of the targets, only MSE's (the loss builders make targets graph inputs,
 * which need none). */
#include "autodiff/grad_rules.h"

static void loss_grad(ot_grad_ctx *c, const ot_node *n, ot_op op, int dy) {
    int x = n->inputs[0];
    int in[4] = {dy, x, n->inputs[1], n->n_inputs > 2 ? n->inputs[2] : -1}, node = -1;
    ot_shape xs = ot_gb_shape(c, x);
    int nin = n->n_inputs > 2 ? 4 : 3;
    int out = ot_gb_op_s(c, op, in, nin, ot_gb_dtype(c, x), &xs, &node);
    ot_gb_copy_attrs(c, node, n);
    ot_gb_add(c, x, out);
}

/* LinearCrossEntropy (H, W, labels [, bias]): one LinearCrossEntropyGrad gives every
 * gradient asked for, recomputing the logits chunk by chunk as the forward did. */
static void linear_ce_grad(ot_grad_ctx *c, const ot_node *n, int dy) {
    int bias = n->n_inputs > 3 ? n->inputs[3] : -1;
    int in[5] = {dy, n->inputs[0], n->inputs[1], n->inputs[2], bias}, out[3] = {-1, -1, -1};
    int of[3] = {n->inputs[0], n->inputs[1], bias};
    bool any = false;
    for (int k = 0; k < 3; k++)
        if (of[k] >= 0 && ot_gb_needs(c, of[k])) {
            ot_shape s = ot_gb_shape(c, of[k]);
            out[k] = ot_gb_new(c, ot_gb_dtype(c, of[k]), &s);
            any = true;
        }
    if (!any) return;
    int node = ot_gb_emit(c, OT_OP_LINEAR_CROSS_ENTROPY_GRAD, in, bias >= 0 ? 5 : 4, out, bias >= 0 ? 3 : 2);
    ot_gb_copy_attrs(c, node, n);
    for (int k = 0; k < 3; k++)
        if (out[k] >= 0) ot_gb_add(c, of[k], out[k]);
}

ot_status ot_grad_loss(ot_grad_ctx *c, const ot_node *n, const int *dy) {
    switch (n->op) {
    case OT_OP_SOFTMAX_CROSS_ENTROPY_LOSS:
        if (dy[0] >= 0) loss_grad(c, n, OT_OP_SOFTMAX_CROSS_ENTROPY_LOSS_GRAD, dy[0]);
        if (n->n_outputs > 1 && dy[1] >= 0) { /* log_prob = LogSoftmax(scores, axis 1) */
            int x = n->inputs[0];
            int in[2] = {dy[1], n->outputs[1]}, node = -1;
            ot_shape xs = ot_gb_shape(c, x);
            int out = ot_gb_op_s(c, OT_OP_LOG_SOFTMAX_GRAD, in, 2, ot_gb_dtype(c, x), &xs, &node);
            ot_gb_set_int(c, node, "axis", 1);
            ot_gb_add(c, x, out);
        }
        return OT_OK;
    case OT_OP_LINEAR_CROSS_ENTROPY:
        if (dy[0] >= 0) linear_ce_grad(c, n, dy[0]);
        return OT_OK;
    case OT_OP_NLL_LOSS: loss_grad(c, n, OT_OP_NLL_LOSS_GRAD, dy[0]); return OT_OK;
    case OT_OP_MSE_LOSS:
        loss_grad(c, n, OT_OP_MSE_LOSS_GRAD, dy[0]);
        if (ot_gb_needs(c, n->inputs[1])) { /* d/dtarget = -d/dX */
            int in[4] = {dy[0], n->inputs[1], n->inputs[0]};
            int t = n->inputs[1];
            ot_gb_add(c, t, ot_gb_op(c, OT_OP_MSE_LOSS_GRAD, in, 3, t));
        }
        return OT_OK;
    case OT_OP_BCE_LOGITS_LOSS:
    case OT_OP_L1_LOSS:
        if (ot_gb_needs(c, n->inputs[1]))
            return ot_fail(c->err, OT_E_UNSUPPORTED,
                           "autodiff: node '%s' (%s): the targets need a gradient, which this loss does not give; "
                           "feed the targets as data",
                           n->name, n->op_type ? n->op_type : ot_op_name(n->op));
        loss_grad(c, n, n->op == OT_OP_L1_LOSS ? OT_OP_L1_LOSS_GRAD : OT_OP_BCE_LOGITS_LOSS_GRAD, dy[0]);
        return OT_OK;
    default:
        return ot_fail(c->err, OT_E_UNSUPPORTED, "autodiff: node '%s': no gradient rule for %s", n->name,
                       n->op_type);
    }
}
