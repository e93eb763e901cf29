/* grad_elementwise.c — gradient rules of pointwise ops: arithmetic with
 * broadcasting (Add, Sub, Mul, Div, Pow, Sum, Where; broadcast inputs reduced with
 * ReduceToLike), unary maths and activations (through the *Grad internal ops or
 * plain pointwise nodes), and Cast. */
#include "autodiff/grad_rules.h"

/* Binary op node helper: out shaped like value `like`. */
static int bin(ot_grad_ctx *c, ot_op op, int a, int b, int like) {
    int in[2] = {a, b};
    return ot_gb_op(c, op, in, 2, like);
}

/* (dY, v) -> dX through one of the *Grad ops, attributes copied from the forward node. */
static int act_grad(ot_grad_ctx *c, const ot_node *n, ot_op op, int dy, int v) {
    int in[2] = {dy, v};
    int node = -1;
    ot_shape s = ot_gb_shape(c, n->inputs[0]);
    int out = ot_gb_op_s(c, op, in, 2, ot_gb_dtype(c, n->inputs[0]), &s, &node);
    ot_gb_copy_attrs(c, node, n);
    return out;
}

ot_status ot_grad_elementwise(ot_grad_ctx *c, const ot_node *n, const int *dyv) {
    int dy = dyv[0];
    int y = n->outputs[0];
    int a = n->inputs[0], b = n->n_inputs > 1 ? n->inputs[1] : -1;
    ot_shape ys = ot_gb_shape(c, y);
    switch (n->op) {
    case OT_OP_ADD:
        ot_gb_add_like(c, a, dy, &ys);
        ot_gb_add_like(c, b, dy, &ys);
        return OT_OK;
    case OT_OP_SUM:
        for (int i = 0; i < n->n_inputs; i++) ot_gb_add_like(c, n->inputs[i], dy, &ys);
        return OT_OK;
    case OT_OP_SUB:
        ot_gb_add_like(c, a, dy, &ys);
        if (ot_gb_needs(c, b)) ot_gb_add_like(c, b, ot_gb_op(c, OT_OP_NEG, &dy, 1, y), &ys);
        return OT_OK;
    case OT_OP_MUL:
        if (ot_gb_needs(c, a)) ot_gb_add_like(c, a, bin(c, OT_OP_MUL, dy, b, y), &ys);
        if (ot_gb_needs(c, b)) ot_gb_add_like(c, b, bin(c, OT_OP_MUL, dy, a, y), &ys);
        return OT_OK;
    case OT_OP_DIV:
        /* dA = dY / B ; dB = -dY * Y / B */
        if (ot_gb_needs(c, a)) ot_gb_add_like(c, a, bin(c, OT_OP_DIV, dy, b, y), &ys);
        if (ot_gb_needs(c, b)) {
            int t = bin(c, OT_OP_DIV, bin(c, OT_OP_MUL, dy, y, y), b, y);
            ot_gb_add_like(c, b, ot_gb_op(c, OT_OP_NEG, &t, 1, y), &ys);
        }
        return OT_OK;
    case OT_OP_POW:
        /* dA = dY * B * A^(B-1) ; dB = dY * Y * log(A) */
        if (ot_gb_needs(c, a)) {
            int bm1 = bin(c, OT_OP_SUB, b, ot_gb_const_f32(c, 1.0f), b);
            int t = bin(c, OT_OP_MUL, b, bin(c, OT_OP_POW, a, bm1, y), y);
            ot_gb_add_like(c, a, bin(c, OT_OP_MUL, dy, t, y), &ys);
        }
        if (ot_gb_needs(c, b)) {
            int la = ot_gb_op(c, OT_OP_LOG, &a, 1, a);
            ot_gb_add_like(c, b, bin(c, OT_OP_MUL, dy, bin(c, OT_OP_MUL, y, la, y), y), &ys);
        }
        return OT_OK;
    case OT_OP_WHERE: {
        /* inputs (cond, X, Y): the branch not taken gets zero */
        int cond = a, x1 = n->inputs[1], x2 = n->inputs[2];
        if (ot_gb_needs(c, x1)) {
            int in[3] = {cond, dy, ot_gb_const_f32(c, 0.0f)};
            ot_gb_add_like(c, x1, ot_gb_op(c, OT_OP_WHERE, in, 3, y), &ys);
        }
        if (ot_gb_needs(c, x2)) {
            int in[3] = {cond, ot_gb_const_f32(c, 0.0f), dy};
            ot_gb_add_like(c, x2, ot_gb_op(c, OT_OP_WHERE, in, 3, y), &ys);
        }
        return OT_OK;
    }
    case OT_OP_NEG: ot_gb_add(c, a, ot_gb_op(c, OT_OP_NEG, &dy, 1, a)); return OT_OK;
    case OT_OP_EXP: ot_gb_add(c, a, bin(c, OT_OP_MUL, dy, y, a)); return OT_OK;
    case OT_OP_LOG: ot_gb_add(c, a, bin(c, OT_OP_DIV, dy, a, a)); return OT_OK;
    case OT_OP_SQRT: /* dY / (2 Y) */
        ot_gb_add(c, a, bin(c, OT_OP_DIV, dy, bin(c, OT_OP_MUL, y, ot_gb_const_f32(c, 2.0f), y), a));
        return OT_OK;
    case OT_OP_RECIPROCAL: { /* -dY * Y^2 */
        int t = bin(c, OT_OP_MUL, dy, bin(c, OT_OP_MUL, y, y, y), y);
        ot_gb_add(c, a, ot_gb_op(c, OT_OP_NEG, &t, 1, a));
        return OT_OK;
    }
    case OT_OP_RELU: ot_gb_add(c, a, act_grad(c, n, OT_OP_RELU_GRAD, dy, y)); return OT_OK;
    case OT_OP_SIGMOID: ot_gb_add(c, a, act_grad(c, n, OT_OP_SIGMOID_GRAD, dy, y)); return OT_OK;
    case OT_OP_TANH: ot_gb_add(c, a, act_grad(c, n, OT_OP_TANH_GRAD, dy, y)); return OT_OK;
    case OT_OP_LEAKY_RELU: ot_gb_add(c, a, act_grad(c, n, OT_OP_LEAKY_RELU_GRAD, dy, a)); return OT_OK;
    case OT_OP_GELU: ot_gb_add(c, a, act_grad(c, n, OT_OP_GELU_GRAD, dy, a)); return OT_OK;
    case OT_OP_ERF: ot_gb_add(c, a, act_grad(c, n, OT_OP_ERF_GRAD, dy, a)); return OT_OK;
    case OT_OP_CLIP: { /* bounds may still be inputs: pass them along */
        int in[4] = {dy, a, b, n->n_inputs > 2 ? n->inputs[2] : -1}, node = -1;
        ot_shape s = ot_gb_shape(c, a);
        int out = ot_gb_op_s(c, OT_OP_CLIP_GRAD, in, n->n_inputs + 1, ot_gb_dtype(c, a), &s, &node);
        ot_gb_copy_attrs(c, node, n);
        ot_gb_add(c, a, out);
        return OT_OK;
    }
    case OT_OP_CAST: {
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
