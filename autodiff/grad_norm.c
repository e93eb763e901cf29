/* grad_norm.c — gradient rules of normalisations: BatchNormalization (training
 * mode: batch statistics recomputed from X; inference mode: running statistics
 * passed to BatchNormGrad as inputs 3/4), LayerNormalization, Softmax, LogSoftmax,
 * InstanceNormalization and GroupNormalization (issue 26: one GroupNormGrad). */
#include "autodiff/grad_rules.h"

/* Emits a 3-output *NormGrad node (dX, dScale, dBias), creating only the outputs
 * whose target needs a gradient. */
static void norm_grad(ot_grad_ctx *c, const ot_node *n, ot_op op, const int *in, int n_in, int bias) {
    int x = n->inputs[0], scale = n->inputs[1];
    int targets[3] = {x, scale, bias};
    int outs[3];
    for (int i = 0; i < 3; i++) {
        outs[i] = -1;
        if (ot_gb_needs(c, targets[i])) {
            ot_shape s = ot_gb_shape(c, targets[i]);
            outs[i] = ot_gb_new(c, ot_gb_dtype(c, targets[i]), &s);
        }
    }
    int node = ot_gb_emit(c, op, in, n_in, outs, 3);
    ot_gb_copy_attrs(c, node, n);
    for (int i = 0; i < 3; i++) ot_gb_add(c, targets[i], outs[i]);
}

ot_status ot_grad_norm(ot_grad_ctx *c, const ot_node *n, const int *dy) {
    switch (n->op) {
    case OT_OP_BATCH_NORM: {
        if ((n->n_outputs > 1 && dy[1] >= 0) || (n->n_outputs > 2 && dy[2] >= 0))
            return ot_fail(c->err, OT_E_UNSUPPORTED,
                           "autodiff: BatchNormalization '%s': its running statistics reach the loss; only the "
                           "gradient through Y is supported",
                           n->name);
        bool train = ot_node_attr_int(n, "training_mode", 0) != 0;
        int in[5] = {dy[0], n->inputs[0], n->inputs[1], n->inputs[3], n->inputs[4]};
        norm_grad(c, n, OT_OP_BATCH_NORM_GRAD, in, train ? 3 : 5, n->inputs[2]);
        return OT_OK;
    }
    case OT_OP_LAYER_NORM: {
        if ((n->n_outputs > 1 && dy[1] >= 0) || (n->n_outputs > 2 && dy[2] >= 0))
            return ot_fail(c->err, OT_E_UNSUPPORTED,
                           "autodiff: LayerNormalization '%s': its Mean / InvStdDev outputs reach the loss; only "
                           "the gradient through Y is supported",
                           n->name);
        int in[3] = {dy[0], n->inputs[0], n->inputs[1]};
        norm_grad(c, n, OT_OP_LAYER_NORM_GRAD, in, 3, n->n_inputs > 2 ? n->inputs[2] : -1);
        return OT_OK;
    }
    case OT_OP_INSTANCE_NORM: /* issue 26: GroupNormGrad (dY, X, scale) -> dX, dScale, dB */
    case OT_OP_GROUP_NORM: {
        int in[3] = {dy[0], n->inputs[0], n->inputs[1]};
        norm_grad(c, n, OT_OP_GROUP_NORM_GRAD, in, 3, n->inputs[2]);
        return OT_OK;
    }
    case OT_OP_SOFTMAX:
    case OT_OP_LOG_SOFTMAX: {
        int x = n->inputs[0];
        int in[2] = {dy[0], n->outputs[0]}, node = -1;
        ot_shape xs = ot_gb_shape(c, x);
        int out = ot_gb_op_s(c, n->op == OT_OP_SOFTMAX ? OT_OP_SOFTMAX_GRAD : OT_OP_LOG_SOFTMAX_GRAD, in, 2,
                             ot_gb_dtype(c, x), &xs, &node);
        ot_gb_copy_attrs(c, node, n);
        ot_gb_add(c, x, out);
        return OT_OK;
    }
    default:
        return ot_fail(c->err, OT_E_UNSUPPORTED, "autodiff: node '%s': no gradient rule for %s", n->name,
                       n->op_type);
    }
}
