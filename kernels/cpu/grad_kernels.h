/* grad_kernels.h — private to kernels/cpu: the backward-kernel families behind
 * the op table of cpu_ops.c (one file each), all float32 with the ot_cpu_run_node contract.
 * Determinism: parallel loops split over independent outputs; every sum runs in a
 * fixed order inside one output element (no float atomics). */
#ifndef OT_GRAD_KERNELS_H
#define OT_GRAD_KERNELS_H

#include "kernels/cpu/cpu_common.h"

#define OT_GRAD_KERNEL(fn) \
    ot_status fn(const ot_node *node, const ot_tensor *in, ot_tensor *out, const ot_kernel_ctx *ctx, ot_error *err)

/* grad_pointwise.c: ReluGrad, LeakyReluGrad, SigmoidGrad, TanhGrad, GeluGrad, ErfGrad,
 * ClipGrad, DropoutGrad, ZerosLike, OnesLike */
OT_GRAD_KERNEL(ot_cpu_act_grad);
OT_GRAD_KERNEL(ot_cpu_dropout_grad);
OT_GRAD_KERNEL(ot_cpu_fill_like);
/* grad_reduce.c: ReduceToLike, ExpandLike, SoftmaxGrad, LogSoftmaxGrad */
OT_GRAD_KERNEL(ot_cpu_reduce_to_like);
OT_GRAD_KERNEL(ot_cpu_expand_like);
OT_GRAD_KERNEL(ot_cpu_softmax_grad);
/* grad_loss.c: SoftmaxCrossEntropyLossGrad, NegativeLogLikelihoodLossGrad, MseLoss, MseLossGrad */
OT_GRAD_KERNEL(ot_cpu_class_loss_grad);
OT_GRAD_KERNEL(ot_cpu_mse_loss);
OT_GRAD_KERNEL(ot_cpu_mse_loss_grad);
/* BceWithLogitsLoss and L1Loss and their gradients (kernels/cpu/grad_loss.c) */
OT_GRAD_KERNEL(ot_cpu_elementwise_loss);
OT_GRAD_KERNEL(ot_cpu_elementwise_loss_grad);
/* cpu_linear_ce.c (issue 28): LinearCrossEntropy, LinearCrossEntropyGrad (one chunk of
 * logits in ctx->workspace) */
OT_GRAD_KERNEL(ot_cpu_linear_ce);
OT_GRAD_KERNEL(ot_cpu_linear_ce_grad);
size_t ot_cpu_linear_ce_workspace(const ot_node *node, const ot_tensor *in, const ot_tensor *out);
/* grad_norm.c: BatchNormGrad, LayerNormGrad */
OT_GRAD_KERNEL(ot_cpu_batch_norm_grad);
OT_GRAD_KERNEL(ot_cpu_layer_norm_grad);
size_t ot_cpu_layer_norm_grad_workspace(const ot_node *node, const ot_tensor *in, const ot_tensor *out);
/* grad_conv.c: ConvGradInput, ConvGradWeight (sgemm + im2col / col2im in ctx->workspace) */
OT_GRAD_KERNEL(ot_cpu_conv_grad_input);
OT_GRAD_KERNEL(ot_cpu_conv_grad_weight);
size_t ot_cpu_conv_grad_workspace(const ot_node *node, const ot_tensor *in, const ot_tensor *out);
/* grad_pool.c: MaxPoolGrad, AveragePoolGrad */
OT_GRAD_KERNEL(ot_cpu_pool_grad);
/* grad_layout.c: GatherGrad, SliceGrad */
OT_GRAD_KERNEL(ot_cpu_gather_grad);
size_t ot_cpu_gather_grad_workspace(const ot_node *node, const ot_tensor *in, const ot_tensor *out); /* with base */
OT_GRAD_KERNEL(ot_cpu_slice_grad);
/* cpu_pointwise_math.c: AbsGrad, HardSigmoidGrad, HardSwishGrad, MishGrad; ModGrad;
 * MaxGrad, MinGrad */
OT_GRAD_KERNEL(ot_cpu_math_grad);
OT_GRAD_KERNEL(ot_cpu_mod_grad);
OT_GRAD_KERNEL(ot_cpu_minmax_grad);
/* grad_index.c (layout and indexing, issue 13): PadGrad and TileGrad, GatherElementsGrad */
OT_GRAD_KERNEL(ot_cpu_pad_grad);
OT_GRAD_KERNEL(ot_cpu_gather_elements_grad);
/* cpu_activation.c (ops batch 1, issue 26): EluGrad, ThresholdedReluGrad, SoftsignGrad; PReluGrad */
OT_GRAD_KERNEL(ot_cpu_act_ext_grad);
OT_GRAD_KERNEL(ot_cpu_prelu_grad);
/* cpu_reduce_ext.c (ops batch 1, issue 26): ReduceGrad */
OT_GRAD_KERNEL(ot_cpu_reduce_grad);
/* cpu_group_norm.c (issue 26): GroupNormGrad */
OT_GRAD_KERNEL(ot_cpu_group_norm_grad);
/* spatial ops (issue 26, ops batch 2): cpu_spatial.c */
OT_GRAD_KERNEL(ot_cpu_resize_grad);

/* cpu_xfmr.c (ops3, issue 26): RMSNormGrad, AttentionGrad (RotaryEmbeddingGrad is the
 * forward kernel's inverse mode) */
OT_GRAD_KERNEL(ot_cpu_rms_norm_grad);
size_t ot_cpu_rms_norm_grad_workspace(const ot_node *node, const ot_tensor *in, const ot_tensor *out);
OT_GRAD_KERNEL(ot_cpu_attention_grad);
size_t ot_cpu_attention_grad_workspace(const ot_node *node, const ot_tensor *in, const ot_tensor *out);

/* cpu_rnn.c (issue 26): RnnGrad */
OT_GRAD_KERNEL(ot_cpu_rnn_grad);

#endif
