/* cpu_ops.c — the CPU backend's op table and its entry points (kernels/kernel.h).
 * One row per op of ir/ops.def, indexed by op: the kernel, the dtype predicate that
 * supports() answers with, and the workspace function (NULL: none). Running a node
 * checks its arity, its required data and its workspace, then calls the row's kernel;
 * an op without a row has no CPU kernel. Nothing else in the backend switches on the
 * op to dispatch. */
#include "kernels/cpu/cpu_common.h"
#include "kernels/cpu/grad_kernels.h"
#include "kernels/cpu/optim_cpu.h"
#include "kernels/cpu/cpu_random.h"
#include "kernels/cpu/cpu_lowp.h"
#include "kernels/cpu/conv_lowp.h"
#include "kernels/cpu/pool_lowp.h"
#include "kernels/xfmr_geometry.h" /* ot_xfmr_input: which optional inputs an Attention has */

typedef bool (*cpu_supports_fn)(ot_dtype t0, ot_dtype o0, const ot_tensor *in);
typedef bool (*cpu_supports_node_fn)(const ot_node *node, const ot_tensor *in, const ot_tensor *out);
typedef size_t (*cpu_workspace_fn)(const ot_node *node, const ot_tensor *in, const ot_tensor *out);

typedef struct cpu_op {
    ot_cpu_kernel_fn run;
    /* t0 / o0: the dtype of input / output 0 (OT_UNDEFINED when the node has none) */
    cpu_supports_fn supports;
    cpu_workspace_fn workspace;
} cpu_op;

/* ---- dtype predicates ------------------------------------------------------------- */

static bool any_dtype(ot_dtype t) { return ot_dtype_size(t) != 0; }
static bool arith_dtype(ot_dtype t) { return t == OT_F32 || t == OT_I64 || t == OT_I32; }
static bool num_dtype(ot_dtype t) {
    return t == OT_F32 || t == OT_F64 || t == OT_F16 || t == OT_BF16 || ot_kernel_is_int_dtype(t);
}
static bool index_dtype(ot_dtype t) { return t == OT_I64 || t == OT_I32; }
static bool lowp_dtype(ot_dtype t) { return t == OT_BF16 || t == OT_F16; }

/* compute kernels, forward and backward, are float32 */
static bool sup_f32(ot_dtype t0, ot_dtype o0, const ot_tensor *in) { return t0 == OT_F32; }
static bool sup_arith(ot_dtype t0, ot_dtype o0, const ot_tensor *in) {
    return (arith_dtype(t0) || t0 == OT_U8 || t0 == OT_I8) && in[1].dtype == t0;
}
static bool sup_pow(ot_dtype t0, ot_dtype o0, const ot_tensor *in) {
    return arith_dtype(t0) && arith_dtype(in[1].dtype);
}
/* Clip: integers and float32 as they are, bfloat16 / float16 X and Y through the float32
 * kernel chunk by chunk (its bounds, optional inputs of any float dtype, read as one
 * value each: cpu_lowp.c) */
static bool sup_clip(ot_dtype t0, ot_dtype o0, const ot_tensor *in) {
    return arith_dtype(t0) || t0 == OT_U8 || t0 == OT_I8 || (lowp_dtype(t0) && o0 == t0);
}
static bool sup_neg(ot_dtype t0, ot_dtype o0, const ot_tensor *in) { return arith_dtype(t0); }
static bool sup_equal(ot_dtype t0, ot_dtype o0, const ot_tensor *in) {
    return in[1].dtype == t0 && (arith_dtype(t0) || t0 == OT_BOOL || t0 == OT_U8 || t0 == OT_I8);
}
static bool sup_where(ot_dtype t0, ot_dtype o0, const ot_tensor *in) {
    return t0 == OT_BOOL && any_dtype(in[1].dtype) && in[2].dtype == in[1].dtype;
}
/* data movement: any dtype with a size */
static bool sup_any(ot_dtype t0, ot_dtype o0, const ot_tensor *in) { return any_dtype(t0); }
static bool sup_any_out(ot_dtype t0, ot_dtype o0, const ot_tensor *in) { return any_dtype(o0); }
static bool sup_gather(ot_dtype t0, ot_dtype o0, const ot_tensor *in) {
    return any_dtype(t0) && index_dtype(in[1].dtype);
}
static bool sup_cast(ot_dtype t0, ot_dtype o0, const ot_tensor *in) { return num_dtype(t0) && num_dtype(o0); }
static bool sup_range(ot_dtype t0, ot_dtype o0, const ot_tensor *in) {
    return t0 == OT_F32 || t0 == OT_F64 || t0 == OT_I64 || t0 == OT_I32;
}
/* LinearCrossEntropyGrad: float32 dLoss, H, W */
static bool sup_linear_ce_grad(ot_dtype t0, ot_dtype o0, const ot_tensor *in) {
    return t0 == OT_F32 && in[1].dtype == OT_F32 && in[2].dtype == OT_F32;
}
static bool sup_class_loss(ot_dtype t0, ot_dtype o0, const ot_tensor *in) {
    return t0 == OT_F32 && index_dtype(in[1].dtype);
}
/* issue 27: Gemm and MatMul take bfloat16 or float16 A and B (the same dtype) into a
 * float32 Y or one of their dtype, float32 sums (gemm_lowp.h); Gemm's C is checked in
 * the kernel (float32 or A's dtype) */
