/* shape_rules_ops1.c — shape rules of issue 26's "ops batch 1" that are more than
 * "like the input" or the Reduce rule: PRelu (Y like X; the slope must broadcast to X,
 * one way), ArgMax and ArgMin, InstanceNormalization and GroupNormalization. */
#include "shape_internal.h"

#define SHP(s, buf) ot_shape_str(c->g, (s), (buf), sizeof(buf))

/* PRelu (X, slope): Y is typed and shaped like X. The slope broadcasts to X only
 * (ONNX's unidirectional broadcasting): a slope with more dims, or a known dim that is
 * neither 1 nor X's, is refused here rather than widening Y. */
ot_status ot_shape_rule_prelu(ot_shape_ctx *c, const ot_node *n, ot_dtype *dt, ot_shape *sh) {
    char a[160], b[160];
    const ot_value *x = ot_shape_input(c, n, 0), *s = ot_shape_input(c, n, 1);
    dt[0] = x ? x->dtype : OT_UNDEFINED;
    sh[0] = x ? x->shape : ot_shape_unknown();
    ot_shape X = sh[0], S = s ? s->shape : ot_shape_unknown();
    if (X.rank < 0 || S.rank < 0) return OT_OK;
    bool ok = S.rank <= X.rank;
    for (int i = 0; ok && i < S.rank; i++) {
        int64_t sd = S.dim[S.rank - 1 - i], xd = X.dim[X.rank - 1 - i];
        ok = sd == 1 || sd < 0 || xd < 0 || sd == xd;
    }
    if (!ok) return ot_shape_fail(c, n, "slope %s does not broadcast to X %s", SHP(&S, a), SHP(&X, b));
    return OT_OK;
}

/* ArgMax, ArgMin: int64 indices, X's shape with `axis` removed (keepdims 0) or 1. */
ot_status ot_shape_rule_arg_reduce(ot_shape_ctx *c, const ot_node *n, ot_dtype *dt, ot_shape *sh) {
    const ot_value *x = ot_shape_input(c, n, 0);
    dt[0] = OT_I64;
    ot_shape X = x ? x->shape : ot_shape_unknown();
    if (X.rank < 0) return OT_OK;
    int ax;
    ot_status st = ot_shape_axis(c, n, ot_node_attr_int(n, "axis", 0), X.rank, false, &X, &ax);
    if (st) return st;
    sh[0] = X;
    if (ot_node_attr_int(n, "keepdims", 1)) {
        sh[0].dim[ax] = 1;
        sh[0].sym[ax] = -1;
        return OT_OK;
    }
    for (int i = ax; i + 1 < X.rank; i++) sh[0].dim[i] = X.dim[i + 1], sh[0].sym[i] = X.sym[i + 1];
    sh[0].rank = X.rank - 1;
    return OT_OK;
}

/* InstanceNormalization, GroupNormalization: Y like X ([N, C, ...]); scale and B hold C
 * values (InstanceNormalization, GroupNormalization from opset 21) or num_groups values
 * (GroupNormalization-18), and num_groups divides C. */
ot_status ot_shape_rule_group_norm(ot_shape_ctx *c, const ot_node *n, ot_dtype *dt, ot_shape *sh) {
    char a[160];
    const ot_value *x = ot_shape_input(c, n, 0);
    dt[0] = x ? x->dtype : OT_UNDEFINED;
    sh[0] = x ? x->shape : ot_shape_unknown();
    ot_shape X = sh[0];
    if (X.rank < 0) return OT_OK;
    if (X.rank < 2) return ot_shape_fail(c, n, "X %s needs [N, C, ...]", SHP(&X, a));
    int64_t C = X.dim[1], G = C;
    bool group = n->op == OT_OP_GROUP_NORM;
    if (group) {
        G = ot_node_attr_int(n, "num_groups", 0);
        if (G <= 0 || (C >= 0 && C % G != 0))
            return ot_shape_fail(c, n, "num_groups %lld does not divide the channels of X %s", (long long)G, SHP(&X, a));
    }
    int64_t want = group && c->g->opset < 21 ? G : C;
    for (int k = 1; k < 3 && want >= 0; k++) {
        const ot_value *p = ot_shape_input(c, n, k);
        if (!p || p->shape.rank < 0) continue;
        int64_t cnt = 1;
        for (int d = 0; d < p->shape.rank && cnt >= 0; d++)
            if (p->shape.dim[d] < 0) cnt = -1;
            else if (!ot_i64_mul(cnt, p->shape.dim[d], &cnt))
                return ot_shape_fail(c, n, "the element count of %s %s overflows int64", k == 1 ? "scale" : "B",
                                     SHP(&p->shape, a));
        if (cnt >= 0 && cnt != want)
            return ot_shape_fail(c, n, "%s %s must hold %lld values (%s)", k == 1 ? "scale" : "B", SHP(&p->shape, a),
                                 (long long)want, want == C ? "one per channel" : "one per group before opset 21");
    }
    return OT_OK;
}
