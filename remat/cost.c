/* cost.c — the FLOP cost model remat ranks recomputations by and reports: one
 * formula per op family from the static shapes of a node's values. It only has to
 * order choices sensibly and give the user a believable share of the step; memory is
 * never estimated here (the planner measures it). */
#include <stdlib.h>

#include "remat/remat.h"

static int64_t numel_of(const ot_graph *g, int v) {
    if (v < 0 || v >= g->n_values) return 0;
    int64_t n = ot_shape_numel(&g->values[v].shape);
    return n > 0 ? n : 0;
}

int64_t ot_remat_value_bytes(const ot_graph *g, int v) {
    return numel_of(g, v) * (int64_t)ot_dtype_size(g->values[v].dtype);
}

static int64_t dim_of(const ot_graph *g, int v, int axis) {
    if (v < 0) return 0;
    const ot_shape *s = &g->values[v].shape;
    if (s->rank <= 0) return 1;
    if (axis < 0) axis += s->rank;
    if (axis < 0 || axis >= s->rank || s->dim[axis] < 0) return 0;
    return s->dim[axis];
}

/* Transcendental pointwise ops cost a few multiply-adds per element. */
static double pointwise_factor(ot_op op) {
    switch (op) {
    case OT_OP_EXP: case OT_OP_LOG: case OT_OP_TANH: case OT_OP_SIGMOID: case OT_OP_ERF:
    case OT_OP_GELU: case OT_OP_POW: case OT_OP_SQRT:
    case OT_OP_TANH_GRAD: case OT_OP_SIGMOID_GRAD: case OT_OP_GELU_GRAD: case OT_OP_ERF_GRAD:
        return 4.0;
    case OT_OP_DROPOUT: case OT_OP_DROPOUT_GRAD:
        return 3.0; /* Philox draw, compare, scale */
    default:
        return 1.0;
    }
}

double ot_remat_node_flops(const ot_graph *g, const ot_node *n) {
    int in0 = n->n_inputs > 0 ? n->inputs[0] : -1;
    int in1 = n->n_inputs > 1 ? n->inputs[1] : -1;
    int out0 = n->n_outputs > 0 ? n->outputs[0] : -1;
    double out = (double)numel_of(g, out0), in = (double)numel_of(g, in0);
    switch (n->op) {
    case OT_OP_GEMM: {
        int64_t k = ot_node_attr_int(n, "transA", 0) ? dim_of(g, in0, 0) : dim_of(g, in0, 1);
        return 2.0 * out * (double)k + (n->n_inputs > 2 && n->inputs[2] >= 0 ? out : 0.0);
    }
    case OT_OP_MATMUL:
        return 2.0 * out * (double)dim_of(g, in0, -1);
    case OT_OP_CONV: {
        int64_t cout = dim_of(g, in1, 0);
        double per = cout > 0 ? (double)numel_of(g, in1) / (double)cout : 0.0;
        return 2.0 * out * per;
    }
    case OT_OP_CONV_GRAD_INPUT: { /* (dY, W, x-like): as many MACs as the forward conv */
        int64_t cout = dim_of(g, in1, 0);
        double per = cout > 0 ? (double)numel_of(g, in1) / (double)cout : 0.0;
        return 2.0 * in * per;
    }
    case OT_OP_CONV_GRAD_WEIGHT: { /* (dY, X, w-like) -> dW */
        int64_t cout = dim_of(g, out0, 0);
        double per = cout > 0 ? out / (double)cout : 0.0;
        return 2.0 * in * per;
    }
    case OT_OP_MAX_POOL: case OT_OP_AVERAGE_POOL: {
        int kn = 0;
        const int64_t *k = ot_node_attr_ints(n, "kernel_shape", &kn);
        double win = 1.0;
        for (int i = 0; k && i < kn; i++) win *= (double)k[i];
        return out * win;
    }
    case OT_OP_SOFTMAX: case OT_OP_LOG_SOFTMAX: case OT_OP_SOFTMAX_GRAD: case OT_OP_LOG_SOFTMAX_GRAD:
    case OT_OP_BATCH_NORM: case OT_OP_LAYER_NORM:
        return 5.0 * (out > in ? out : in);
    case OT_OP_BATCH_NORM_GRAD: case OT_OP_LAYER_NORM_GRAD:
        return 8.0 * (double)numel_of(g, in1);
    case OT_OP_SOFTMAX_CROSS_ENTROPY_LOSS: case OT_OP_NLL_LOSS: case OT_OP_MSE_LOSS:
        return 5.0 * in;
    case OT_OP_SOFTMAX_CROSS_ENTROPY_LOSS_GRAD: case OT_OP_NLL_LOSS_GRAD: case OT_OP_MSE_LOSS_GRAD:
        return 5.0 * (double)numel_of(g, in1);
    default:
        break;
    }
    const ot_op_info *info = ot_op_get(n->op);
    if (info->traits & (OT_T_VIEW | OT_T_SHAPE)) return 0.0;
    if (info->traits & (OT_T_REDUCE | OT_T_OPTIMIZER)) return in > out ? in : out;
    if (info->traits & OT_T_ELEMENTWISE) return pointwise_factor(n->op) * out;
    return out > in ? out : in; /* layout, gather, pooling grads, ...: one per element */
}

double ot_remat_step_flops(const ot_graph *g) {
    double sum = 0.0;
    for (int id = 0; id < g->n_nodes; id++) {
        const ot_node *n = &g->nodes[id];
        if (n->removed || n->phase == OT_PHASE_RECOMPUTE) continue;
        sum += ot_remat_node_flops(g, n);
    }
    return sum;
}
