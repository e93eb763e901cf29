/* cpu_philox.c — ot_cpu_philox_uniforms: Philox4x32-10 (exec/rng.c) on 8 counters
 * at once with AVX2, chosen at run time, scalar otherwise. One Philox block per
 * element made Dropout 46% of tinygpt's forward instructions (bench/NOTES.md). */
#include "kernels/cpu/cpu_philox.h"

#include "exec/rng.h"

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include <immintrin.h>
#define PHILOX_X86 1

/* Low and high 32 bits of the eight 32x32-bit products a * m. */
__attribute__((target("avx2"))) static inline void mulhilo8(__m256i a, __m256i m, __m256i *hi, __m256i *lo) {
    __m256i even = _mm256_mul_epu32(a, m);                       /* lanes 0,2,4,6 as 64-bit */
    __m256i odd = _mm256_mul_epu32(_mm256_srli_epi64(a, 32), m); /* lanes 1,3,5,7 */
    *lo = _mm256_blend_epi32(even, _mm256_slli_epi64(odd, 32), 0xAA);
    *hi = _mm256_blend_epi32(_mm256_srli_epi64(even, 32), odd, 0xAA);
}

/* u[k] for 8 counters {lo32[k], hi32[k], c2, c3}: the rounds and key schedule of
 * ot_philox4x32_10, then (out[0] >> 8) * 2^-24 as ot_philox_uniform. */
__attribute__((target("avx2"))) static void philox8(const uint32_t *lo32, const uint32_t *hi32, uint32_t c2,
                                                    uint32_t c3, uint64_t seed, float *u) {
    __m256i x0 = _mm256_loadu_si256((const __m256i *)lo32), x1 = _mm256_loadu_si256((const __m256i *)hi32);
    __m256i x2 = _mm256_set1_epi32((int)c2), x3 = _mm256_set1_epi32((int)c3);
    const __m256i m0 = _mm256_set1_epi32((int)0xD2511F53u), m1 = _mm256_set1_epi32((int)0xCD9E8D57u);
    uint32_t k0 = (uint32_t)seed, k1 = (uint32_t)(seed >> 32);
    for (int r = 0; r < 10; r++) {
        __m256i hi0, lo0, hi1, lo1;
        mulhilo8(x0, m0, &hi0, &lo0);
        mulhilo8(x2, m1, &hi1, &lo1);
        x0 = _mm256_xor_si256(_mm256_xor_si256(hi1, x1), _mm256_set1_epi32((int)k0));
        x1 = lo1;
        x2 = _mm256_xor_si256(_mm256_xor_si256(hi0, x3), _mm256_set1_epi32((int)k1));
        x3 = lo0;
        k0 += 0x9E3779B9u;
        k1 += 0xBB67AE85u;
    }
    __m256 f = _mm256_cvtepi32_ps(_mm256_srli_epi32(x0, 8)); /* < 2^24: exact */
    _mm256_storeu_ps(u, _mm256_mul_ps(f, _mm256_set1_ps(1.0f / 16777216.0f)));
}
#endif

void ot_cpu_philox_uniforms(uint64_t seed, uint64_t step, uint32_t node, uint64_t i0, int64_t n, float *u) {
    int64_t k = 0;
#ifdef PHILOX_X86
    if (__builtin_cpu_supports("avx2")) {
        for (; k + 8 <= n; k += 8) {
            uint32_t lo[8], hi[8];
            for (int j = 0; j < 8; j++) {
                uint64_t idx = i0 + (uint64_t)(k + j);
                lo[j] = (uint32_t)idx;
                hi[j] = (uint32_t)(idx >> 32);
            }
            philox8(lo, hi, (uint32_t)step, node, seed, u + k);
        }
    }
#endif
    for (; k < n; k++) u[k] = ot_philox_uniform(seed, step, node, i0 + (uint64_t)k);
}
