/* cpu_random.h — the CPU kernel of the random sources (cpu_random.c), routed to by
 * the op table (cpu_ops.c). */
#ifndef OT_CPU_RANDOM_H
#define OT_CPU_RANDOM_H

#include "kernels/cpu/cpu_common.h"

/* RandomUniformLike, RandomUniform: float32 draws in [low, high) (issue 13). */
ot_status ot_cpu_random_uniform(const ot_node *, const ot_tensor *, ot_tensor *, const ot_kernel_ctx *, ot_error *);

#endif
