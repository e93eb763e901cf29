/* cpu_dispatch.c — the CPU backend's entry points (kernels/kernel.h): routes a node
 * to its forward kernel by op, every OT_T_INTERNAL op to grad_dispatch.c, checks
 * arity and required data, and answers supports / workspace queries. */
#include "kernels/cpu/cpu_common.h"
#include "kernels/cpu/cpu_internal.h"

static ot_cpu_kernel_fn kernel_of(ot_op op) {
    switch (op) {
    case OT_OP_GEMM: return ot_cpu_gemm;
    case OT_OP_MATMUL: return ot_cpu_matmul;
    case OT_OP_ADD:
    case OT_OP_SUB:
    case OT_OP_MUL:
    case OT_OP_DIV:
    case OT_OP_POW: return ot_cpu_binary;
    case OT_OP_SQRT:
    case OT_OP_RECIPROCAL:
    case OT_OP_NEG:
    case OT_OP_EXP:
    case OT_OP_LOG:
    case OT_OP_ERF:
    case OT_OP_TANH:
    case OT_OP_SIGMOID:
    case OT_OP_RELU:
    case OT_OP_LEAKY_RELU:
    case OT_OP_CLIP:
    case OT_OP_GELU: return ot_cpu_unary;
    case OT_OP_SOFTMAX:
    case OT_OP_LOG_SOFTMAX: return ot_cpu_softmax;
    case OT_OP_CONV: return ot_cpu_conv;
    case OT_OP_MAX_POOL: return ot_cpu_max_pool;
    case OT_OP_AVERAGE_POOL: return ot_cpu_average_pool;
    case OT_OP_GLOBAL_AVERAGE_POOL: return ot_cpu_global_average_pool;
    case OT_OP_BATCH_NORM: return ot_cpu_batch_norm;
    case OT_OP_LAYER_NORM: return ot_cpu_layer_norm;
    case OT_OP_DROPOUT: return ot_cpu_dropout;
    case OT_OP_FLATTEN:
    case OT_OP_RESHAPE:
    case OT_OP_SQUEEZE:
    case OT_OP_UNSQUEEZE:
    case OT_OP_IDENTITY: return ot_cpu_copy_view;
    case OT_OP_TRANSPOSE: return ot_cpu_transpose;
    case OT_OP_CONCAT: return ot_cpu_concat;
    case OT_OP_SPLIT: return ot_cpu_split;
    case OT_OP_SLICE: return ot_cpu_slice;
    case OT_OP_GATHER: return ot_cpu_gather;
    case OT_OP_SHAPE: return ot_cpu_shape;
    case OT_OP_RANGE: return ot_cpu_range;
    case OT_OP_EQUAL: return ot_cpu_equal;
    case OT_OP_WHERE: return ot_cpu_where;
    case OT_OP_CAST: return ot_cpu_cast;
    case OT_OP_CONSTANT: return ot_cpu_constant;
    case OT_OP_CONSTANT_OF_SHAPE: return ot_cpu_constant_of_shape;
    case OT_OP_EXPAND: return ot_cpu_expand;
    case OT_OP_REDUCE_MEAN:
    case OT_OP_REDUCE_SUM: return ot_cpu_reduce;
    case OT_OP_SUM: return ot_cpu_sum;
    case OT_OP_SOFTMAX_CROSS_ENTROPY_LOSS: return ot_cpu_softmax_ce_loss;
    case OT_OP_NLL_LOSS: return ot_cpu_nll_loss;
    default: return NULL;
    }
}

static bool is_internal(const ot_node *node) {
    return node->op > OT_OP_UNKNOWN && node->op < OT_OP_COUNT && ot_op_has(node->op, OT_T_INTERNAL);
}

ot_status ot_cpu_run_node(const ot_node *node, const ot_tensor *in, ot_tensor *out, const ot_kernel_ctx *ctx,
                          ot_error *err) {
    if (is_internal(node)) return ot_cpu_run_internal_node(node, in, out, ctx, err);
    ot_cpu_kernel_fn fn = kernel_of(node->op);
    if (!fn)
        return ot_fail(err, OT_E_UNSUPPORTED, "node '%s': no CPU kernel for %s", node->name,
                       node->op_type && node->op_type[0] ? node->op_type : ot_op_name(node->op));
    const ot_op_info *info = ot_op_get(node->op);
    if (node->n_inputs < info->min_inputs || (info->max_inputs >= 0 && node->n_inputs > info->max_inputs) ||
        node->n_outputs < info->min_outputs || (info->max_outputs >= 0 && node->n_outputs > info->max_outputs))
        return ot_fail(err, OT_E_MODEL, "node '%s' (%s): %d inputs / %d outputs outside the op's arity", node->name,
                       node->op_type, node->n_inputs, node->n_outputs);
    /* Shape reads only the input's shape: shape inference folds it on activations */
    for (int k = 0; k < info->min_inputs && node->op != OT_OP_SHAPE; k++)
        if (!in[k].data && ot_cpu_numel(&in[k]) > 0)
            return ot_fail(err, OT_E_INTERNAL, "node '%s' (%s): required input %d has no data", node->name,
                           node->op_type, k);
    if (node->n_outputs > 0 && !out[0].data && ot_cpu_numel(&out[0]) > 0)
        return ot_fail(err, OT_E_INTERNAL, "node '%s' (%s): output 0 has no buffer", node->name, node->op_type);
    size_t ws = ot_cpu_workspace_bytes(node, in, out);
    if (ws > 0 && (!ctx || !ctx->workspace || ctx->workspace_bytes < ws))
        return ot_fail(err, OT_E_INTERNAL, "node '%s' (%s): needs %zu bytes of workspace, given %zu", node->name,
                       node->op_type, ws, ctx ? ctx->workspace_bytes : (size_t)0);
    ot_kernel_ctx dflt = {0};
    return fn(node, in, out, ctx ? ctx : &dflt, err);
}

