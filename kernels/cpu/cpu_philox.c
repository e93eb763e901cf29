/* cpu_philox.c — ot_cpu_philox_uniforms: Philox4x32-10 (exec/rng.c) on 16 counters at
 * once with AVX-512 or 8 with AVX2, chosen at run time, scalar otherwise. One Philox
 * block per element made Dropout 46% of tinygpt's forward instructions (bench/NOTES.md).
 *
 * The 8 counters travel as two halves of four, each 32-bit word in the low half of
 * a 64-bit lane: _mm256_mul_epu32 then yields the whole 64-bit product per lane
 * (hi = product >> 32, lo = the product itself, its high half ignored by the next
 * multiply and by the final blend), so no lane is shuffled inside a round. Within a
 * run of 8 indices that does not carry into the high word, ctr[1..3] are the same
 * for all 8: the words they feed in rounds 0 and 1 are scalars computed once per
 * block, and round 9 keeps only out[0], the word the uniform uses. Where the CPU has
 * AVX-512 the same rounds run 16 counters at once in zmm registers (two halves of 8):
 * the integer words, hence the floats, are the same whatever the width, and the
 * multiplies (the bound: 36 a block) take half the instructions. */
#include "kernels/cpu/cpu_philox.h"

#include "exec/rng.h"

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include <immintrin.h>
#define PHILOX_X86 1

/* The round keys of exec/rng.c's schedule, and the per-run constants. */
typedef struct {
    __m256i k0[10], k1[10];
    uint32_t key0[10], key1[10];
    uint32_t c2, c3;
} philox_keys;

/* out[0] of the 4 counters in half x (lo words in 64-bit lanes), hi word h, from
 * round 0 on: rounds 0-1 fold in the scalars that are the same for every lane. */
__attribute__((target("avx2"))) static inline __m256i philox_half(__m256i x, uint32_t h, const philox_keys *k) {
    const __m256i m0 = _mm256_set1_epi64x(OT_PHILOX_M0), m1 = _mm256_set1_epi64x(OT_PHILOX_M1);
    /* Round 0: ctr[2] * M1 is a scalar, so new x0 and x1 are too. */
    uint64_t p1 = (uint64_t)OT_PHILOX_M1 * k->c2;
    uint32_t a0 = (uint32_t)(p1 >> 32) ^ h ^ k->key0[0], a1 = (uint32_t)p1;
    __m256i p0 = _mm256_mul_epu32(x, m0);
    __m256i x2 = _mm256_xor_si256(_mm256_srli_epi64(p0, 32), _mm256_set1_epi64x(k->c3 ^ k->key1[0]));
    __m256i x3 = p0;
    /* Round 1: x0 (a0) is a scalar, so new x3 is too. */
    uint64_t q0 = (uint64_t)OT_PHILOX_M0 * a0;
    __m256i q1 = _mm256_mul_epu32(x2, m1);
    __m256i x0 = _mm256_xor_si256(_mm256_srli_epi64(q1, 32), _mm256_set1_epi64x(a1 ^ k->key0[1]));
    __m256i x1 = q1;
    x2 = _mm256_xor_si256(x3, _mm256_set1_epi64x((uint32_t)(q0 >> 32) ^ k->key1[1]));
    x3 = _mm256_set1_epi64x((uint32_t)q0);
    /* unrolled: a rolled loop adds two register copies and the loop test per round */
#pragma GCC unroll 7
    for (int r = 2; r < 9; r++) {
        __m256i e0 = _mm256_mul_epu32(x0, m0), e1 = _mm256_mul_epu32(x2, m1);
        x0 = _mm256_xor_si256(_mm256_xor_si256(_mm256_srli_epi64(e1, 32), x1), k->k0[r]);
        x1 = e1;
        x2 = _mm256_xor_si256(_mm256_xor_si256(_mm256_srli_epi64(e0, 32), x3), k->k1[r]);
        x3 = e0;
    }
    /* Round 9: only out[0] = hi(x2 * M1) ^ x1 ^ k0. */
    __m256i e1 = _mm256_mul_epu32(x2, m1);
    return _mm256_xor_si256(_mm256_xor_si256(_mm256_srli_epi64(e1, 32), x1), k->k0[9]);
}

/* u[0..n) for n a multiple of 8 from index i0: 8 indices per step; a run of 8 that
 * carries into the high word takes the scalar rule. */
__attribute__((target("avx2"))) static void philox_avx2(const philox_keys *k, uint64_t seed, uint64_t step,
                                                        uint32_t node, uint64_t i0, int64_t n, float *u) {
    const __m256i even = _mm256_setr_epi64x(0, 2, 4, 6), odd = _mm256_setr_epi64x(1, 3, 5, 7);
    const __m256 scale = _mm256_set1_ps(1.0f / 16777216.0f);
    for (int64_t j = 0; j < n; j += 8) {
        uint64_t idx = i0 + (uint64_t)j;
        uint32_t lo = (uint32_t)idx;
        if (lo > 0xFFFFFFF8u) {
            for (int t = 0; t < 8; t++) u[j + t] = ot_philox_uniform(seed, step, node, idx + (uint64_t)t);
            continue;
        }
        __m256i base = _mm256_set1_epi64x(lo);
        __m256i e = philox_half(_mm256_add_epi64(base, even), (uint32_t)(idx >> 32), k);
        __m256i o = philox_half(_mm256_add_epi64(base, odd), (uint32_t)(idx >> 32), k);
        __m256i out0 = _mm256_blend_epi32(e, _mm256_slli_epi64(o, 32), 0xAA);
        __m256 f = _mm256_cvtepi32_ps(_mm256_srli_epi32(out0, 8)); /* < 2^24: exact */
        _mm256_storeu_ps(u + j, _mm256_mul_ps(f, scale));
    }
}