static bool sup_gemm(ot_dtype t0, ot_dtype o0, const ot_tensor *in) {
    return t0 == OT_F32 || (lowp_dtype(t0) && in[1].dtype == t0 && (o0 == OT_F32 || o0 == t0));
}
/* issue 27: element-wise ops with bfloat16 / float16 operands and output of one dtype,
 * float32 math (cpu_lowp.c) */
static bool sup_unary_lp(ot_dtype t0, ot_dtype o0, const ot_tensor *in) {
    return t0 == OT_F32 || (lowp_dtype(t0) && o0 == t0);
}
static bool sup_arith_lp(ot_dtype t0, ot_dtype o0, const ot_tensor *in) {
    return sup_arith(t0, o0, in) || (lowp_dtype(t0) && in[1].dtype == t0 && o0 == t0);
}
static bool sup_grad_lp(ot_dtype t0, ot_dtype o0, const ot_tensor *in) {
    return t0 == OT_F32 || (lowp_dtype(t0) && in[1].dtype == t0 && o0 == t0);
}
/* 1-D and 2-D convolutions; with bfloat16 / float16 X and W (the same dtype) into Y of
 * their dtype or float32 through the float32 kernels (cpu_lowp.c) */
static bool sup_conv_lowp(ot_dtype t0, ot_dtype o0, const ot_tensor *in) {
    return lowp_dtype(t0) && in[1].dtype == t0 && (o0 == t0 || o0 == OT_F32);
}
static bool sup_conv(ot_dtype t0, ot_dtype o0, const ot_tensor *in) {
    return (t0 == OT_F32 || sup_conv_lowp(t0, o0, in)) && (in[0].shape.rank == 3 || in[0].shape.rank == 4);
}
/* ConvGradInput (dY, W), ConvGradWeight (dY, X), ConvTranspose (X, W) */
static bool sup_conv_grad(ot_dtype t0, ot_dtype o0, const ot_tensor *in) {
    return t0 == OT_F32 || sup_conv_lowp(t0, o0, in);
}
/* BatchNormalization: X and Y float32, or bfloat16 / float16 with float32 scale, bias
 * and statistics (cpu_norm.c); its gradient: dY and X of one such dtype into dX of it,
 * float32 scale (grad_norm.c) */
static bool sup_bn(ot_dtype t0, ot_dtype o0, const ot_tensor *in) {
    return t0 == OT_F32 || (lowp_dtype(t0) && o0 == t0 && in[1].dtype == OT_F32);
}
static bool sup_bn_grad(ot_dtype t0, ot_dtype o0, const ot_tensor *in) {
    return t0 == OT_F32 || (lowp_dtype(t0) && in[1].dtype == t0 && in[2].dtype == OT_F32 && o0 == t0);
}
static bool sup_ones(ot_dtype t0, ot_dtype o0, const ot_tensor *in) { return o0 == OT_F32 || o0 == OT_F64; }
static bool sup_gather_grad(ot_dtype t0, ot_dtype o0, const ot_tensor *in) {
    return t0 == OT_F32 && ot_kernel_is_int_dtype(in[1].dtype);
}
/* (dY, logits or log-probabilities, labels) */
static bool sup_class_loss_grad(ot_dtype t0, ot_dtype o0, const ot_tensor *in) {
    return in[1].dtype == OT_F32 && ot_kernel_is_int_dtype(in[2].dtype);
}

