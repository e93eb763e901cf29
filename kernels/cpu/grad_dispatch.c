/* grad_dispatch.c — routes every internal op (OT_T_INTERNAL in ir/ops.def: the
 * backward ops, the losses onnxtrain adds, the optimizer steps) to its CPU kernel,
 * and answers the workspace / supports queries for them. cpu_dispatch.c sends
 * internal ops here. */
#include "kernels/cpu/cpu_internal.h"
#include "kernels/cpu/grad_kernels.h"
#include "kernels/cpu/optim_cpu.h"

static ot_cpu_kernel_fn internal_kernel(ot_op op) {
    switch (op) {
    case OT_OP_RELU_GRAD:
    case OT_OP_LEAKY_RELU_GRAD:
    case OT_OP_SIGMOID_GRAD:
    case OT_OP_TANH_GRAD:
    case OT_OP_GELU_GRAD:
    case OT_OP_ERF_GRAD:
    case OT_OP_CLIP_GRAD: return ot_cpu_act_grad;
    case OT_OP_SOFTMAX_GRAD:
    case OT_OP_LOG_SOFTMAX_GRAD: return ot_cpu_softmax_grad;
    case OT_OP_CONV_GRAD_INPUT: return ot_cpu_conv_grad_input;
    case OT_OP_CONV_GRAD_WEIGHT: return ot_cpu_conv_grad_weight;
    case OT_OP_MAX_POOL_GRAD:
    case OT_OP_AVERAGE_POOL_GRAD: return ot_cpu_pool_grad;
    case OT_OP_BATCH_NORM_GRAD: return ot_cpu_batch_norm_grad;
    case OT_OP_LAYER_NORM_GRAD: return ot_cpu_layer_norm_grad;
    case OT_OP_DROPOUT_GRAD: return ot_cpu_dropout_grad;
    case OT_OP_GATHER_GRAD: return ot_cpu_gather_grad;
    case OT_OP_REDUCE_TO_LIKE: return ot_cpu_reduce_to_like;
    case OT_OP_EXPAND_LIKE: return ot_cpu_expand_like;
    case OT_OP_SLICE_GRAD: return ot_cpu_slice_grad;
    case OT_OP_SOFTMAX_CROSS_ENTROPY_LOSS_GRAD:
    case OT_OP_NLL_LOSS_GRAD: return ot_cpu_class_loss_grad;
    case OT_OP_ZEROS_LIKE:
    case OT_OP_ONES_LIKE: return ot_cpu_fill_like;
    case OT_OP_MSE_LOSS: return ot_cpu_mse_loss;
    case OT_OP_MSE_LOSS_GRAD: return ot_cpu_mse_loss_grad;
    case OT_OP_SGD_STEP: return ot_cpu_sgd_step;
    case OT_OP_ADAM_STEP: return ot_cpu_adam_step;
    default: return NULL;
    }
}

ot_status ot_cpu_run_internal_node(const ot_node *node, const ot_tensor *in, ot_tensor *out,
                                   const ot_kernel_ctx *ctx, ot_error *err) {
    ot_cpu_kernel_fn fn = internal_kernel(node->op);
    if (!fn)
        return ot_fail(err, OT_E_UNSUPPORTED, "node '%s': no CPU kernel for internal op %s", node->name,
                       node->op_type ? node->op_type : ot_op_name(node->op));
    const ot_op_info *info = ot_op_get(node->op);
    if (node->n_inputs < info->min_inputs || (info->max_inputs >= 0 && node->n_inputs > info->max_inputs) ||
        node->n_outputs < info->min_outputs || (info->max_outputs >= 0 && node->n_outputs > info->max_outputs))
        return ot_fail(err, OT_E_MODEL, "node '%s' (%s): %d inputs / %d outputs outside the op's arity", node->name,
                       node->op_type, node->n_inputs, node->n_outputs);
    for (int k = 0; k < info->min_inputs; k++)
        if (!in[k].data && ot_cpu_numel(&in[k]) > 0)
            return ot_fail(err, OT_E_INTERNAL, "node '%s' (%s): required input %d has no data", node->name,
                           node->op_type, k);
    size_t ws = ot_cpu_internal_workspace_bytes(node, in, out);
    if (ws > 0 && (!ctx || !ctx->workspace || ctx->workspace_bytes < ws))
        return ot_fail(err, OT_E_INTERNAL, "node '%s' (%s): needs %zu bytes of workspace, given %zu", node->name,
                       node->op_type, ws, ctx ? ctx->workspace_bytes : (size_t)0);
    ot_kernel_ctx dflt = {0};
    return fn(node, in, out, ctx ? ctx : &dflt, err);
}

size_t ot_cpu_internal_workspace_bytes(const ot_node *node, const ot_tensor *in, const ot_tensor *out) {
    (void)out;
    switch (node->op) {
    case OT_OP_CONV_GRAD_INPUT:
    case OT_OP_CONV_GRAD_WEIGHT: return ot_cpu_conv_grad_workspace(node, in);
    case OT_OP_LAYER_NORM_GRAD: return ot_cpu_layer_norm_grad_workspace(node, in);
    default: return 0;
    }
}

bool ot_cpu_internal_supports(const ot_node *node, const ot_tensor *in, const ot_tensor *out) {
    if (!internal_kernel(node->op)) return false;
    switch (node->op) {
    case OT_OP_ZEROS_LIKE: return ot_dtype_size(out[0].dtype) != 0;
    case OT_OP_ONES_LIKE: return out[0].dtype == OT_F32 || out[0].dtype == OT_F64;
    case OT_OP_GATHER_GRAD: return in[0].dtype == OT_F32 && ot_cpu_is_int_dtype(in[1].dtype);
    case OT_OP_SOFTMAX_CROSS_ENTROPY_LOSS_GRAD:
    case OT_OP_NLL_LOSS_GRAD: return in[1].dtype == OT_F32 && ot_cpu_is_int_dtype(in[2].dtype);
    case OT_OP_SGD_STEP:
    case OT_OP_ADAM_STEP: return in[0].dtype == OT_F32;
    default: return in[0].dtype == OT_F32; /* backward kernels are float32 */
    }
}
