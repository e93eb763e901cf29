/* cpu_philox.h — Dropout's uniforms in bulk for the CPU kernels: the floats of
 * ot_philox_uniform (exec/rng.h) for a run of consecutive element indices,
 * computed 16 Philox blocks at a time where the CPU has AVX-512, 8 with AVX2. Same
 * bits as the scalar rule, so forward, DropoutGrad and recompute clones may mix the
 * widths freely. */
#ifndef OT_CPU_PHILOX_H
#define OT_CPU_PHILOX_H

#include <stdint.h>

/* u[k] = ot_philox_uniform(seed, step, node, i0 + k) for 0 <= k < n. */
void ot_cpu_philox_uniforms(uint64_t seed, uint64_t step, uint32_t node, uint64_t i0, int64_t n, float *u);

#endif
