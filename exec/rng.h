/* rng.h — the counter-based generator behind every random op: Philox4x32-10
 * (Salmon et al., "Parallel random numbers: as easy as 1, 2, 3", SC'11; the
 * Random123 reference). Stateless: a draw is a pure function of (key, counter), so a
 * recomputed Dropout reproduces its mask on any backend, in any order.
 *
 * Layout used by onnxtrain (the CUDA backend must use exactly the same):
 *   key[0] = low 32 bits of seed          key[1] = high 32 bits of seed
 *   ctr[0] = low 32 bits of element index ctr[1] = high 32 bits of element index
 *   ctr[2] = low 32 bits of step          ctr[3] = node id (original forward node)
 * The uniform of element `index` is out[0] >> 8 scaled by 2^-24: a float in [0, 1)
 * with 24 random bits, exactly representable, identical on CPU and GPU.
 * Dropout keeps element i iff uniform(i) >= ratio (see ot_dropout_keep). */
#ifndef OT_RNG_H
#define OT_RNG_H

#include <stdbool.h>
#include <stdint.h>

/* Philox4x32's round multipliers and Weyl key increments (the Random123 values). The
 * CPU fast path (kernels/cpu/cpu_philox.c) and the CUDA kernels use these same names. */
#define OT_PHILOX_M0 0xD2511F53u
#define OT_PHILOX_M1 0xCD9E8D57u
#define OT_PHILOX_W0 0x9E3779B9u /* golden ratio */
#define OT_PHILOX_W1 0xBB67AE85u /* sqrt(3) - 1 */

/* One Philox4x32-10 block: 10 rounds with the Weyl key schedule. */
void ot_philox4x32_10(const uint32_t ctr[4], const uint32_t key[2], uint32_t out[4]);

/* Uniform float in [0, 1) for (seed, step, node, index) with the layout above. */
float ot_philox_uniform(uint64_t seed, uint64_t step, uint32_t node, uint64_t index);

/* The Dropout rule shared by forward and backward kernels: keep iff u >= ratio. */
static inline bool ot_dropout_keep(uint64_t seed, uint64_t step, uint32_t node, uint64_t index, float ratio) {
    return ot_philox_uniform(seed, step, node, index) >= ratio;
}

#endif
