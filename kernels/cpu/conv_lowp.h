/* conv_lowp.h — private to kernels/cpu: the op-table entry of the convolutions
 * (Conv, ConvGradInput, ConvGradWeight, ConvTranspose) in every dtype: bfloat16 ones
 * natively on oneDNN where it has a kernel for them on this CPU (conv_dnnl.c,
 * "bfloat16"), everything else as cpu_lowp.c's ot_cpu_conv_any runs it (float32 as it
 * is; float16, and bfloat16 without oneDNN, through float32 copies). */
#ifndef OT_CONV_LOWP_H
#define OT_CONV_LOWP_H

#include "kernels/cpu/cpu_common.h"

ot_status ot_cpu_conv_all(const ot_node *, const ot_tensor *, ot_tensor *, const ot_kernel_ctx *, ot_error *);
size_t ot_cpu_conv_all_workspace(const ot_node *node, const ot_tensor *in, const ot_tensor *out);

#endif
