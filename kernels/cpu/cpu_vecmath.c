/* cpu_vecmath.c — element loops of the transformer kernels, 16 floats at once with
 * AVX-512 where the CPU has it, with the bits of the one-at-a-time loops they replace:
 * ot_cpu_expf_n (the C library's expf) and ot_cpu_max_f32 (a running max).
 *
 * ot_cpu_expf_n: the kernels called glibc 2.36's expf one element at a time (Softmax,
 * the cross-entropy loss, ErfGrad).
 *
 * glibc's expf (sysdeps/ieee754/flt-32/e_expf.c, the __expf_fma variant its ifunc
 * picks on every CPU with AVX-512, since those have FMA) computes in double:
 *   z = fma(32/ln2, x, shift); k = bits(z); kd = z - shift; r = fma(32/ln2, x, -kd);
 *   s = double(T[k % 32] + (k << 47)); p = fma(fma(r, c0, c1), r*r, fma(r, c2, 1));
 *   expf(x) = float(p * s)
 * for |x| below 88 (the top 12 bits of |x| at most 0x42a), and takes a slow path for
 * the rest (infinities, NaN, overflow and underflow with errno). The vector path below
 * does those operations in that order with the same constants, one lane per element,
 * and hands any group of 16 with an element outside the fast range to expf itself: so
 * every result is expf's, bit for bit. tests/test_kernels_cpu_xfmr.c checks that against
 * expf on a sweep of float bit patterns and on the special values; a C library with
 * another expf would fail it. Without AVX-512 every element goes to expf. */
#include "kernels/cpu/cpu_vecmath.h"

#include <math.h>

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include <immintrin.h>
#define VM_X86 1

/* glibc's __exp2f_data: T[i] = bits(2^(i/32)) - (i << 47), then 32/ln2, the scaled
 * polynomial c0, c1, c2 and the rounding shift 1.5 * 2^52. */
static const uint64_t expf_tab[32] = {
    0x3ff0000000000000, 0x3fefd9b0d3158574, 0x3fefb5586cf9890f, 0x3fef9301d0125b51, 0x3fef72b83c7d517b,
    0x3fef54873168b9aa, 0x3fef387a6e756238, 0x3fef1e9df51fdee1, 0x3fef06fe0a31b715, 0x3feef1a7373aa9cb,
    0x3feedea64c123422, 0x3feece086061892d, 0x3feebfdad5362a27, 0x3feeb42b569d4f82, 0x3feeab07dd485429,
    0x3feea47eb03a5585, 0x3feea09e667f3bcd, 0x3fee9f75e8ec5f74, 0x3feea11473eb0187, 0x3feea589994cce13,
    0x3feeace5422aa0db, 0x3feeb737b0cdc5e5, 0x3feec49182a3f090, 0x3feed503b23e255d, 0x3feee89f995ad3ad,
    0x3feeff76f2fb5e47, 0x3fef199bdd85529c, 0x3fef3720dcef9069, 0x3fef5818dcfba487, 0x3fef7c97337b9b5f,
    0x3fefa4afa2a490da, 0x3fefd0765b6e4540};
#define EXPF_INVLN2N 0x40471547652b82feULL
#define EXPF_C0 0x3ebc6af84b912394ULL
#define EXPF_C1 0x3f2ebfce50fac4f3ULL
#define EXPF_C2 0x3f962e42ff0c52d6ULL
#define EXPF_SHIFT 0x4338000000000000ULL

