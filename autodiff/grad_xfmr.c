/* grad_xfmr.c — gradient rules of the transformer ops of issue 26:
 * RMSNormalization (RMSNormGrad: dX and dScale, 1/rms recomputed from X),
 * RotaryEmbedding (RotaryEmbeddingGrad: the inverse rotation of dY with the same
 * caches) and Attention (AttentionGrad: dQ, dK, dV, probabilities recomputed from Q
 * and K). The caches, position ids and masks take no gradient: autodiff/params_rule.c
 * lists their slots, so a cache stored as an initializer is frozen, not trained. */
#include "autodiff/grad_rules.h"

/* A backward node with one output per target that needs a gradient (-1 otherwise). */
static int emit_for(ot_grad_ctx *c, const ot_node *n, ot_op op, const int *in, int n_in, const int *targets, int n_t,
                    int *outs) {
    for (int i = 0; i < n_t; i++) {
        outs[i] = -1;
        if (targets[i] >= 0 && ot_gb_needs(c, targets[i])) {
            ot_shape s = ot_gb_shape(c, targets[i]);
            outs[i] = ot_gb_new(c, ot_gb_dtype(c, targets[i]), &s);
        }
    }
    int node = ot_gb_emit(c, op, in, n_in, outs, n_t);
    ot_gb_copy_attrs(c, node, n);
    for (int i = 0; i < n_t; i++)
        ot_gb_add(c, targets[i], outs[i]);
    return node;
}

static ot_status grad_attention(ot_grad_ctx *c, const ot_node *n, const int *dy) {
    if ((n->n_outputs > 1 && dy[1] >= 0) || (n->n_outputs > 2 && dy[2] >= 0))
        return ot_fail(c->err, OT_E_UNSUPPORTED,
                       "autodiff: Attention '%s': its present_key / present_value outputs reach the loss; only the "
                       "gradient through Y is supported",
                       n->name);
    for (int k = 4; k <= 5 && k < n->n_inputs; k++)
        if (n->inputs[k] >= 0 && ot_gb_needs(c, n->inputs[k]))
            return ot_fail(c->err, OT_E_UNSUPPORTED,
                           "autodiff: Attention '%s': past_key / past_value would need a gradient (a trained "
                           "prefix); give the cache as data or freeze what it is computed from",
                           n->name);
    int in[8] = {dy[0], n->inputs[0], n->inputs[1], n->inputs[2], -1, -1, -1, -1}, n_in = 4;
    for (int k = 3; k < n->n_inputs && k < 7; k++) {
        in[k + 1] = n->inputs[k];
        if (n->inputs[k] >= 0) n_in = k + 2;
    }
    int targets[3] = {n->inputs[0], n->inputs[1], n->inputs[2]}, outs[3];
    emit_for(c, n, OT_OP_ATTENTION_GRAD, in, n_in, targets, 3, outs);
    return OT_OK;
}

ot_status ot_grad_xfmr(ot_grad_ctx *c, const ot_node *n, const int *dy) {
    switch (n->op) {
    case OT_OP_RMS_NORM: {
        int in[3] = {dy[0], n->inputs[0], n->inputs[1]}, outs[2];
        int targets[2] = {n->inputs[0], n->inputs[1]};
        emit_for(c, n, OT_OP_RMS_NORM_GRAD, in, 3, targets, 2, outs);
        return OT_OK;
    }
    case OT_OP_ROTARY_EMBEDDING: {
        int x = n->inputs[0];
        if (!ot_gb_needs(c, x)) return OT_OK;
        bool pos = n->n_inputs > 3 && n->inputs[3] >= 0;
        int in[4] = {dy[0], n->inputs[1], n->inputs[2], pos ? n->inputs[3] : -1}, node = -1;
        ot_shape xs = ot_gb_shape(c, x);
        int out = ot_gb_op_s(c, OT_OP_ROTARY_EMBEDDING_GRAD, in, pos ? 4 : 3, ot_gb_dtype(c, x), &xs, &node);
        ot_gb_copy_attrs(c, node, n);
        ot_gb_add(c, x, out);
        return OT_OK;
    }
    case OT_OP_ATTENTION: return grad_attention(c, n, dy);
    default:
        return ot_fail(c->err, OT_E_UNSUPPORTED, "autodiff: node '%s': no gradient rule for %s", n->name, n->op_type);
    }
}
