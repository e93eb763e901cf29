/* grad_reduce_ext.c — gradient rules of issue 26's reductions (ReduceMax, ReduceMin,
 * ReduceProd, ReduceL1, ReduceL2, ReduceLogSumExp, ReduceSumSquare): one backward op,
 * ReduceGrad (dY, X, Y) -> dX, whose element rules are PyTorch 1.13's
 * (kernels/reduce_ext.h). The rule writes the reduced axes out as ReduceGrad's
 * attribute (every dim when the forward node had none), so the backward op never
 * reads an axes input. ArgMax and ArgMin give indices: no gradient. */
#include "autodiff/grad_rules.h"

#include <string.h>

/* The forward node's axes: its attribute, or its opset-18 input when that is a
 * constant; *n = -1 when neither is known. */
static void forward_axes(const ot_grad_ctx *c, const ot_node *n, int64_t *axes, int *cnt) {
    int k = 0;
    const int64_t *a = ot_node_attr_ints(n, "axes", &k);
    *cnt = 0;
    if (a) {
        for (int i = 0; i < k && i < OT_MAX_RANK; i++) axes[i] = a[i];
        *cnt = k > OT_MAX_RANK ? -1 : k;
        return;
    }
    if (n->n_inputs < 2 || n->inputs[1] < 0) return;
    const ot_value *av = &c->g->values[n->inputs[1]];
    size_t es = ot_dtype_size(av->dtype);
    if (!av->data || (av->dtype != OT_I64 && av->dtype != OT_I32) || av->nbytes / es > OT_MAX_RANK) {
        *cnt = -1;
        return;
    }
    *cnt = (int)(av->nbytes / es);
    for (int i = 0; i < *cnt; i++)
        axes[i] = av->dtype == OT_I64 ? ((const int64_t *)av->data)[i] : ((const int32_t *)av->data)[i];
}

ot_status ot_grad_reduce_ext(ot_grad_ctx *c, const ot_node *n, const int *dyv) {
    int dy = dyv[0], x = n->inputs[0];
    if (dy < 0 || !ot_gb_needs(c, x)) return OT_OK;
    ot_op_params scratch;
    const ot_op_params *pp;
    ot_status st = ot_node_params(n, &scratch, &pp, c->err);
    if (st) return st;
    ot_reduce_mode mode = pp->u.reduce.mode;
    if (mode < OT_RMODE_MAX || mode > OT_RMODE_SUM_SQUARE)
        return ot_fail(c->err, OT_E_UNSUPPORTED, "autodiff: node '%s': no gradient rule for %s", n->name, n->op_type);
    int64_t axes[OT_MAX_RANK];
    int cnt;
    forward_axes(c, n, axes, &cnt);
    if (cnt < 0)
        return ot_fail(c->err, OT_E_UNSUPPORTED, "autodiff: %s '%s': axes must be constant", n->op_type, n->name);
    if (cnt == 0 && pp->u.reduce.noop_with_empty_axes) { /* Y is X */
        ot_gb_add(c, x, dy);
        return OT_OK;
    }
    ot_shape xs = ot_gb_shape(c, x);
    if (xs.rank < 0)
        return ot_fail(c->err, OT_E_SHAPE, "autodiff: node '%s' (%s): its gradient needs a known rank", n->name,
                       n->op_type);
    if (cnt == 0) /* every dim */
        for (int d = 0; d < xs.rank; d++) axes[cnt++] = d;
    int in[3] = {dy, x, n->outputs[0]}, node = -1;
    int g = ot_gb_op_s(c, OT_OP_REDUCE_GRAD, in, 3, ot_gb_dtype(c, x), &xs, &node);
    ot_gb_set_ints(c, node, "axes", axes, cnt);
    ot_gb_set_int(c, node, "keepdims", pp->u.reduce.keepdims);
    ot_gb_set_string(c, node, "mode", ot_reduce_mode_name(mode));
    ot_gb_add(c, x, g);
    return OT_OK;
}
