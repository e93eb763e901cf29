/* cost.c — the FLOP cost model remat ranks recomputations by and reports: one table
 * giving every op a formula or a class (free, per element, pointwise, ...) over the
 * static shapes of a node's values. It only has to order choices sensibly and give
 * the user a believable share of the step; memory is never estimated here (the
 * planner measures it). */
#include <stdlib.h>

#include "ir/einsum.h"
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

/* What a cost rule reads: the first inputs and output and their element counts. */
typedef struct cost_io {
    int in0, in1, out0;
    double in, out; /* elements of in0 / out0 */
} cost_io;

typedef double (*cost_fn)(const ot_graph *g, const ot_node *n, const cost_io *io);

/* ---- classes shared by many ops ---------------------------------------------- */

/* Views and shape computations move no data. */
static double cost_free(const ot_graph *g, const ot_node *n, const cost_io *io) {
    (void)g, (void)n, (void)io;
    return 0.0;
}

/* One per element of the larger of input 0 and output 0: data movement, gather,
 * reductions, pooling grads, optimizer steps. */
static double cost_per_element(const ot_graph *g, const ot_node *n, const cost_io *io) {
    (void)g, (void)n;
    return io->out > io->in ? io->out : io->in;
}

/* Cheap pointwise arithmetic: one per output element. */
static double cost_pointwise(const ot_graph *g, const ot_node *n, const cost_io *io) {
    (void)g, (void)n;
    return io->out;
}

/* Transcendental pointwise ops cost a few multiply-adds per element. */
static double cost_transcendental(const ot_graph *g, const ot_node *n, const cost_io *io) {
    (void)g, (void)n;
    return 4.0 * io->out;
}

/* Philox draw, compare, scale per output element. */
static double cost_random_pointwise(const ot_graph *g, const ot_node *n, const cost_io *io) {
    (void)g, (void)n;
    return 3.0 * io->out;
}

/* Softmax and normalisations: a few passes over the larger of X and Y. */
static double cost_norm(const ot_graph *g, const ot_node *n, const cost_io *io) {
    (void)g, (void)n;
    return 5.0 * (io->out > io->in ? io->out : io->in);
}

/* BatchNormGrad / LayerNormGrad: (dY, X, scale), over X. */
static double cost_norm_grad(const ot_graph *g, const ot_node *n, const cost_io *io) {
    (void)n;
    return 8.0 * (double)numel_of(g, io->in1);
}

static double cost_loss(const ot_graph *g, const ot_node *n, const cost_io *io) {
    (void)g, (void)n;
    return 5.0 * io->in;
}

/* Loss gradients: (dLoss, X, ...), over X. */
static double cost_loss_grad(const ot_graph *g, const ot_node *n, const cost_io *io) {
    (void)n;
    return 5.0 * (double)numel_of(g, io->in1);
}

/* ---- ops with their own formula ---------------------------------------------- */

static double cost_gemm(const ot_graph *g, const ot_node *n, const cost_io *io) {
    int64_t k = ot_node_attr_int(n, "transA", 0) ? dim_of(g, io->in0, 0) : dim_of(g, io->in0, 1);
    return 2.0 * io->out * (double)k + (n->n_inputs > 2 && n->inputs[2] >= 0 ? io->out : 0.0);
}

static double cost_matmul(const ot_graph *g, const ot_node *n, const cost_io *io) {
    (void)n;
    return 2.0 * io->out * (double)dim_of(g, io->in0, -1);
}

/* MACs per output element of a conv with weight w: Cin/group * kernel size. */
static double conv_macs_per_out(const ot_graph *g, int w) {
    int64_t cout = dim_of(g, w, 0);
    return cout > 0 ? (double)numel_of(g, w) / (double)cout : 0.0;
}

static double cost_conv(const ot_graph *g, const ot_node *n, const cost_io *io) {
    (void)n;
    return 2.0 * io->out * conv_macs_per_out(g, io->in1);
}

/* (dY, W, x-like): as many MACs as the forward conv. */
static double cost_conv_grad_input(const ot_graph *g, const ot_node *n, const cost_io *io) {
    (void)n;
    return 2.0 * io->in * conv_macs_per_out(g, io->in1);
}

/* (dY, X, w-like) -> dW */
static double cost_conv_grad_weight(const ot_graph *g, const ot_node *n, const cost_io *io) {
    (void)n;
    int64_t cout = dim_of(g, io->out0, 0);
    double per = cout > 0 ? io->out / (double)cout : 0.0;
    return 2.0 * io->in * per;
}

