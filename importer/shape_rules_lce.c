/* shape_rules_lce.c — shape rules of the chunked cross-entropy pair (issue 28):
 * LinearCrossEntropy (H [rows.., D], W [D, V] or [V, D], labels [rows..] [, bias [V]])
 * -> scalar loss, and LinearCrossEntropyGrad -> dH, dW [, dBias] like H, W and bias.
 * The op is made by autodiff/linear_ce.c, never imported, so a mismatch here is that
 * rewrite's bug: the messages still name the node and the shapes. */
#include "shape_internal.h"

static ot_shape shape_at(ot_shape_ctx *c, const ot_node *n, int i) {
    const ot_value *v = ot_shape_input(c, n, i);
    return v ? v->shape : ot_shape_unknown();
}

/* Checks H, W, labels and bias at slots h .. h + 3 against each other (known dims only). */
static ot_status check(ot_shape_ctx *c, const ot_node *n, int h) {
    char a[160], b[160];
    ot_shape H = shape_at(c, n, h), W = shape_at(c, n, h + 1), L = shape_at(c, n, h + 2), B = shape_at(c, n, h + 3);
    bool tw = ot_node_attr_int(n, "trans_w", 0) != 0;
    if (W.rank >= 0 && W.rank != 2)
        return ot_shape_fail(c, n, "weight %s must be 2-D", ot_shape_str(c->g, &W, a, sizeof a));
    if (H.rank >= 0 && H.rank < 1) return ot_shape_fail(c, n, "hidden states must have rank >= 1");
    int64_t D = W.rank == 2 ? W.dim[tw ? 1 : 0] : -1, V = W.rank == 2 ? W.dim[tw ? 0 : 1] : -1;
    if (H.rank >= 1 && D >= 0 && H.dim[H.rank - 1] >= 0 && H.dim[H.rank - 1] != D)
        return ot_shape_fail(c, n, "hidden states %s do not match weight %s", ot_shape_str(c->g, &H, a, sizeof a),
                             ot_shape_str(c->g, &W, b, sizeof b));
    int64_t rows = H.rank >= 1 ? ot_shape_numel(&H) : -1, nl = ot_shape_numel(&L);
    if (rows >= 0 && H.dim[H.rank - 1] > 0) rows /= H.dim[H.rank - 1];
    if (rows >= 0 && nl >= 0 && H.dim[H.rank - 1] > 0 && rows != nl)
        return ot_shape_fail(c, n, "labels %s do not have one label per row of hidden states %s",
                             ot_shape_str(c->g, &L, a, sizeof a), ot_shape_str(c->g, &H, b, sizeof b));
    int64_t nb = ot_shape_numel(&B);
    if (B.rank >= 0 && nb >= 0 && V >= 0 && nb != V)
        return ot_shape_fail(c, n, "bias %s must have V = %lld elements", ot_shape_str(c->g, &B, a, sizeof a),
                             (long long)V);
    return OT_OK;
}

ot_status ot_shape_rule_linear_ce(ot_shape_ctx *c, const ot_node *n, ot_dtype *dt, ot_shape *sh) {
    const ot_value *h = ot_shape_input(c, n, 0);
    dt[0] = h ? h->dtype : OT_UNDEFINED;
    sh[0] = ot_shape_make(0, NULL);
    return check(c, n, 0);
}

ot_status ot_shape_rule_linear_ce_grad(ot_shape_ctx *c, const ot_node *n, ot_dtype *dt, ot_shape *sh) {
    for (int k = 0; k < 3 && k < n->n_outputs; k++) { /* dH, dW, dBias like H, W, bias */
        const ot_value *v = ot_shape_input(c, n, k == 2 ? 4 : k + 1);
        dt[k] = v ? v->dtype : OT_UNDEFINED;
        sh[k] = v ? v->shape : ot_shape_unknown();
    }
    return check(c, n, 1);
}
