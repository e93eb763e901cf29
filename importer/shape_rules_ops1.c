/* shape_rules_ops1.c — shape rules of issue 26's "ops batch 1" that are more than
 * "like the input": PRelu (Y like X; the slope must broadcast to X, one way). */
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