/* issue 13: comparisons of float32 / int64 / int32, logic on bool */
static bool sup_compare(ot_dtype t0, ot_dtype o0, const ot_tensor *in) { return arith_dtype(t0) && in[1].dtype == t0; }
static bool sup_logic(ot_dtype t0, ot_dtype o0, const ot_tensor *in) { return t0 == OT_BOOL && in[1].dtype == OT_BOOL; }
static bool sup_not(ot_dtype t0, ot_dtype o0, const ot_tensor *in) { return t0 == OT_BOOL; }
static bool sup_f32_f64(ot_dtype t0, ot_dtype o0, const ot_tensor *in) { return t0 == OT_F32 || t0 == OT_F64; }
static bool sup_minmax(ot_dtype t0, ot_dtype o0, const ot_tensor *in) { return arith_dtype(t0) && o0 == t0; }
/* layout and indexing (issue 13) */
static bool sup_pad(ot_dtype t0, ot_dtype o0, const ot_tensor *in) {
    return any_dtype(t0) && ot_dtype_size(t0) <= 8 && index_dtype(in[1].dtype);
}
static bool sup_scatter(ot_dtype t0, ot_dtype o0, const ot_tensor *in) {
    return any_dtype(t0) && ot_dtype_size(t0) <= 8 && index_dtype(in[1].dtype) && in[2].dtype == t0;
}
static bool sup_cumsum(ot_dtype t0, ot_dtype o0, const ot_tensor *in) {
    return (t0 == OT_F32 || t0 == OT_F64 || t0 == OT_I64 || t0 == OT_I32) && index_dtype(in[1].dtype);
}
/* random sources (issue 13): the output's dtype decides, the input gives a shape only */
static bool sup_f32_out(ot_dtype t0, ot_dtype o0, const ot_tensor *in) { return o0 == OT_F32; }
/* ops batch 1 (issue 26): PRelu's X and slope float32 */
static bool sup_prelu(ot_dtype t0, ot_dtype o0, const ot_tensor *in) { return t0 == OT_F32 && in[1].dtype == OT_F32; }
/* ops batch 4 (issue 26): TopK's float32 X and integer K; OneHot's numeric indices and
 * float32 / int64 / int32 values */
static bool sup_top_k(ot_dtype t0, ot_dtype o0, const ot_tensor *in) {
    return t0 == OT_F32 && index_dtype(in[1].dtype);
}
/* RnnGrad: its dY or dY_h may be absent; X (input 3) is float32 */
static bool sup_any_rnn_grad(ot_dtype t0, ot_dtype o0, const ot_tensor *in) { return in[3].dtype == OT_F32; }
static bool sup_one_hot(ot_dtype t0, ot_dtype o0, const ot_tensor *in) {
    return num_dtype(t0) && num_dtype(in[1].dtype) && arith_dtype(o0) && in[2].dtype == o0;
}

/* Attention (o = 0) and AttentionGrad (o = 1: dY first): float32 Q (and dY); or Q, K,
 * V, dY, the past key and value and every output of one bfloat16 / float16 dtype, the
 * mask bool or float32, nonpad int64 (cpu_xfmr.c: float32 math on a head's copies). */
static bool sup_attention_of(const ot_node *node, const ot_tensor *in, const ot_tensor *out, int o) {
    ot_dtype t = in[0].dtype;
    if (t == OT_F32) return true;
    if (!lowp_dtype(t)) return false;
    for (int k = 0; k < node->n_inputs && k <= o + 6; k++) {
        const ot_tensor *x = ot_xfmr_input(node, in, k);
        ot_dtype want = k == o + 3 ? OT_UNDEFINED : k == o + 6 ? OT_I64 : t;
        if (!x) continue;
        if (want == OT_UNDEFINED ? x->dtype != OT_F32 && x->dtype != OT_BOOL : x->dtype != want) return false;
    }
    for (int k = 0; k < node->n_outputs && k < 3; k++)
        if ((!node->outputs || node->outputs[k] >= 0) && out[k].dtype != OT_UNDEFINED && out[k].dtype != t)
            return false;
    return node->n_outputs <= 3;
}
static bool sup_attention(const ot_node *node, const ot_tensor *in, const ot_tensor *out) {
    return sup_attention_of(node, in, out, 0);
}
static bool sup_attention_grad(const ot_node *node, const ot_tensor *in, const ot_tensor *out) {
    return sup_attention_of(node, in, out, 1);
}

/* ---- the table -------------------------------------------------------------------- */

