/* pool_lowp.h — private to kernels/cpu: the pools' op-table entry in every dtype
 * (MaxPool, AveragePool, GlobalAveragePool, MaxPoolGrad, AveragePoolGrad): float32 as
 * cpu_pool.c / grad_pool.c run it; bfloat16 / float16 plane by plane (pool_lowp.c). */
#ifndef OT_POOL_LOWP_H
#define OT_POOL_LOWP_H

#include "kernels/cpu/cpu_common.h"

ot_status ot_cpu_pool_all(const ot_node *, const ot_tensor *, ot_tensor *, const ot_kernel_ctx *, ot_error *);
size_t ot_cpu_pool_all_workspace(const ot_node *node, const ot_tensor *in, const ot_tensor *out);

#endif