size_t ot_cpu_workspace_bytes(const ot_node *node, const ot_tensor *in, const ot_tensor *out) {
    if (is_internal(node)) return ot_cpu_internal_workspace_bytes(node, in, out);
    switch (node->op) {
    case OT_OP_CONV: return ot_cpu_conv_workspace(node, in, out);
    case OT_OP_SOFTMAX_CROSS_ENTROPY_LOSS:
    case OT_OP_NLL_LOSS: return ot_cpu_loss_workspace(node, in, out);
    default: return 0;
    }
}

static bool any_dtype(ot_dtype t) { return ot_dtype_size(t) != 0; }
static bool arith_dtype(ot_dtype t) { return t == OT_F32 || t == OT_I64 || t == OT_I32; }
static bool num_dtype(ot_dtype t) {
    return t == OT_F32 || t == OT_F64 || t == OT_F16 || t == OT_BF16 || ot_cpu_is_int_dtype(t);
}

bool ot_cpu_supports(const ot_node *node, const ot_tensor *in, const ot_tensor *out) {
    if (is_internal(node)) return ot_cpu_internal_supports(node, in, out);
    if (!kernel_of(node->op)) return false;
    ot_dtype t0 = node->n_inputs > 0 ? in[0].dtype : OT_UNDEFINED;
    ot_dtype o0 = node->n_outputs > 0 ? out[0].dtype : OT_UNDEFINED;
    switch (node->op) {
    case OT_OP_ADD:
    case OT_OP_SUB:
    case OT_OP_MUL:
    case OT_OP_DIV: return (arith_dtype(t0) || t0 == OT_U8 || t0 == OT_I8) && in[1].dtype == t0;
    case OT_OP_POW: return arith_dtype(t0) && arith_dtype(in[1].dtype);
    case OT_OP_CLIP: return arith_dtype(t0) || t0 == OT_U8 || t0 == OT_I8;
    case OT_OP_NEG: return arith_dtype(t0);
    case OT_OP_EQUAL:
        return in[1].dtype == t0 && (arith_dtype(t0) || t0 == OT_BOOL || t0 == OT_U8 || t0 == OT_I8);
    case OT_OP_WHERE: return t0 == OT_BOOL && any_dtype(in[1].dtype) && in[2].dtype == in[1].dtype;
    case OT_OP_FLATTEN:
    case OT_OP_RESHAPE:
    case OT_OP_SQUEEZE:
    case OT_OP_UNSQUEEZE:
    case OT_OP_IDENTITY:
    case OT_OP_TRANSPOSE:
    case OT_OP_CONCAT:
    case OT_OP_SPLIT:
    case OT_OP_SLICE:
    case OT_OP_EXPAND:
    case OT_OP_SHAPE: return any_dtype(t0);
    case OT_OP_GATHER: return any_dtype(t0) && (in[1].dtype == OT_I64 || in[1].dtype == OT_I32);
    case OT_OP_CAST: return num_dtype(t0) && num_dtype(o0);
    case OT_OP_RANGE: return t0 == OT_F32 || t0 == OT_F64 || t0 == OT_I64 || t0 == OT_I32;
    case OT_OP_CONSTANT:
    case OT_OP_CONSTANT_OF_SHAPE: return any_dtype(o0);
    case OT_OP_SOFTMAX_CROSS_ENTROPY_LOSS:
    case OT_OP_NLL_LOSS: return t0 == OT_F32 && (in[1].dtype == OT_I64 || in[1].dtype == OT_I32);
    case OT_OP_CONV: return t0 == OT_F32 && (in[0].shape.rank == 3 || in[0].shape.rank == 4); /* 1-D, 2-D */
    default: return t0 == OT_F32; /* compute kernels are float32 */
    }
}