#define F32(fn) {fn, sup_f32, NULL}
static const cpu_op CPU_OPS[OT_OP_COUNT] = {
    [OT_OP_GEMM] = {ot_cpu_gemm, sup_gemm, ot_cpu_matmul_workspace},
    [OT_OP_MATMUL] = {ot_cpu_matmul, sup_gemm, ot_cpu_matmul_workspace},
    [OT_OP_ADD] = {ot_cpu_binary_any, sup_arith_lp, ot_cpu_elementwise_any_workspace},
    [OT_OP_SUB] = {ot_cpu_binary_any, sup_arith_lp, ot_cpu_elementwise_any_workspace},
    [OT_OP_MUL] = {ot_cpu_binary_any, sup_arith_lp, ot_cpu_elementwise_any_workspace},
    [OT_OP_DIV] = {ot_cpu_binary_any, sup_arith_lp, ot_cpu_elementwise_any_workspace},
    [OT_OP_POW] = {ot_cpu_binary, sup_pow, NULL},
    [OT_OP_SQRT] = {ot_cpu_unary_any, sup_unary_lp, NULL},
    [OT_OP_RECIPROCAL] = F32(ot_cpu_unary),
    [OT_OP_NEG] = {ot_cpu_unary, sup_neg, NULL},
    [OT_OP_EXP] = {ot_cpu_unary_any, sup_unary_lp, NULL},
    [OT_OP_LOG] = F32(ot_cpu_unary),
    [OT_OP_ERF] = {ot_cpu_unary_any, sup_unary_lp, NULL},
    [OT_OP_TANH] = {ot_cpu_unary_any, sup_unary_lp, NULL},
    [OT_OP_SIGMOID] = {ot_cpu_unary_any, sup_unary_lp, NULL},
    [OT_OP_RELU] = {ot_cpu_unary_any, sup_unary_lp, NULL},
    [OT_OP_LEAKY_RELU] = {ot_cpu_unary_any, sup_unary_lp, NULL},
    [OT_OP_CLIP] = {ot_cpu_unary_any, sup_clip, NULL},
    [OT_OP_GELU] = {ot_cpu_unary_any, sup_unary_lp, NULL},
    [OT_OP_SOFTMAX] = F32(ot_cpu_softmax),
    [OT_OP_LOG_SOFTMAX] = F32(ot_cpu_softmax),
    [OT_OP_CONV] = {ot_cpu_conv_all, sup_conv, ot_cpu_conv_all_workspace},
    [OT_OP_MAX_POOL] = {ot_cpu_pool_all, sup_unary_lp, ot_cpu_pool_all_workspace},
    [OT_OP_AVERAGE_POOL] = {ot_cpu_pool_all, sup_unary_lp, ot_cpu_pool_all_workspace},
    [OT_OP_GLOBAL_AVERAGE_POOL] = {ot_cpu_pool_all, sup_unary_lp, ot_cpu_pool_all_workspace},
    [OT_OP_BATCH_NORM] = {ot_cpu_batch_norm, sup_bn, NULL},
    [OT_OP_LAYER_NORM] = F32(ot_cpu_layer_norm),
    [OT_OP_DROPOUT] = {ot_cpu_dropout, sup_unary_lp, NULL}, /* the mask stays bool */
    [OT_OP_FLATTEN] = {ot_cpu_copy_view, sup_any, NULL},
    [OT_OP_RESHAPE] = {ot_cpu_copy_view, sup_any, NULL},
    [OT_OP_TRANSPOSE] = {ot_cpu_transpose, sup_any, NULL},
    [OT_OP_SQUEEZE] = {ot_cpu_copy_view, sup_any, NULL},
    [OT_OP_UNSQUEEZE] = {ot_cpu_copy_view, sup_any, NULL},
    [OT_OP_CONCAT] = {ot_cpu_concat, sup_any, NULL},
    [OT_OP_SPLIT] = {ot_cpu_split, sup_any, NULL},
    [OT_OP_SLICE] = {ot_cpu_slice, sup_any, NULL},
    [OT_OP_GATHER] = {ot_cpu_gather, sup_gather, NULL},
    [OT_OP_SHAPE] = {ot_cpu_shape, sup_any, NULL},
    [OT_OP_RANGE] = {ot_cpu_range, sup_range, NULL},
    [OT_OP_EQUAL] = {ot_cpu_equal, sup_equal, NULL},
    [OT_OP_WHERE] = {ot_cpu_where, sup_where, NULL},
    [OT_OP_CAST] = {ot_cpu_cast, sup_cast, NULL},
    [OT_OP_CONSTANT] = {ot_cpu_constant, sup_any_out, NULL},
    [OT_OP_CONSTANT_OF_SHAPE] = {ot_cpu_constant_of_shape, sup_any_out, NULL},
    [OT_OP_EXPAND] = {ot_cpu_expand, sup_any, NULL},
    [OT_OP_REDUCE_MEAN] = F32(ot_cpu_reduce),
    [OT_OP_REDUCE_SUM] = F32(ot_cpu_reduce),
    [OT_OP_IDENTITY] = {ot_cpu_copy_view, sup_any, NULL},
    [OT_OP_SUM] = F32(ot_cpu_sum),
    [OT_OP_SOFTMAX_CROSS_ENTROPY_LOSS] = {ot_cpu_softmax_ce_loss, sup_class_loss, ot_cpu_loss_workspace},
    [OT_OP_NLL_LOSS] = {ot_cpu_nll_loss, sup_class_loss, ot_cpu_loss_workspace},
    /* internal ops: backward kernels (float32), losses onnxtrain adds, optimizer steps */
    [OT_OP_RELU_GRAD] = {ot_cpu_act_grad_any, sup_grad_lp, NULL},
    [OT_OP_LEAKY_RELU_GRAD] = {ot_cpu_act_grad_any, sup_grad_lp, NULL},
    [OT_OP_SIGMOID_GRAD] = {ot_cpu_act_grad_any, sup_grad_lp, NULL},
    [OT_OP_TANH_GRAD] = {ot_cpu_act_grad_any, sup_grad_lp, NULL},
    [OT_OP_GELU_GRAD] = {ot_cpu_act_grad_any, sup_grad_lp, NULL},
    [OT_OP_ERF_GRAD] = {ot_cpu_act_grad_any, sup_grad_lp, NULL},
    [OT_OP_CLIP_GRAD] = {ot_cpu_act_grad_any, sup_grad_lp, NULL},
    [OT_OP_SOFTMAX_GRAD] = F32(ot_cpu_softmax_grad),
    [OT_OP_LOG_SOFTMAX_GRAD] = F32(ot_cpu_softmax_grad),
    [OT_OP_CONV_GRAD_INPUT] = {ot_cpu_conv_all, sup_conv_grad, ot_cpu_conv_all_workspace},
    [OT_OP_CONV_GRAD_WEIGHT] = {ot_cpu_conv_all, sup_conv_grad, ot_cpu_conv_all_workspace},
    [OT_OP_MAX_POOL_GRAD] = {ot_cpu_pool_all, sup_grad_lp, ot_cpu_pool_all_workspace},
    [OT_OP_AVERAGE_POOL_GRAD] = {ot_cpu_pool_all, sup_grad_lp, ot_cpu_pool_all_workspace},
    [OT_OP_BATCH_NORM_GRAD] = {ot_cpu_batch_norm_grad, sup_bn_grad, NULL},
    [OT_OP_LAYER_NORM_GRAD] = {ot_cpu_layer_norm_grad, sup_f32, ot_cpu_layer_norm_grad_workspace},
    [OT_OP_DROPOUT_GRAD] = {ot_cpu_dropout_grad, sup_grad_lp, NULL},
    [OT_OP_GATHER_GRAD] = {ot_cpu_gather_grad, sup_gather_grad, ot_cpu_gather_grad_workspace},
    [OT_OP_REDUCE_TO_LIKE] = F32(ot_cpu_reduce_to_like),
    [OT_OP_EXPAND_LIKE] = F32(ot_cpu_expand_like),
    [OT_OP_SLICE_GRAD] = F32(ot_cpu_slice_grad),
    [OT_OP_SOFTMAX_CROSS_ENTROPY_LOSS_GRAD] = {ot_cpu_class_loss_grad, sup_class_loss_grad, NULL},
    [OT_OP_NLL_LOSS_GRAD] = {ot_cpu_class_loss_grad, sup_class_loss_grad, NULL},
    [OT_OP_ZEROS_LIKE] = {ot_cpu_fill_like, sup_any_out, NULL},
    [OT_OP_ONES_LIKE] = {ot_cpu_fill_like, sup_ones, NULL},
    [OT_OP_MSE_LOSS] = F32(ot_cpu_mse_loss),
    [OT_OP_MSE_LOSS_GRAD] = F32(ot_cpu_mse_loss_grad),
    [OT_OP_BCE_LOGITS_LOSS] = F32(ot_cpu_elementwise_loss),
    [OT_OP_BCE_LOGITS_LOSS_GRAD] = F32(ot_cpu_elementwise_loss_grad),
    [OT_OP_L1_LOSS] = F32(ot_cpu_elementwise_loss),
    [OT_OP_L1_LOSS_GRAD] = F32(ot_cpu_elementwise_loss_grad),
    [OT_OP_SGD_STEP] = F32(ot_cpu_sgd_step),
    [OT_OP_ADAM_STEP] = F32(ot_cpu_adam_step),
    /* ---- comparison, logic and pointwise math (issue 13) ---- */
    [OT_OP_LESS] = {ot_cpu_compare, sup_compare, NULL},
    [OT_OP_GREATER] = {ot_cpu_compare, sup_compare, NULL},
    [OT_OP_LESS_OR_EQUAL] = {ot_cpu_compare, sup_compare, NULL},
    [OT_OP_GREATER_OR_EQUAL] = {ot_cpu_compare, sup_compare, NULL},
    [OT_OP_NOT] = {ot_cpu_predicate, sup_not, NULL},
    [OT_OP_AND] = {ot_cpu_compare, sup_logic, NULL},
    [OT_OP_OR] = {ot_cpu_compare, sup_logic, NULL},
    [OT_OP_XOR] = {ot_cpu_compare, sup_logic, NULL},
    [OT_OP_IS_NAN] = {ot_cpu_predicate, sup_f32_f64, NULL},
    [OT_OP_IS_INF] = {ot_cpu_predicate, sup_f32_f64, NULL},
    [OT_OP_ABS] = {ot_cpu_math_unary, sup_neg, NULL},
    [OT_OP_SIN] = F32(ot_cpu_math_unary),
    [OT_OP_COS] = F32(ot_cpu_math_unary),
    [OT_OP_HARD_SIGMOID] = F32(ot_cpu_math_unary),
    [OT_OP_HARD_SWISH] = F32(ot_cpu_math_unary),
    [OT_OP_SOFTPLUS] = F32(ot_cpu_math_unary),
    [OT_OP_MISH] = F32(ot_cpu_math_unary),
    [OT_OP_MIN] = {ot_cpu_minmax, sup_minmax, NULL},
    [OT_OP_MAX] = {ot_cpu_minmax, sup_minmax, NULL},
    [OT_OP_MOD] = {ot_cpu_mod, sup_compare, NULL},
    [OT_OP_CAST_LIKE] = {ot_cpu_cast, sup_cast, NULL},
    [OT_OP_ABS_GRAD] = F32(ot_cpu_math_grad),
    [OT_OP_HARD_SIGMOID_GRAD] = F32(ot_cpu_math_grad),
    [OT_OP_HARD_SWISH_GRAD] = F32(ot_cpu_math_grad),
    [OT_OP_MISH_GRAD] = F32(ot_cpu_math_grad),
    [OT_OP_MOD_GRAD] = F32(ot_cpu_mod_grad),
    [OT_OP_MAX_GRAD] = F32(ot_cpu_minmax_grad),
    [OT_OP_MIN_GRAD] = F32(ot_cpu_minmax_grad),
    /* ---- layout and indexing (issue 13) ---- */
    [OT_OP_PAD] = {ot_cpu_pad, sup_pad, NULL},
    [OT_OP_TILE] = {ot_cpu_tile, sup_gather, NULL},
    [OT_OP_TRILU] = {ot_cpu_trilu, sup_any, NULL},
    [OT_OP_GATHER_ELEMENTS] = {ot_cpu_gather_elements, sup_gather, NULL},
    [OT_OP_CUMSUM] = {ot_cpu_cumsum, sup_cumsum, NULL},
    [OT_OP_SCATTER_ND] = {ot_cpu_scatter_nd, sup_scatter, NULL},
    [OT_OP_SCATTER_ELEMENTS] = {ot_cpu_scatter_elements, sup_scatter, NULL},
    [OT_OP_GATHER_ND] = {ot_cpu_gather_nd, sup_gather, NULL},
    /* ---- random sources (issue 13): float32 out; RandomUniformLike reads its input's shape only ---- */
    [OT_OP_RANDOM_UNIFORM_LIKE] = {ot_cpu_random_uniform, sup_f32_out, NULL},
    [OT_OP_RANDOM_UNIFORM] = {ot_cpu_random_uniform, sup_f32_out, NULL},
    [OT_OP_PAD_GRAD] = F32(ot_cpu_pad_grad),
    [OT_OP_TILE_GRAD] = F32(ot_cpu_pad_grad),
    [OT_OP_GATHER_ELEMENTS_GRAD] = {ot_cpu_gather_elements_grad, sup_gather_grad, NULL},
    /* ---- ops batch 1 (issue 26): activations and rounding ---- */
    [OT_OP_ELU] = F32(ot_cpu_act_unary),
    [OT_OP_SELU] = F32(ot_cpu_act_unary),
    [OT_OP_CELU] = F32(ot_cpu_act_unary),
    [OT_OP_PRELU] = {ot_cpu_prelu, sup_prelu, NULL},
    [OT_OP_THRESHOLDED_RELU] = F32(ot_cpu_act_unary),
    [OT_OP_SOFTSIGN] = F32(ot_cpu_act_unary),
    [OT_OP_SIGN] = {ot_cpu_act_unary, sup_neg, NULL},
    [OT_OP_FLOOR] = F32(ot_cpu_act_unary),
    [OT_OP_CEIL] = F32(ot_cpu_act_unary),
    [OT_OP_ROUND] = F32(ot_cpu_act_unary),
    [OT_OP_ELU_GRAD] = F32(ot_cpu_act_ext_grad),
    [OT_OP_THRESHOLDED_RELU_GRAD] = F32(ot_cpu_act_ext_grad),
    [OT_OP_SOFTSIGN_GRAD] = F32(ot_cpu_act_ext_grad),
    [OT_OP_PRELU_GRAD] = F32(ot_cpu_prelu_grad),
    /* ---- ops batch 1 (issue 26): reductions ---- */
    [OT_OP_REDUCE_MAX] = {ot_cpu_reduce_ext, sup_neg, NULL}, /* float32, int64, int32 */
    [OT_OP_REDUCE_MIN] = {ot_cpu_reduce_ext, sup_neg, NULL},
    [OT_OP_REDUCE_PROD] = F32(ot_cpu_reduce_ext),
    [OT_OP_REDUCE_L1] = F32(ot_cpu_reduce_ext),
    [OT_OP_REDUCE_L2] = F32(ot_cpu_reduce_ext),
    [OT_OP_REDUCE_LOG_SUM_EXP] = F32(ot_cpu_reduce_ext),
    [OT_OP_REDUCE_SUM_SQUARE] = F32(ot_cpu_reduce_ext),
    [OT_OP_ARG_MAX] = {ot_cpu_arg_reduce, sup_neg, NULL},
    [OT_OP_ARG_MIN] = {ot_cpu_arg_reduce, sup_neg, NULL},
    [OT_OP_REDUCE_GRAD] = F32(ot_cpu_reduce_grad),
    /* ---- issue 26: InstanceNormalization, GroupNormalization ---- */
    [OT_OP_INSTANCE_NORM] = F32(ot_cpu_group_norm),
    [OT_OP_GROUP_NORM] = F32(ot_cpu_group_norm),
    [OT_OP_GROUP_NORM_GRAD] = F32(ot_cpu_group_norm_grad),
    /* ---- spatial ops (issue 26, ops batch 2) ---- */
    [OT_OP_RESIZE] = {ot_cpu_resize, sup_f32, ot_cpu_resize_workspace},
    [OT_OP_UPSAMPLE] = {ot_cpu_resize, sup_f32, ot_cpu_resize_workspace},
    [OT_OP_RESIZE_GRAD] = {ot_cpu_resize_grad, sup_f32, ot_cpu_resize_workspace},
    [OT_OP_CONV_TRANSPOSE] = {ot_cpu_conv_any, sup_conv_grad, ot_cpu_conv_any_workspace},
    [OT_OP_DEPTH_TO_SPACE] = {ot_cpu_depth_space, sup_any, NULL},
    [OT_OP_SPACE_TO_DEPTH] = {ot_cpu_depth_space, sup_any, NULL},
    /* ---- ops3 (issue 26): transformer ops, cpu_xfmr.c ---- */
    [OT_OP_RMS_NORM] = F32(ot_cpu_rms_norm),
    [OT_OP_RMS_NORM_GRAD] = {ot_cpu_rms_norm_grad, sup_f32, ot_cpu_rms_norm_grad_workspace},
    [OT_OP_ROTARY_EMBEDDING] = F32(ot_cpu_rotary_embedding),
    [OT_OP_ROTARY_EMBEDDING_GRAD] = F32(ot_cpu_rotary_embedding),
    [OT_OP_ATTENTION] = {ot_cpu_attention, NULL, ot_cpu_attention_workspace},
    [OT_OP_ATTENTION_GRAD] = {ot_cpu_attention_grad, NULL, ot_cpu_attention_grad_workspace},
    /* ---- ops batch 4 (issue 26) ---- */
    [OT_OP_EINSUM] = {ot_cpu_einsum, sup_f32_f64, NULL},
    [OT_OP_EINSUM_GRAD] = {ot_cpu_einsum, sup_f32_f64, NULL},
    [OT_OP_TOP_K] = {ot_cpu_top_k, sup_top_k, NULL},
    [OT_OP_ONE_HOT] = {ot_cpu_one_hot, sup_one_hot, NULL},
    [OT_OP_SIZE] = {ot_cpu_size, sup_any, NULL},
    /* ---- recurrent ops (issue 26) ---- */
    [OT_OP_RNN] = {ot_cpu_rnn, sup_f32, ot_cpu_rnn_workspace},
    [OT_OP_GRU] = {ot_cpu_rnn, sup_f32, ot_cpu_rnn_workspace},
    [OT_OP_LSTM] = {ot_cpu_rnn, sup_f32, ot_cpu_rnn_workspace},
    [OT_OP_RNN_GRAD] = {ot_cpu_rnn_grad, sup_any_rnn_grad, ot_cpu_rnn_workspace},
    [OT_OP_LINEAR_CROSS_ENTROPY] = {ot_cpu_linear_ce, sup_f32, ot_cpu_linear_ce_workspace},
    [OT_OP_LINEAR_CROSS_ENTROPY_GRAD] = {ot_cpu_linear_ce_grad, sup_linear_ce_grad, ot_cpu_linear_ce_workspace},
};
#undef F32