/* philox_half in 512-bit registers: 8 counters (lo words in 64-bit lanes). The round
 * keys are broadcast from the scalar schedule (an embedded broadcast of the xor's
 * memory operand), so philox_keys needs no zmm copies. */
__attribute__((target("avx512f"))) static inline __m512i philox_half16(__m512i x, uint32_t h, const philox_keys *k) {
    const __m512i m0 = _mm512_set1_epi64(OT_PHILOX_M0), m1 = _mm512_set1_epi64(OT_PHILOX_M1);
    uint64_t p1 = (uint64_t)OT_PHILOX_M1 * k->c2;
    uint32_t a0 = (uint32_t)(p1 >> 32) ^ h ^ k->key0[0], a1 = (uint32_t)p1;
    __m512i p0 = _mm512_mul_epu32(x, m0);
    __m512i x2 = _mm512_xor_si512(_mm512_srli_epi64(p0, 32), _mm512_set1_epi64(k->c3 ^ k->key1[0]));
    __m512i x3 = p0;
    uint64_t q0 = (uint64_t)OT_PHILOX_M0 * a0;
    __m512i q1 = _mm512_mul_epu32(x2, m1);
    __m512i x0 = _mm512_xor_si512(_mm512_srli_epi64(q1, 32), _mm512_set1_epi64(a1 ^ k->key0[1]));
    __m512i x1 = q1;
    x2 = _mm512_xor_si512(x3, _mm512_set1_epi64((uint32_t)(q0 >> 32) ^ k->key1[1]));
    x3 = _mm512_set1_epi64((uint32_t)q0);
#pragma GCC unroll 7
    for (int r = 2; r < 9; r++) {
        __m512i e0 = _mm512_mul_epu32(x0, m0), e1 = _mm512_mul_epu32(x2, m1);
        x0 = _mm512_xor_si512(_mm512_xor_si512(_mm512_srli_epi64(e1, 32), x1), _mm512_set1_epi64(k->key0[r]));
        x1 = e1;
        x2 = _mm512_xor_si512(_mm512_xor_si512(_mm512_srli_epi64(e0, 32), x3), _mm512_set1_epi64(k->key1[r]));
        x3 = e0;
    }
    __m512i e1 = _mm512_mul_epu32(x2, m1);
    return _mm512_xor_si512(_mm512_xor_si512(_mm512_srli_epi64(e1, 32), x1), _mm512_set1_epi64(k->key0[9]));
}

/* philox_avx2 at 16 indices a step, for n a multiple of 16; a run of 16 that carries
 * into the high word takes the scalar rule. */
__attribute__((target("avx512f"))) static void philox_avx512(const philox_keys *k, uint64_t seed, uint64_t step,
                                                            uint32_t node, uint64_t i0, int64_t n, float *u) {
    const __m512i even = _mm512_setr_epi64(0, 2, 4, 6, 8, 10, 12, 14), odd = _mm512_setr_epi64(1, 3, 5, 7, 9, 11, 13, 15);
    const __m512 scale = _mm512_set1_ps(1.0f / 16777216.0f);
    for (int64_t j = 0; j < n; j += 16) {
        uint64_t idx = i0 + (uint64_t)j;
        uint32_t lo = (uint32_t)idx;
        if (lo > 0xFFFFFFF0u) {
            for (int t = 0; t < 16; t++) u[j + t] = ot_philox_uniform(seed, step, node, idx + (uint64_t)t);
            continue;
        }
        __m512i base = _mm512_set1_epi64(lo);
        __m512i e = philox_half16(_mm512_add_epi64(base, even), (uint32_t)(idx >> 32), k);
        __m512i o = philox_half16(_mm512_add_epi64(base, odd), (uint32_t)(idx >> 32), k);
        __m512i out0 = _mm512_mask_blend_epi32((__mmask16)0xAAAA, e, _mm512_slli_epi64(o, 32));
        __m512 f = _mm512_cvtepi32_ps(_mm512_srli_epi32(out0, 8)); /* < 2^24: exact */
        _mm512_storeu_ps(u + j, _mm512_mul_ps(f, scale));
    }
}

__attribute__((target("avx2"))) static void philox_keys_init(philox_keys *k, uint64_t seed, uint64_t step,
                                                             uint32_t node) {
    uint32_t k0 = (uint32_t)seed, k1 = (uint32_t)(seed >> 32);
    for (int r = 0; r < 10; r++) {
        k->key0[r] = k0;
        k->key1[r] = k1;
        k->k0[r] = _mm256_set1_epi64x(k0);
        k->k1[r] = _mm256_set1_epi64x(k1);
        k0 += OT_PHILOX_W0;
        k1 += OT_PHILOX_W1;
    }
    k->c2 = (uint32_t)step;
    k->c3 = node;
}
#endif

void ot_cpu_philox_uniforms(uint64_t seed, uint64_t step, uint32_t node, uint64_t i0, int64_t n, float *u) {
    int64_t k = 0;
#ifdef PHILOX_X86
    if (n >= 8 && __builtin_cpu_supports("avx2")) {
        philox_keys keys;
        philox_keys_init(&keys, seed, step, node);
        if (n >= 16 && __builtin_cpu_supports("avx512f")) {
            k = n & ~(int64_t)15;
            philox_avx512(&keys, seed, step, node, i0, k, u);
        }
        int64_t k8 = n & ~(int64_t)7; /* the 8 left over past the 16s, if any */
        if (k8 > k) philox_avx2(&keys, seed, step, node, i0 + (uint64_t)k, k8 - k, u + k);
        k = k8;
    }
#endif
    for (; k < n; k++) u[k] = ot_philox_uniform(seed, step, node, i0 + (uint64_t)k);
}
