/* grad_table.c — the gradient rule of every op: one array indexed by op, the only
 * place the autodiff driver looks a rule up. An op flagged OT_T_DIFF in ir/ops.def
 * has an entry here and no other op has one (tests/test_op_table.c walks the table
 * and names the op that breaks this). Each entry is the rule of the op's family
 * (grad_*.c); a family may handle several ops and tells them apart itself. */
#include "autodiff/grad_rules.h"

static const ot_grad_rule_fn grad_rules[OT_OP_COUNT] = {
    /* grad_matmul.c */
    [OT_OP_GEMM] = ot_grad_matmul,
    [OT_OP_MATMUL] = ot_grad_matmul,
    /* grad_elementwise.c: arithmetic with broadcasting */
    [OT_OP_ADD] = ot_grad_elementwise,
    [OT_OP_SUB] = ot_grad_elementwise,
    [OT_OP_MUL] = ot_grad_elementwise,
    [OT_OP_DIV] = ot_grad_elementwise,
    [OT_OP_POW] = ot_grad_elementwise,
    [OT_OP_SUM] = ot_grad_elementwise,
    [OT_OP_WHERE] = ot_grad_elementwise,
    [OT_OP_CAST] = ot_grad_elementwise,
    /* grad_elementwise.c: unary maths and activations */
    [OT_OP_SQRT] = ot_grad_elementwise,
    [OT_OP_RECIPROCAL] = ot_grad_elementwise,
    [OT_OP_NEG] = ot_grad_elementwise,
    [OT_OP_EXP] = ot_grad_elementwise,
    [OT_OP_LOG] = ot_grad_elementwise,
    [OT_OP_ERF] = ot_grad_elementwise,
    [OT_OP_TANH] = ot_grad_elementwise,
    [OT_OP_SIGMOID] = ot_grad_elementwise,
    [OT_OP_RELU] = ot_grad_elementwise,
    [OT_OP_LEAKY_RELU] = ot_grad_elementwise,
    [OT_OP_CLIP] = ot_grad_elementwise,
    [OT_OP_GELU] = ot_grad_elementwise,
    /* grad_conv.c, grad_pool.c */
    [OT_OP_CONV] = ot_grad_conv,
    [OT_OP_MAX_POOL] = ot_grad_pool,
    [OT_OP_AVERAGE_POOL] = ot_grad_pool,
    [OT_OP_GLOBAL_AVERAGE_POOL] = ot_grad_pool,
    /* grad_norm.c */
    [OT_OP_SOFTMAX] = ot_grad_norm,
    [OT_OP_LOG_SOFTMAX] = ot_grad_norm,
    [OT_OP_BATCH_NORM] = ot_grad_norm,
    [OT_OP_LAYER_NORM] = ot_grad_norm,
    /* grad_shape.c: views, layout, gather, reductions, Dropout */
    [OT_OP_DROPOUT] = ot_grad_shape,
    [OT_OP_FLATTEN] = ot_grad_shape,
    [OT_OP_RESHAPE] = ot_grad_shape,
    [OT_OP_TRANSPOSE] = ot_grad_shape,
    [OT_OP_SQUEEZE] = ot_grad_shape,
    [OT_OP_UNSQUEEZE] = ot_grad_shape,
    [OT_OP_CONCAT] = ot_grad_shape,
    [OT_OP_SPLIT] = ot_grad_shape,
    [OT_OP_SLICE] = ot_grad_shape,
    [OT_OP_GATHER] = ot_grad_shape,
    [OT_OP_EXPAND] = ot_grad_shape,
    [OT_OP_REDUCE_MEAN] = ot_grad_shape,
    [OT_OP_REDUCE_SUM] = ot_grad_shape,
    [OT_OP_IDENTITY] = ot_grad_shape,
    /* grad_loss.c */
    [OT_OP_SOFTMAX_CROSS_ENTROPY_LOSS] = ot_grad_loss,
    [OT_OP_NLL_LOSS] = ot_grad_loss,
    [OT_OP_MSE_LOSS] = ot_grad_loss,
    [OT_OP_BCE_LOGITS_LOSS] = ot_grad_loss,
    [OT_OP_L1_LOSS] = ot_grad_loss,
    [OT_OP_LINEAR_CROSS_ENTROPY] = ot_grad_loss,
    /* ---- comparison, logic and pointwise math (issue 13): grad_math.c ---- */
    [OT_OP_ABS] = ot_grad_math,
    [OT_OP_SIN] = ot_grad_math,
    [OT_OP_COS] = ot_grad_math,
    [OT_OP_HARD_SIGMOID] = ot_grad_math,
    [OT_OP_HARD_SWISH] = ot_grad_math,
    [OT_OP_SOFTPLUS] = ot_grad_math,
    [OT_OP_MISH] = ot_grad_math,
    [OT_OP_MIN] = ot_grad_math,
    [OT_OP_MAX] = ot_grad_math,
    [OT_OP_MOD] = ot_grad_math,
    [OT_OP_CAST_LIKE] = ot_grad_math,
    /* ---- layout and indexing (issue 13): grad_index.c ---- */
    [OT_OP_PAD] = ot_grad_index,
    [OT_OP_TILE] = ot_grad_index,
    [OT_OP_TRILU] = ot_grad_index,
    [OT_OP_GATHER_ELEMENTS] = ot_grad_index,
    [OT_OP_CUMSUM] = ot_grad_index,
    [OT_OP_SCATTER_ND] = ot_grad_index,
    [OT_OP_SCATTER_ELEMENTS] = ot_grad_index,
    [OT_OP_GATHER_ND] = ot_grad_index,
    /* ---- spatial ops (issue 26, ops batch 2): grad_index.c ---- */
    [OT_OP_RESIZE] = ot_grad_index,
    [OT_OP_UPSAMPLE] = ot_grad_index,
    [OT_OP_CONV_TRANSPOSE] = ot_grad_conv, /* grad_conv.c */
    [OT_OP_DEPTH_TO_SPACE] = ot_grad_index,
    [OT_OP_SPACE_TO_DEPTH] = ot_grad_index,
    /* ---- ops3 (issue 26) ---- */
    [OT_OP_RMS_NORM] = ot_grad_xfmr,
    [OT_OP_ROTARY_EMBEDDING] = ot_grad_xfmr,
    [OT_OP_ATTENTION] = ot_grad_xfmr,
    /* Not differentiable (no entry): Shape, Range, Equal, the comparisons,
     * Not, And, Or, Xor, IsNaN, IsInf, Constant, ConstantOfShape,
     * every backward-only op and the optimizer steps. */
    /* ---- ops batch 1 (issue 26): grad_activation.c ---- */
    [OT_OP_ELU] = ot_grad_activation,
    [OT_OP_SELU] = ot_grad_activation,
    [OT_OP_CELU] = ot_grad_activation,
    [OT_OP_PRELU] = ot_grad_activation,
    [OT_OP_THRESHOLDED_RELU] = ot_grad_activation,
    [OT_OP_SOFTSIGN] = ot_grad_activation,
    [OT_OP_SIGN] = ot_grad_activation,
    [OT_OP_FLOOR] = ot_grad_activation,
    [OT_OP_CEIL] = ot_grad_activation,
    [OT_OP_ROUND] = ot_grad_activation,
    /* grad_reduce_ext.c (ArgMax, ArgMin: indices, no entry) */
    [OT_OP_REDUCE_MAX] = ot_grad_reduce_ext,
    [OT_OP_REDUCE_MIN] = ot_grad_reduce_ext,
    [OT_OP_REDUCE_PROD] = ot_grad_reduce_ext,
    [OT_OP_REDUCE_L1] = ot_grad_reduce_ext,
    [OT_OP_REDUCE_L2] = ot_grad_reduce_ext,
    [OT_OP_REDUCE_LOG_SUM_EXP] = ot_grad_reduce_ext,
    [OT_OP_REDUCE_SUM_SQUARE] = ot_grad_reduce_ext,
    /* grad_norm.c (issue 26) */
    [OT_OP_INSTANCE_NORM] = ot_grad_norm,
    [OT_OP_GROUP_NORM] = ot_grad_norm,
    /* grad_select.c (ops batch 4, issue 26) */
    [OT_OP_EINSUM] = ot_grad_select,
    [OT_OP_TOP_K] = ot_grad_select,
    /* grad_rnn.c (issue 26) */
    [OT_OP_RNN] = ot_grad_rnn,
    [OT_OP_GRU] = ot_grad_rnn,
    [OT_OP_LSTM] = ot_grad_rnn,
};

ot_grad_rule_fn ot_grad_rule_of(ot_op op) { return (op > 0 && op < OT_OP_COUNT) ? grad_rules[op] : NULL; }

bool ot_grad_has_rule(ot_op op) { return ot_grad_rule_of(op) != NULL; }
