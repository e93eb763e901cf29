/* grad_math.c — gradient rules of issue 13's pointwise maths: Abs, Sin, Cos,
 * HardSigmoid, HardSwish, Softplus, Mish, Min, Max, Mod and CastLike. Where PyTorch's
 * backward is a product of ops onnxtrain has (Sin, Cos, Softplus) the rule composes
 * them; the others emit a backward op of their own (AbsGrad, HardSigmoidGrad,
 * HardSwishGrad, MishGrad, ModGrad, MaxGrad, MinGrad) whose element rule is PyTorch
 * 1.13's (kernels/pointwise_math.h). The comparisons and logic ops have no gradient. */
#include "autodiff/grad_rules.h"

/* Bounds the MaxGrad input array; ops.def's arity of MaxGrad is the real limit. */
#define MINMAX_MAX_IN 8

static int mul(ot_grad_ctx *c, int a, int b, int like) {
    int in[2] = {a, b};
    return ot_gb_op(c, OT_OP_MUL, in, 2, like);
}

/* (dY, X) -> dX through op, shaped like X, the forward node's attributes copied. */
static int x_grad(ot_grad_ctx *c, const ot_node *n, ot_op op, int dy) {
    int in[2] = {dy, n->inputs[0]}, node = -1;
    ot_shape s = ot_gb_shape(c, n->inputs[0]);
    int out = ot_gb_op_s(c, op, in, 2, ot_gb_dtype(c, n->inputs[0]), &s, &node);
    ot_gb_copy_attrs(c, node, n);
    return out;
}

/* Max / Min: MaxGrad (dY, Y, X_0 ..) per input that needs a gradient, reduced to the
 * input's shape when it was broadcast. One input: Y is X. */
static ot_status minmax(ot_grad_ctx *c, const ot_node *n, int dy) {
    int y = n->outputs[0];
    ot_shape ys = ot_gb_shape(c, y);
    if (n->n_inputs == 1) {
        ot_gb_add(c, n->inputs[0], dy);
        return OT_OK;
    }
    ot_op op = n->op == OT_OP_MAX ? OT_OP_MAX_GRAD : OT_OP_MIN_GRAD;
    int most = ot_op_get(op)->max_inputs - 2; /* MaxGrad reads dY, Y and every X */
    if (n->n_inputs > most || most > MINMAX_MAX_IN)
        return ot_fail(c->err, OT_E_UNSUPPORTED, "autodiff: node '%s' (%s): a gradient through more than %d inputs",
                       n->name, n->op_type, most);
    int in[2 + MINMAX_MAX_IN] = {dy, y};
    for (int k = 0; k < n->n_inputs; k++) in[2 + k] = n->inputs[k];
    for (int k = 0; k < n->n_inputs; k++) {
        if (!ot_gb_needs(c, n->inputs[k])) continue;
        int node = -1;
        int g = ot_gb_op_s(c, op, in, 2 + n->n_inputs, ot_gb_dtype(c, y), &ys, &node);
        ot_gb_set_int(c, node, "index", k);
        ot_gb_add_like(c, n->inputs[k], g, &ys);
    }
    return OT_OK;
}

ot_status ot_grad_math(ot_grad_ctx *c, const ot_node *n, const int *dyv) {
    int dy = dyv[0];
    int a = n->inputs[0];
    if (dy < 0) return OT_OK;
    switch (n->op) {
    case OT_OP_ABS: ot_gb_add(c, a, x_grad(c, n, OT_OP_ABS_GRAD, dy)); return OT_OK;
    case OT_OP_HARD_SIGMOID: ot_gb_add(c, a, x_grad(c, n, OT_OP_HARD_SIGMOID_GRAD, dy)); return OT_OK;
    case OT_OP_HARD_SWISH: ot_gb_add(c, a, x_grad(c, n, OT_OP_HARD_SWISH_GRAD, dy)); return OT_OK;
    case OT_OP_MISH: ot_gb_add(c, a, x_grad(c, n, OT_OP_MISH_GRAD, dy)); return OT_OK;
    case OT_OP_SIN: /* dY * cos(X), as PyTorch */
        ot_gb_add(c, a, mul(c, dy, ot_gb_op(c, OT_OP_COS, &a, 1, a), a));
        return OT_OK;
    case OT_OP_COS: { /* dY * -sin(X), as PyTorch */
        int s = ot_gb_op(c, OT_OP_SIN, &a, 1, a);
        ot_gb_add(c, a, mul(c, dy, ot_gb_op(c, OT_OP_NEG, &s, 1, a), a));
        return OT_OK;
    }
    case OT_OP_SOFTPLUS: /* dY * sigmoid(X) */
        ot_gb_add(c, a, mul(c, dy, ot_gb_op(c, OT_OP_SIGMOID, &a, 1, a), a));
        return OT_OK;
    case OT_OP_MAX:
    case OT_OP_MIN: return minmax(c, n, dy);
    case OT_OP_MOD: { /* float Mod is fmod: dA = dY, dB = -dY * trunc(A / B) (PyTorch's fmod) */
        int b = n->inputs[1];
        ot_shape ys = ot_gb_shape(c, n->outputs[0]);
        ot_gb_add_like(c, a, dy, &ys);
        if (ot_gb_needs(c, b)) {
            int in[3] = {dy, a, b};
            ot_gb_add_like(c, b, ot_gb_op(c, OT_OP_MOD_GRAD, in, 3, dy), &ys);
        }
        return OT_OK;
    }
    case OT_OP_CAST_LIKE: { /* as Cast: dY cast back to input 0's dtype; input 1 gives only a dtype */
        if (!ot_gb_needs(c, a)) return OT_OK;
        int node = -1;
        ot_shape s = ot_gb_shape(c, a);
        int out = ot_gb_op_s(c, OT_OP_CAST, &dy, 1, ot_gb_dtype(c, a), &s, &node);
        ot_gb_set_int(c, node, "to", ot_gb_dtype(c, a));
        ot_gb_add(c, a, out);
        return OT_OK;
    }
    default:
        return ot_fail(c->err, OT_E_UNSUPPORTED, "autodiff: node '%s': no gradient rule for %s", n->name,
                       n->op_type);
    }
}