/* MaxPool / AveragePool: one per window element per output. */
static double cost_window(const ot_graph *g, const ot_node *n, const cost_io *io) {
    (void)g;
    int kn = 0;
    const int64_t *k = ot_node_attr_ints(n, "kernel_shape", &kn);
    double win = 1.0;
    for (int i = 0; k && i < kn; i++) win *= (double)k[i];
    return io->out * win;
}

/* Attention (Q, K, V, ...): QK^T and PV, 2 * D MACs per score each way, over
 * B * Hq * Sq query rows of T = past + new keys (the output's Dv read as D). */
static int64_t attn_keys(const ot_graph *g, const ot_node *n, int k_slot, int past_slot) {
    int64_t t = dim_of(g, n->inputs[k_slot], g->values[n->inputs[k_slot]].shape.rank == 4 ? 2 : 1);
    if (n->n_inputs > past_slot && n->inputs[past_slot] >= 0) t += dim_of(g, n->inputs[past_slot], 2);
    return t;
}
static double cost_attention(const ot_graph *g, const ot_node *n, const cost_io *io) {
    return 4.0 * io->out * (double)attn_keys(g, n, 1, 4) + 5.0 * io->out;
}
/* AttentionGrad (dY, Q, K, V, ...): the scores again, then dP, dQ, dK and dV. */
static double cost_attention_grad(const ot_graph *g, const ot_node *n, const cost_io *io) {
    return 10.0 * io->in * (double)attn_keys(g, n, 2, 5);
}

/* ---- the table --------------------------------------------------------------- */

/* The cost of every op: a formula or a class. Every op of ops.def has an entry
 * (tests/test_op_table.c checks it); so does OT_OP_UNKNOWN, which import refuses
 * anyway, so that a node of one never reads a hole. */
/* ops batch 4 (issue 26): Einsum and EinsumGrad multiply-add once per assignment of
 * every label, the product of the label sizes (each the largest dim it has). */
static double cost_einsum(const ot_graph *g, const ot_node *n, const cost_io *io) {
    (void)io;
    int first = n->op == OT_OP_EINSUM_GRAD ? 1 : 0, nx = n->n_inputs - first, ranks[OT_EIN_MAX_IN];
    if (nx < 1 || nx > OT_EIN_MAX_IN) return 0.0;
    for (int k = 0; k < nx; k++) {
        int v = n->inputs[first + k];
        if (v < 0 || g->values[v].shape.rank < 0) return 0.0;
        ranks[k] = g->values[v].shape.rank;
    }
    ot_einsum e;
    if (!ot_einsum_parse(ot_node_attr_string(n, "equation", NULL), nx, ranks, &e, NULL, 0)) return 0.0;
    int64_t size[OT_EIN_MAX_LABELS] = {0};
    for (int k = 0; k < nx; k++)
        for (int d = 0; d < e.rank[k]; d++) {
            int64_t v = dim_of(g, n->inputs[first + k], d);
            if (v > size[e.label[k][d]]) size[e.label[k][d]] = v;
        }
    double f = 2.0;
    for (int l = 0; l < e.n_labels; l++) f *= (double)(size[l] > 0 ? size[l] : 1);
    return f;
}

/* RNN, GRU, LSTM: two multiply-adds per weight per step and batch element; RnnGrad
 * recomputes the forward and runs about twice its work back. */
static double cost_rnn(const ot_graph *g, const ot_node *n, const cost_io *io) {
    (void)io;
    int first = n->op == OT_OP_RNN_GRAD ? 3 : 0;
    if (n->n_inputs < first + 3) return 0.0;
    int x = n->inputs[first], w = n->inputs[first + 1], r = n->inputs[first + 2];
    double steps = (double)numel_of(g, x) / (double)(dim_of(g, x, 2) ? dim_of(g, x, 2) : 1);
    double f = 2.0 * steps * (double)(numel_of(g, w) + numel_of(g, r));
    return n->op == OT_OP_RNN_GRAD ? 3.0 * f : f;
}

/* LinearCrossEntropy: the head's GEMM (2 rows D V) and its softmax over the chunks;
 * the gradient recomputes the logits and runs two more GEMMs (dH and dW). */
static double cost_linear_ce(const ot_graph *g, const ot_node *n, const cost_io *io) {
    int first = n->op == OT_OP_LINEAR_CROSS_ENTROPY_GRAD ? 1 : 0;
    if (n->n_inputs < first + 2) return 0.0;
    int w = n->inputs[first + 1];
    double wn = (double)numel_of(g, w), D = (double)dim_of(g, n->inputs[first], -1);
    double rows = D > 0 ? (double)numel_of(g, n->inputs[first]) / D : 0.0;
    (void)io;
    double f = 2.0 * rows * wn + 5.0 * rows * (D > 0 ? wn / D : 0.0);
    return n->op == OT_OP_LINEAR_CROSS_ENTROPY_GRAD ? 3.0 * f : f;
}