/* Instead of a row's supports, for ops whose optional inputs and outputs decide (which
 * of them are present needs the node). A table of its own, so that CPU_OPS's rows keep
 * three fields (clang's -Wmissing-field-initializers). */
static const cpu_supports_node_fn CPU_SUPPORTS_NODE[OT_OP_COUNT] = {
    [OT_OP_ATTENTION] = sup_attention,
    [OT_OP_ATTENTION_GRAD] = sup_attention_grad,
};

static const cpu_op *row_of(ot_op op) {
    if (op <= OT_OP_UNKNOWN || op >= OT_OP_COUNT || !CPU_OPS[op].run) return NULL;
    return &CPU_OPS[op];
}

bool ot_cpu_has_kernel(ot_op op) { return row_of(op) != NULL; }

/* ---- entry points ----------------------------------------------------------------- */

/* A sum over axes (the OT_T_REDUCE ops: ReduceSum / ReduceMean, the bias gradient
 * ReduceToLike, TileGrad) adds one value per element it reads: memory-bound like the
 * cheap element rules, so below OT_CPU_PAR_MIN_CHEAP elements read it runs on one
 * thread. Waking a passive OpenMP worker and joining it cost more than the whole sum
 * there (a 32 x 512 bias gradient: ~60 us on two threads against a few on one, issue
 * 14). Every CPU kernel gives the same bits on any thread count, so this changes the
 * time only. */
