/* cuda_philox.cuh — the CUDA backend's copy of the Philox4x32-10 uniform of
 * exec/rng.c (that file is C for the CPU; this one is host and device code), shared by
 * the kernels that draw: Dropout and DropoutGrad (cuda_pointwise_grad.cu) and the
 * random sources (cuda_random.cu). test_cuda checks its host copy bitwise against
 * the CPU's generator. */
#ifndef OT_CUDA_PHILOX_CUH
#define OT_CUDA_PHILOX_CUH

#include <stdint.h>

#include "exec/rng.h" /* the constants: OT_PHILOX_M0/M1/W0/W1 */

/* Philox4x32-10 exactly as exec/rng.c (key = seed, ctr = (index, step, node)).
 * Host and device: the host copy is what test_cuda checks bitwise against the CPU's
 * generator on machines without a GPU. */
static __host__ __device__ __forceinline__ float philox_uniform(uint64_t seed, uint64_t step, uint32_t node, uint64_t index) {
    uint32_t c0 = (uint32_t)index, c1 = (uint32_t)(index >> 32), c2 = (uint32_t)step, c3 = node;
    uint32_t k0 = (uint32_t)seed, k1 = (uint32_t)(seed >> 32);
    for (int round = 0; round < 10; round++) {
        uint64_t p0 = (uint64_t)OT_PHILOX_M0 * c0, p1 = (uint64_t)OT_PHILOX_M1 * c2;
        uint32_t hi0 = (uint32_t)(p0 >> 32), lo0 = (uint32_t)p0;
        uint32_t hi1 = (uint32_t)(p1 >> 32), lo1 = (uint32_t)p1;
        c0 = hi1 ^ c1 ^ k0;
        c1 = lo1;
        c2 = hi0 ^ c3 ^ k1;
        c3 = lo0;
        k0 += OT_PHILOX_W0;
        k1 += OT_PHILOX_W1;
    }
    return (float)(c0 >> 8) * (1.0f / 16777216.0f);
}

#endif