static const cost_fn cost_rules[OT_OP_COUNT] = {
    [OT_OP_UNKNOWN] = cost_per_element,
    [OT_OP_GEMM] = cost_gemm,
    [OT_OP_MATMUL] = cost_matmul,
    [OT_OP_ADD] = cost_pointwise,
    [OT_OP_SUB] = cost_pointwise,
    [OT_OP_MUL] = cost_pointwise,
    [OT_OP_DIV] = cost_pointwise,
    [OT_OP_POW] = cost_transcendental,
    [OT_OP_SQRT] = cost_transcendental,
    [OT_OP_RECIPROCAL] = cost_pointwise,
    [OT_OP_NEG] = cost_pointwise,
    [OT_OP_EXP] = cost_transcendental,
    [OT_OP_LOG] = cost_transcendental,
    [OT_OP_ERF] = cost_transcendental,
    [OT_OP_TANH] = cost_transcendental,
    [OT_OP_SIGMOID] = cost_transcendental,
    [OT_OP_RELU] = cost_pointwise,
    [OT_OP_LEAKY_RELU] = cost_pointwise,
    [OT_OP_CLIP] = cost_pointwise,
    [OT_OP_GELU] = cost_transcendental,
    [OT_OP_SOFTMAX] = cost_norm,
    [OT_OP_LOG_SOFTMAX] = cost_norm,
    [OT_OP_CONV] = cost_conv,
    [OT_OP_MAX_POOL] = cost_window,
    [OT_OP_AVERAGE_POOL] = cost_window,
    [OT_OP_GLOBAL_AVERAGE_POOL] = cost_per_element,
    [OT_OP_BATCH_NORM] = cost_norm,
    [OT_OP_LAYER_NORM] = cost_norm,
    /* one per element, not cost_random_pointwise: the figure remat has always used */
    [OT_OP_DROPOUT] = cost_per_element,
    [OT_OP_FLATTEN] = cost_free,
    [OT_OP_RESHAPE] = cost_free,
    [OT_OP_TRANSPOSE] = cost_per_element,
    [OT_OP_SQUEEZE] = cost_free,
    [OT_OP_UNSQUEEZE] = cost_free,
    [OT_OP_CONCAT] = cost_per_element,
    [OT_OP_SPLIT] = cost_per_element,
    [OT_OP_SLICE] = cost_per_element,
    [OT_OP_GATHER] = cost_per_element,
    [OT_OP_SHAPE] = cost_free,
    [OT_OP_RANGE] = cost_free,
    [OT_OP_EQUAL] = cost_pointwise,
    [OT_OP_WHERE] = cost_pointwise,
    [OT_OP_CAST] = cost_pointwise,
    [OT_OP_CONSTANT] = cost_free,
    [OT_OP_CONSTANT_OF_SHAPE] = cost_free,
    [OT_OP_EXPAND] = cost_per_element,
    [OT_OP_REDUCE_MEAN] = cost_per_element,
    [OT_OP_REDUCE_SUM] = cost_per_element,
    [OT_OP_IDENTITY] = cost_free,
    [OT_OP_SUM] = cost_pointwise,
    [OT_OP_SOFTMAX_CROSS_ENTROPY_LOSS] = cost_loss,
    [OT_OP_NLL_LOSS] = cost_loss,
    /* backward-only and training ops */
    [OT_OP_RELU_GRAD] = cost_pointwise,
    [OT_OP_LEAKY_RELU_GRAD] = cost_pointwise,
    [OT_OP_SIGMOID_GRAD] = cost_transcendental,
    [OT_OP_TANH_GRAD] = cost_transcendental,
    [OT_OP_GELU_GRAD] = cost_transcendental,
    [OT_OP_ERF_GRAD] = cost_transcendental,
    [OT_OP_CLIP_GRAD] = cost_pointwise,
    [OT_OP_SOFTMAX_GRAD] = cost_norm,
    [OT_OP_LOG_SOFTMAX_GRAD] = cost_norm,
    [OT_OP_CONV_GRAD_INPUT] = cost_conv_grad_input,
    [OT_OP_CONV_GRAD_WEIGHT] = cost_conv_grad_weight,
    [OT_OP_MAX_POOL_GRAD] = cost_per_element,
    [OT_OP_AVERAGE_POOL_GRAD] = cost_per_element,
    [OT_OP_BATCH_NORM_GRAD] = cost_norm_grad,
    [OT_OP_LAYER_NORM_GRAD] = cost_norm_grad,
    [OT_OP_DROPOUT_GRAD] = cost_random_pointwise,
    [OT_OP_GATHER_GRAD] = cost_per_element,
    [OT_OP_REDUCE_TO_LIKE] = cost_per_element,
    [OT_OP_EXPAND_LIKE] = cost_per_element,
    [OT_OP_SLICE_GRAD] = cost_per_element,
    [OT_OP_SOFTMAX_CROSS_ENTROPY_LOSS_GRAD] = cost_loss_grad,
    [OT_OP_NLL_LOSS_GRAD] = cost_loss_grad,
    [OT_OP_ZEROS_LIKE] = cost_per_element,
    [OT_OP_ONES_LIKE] = cost_per_element,
    [OT_OP_MSE_LOSS] = cost_loss,
    [OT_OP_MSE_LOSS_GRAD] = cost_loss_grad,
    [OT_OP_BCE_LOGITS_LOSS] = cost_loss,
    [OT_OP_BCE_LOGITS_LOSS_GRAD] = cost_loss_grad,
    [OT_OP_L1_LOSS] = cost_loss,
    [OT_OP_L1_LOSS_GRAD] = cost_loss_grad,
    [OT_OP_SGD_STEP] = cost_per_element,
    [OT_OP_ADAM_STEP] = cost_per_element,
    /* ---- comparison, logic and pointwise math (issue 13) ---- */
    [OT_OP_LESS] = cost_pointwise,
    [OT_OP_GREATER] = cost_pointwise,
    [OT_OP_LESS_OR_EQUAL] = cost_pointwise,
    [OT_OP_GREATER_OR_EQUAL] = cost_pointwise,
    [OT_OP_NOT] = cost_pointwise,
    [OT_OP_AND] = cost_pointwise,
    [OT_OP_OR] = cost_pointwise,
    [OT_OP_XOR] = cost_pointwise,
    [OT_OP_IS_NAN] = cost_pointwise,
    [OT_OP_IS_INF] = cost_pointwise,
    [OT_OP_ABS] = cost_pointwise,
    [OT_OP_SIN] = cost_transcendental,
    [OT_OP_COS] = cost_transcendental,
    [OT_OP_HARD_SIGMOID] = cost_pointwise,
    [OT_OP_HARD_SWISH] = cost_pointwise,
    [OT_OP_SOFTPLUS] = cost_transcendental,
    [OT_OP_MISH] = cost_transcendental,
    [OT_OP_MIN] = cost_pointwise,
    [OT_OP_MAX] = cost_pointwise,
    [OT_OP_MOD] = cost_pointwise,
    [OT_OP_CAST_LIKE] = cost_pointwise,
    [OT_OP_ABS_GRAD] = cost_pointwise,
    [OT_OP_HARD_SIGMOID_GRAD] = cost_pointwise,
    [OT_OP_HARD_SWISH_GRAD] = cost_pointwise,
    [OT_OP_MISH_GRAD] = cost_transcendental,
    [OT_OP_MOD_GRAD] = cost_pointwise,
    [OT_OP_MAX_GRAD] = cost_pointwise,
    [OT_OP_MIN_GRAD] = cost_pointwise,
    /* ---- layout and indexing (issue 13) ---- */
    [OT_OP_PAD] = cost_per_element,
    [OT_OP_TILE] = cost_per_element,
    [OT_OP_TRILU] = cost_per_element,
    [OT_OP_GATHER_ELEMENTS] = cost_per_element,
    [OT_OP_CUMSUM] = cost_pointwise,
    [OT_OP_SCATTER_ND] = cost_per_element,
    [OT_OP_SCATTER_ELEMENTS] = cost_per_element,
    [OT_OP_GATHER_ND] = cost_per_element,
    /* ---- random sources (issue 13): one Philox draw per element, like DropoutGrad ---- */
    [OT_OP_RANDOM_UNIFORM_LIKE] = cost_random_pointwise,
    [OT_OP_RANDOM_UNIFORM] = cost_random_pointwise,
    [OT_OP_PAD_GRAD] = cost_per_element,
    [OT_OP_TILE_GRAD] = cost_per_element,
    [OT_OP_GATHER_ELEMENTS_GRAD] = cost_per_element,
    /* ---- ops batch 1 (issue 26): activations and rounding ---- */
    [OT_OP_ELU] = cost_transcendental,
    [OT_OP_SELU] = cost_transcendental,
    [OT_OP_CELU] = cost_transcendental,
    [OT_OP_PRELU] = cost_pointwise,
    [OT_OP_THRESHOLDED_RELU] = cost_pointwise,
    [OT_OP_SOFTSIGN] = cost_pointwise,
    [OT_OP_SIGN] = cost_pointwise,
    [OT_OP_FLOOR] = cost_pointwise,
    [OT_OP_CEIL] = cost_pointwise,
    [OT_OP_ROUND] = cost_pointwise,
    [OT_OP_ELU_GRAD] = cost_transcendental,
    [OT_OP_THRESHOLDED_RELU_GRAD] = cost_pointwise,
    [OT_OP_SOFTSIGN_GRAD] = cost_pointwise,
    [OT_OP_PRELU_GRAD] = cost_pointwise,
    /* ---- ops batch 1 (issue 26): reductions (LogSumExp: an exp per element) ---- */
    [OT_OP_REDUCE_MAX] = cost_per_element,
    [OT_OP_REDUCE_MIN] = cost_per_element,
    [OT_OP_REDUCE_PROD] = cost_per_element,
    [OT_OP_REDUCE_L1] = cost_per_element,
    [OT_OP_REDUCE_L2] = cost_per_element,
    [OT_OP_REDUCE_LOG_SUM_EXP] = cost_transcendental,
    [OT_OP_REDUCE_SUM_SQUARE] = cost_per_element,
    [OT_OP_ARG_MAX] = cost_per_element,
    [OT_OP_ARG_MIN] = cost_per_element,
    [OT_OP_REDUCE_GRAD] = cost_pointwise,
    /* ---- issue 26: InstanceNormalization, GroupNormalization ---- */
    [OT_OP_INSTANCE_NORM] = cost_norm,
    [OT_OP_GROUP_NORM] = cost_norm,
    [OT_OP_GROUP_NORM_GRAD] = cost_norm_grad,
    /* ---- spatial ops (issue 26, ops batch 2): a few taps per element ---- */
    [OT_OP_RESIZE] = cost_pointwise,
    [OT_OP_UPSAMPLE] = cost_pointwise,
    [OT_OP_RESIZE_GRAD] = cost_pointwise,
    [OT_OP_CONV_TRANSPOSE] = cost_conv_grad_input, /* it runs ConvGradInput: (X, W) */
    [OT_OP_DEPTH_TO_SPACE] = cost_per_element,
    [OT_OP_SPACE_TO_DEPTH] = cost_per_element,
    /* ---- ops3 (issue 26) ---- */
    [OT_OP_RMS_NORM] = cost_norm,
    [OT_OP_RMS_NORM_GRAD] = cost_norm_grad,
    [OT_OP_ROTARY_EMBEDDING] = cost_pointwise,
    [OT_OP_ROTARY_EMBEDDING_GRAD] = cost_pointwise,
    [OT_OP_ATTENTION] = cost_attention,
    [OT_OP_ATTENTION_GRAD] = cost_attention_grad,
    /* ---- ops batch 4 (issue 26) ---- */
    [OT_OP_EINSUM] = cost_einsum,
    [OT_OP_EINSUM_GRAD] = cost_einsum,
    [OT_OP_TOP_K] = cost_per_element,
    [OT_OP_ONE_HOT] = cost_per_element,
    [OT_OP_SIZE] = cost_free,
    /* ---- recurrent ops (issue 26) ---- */
    [OT_OP_RNN] = cost_rnn,
    [OT_OP_GRU] = cost_rnn,
    [OT_OP_LSTM] = cost_rnn,
    [OT_OP_RNN_GRAD] = cost_rnn,
    [OT_OP_LINEAR_CROSS_ENTROPY] = cost_linear_ce,
    [OT_OP_LINEAR_CROSS_ENTROPY_GRAD] = cost_linear_ce,
};

bool ot_cost_has_rule(ot_op op) { return (unsigned)op < OT_OP_COUNT && cost_rules[op]; }

double ot_remat_node_flops(const ot_graph *g, const ot_node *n) {
    cost_io io = {
        .in0 = n->n_inputs > 0 ? n->inputs[0] : -1,
        .in1 = n->n_inputs > 1 ? n->inputs[1] : -1,
        .out0 = n->n_outputs > 0 ? n->outputs[0] : -1,
    };
    io.out = (double)numel_of(g, io.out0);
    io.in = (double)numel_of(g, io.in0);
    /* A hole would be a bug the op-table test catches; count it as data movement. */
    cost_fn fn = ot_cost_has_rule(n->op) ? cost_rules[n->op] : cost_per_element;
    return fn(g, n, &io);
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