static bool serial_below_grain(const ot_node *node, const ot_tensor *in) {
    if (!ot_op_has(node->op, OT_T_REDUCE) || node->n_inputs < 1) return false;
    return ot_kernel_numel(&in[0]) < OT_CPU_PAR_MIN_CHEAP;
}

ot_status ot_cpu_run_node(const ot_node *node, const ot_tensor *in, ot_tensor *out, const ot_kernel_ctx *ctx,
                          ot_error *err) {
    const cpu_op *row = row_of(node->op);
    if (!row)
        return ot_fail(err, OT_E_UNSUPPORTED, "node '%s': no CPU kernel for %s", node->name,
                       node->op_type && node->op_type[0] ? node->op_type : ot_op_name(node->op));
    const ot_op_info *info = ot_op_get(node->op);
    if (node->n_inputs < info->min_inputs || (info->max_inputs >= 0 && node->n_inputs > info->max_inputs) ||
        node->n_outputs < info->min_outputs || (info->max_outputs >= 0 && node->n_outputs > info->max_outputs))
        return ot_fail(err, OT_E_MODEL, "node '%s' (%s): %d inputs / %d outputs outside the op's arity", node->name,
                       node->op_type, node->n_inputs, node->n_outputs);
    /* Shape (and Size) read only the input's shape: shape inference folds them on
     * activations */
    bool shape_only = node->op == OT_OP_SHAPE || node->op == OT_OP_SIZE;
    for (int k = 0; k < info->min_inputs && !shape_only; k++)
        if (!in[k].data && ot_kernel_numel(&in[k]) > 0)
            return ot_fail(err, OT_E_INTERNAL, "node '%s' (%s): required input %d has no data", node->name,
                           node->op_type, k);
    /* internal ops may leave output 0 absent (a gradient nobody needs) */
    /* (an absent optional output 0, RNN's Y when only Y_h is read, has none either) */
    if (!ot_op_has(node->op, OT_T_INTERNAL) && node->n_outputs > 0 && (!node->outputs || node->outputs[0] >= 0) && !out[0].data &&
        ot_kernel_numel(&out[0]) > 0)
        return ot_fail(err, OT_E_INTERNAL, "node '%s' (%s): output 0 has no buffer", node->name, node->op_type);
    size_t ws = row->workspace ? row->workspace(node, in, out) : 0;
    if (ws > 0 && (!ctx || !ctx->workspace || ctx->workspace_bytes < ws))
        return ot_fail(err, OT_E_INTERNAL, "node '%s' (%s): needs %zu bytes of workspace, given %zu", node->name,
                       node->op_type, ws, ctx ? ctx->workspace_bytes : (size_t)0);
    ot_kernel_ctx dflt = {0};
    if (!ctx) ctx = &dflt;
    if (serial_below_grain(node, in)) {
        ot_kernel_ctx one = *ctx;
        one.n_threads = 1;
        return row->run(node, in, out, &one, err);
    }
    return row->run(node, in, out, ctx, err);
}

size_t ot_cpu_workspace_bytes(const ot_node *node, const ot_tensor *in, const ot_tensor *out) {
    const cpu_op *row = row_of(node->op);
    return row && row->workspace ? row->workspace(node, in, out) : 0;
}

bool ot_cpu_supports(const ot_node *node, const ot_tensor *in, const ot_tensor *out) {
    const cpu_op *row = row_of(node->op);
    if (!row) return false;
    ot_dtype t0 = node->n_inputs > 0 ? in[0].dtype : OT_UNDEFINED;
    ot_dtype o0 = node->n_outputs > 0 ? out[0].dtype : OT_UNDEFINED;
    cpu_supports_node_fn by_node = CPU_SUPPORTS_NODE[node->op];
    return by_node ? by_node(node, in, out) : row->supports(t0, o0, in);
}
