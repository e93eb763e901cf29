/* cpu_internal.h — the CPU kernels of onnxtrain's internal ops (every op in
 * ir/ops.def with OT_T_INTERNAL: ReluGrad, ConvGradInput, ..., SgdStep, AdamStep).
 * cpu_dispatch.c routes those ops here; grad_dispatch.c implements them. Same
 * contracts as the three functions of kernels/kernel.h. */
#ifndef OT_CPU_INTERNAL_H
#define OT_CPU_INTERNAL_H

#include "kernels/kernel.h"

ot_status ot_cpu_run_internal_node(const ot_node *node, const ot_tensor *in, ot_tensor *out,
                                   const ot_kernel_ctx *ctx, ot_error *err);
size_t ot_cpu_internal_workspace_bytes(const ot_node *node, const ot_tensor *in, const ot_tensor *out);
bool ot_cpu_internal_supports(const ot_node *node, const ot_tensor *in, const ot_tensor *out);

#endif