/* expf of 8 floats widened to doubles (all in the fast range). */
__attribute__((target("avx512f"))) static inline __m256 expf8(__m256 xf, const __m512i *tab) {
    const __m512d invln2n = _mm512_castsi512_pd(_mm512_set1_epi64((long long)EXPF_INVLN2N));
    const __m512d shift = _mm512_castsi512_pd(_mm512_set1_epi64((long long)EXPF_SHIFT));
    const __m512d c0 = _mm512_castsi512_pd(_mm512_set1_epi64((long long)EXPF_C0));
    const __m512d c1 = _mm512_castsi512_pd(_mm512_set1_epi64((long long)EXPF_C1));
    const __m512d c2 = _mm512_castsi512_pd(_mm512_set1_epi64((long long)EXPF_C2));
    const __m512d one = _mm512_set1_pd(1.0);
    __m512d xd = _mm512_cvtps_pd(xf);
    __m512d z = _mm512_fmadd_pd(invln2n, xd, shift);
    __m512i ki = _mm512_castpd_si512(z);
    __m512d kd = _mm512_sub_pd(z, shift);
    __m512d r = _mm512_fmsub_pd(invln2n, xd, kd);
    /* T[k % 32]: two 16-entry lookups, picked by bit 4 of k */
    __m512i idx = _mm512_and_si512(ki, _mm512_set1_epi64(31));
    __m512i lo = _mm512_permutex2var_epi64(tab[0], idx, tab[1]), hi = _mm512_permutex2var_epi64(tab[2], idx, tab[3]);
    __mmask8 upper = _mm512_test_epi64_mask(idx, _mm512_set1_epi64(16));
    __m512i t = _mm512_mask_blend_epi64(upper, lo, hi);
    __m512d s = _mm512_castsi512_pd(_mm512_add_epi64(t, _mm512_slli_epi64(ki, 47)));
    __m512d p = _mm512_fmadd_pd(r, c0, c1);
    __m512d r2 = _mm512_mul_pd(r, r);
    __m512d y = _mm512_fmadd_pd(r, c2, one);
    y = _mm512_fmadd_pd(p, r2, y);
    return _mm512_cvtpd_ps(_mm512_mul_pd(y, s));
}

/* y[0 .. n) for n a multiple of 16. */
__attribute__((target("avx512f"))) static void expf_avx512(const float *x, float *y, int64_t n) {
    __m512i tab[4];
    for (int q = 0; q < 4; q++) tab[q] = _mm512_loadu_si512((const void *)(expf_tab + 8 * q));
    const __m512i absmask = _mm512_set1_epi32(0x7fffffff), limit = _mm512_set1_epi32(0x42afffff);
    for (int64_t i = 0; i < n; i += 16) {
        __m512 v = _mm512_loadu_ps(x + i);
        /* the slow path: the top 12 bits of |x| (sign cleared) above 0x42a, |x| >= 88 */
        __mmask16 slow = _mm512_cmpgt_epi32_mask(_mm512_and_si512(_mm512_castps_si512(v), absmask), limit);
        if (slow) {
            for (int k = 0; k < 16; k++) y[i + k] = expf(x[i + k]);
            continue;
        }
        __m256 a = expf8(_mm512_castps512_ps256(v), tab);
        __m256 b = expf8(_mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(v), 1)), tab);
        __m512d ab = _mm512_insertf64x4(_mm512_castpd256_pd512(_mm256_castps_pd(a)), _mm256_castps_pd(b), 1);
        _mm512_storeu_ps(y + i, _mm512_castpd_ps(ab));
    }
}

/* max over x[0 .. n) for n a multiple of 16, with the rule m = x > m ? x : m in each
 * lane (vmaxps(x, m) is exactly that: m when either is NaN or they are equal). */
__attribute__((target("avx512f"))) static float max_avx512(const float *x, int64_t n) {
    __m512 m = _mm512_set1_ps(-INFINITY);
    for (int64_t i = 0; i < n; i += 16) m = _mm512_max_ps(_mm512_loadu_ps(x + i), m);
    float l[16], r = -INFINITY;
    _mm512_storeu_ps(l, m);
    for (int k = 0; k < 16; k++) r = l[k] > r ? l[k] : r;
    return r;
}
#endif

float ot_cpu_max_f32(const float *x, int64_t n) {
    float m = -INFINITY;
    int64_t k = 0;
#ifdef VM_X86
    if (n >= 16 && __builtin_cpu_supports("avx512f")) {
        k = n & ~(int64_t)15;
        m = max_avx512(x, k);
    }
#endif
    for (; k < n; k++) m = x[k] > m ? x[k] : m;
    /* A zero max is the first of the equal zeros, +0 or -0, an order the lanes do
     * not keep: the plain loop decides. */
    if (m == 0.0f) {
        m = -INFINITY;
        for (int64_t i = 0; i < n; i++) m = x[i] > m ? x[i] : m;
    }
    return m;
}

void ot_cpu_expf_n(const float *x, float *y, int64_t n) {
    int64_t k = 0;
#ifdef VM_X86
    if (n >= 16 && __builtin_cpu_supports("avx512f")) {
        k = n & ~(int64_t)15;
        expf_avx512(x, y, k);
    }
#endif
    for (; k < n; k++) y[k] = expf(x[k]);
}
