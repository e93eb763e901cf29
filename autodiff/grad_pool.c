/* grad_pool.c — gradient rules of MaxPool (MaxPoolGrad recomputes the argmax from
 * X, first maximum wins), AveragePool (AveragePoolGrad) and GlobalAveragePool
 * (ExpandLike of dY scaled by 1 / spatial size). */
#include "autodiff/grad_rules.h"

ot_status ot_grad_pool(ot_grad_ctx *c, const ot_node *n, const int *dyv) {
    int dy = dyv[0], x = n->inputs[0];
    if (dy < 0) return OT_OK; /* only MaxPool's indices output reached the loss */
    ot_shape xs = ot_gb_shape(c, x);
    switch (n->op) {
    case OT_OP_MAX_POOL:
    case OT_OP_AVERAGE_POOL: {
        int in[2] = {dy, x}, node = -1;
        int out = ot_gb_op_s(c, n->op == OT_OP_MAX_POOL ? OT_OP_MAX_POOL_GRAD : OT_OP_AVERAGE_POOL_GRAD, in, 2,
                             ot_gb_dtype(c, x), &xs, &node);
        ot_gb_copy_attrs(c, node, n);
        ot_gb_add(c, x, out);
        return OT_OK;
    }
    case OT_OP_GLOBAL_AVERAGE_POOL: {
        int64_t count = 1;
        for (int i = 2; i < xs.rank; i++) count = xs.dim[i] >= 0 && count >= 0 ? count * xs.dim[i] : -1;
        if (xs.rank < 3 || count <= 0)
            return ot_fail(c->err, OT_E_SHAPE,
                           "autodiff: GlobalAveragePool '%s': its gradient needs static spatial dims of '%s'",
                           n->name, c->g->values[x].name);
        int in[2] = {dy, x};
        int e = ot_gb_op(c, OT_OP_EXPAND_LIKE, in, 2, x);
        int m[2] = {e, ot_gb_const_f32(c, 1.0f / (float)count)};
        ot_gb_add(c, x, ot_gb_op(c, OT_OP_MUL, m, 2, x));
        return OT_OK;
    }
    default:
        return ot_fail(c->err, OT_E_UNSUPPORTED, "autodiff: node '%s': no gradient rule for %s", n->name,
                       n->op_type);
    }
}
