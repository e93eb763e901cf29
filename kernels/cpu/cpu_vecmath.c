/* cpu_vecmath.c — element loops of the transformer kernels, 16 floats at once with
 * AVX-512 where the CPU has it, with the bits of the one-at-a-time loops they replace:
 * ot_cpu_expf_n (the C library's expf), ot_cpu_exp_diff_f64 (its exp, the same way:
 * glibc's __ieee754_exp_fma step for step, 8 doubles at once, any argument outside
 * its fast range handed to exp), ot_cpu_max_f32 (a running max) and
 * ot_cpu_dropout_select (Dropout's keep-and-scale: a compare and a masked multiply,
 * the same IEEE multiply per kept element) and ot_cpu_select_u32 (Where on 4-byte
 * payloads, copied as integers), ot_cpu_div_scale_f64 (the cross-entropy gradient's
 * g * (e / s) rounded to float: IEEE divides and multiplies, 8 at a time), ot_cpu_erf_n
 * (Erf's rational rule, ot_cpu_erf1, with the same IEEE operations in each of 16 lanes;
 * 4 lanes on CPUs without AVX-512; -std=c11 keeps -ffp-contract=off, so no FMA forms),
 * ot_cpu_arith_f32 (Add, Sub, Mul, Div: one IEEE operation per lane).
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
 * and hands any group of 16 with an element outside the fast range to expf itself,
 * except -inf and arguments below -0x1.9fe368p6f (log(2^-150)), for which expf returns
 * +0 before any arithmetic (its __math_uflowf(0) and -inf cases) and the vector path
 * writes +0: so every result is expf's, bit for bit. tests/test_kernels_cpu_xfmr.c checks that against
 * expf on a sweep of float bit patterns and on the special values; a C library with
 * another expf would fail it. Without AVX-512, the same on 8 lanes of AVX2 with FMA
 * (tests/test_cpu_vecmath.c checks each width the CPU has); without those, expf. */
#include "kernels/cpu/cpu_vecmath.h"

#include <math.h>
#include <stdbool.h>
#include <string.h>

/* Erf: x * P(x^2) / Q(x^2) (Eigen's float erf coefficients), written once for a scalar
 * or a vector type T with ERF_SPLAT(c) broadcasting a constant; libm's erff was 21% of
 * tinygpt's forward instructions (exact GELU exports Erf). */
#define ERF_POLY(T, x2, x)                                                                               \
    T p = ERF_SPLAT(-2.72614225801306e-10f);                                                            \
    p = p * x2 + ERF_SPLAT(2.77068142495902e-08f);                                                      \
    p = p * x2 + ERF_SPLAT(-2.10102402082508e-06f);                                                     \
    p = p * x2 + ERF_SPLAT(-5.69250639462346e-05f);                                                     \
    p = p * x2 + ERF_SPLAT(-7.34990630326855e-04f);                                                     \
    p = p * x2 + ERF_SPLAT(-2.95459980854025e-03f);                                                     \
    p = p * x2 + ERF_SPLAT(-1.60960333262415e-02f);                                                     \
    p = p * x;                                                                                          \
    T q = ERF_SPLAT(-1.45660718464996e-05f);                                                            \
    q = q * x2 + ERF_SPLAT(-2.13374055278905e-04f);                                                     \
    q = q * x2 + ERF_SPLAT(-1.68282697438203e-03f);                                                     \
    q = q * x2 + ERF_SPLAT(-7.37332916720468e-03f);                                                     \
    q = q * x2 + ERF_SPLAT(-1.42647390514189e-02f);

float ot_cpu_erf1(float a) {
#define ERF_SPLAT(c) (c)
    float x = a < -4.0f ? -4.0f : a; /* a NaN fails both compares and stays */
    x = x > 4.0f ? 4.0f : x;
    float x2 = x * x;
    ERF_POLY(float, x2, x)
    return p / q;
#undef ERF_SPLAT
}

/* 4 lanes (GCC and Clang vector extension), the baseline's SSE. */
typedef float vm_v4f __attribute__((vector_size(16)));
typedef int32_t vm_v4i __attribute__((vector_size(16)));
static void erf_v4(const float *xin, float *y, int64_t n) {
#define ERF_SPLAT(c) ((vm_v4f){(c), (c), (c), (c)})
    const vm_v4f lo = ERF_SPLAT(-4.0f), hi = ERF_SPLAT(4.0f);
    for (int64_t i = 0; i < n; i += 4) {
        vm_v4f a;
        memcpy(&a, xin + i, sizeof a);
        vm_v4i m = (vm_v4i)(a < lo);
        vm_v4f x = (vm_v4f)(((vm_v4i)lo & m) | ((vm_v4i)a & ~m));
        m = (vm_v4i)(x > hi);
        x = (vm_v4f)(((vm_v4i)hi & m) | ((vm_v4i)x & ~m));
        vm_v4f x2 = x * x;
        ERF_POLY(vm_v4f, x2, x)
        vm_v4f r = p / q;
        memcpy(y + i, &r, sizeof r);
    }
#undef ERF_SPLAT
}

/* a OP b over n elements, W floats per step through vector type T (LOAD/STORE move
 * one), then the plain loop for the rest: an operation and a layout per loop. */
#define ARITH_LOOP(T, W, LOAD, STORE, OPR)                                                               \
    do {                                                                                                 \
        if (b_step)                                                                                      \
            for (; k + (W) <= n; k += (W)) STORE(y + k, LOAD(a + k) OPR LOAD(b + k));                  \
        else {                                                                                           \
            T vb = LOAD_SPLAT(b[0]);                                                                     \
            for (; k + (W) <= n; k += (W)) STORE(y + k, LOAD(a + k) OPR vb);                           \
        }                                                                                                \
    } while (0)
#define ARITH_SWITCH(T, W, LOAD, STORE)                                                                  \
    switch (op) {                                                                                        \
    case OT_CPU_ARITH_ADD: ARITH_LOOP(T, W, LOAD, STORE, +); break;                                     \
    case OT_CPU_ARITH_SUB: ARITH_LOOP(T, W, LOAD, STORE, -); break;                                     \
    case OT_CPU_ARITH_MUL: ARITH_LOOP(T, W, LOAD, STORE, *); break;                                     \
    case OT_CPU_ARITH_DIV: ARITH_LOOP(T, W, LOAD, STORE, /); break;                                     \
    }

static inline vm_v4f v4_load(const float *p) {
    vm_v4f v;
    memcpy(&v, p, sizeof v);
    return v;
}
static inline void v4_store(float *p, vm_v4f v) { memcpy(p, &v, sizeof v); }

/* returns the elements done: n rounded down to 4 */
static int64_t arith_v4(ot_cpu_arith_op op, const float *a, const float *b, bool b_step, float *y, int64_t n) {
    int64_t k = 0;
#define LOAD_SPLAT(c) ((vm_v4f){(c), (c), (c), (c)})
    ARITH_SWITCH(vm_v4f, 4, v4_load, v4_store)
#undef LOAD_SPLAT
    return k;
}

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include <immintrin.h>
#define VM_X86 1

/* arith for 16 at a time; returns n rounded down to 16 */
__attribute__((target("avx512f"))) static int64_t arith_avx512(ot_cpu_arith_op op, const float *a, const float *b,
                                                               bool b_step, float *y, int64_t n) {
    int64_t k = 0;
#define LOAD_SPLAT(c) _mm512_set1_ps(c)
    ARITH_SWITCH(__m512, 16, _mm512_loadu_ps, _mm512_storeu_ps)
#undef LOAD_SPLAT
    return k;
}

/* erf for n a multiple of 16: the compares and blends of the clamps, then ERF_POLY. */
__attribute__((target("avx512f"))) static void erf_avx512(const float *xin, float *y, int64_t n) {
#define ERF_SPLAT(c) _mm512_set1_ps(c)
    const __m512 lo = ERF_SPLAT(-4.0f), hi = ERF_SPLAT(4.0f);
    for (int64_t i = 0; i < n; i += 16) {
        __m512 a = _mm512_loadu_ps(xin + i);
        __m512 x = _mm512_mask_blend_ps(_mm512_cmp_ps_mask(a, lo, _CMP_LT_OQ), a, lo);
        x = _mm512_mask_blend_ps(_mm512_cmp_ps_mask(x, hi, _CMP_GT_OQ), x, hi);
        __m512 x2 = x * x;
        ERF_POLY(__m512, x2, x)
        _mm512_storeu_ps(y + i, p / q);
    }
#undef ERF_SPLAT
}

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
    const __m512 uflow = _mm512_set1_ps(-0x1.9fe368p6f);
    for (int64_t i = 0; i < n; i += 16) {
        __m512 v = _mm512_loadu_ps(x + i);
        /* the slow path: the top 12 bits of |x| (sign cleared) above 0x42a, |x| >= 88 */
        __mmask16 slow = _mm512_cmpgt_epi32_mask(_mm512_and_si512(_mm512_castps_si512(v), absmask), limit);
        /* Of the slow path's arguments, -inf and those below log(2^-150) (causal
         * Softmax's masked lanes) get expf's +0 here: the lanes are zeroed before and
         * after the fast formula. Any other (NaN, overflow, [-103.97, -88]) hands the
         * group to expf. */
        __mmask16 zero = 0;
        if (slow) {
            zero = _mm512_cmp_ps_mask(v, uflow, _CMP_LT_OQ);
            if (slow & (__mmask16)~zero) {
                for (int k = 0; k < 16; k++) y[i + k] = expf(x[i + k]);
                continue;
            }
            v = _mm512_maskz_mov_ps((__mmask16)~zero, v);
        }
        __m256 a = expf8(_mm512_castps512_ps256(v), tab);
        __m256 b = expf8(_mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(v), 1)), tab);
        __m512d ab = _mm512_insertf64x4(_mm512_castpd256_pd512(_mm256_castps_pd(a)), _mm256_castps_pd(b), 1);
        _mm512_storeu_ps(y + i, _mm512_maskz_mov_ps((__mmask16)~zero, _mm512_castpd_ps(ab)));
    }
}

/* The same on 8 lanes of AVX2 with FMA, for CPUs without AVX-512 (glibc's ifunc
 * picks __expf_fma on them too: the bits are its): 4 doubles at a time, T[k % 32]
 * gathered. y[0 .. n) for n a multiple of 8. */
__attribute__((target("avx2,fma"))) static inline __m128 expf4_avx2(__m128 xf) {
    const __m256d invln2n = _mm256_castsi256_pd(_mm256_set1_epi64x((long long)EXPF_INVLN2N));
    const __m256d shift = _mm256_castsi256_pd(_mm256_set1_epi64x((long long)EXPF_SHIFT));
    const __m256d c0 = _mm256_castsi256_pd(_mm256_set1_epi64x((long long)EXPF_C0));
    const __m256d c1 = _mm256_castsi256_pd(_mm256_set1_epi64x((long long)EXPF_C1));
    const __m256d c2 = _mm256_castsi256_pd(_mm256_set1_epi64x((long long)EXPF_C2));
    __m256d xd = _mm256_cvtps_pd(xf);
    __m256d z = _mm256_fmadd_pd(invln2n, xd, shift);
    __m256i ki = _mm256_castpd_si256(z);
    __m256d kd = _mm256_sub_pd(z, shift);
    __m256d r = _mm256_fmsub_pd(invln2n, xd, kd);
    __m256i t = _mm256_i64gather_epi64((const long long *)expf_tab, _mm256_and_si256(ki, _mm256_set1_epi64x(31)), 8);
    __m256d sc = _mm256_castsi256_pd(_mm256_add_epi64(t, _mm256_slli_epi64(ki, 47)));
    __m256d p = _mm256_fmadd_pd(r, c0, c1);
    __m256d r2 = _mm256_mul_pd(r, r);
    __m256d y = _mm256_fmadd_pd(r, c2, _mm256_set1_pd(1.0));
    y = _mm256_fmadd_pd(p, r2, y);
    return _mm256_cvtpd_ps(_mm256_mul_pd(y, sc));
}

__attribute__((target("avx2,fma"))) static void expf_avx2(const float *x, float *y, int64_t n) {
    const __m256i absmask = _mm256_set1_epi32(0x7fffffff), limit = _mm256_set1_epi32(0x42afffff);
    const __m256 uflow = _mm256_set1_ps(-0x1.9fe368p6f);
    for (int64_t i = 0; i < n; i += 8) {
        __m256 v = _mm256_loadu_ps(x + i);
        /* the same slow path and zeroed lanes as expf_avx512's, on 8 */
        __m256i slow = _mm256_cmpgt_epi32(_mm256_and_si256(_mm256_castps_si256(v), absmask), limit);
        __m256 zero = _mm256_setzero_ps();
        if (!_mm256_testz_si256(slow, slow)) {
            zero = _mm256_cmp_ps(v, uflow, _CMP_LT_OQ);
            if (!_mm256_testc_si256(_mm256_castps_si256(zero), slow)) { /* a slow lane not zeroed */
                for (int k = 0; k < 8; k++) y[i + k] = expf(x[i + k]);
                continue;
            }
            v = _mm256_andnot_ps(zero, v);
        }
        __m128 a = expf4_avx2(_mm256_castps256_ps128(v)), b = expf4_avx2(_mm256_extractf128_ps(v, 1));
        _mm256_storeu_ps(y + i, _mm256_andnot_ps(zero, _mm256_set_m128(b, a)));
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
/* glibc's __exp_data (sysdeps/ieee754/dbl-64/e_exp_data.c): 128/ln2, -ln2/128 in
 * two parts, the polynomial C2 .. C5, the shift 1.5 * 2^52, and 128 pairs (tail,
 * bits(2^(i/128)) - (i << 45)). */
#define EXP_INVLN2N 0x40671547652b82feULL
#define EXP_NEGLN2HIN 0xbf762e42fefa0000ULL
#define EXP_NEGLN2LON 0xbd0cf79abc9e3b3aULL
#define EXP_C2 0x3fdffffffffffdbdULL
#define EXP_C3 0x3fc555555555543cULL
#define EXP_C4 0x3fa55555cf172b91ULL
#define EXP_C5 0x3f81111167a4d017ULL
static const uint64_t exp_tab[256] = {
    0x0000000000000000, 0x3ff0000000000000, 0x3c9b3b4f1a88bf6e, 0x3feff63da9fb3335,
    0xbc7160139cd8dc5d, 0x3fefec9a3e778061, 0xbc905e7a108766d1, 0x3fefe315e86e7f85,
    0x3c8cd2523567f613, 0x3fefd9b0d3158574, 0xbc8bce8023f98efa, 0x3fefd06b29ddf6de,
    0x3c60f74e61e6c861, 0x3fefc74518759bc8, 0x3c90a3e45b33d399, 0x3fefbe3ecac6f383,
    0x3c979aa65d837b6d, 0x3fefb5586cf9890f, 0x3c8eb51a92fdeffc, 0x3fefac922b7247f7,
    0x3c3ebe3d702f9cd1, 0x3fefa3ec32d3d1a2, 0xbc6a033489906e0b, 0x3fef9b66affed31b,
    0xbc9556522a2fbd0e, 0x3fef9301d0125b51, 0xbc5080ef8c4eea55, 0x3fef8abdc06c31cc,
    0xbc91c923b9d5f416, 0x3fef829aaea92de0, 0x3c80d3e3e95c55af, 0x3fef7a98c8a58e51,
    0xbc801b15eaa59348, 0x3fef72b83c7d517b, 0xbc8f1ff055de323d, 0x3fef6af9388c8dea,
    0x3c8b898c3f1353bf, 0x3fef635beb6fcb75, 0xbc96d99c7611eb26, 0x3fef5be084045cd4,
    0x3c9aecf73e3a2f60, 0x3fef54873168b9aa, 0xbc8fe782cb86389d, 0x3fef4d5022fcd91d,
    0x3c8a6f4144a6c38d, 0x3fef463b88628cd6, 0x3c807a05b0e4047d, 0x3fef3f49917ddc96,
    0x3c968efde3a8a894, 0x3fef387a6e756238, 0x3c875e18f274487d, 0x3fef31ce4fb2a63f,
    0x3c80472b981fe7f2, 0x3fef2b4565e27cdd, 0xbc96b87b3f71085e, 0x3fef24dfe1f56381,
    0x3c82f7e16d09ab31, 0x3fef1e9df51fdee1, 0xbc3d219b1a6fbffa, 0x3fef187fd0dad990,
    0x3c8b3782720c0ab4, 0x3fef1285a6e4030b, 0x3c6e149289cecb8f, 0x3fef0cafa93e2f56,
    0x3c834d754db0abb6, 0x3fef06fe0a31b715, 0x3c864201e2ac744c, 0x3fef0170fc4cd831,
    0x3c8fdd395dd3f84a, 0x3feefc08b26416ff, 0xbc86a3803b8e5b04, 0x3feef6c55f929ff1,
    0xbc924aedcc4b5068, 0x3feef1a7373aa9cb, 0xbc9907f81b512d8e, 0x3feeecae6d05d866,
    0xbc71d1e83e9436d2, 0x3feee7db34e59ff7, 0xbc991919b3ce1b15, 0x3feee32dc313a8e5,
    0x3c859f48a72a4c6d, 0x3feedea64c123422, 0xbc9312607a28698a, 0x3feeda4504ac801c,
    0xbc58a78f4817895b, 0x3feed60a21f72e2a, 0xbc7c2c9b67499a1b, 0x3feed1f5d950a897,
    0x3c4363ed60c2ac11, 0x3feece086061892d, 0x3c9666093b0664ef, 0x3feeca41ed1d0057,
    0x3c6ecce1daa10379, 0x3feec6a2b5c13cd0, 0x3c93ff8e3f0f1230, 0x3feec32af0d7d3de,
    0x3c7690cebb7aafb0, 0x3feebfdad5362a27, 0x3c931dbdeb54e077, 0x3feebcb299fddd0d,
    0xbc8f94340071a38e, 0x3feeb9b2769d2ca7, 0xbc87deccdc93a349, 0x3feeb6daa2cf6642,
    0xbc78dec6bd0f385f, 0x3feeb42b569d4f82, 0xbc861246ec7b5cf6, 0x3feeb1a4ca5d920f,
    0x3c93350518fdd78e, 0x3feeaf4736b527da, 0x3c7b98b72f8a9b05, 0x3feead12d497c7fd,
    0x3c9063e1e21c5409, 0x3feeab07dd485429, 0x3c34c7855019c6ea, 0x3feea9268a5946b7,
    0x3c9432e62b64c035, 0x3feea76f15ad2148, 0xbc8ce44a6199769f, 0x3feea5e1b976dc09,
    0xbc8c33c53bef4da8, 0x3feea47eb03a5585, 0xbc845378892be9ae, 0x3feea34634ccc320,
    0xbc93cedd78565858, 0x3feea23882552225, 0x3c5710aa807e1964, 0x3feea155d44ca973,
    0xbc93b3efbf5e2228, 0x3feea09e667f3bcd, 0xbc6a12ad8734b982, 0x3feea012750bdabf,
    0xbc6367efb86da9ee, 0x3fee9fb23c651a2f, 0xbc80dc3d54e08851, 0x3fee9f7df9519484,
    0xbc781f647e5a3ecf, 0x3fee9f75e8ec5f74, 0xbc86ee4ac08b7db0, 0x3fee9f9a48a58174,
    0xbc8619321e55e68a, 0x3fee9feb564267c9, 0x3c909ccb5e09d4d3, 0x3feea0694fde5d3f,
    0xbc7b32dcb94da51d, 0x3feea11473eb0187, 0x3c94ecfd5467c06b, 0x3feea1ed0130c132,
    0x3c65ebe1abd66c55, 0x3feea2f336cf4e62, 0xbc88a1c52fb3cf42, 0x3feea427543e1a12,
    0xbc9369b6f13b3734, 0x3feea589994cce13, 0xbc805e843a19ff1e, 0x3feea71a4623c7ad,
    0xbc94d450d872576e, 0x3feea8d99b4492ed, 0x3c90ad675b0e8a00, 0x3feeaac7d98a6699,
    0x3c8db72fc1f0eab4, 0x3feeace5422aa0db, 0xbc65b6609cc5e7ff, 0x3feeaf3216b5448c,
    0x3c7bf68359f35f44, 0x3feeb1ae99157736, 0xbc93091fa71e3d83, 0x3feeb45b0b91ffc6,
    0xbc5da9b88b6c1e29, 0x3feeb737b0cdc5e5, 0xbc6c23f97c90b959, 0x3feeba44cbc8520f,
    0xbc92434322f4f9aa, 0x3feebd829fde4e50, 0xbc85ca6cd7668e4b, 0x3feec0f170ca07ba,
    0x3c71affc2b91ce27, 0x3feec49182a3f090, 0x3c6dd235e10a73bb, 0x3feec86319e32323,
    0xbc87c50422622263, 0x3feecc667b5de565, 0x3c8b1c86e3e231d5, 0x3feed09bec4a2d33,
    0xbc91bbd1d3bcbb15, 0x3feed503b23e255d, 0x3c90cc319cee31d2, 0x3feed99e1330b358,
    0x3c8469846e735ab3, 0x3feede6b5579fdbf, 0xbc82dfcd978e9db4, 0x3feee36bbfd3f37a,
    0x3c8c1a7792cb3387, 0x3feee89f995ad3ad, 0xbc907b8f4ad1d9fa, 0x3feeee07298db666,
    0xbc55c3d956dcaeba, 0x3feef3a2b84f15fb, 0xbc90a40e3da6f640, 0x3feef9728de5593a,
    0xbc68d6f438ad9334, 0x3feeff76f2fb5e47, 0xbc91eee26b588a35, 0x3fef05b030a1064a,
    0x3c74ffd70a5fddcd, 0x3fef0c1e904bc1d2, 0xbc91bdfbfa9298ac, 0x3fef12c25bd71e09,
    0x3c736eae30af0cb3, 0x3fef199bdd85529c, 0x3c8ee3325c9ffd94, 0x3fef20ab5fffd07a,
    0x3c84e08fd10959ac, 0x3fef27f12e57d14b, 0x3c63cdaf384e1a67, 0x3fef2f6d9406e7b5,
    0x3c676b2c6c921968, 0x3fef3720dcef9069, 0xbc808a1883ccb5d2, 0x3fef3f0b555dc3fa,
    0xbc8fad5d3ffffa6f, 0x3fef472d4a07897c, 0xbc900dae3875a949, 0x3fef4f87080d89f2,
    0x3c74a385a63d07a7, 0x3fef5818dcfba487, 0xbc82919e2040220f, 0x3fef60e316c98398,
    0x3c8e5a50d5c192ac, 0x3fef69e603db3285, 0x3c843a59ac016b4b, 0x3fef7321f301b460,
    0xbc82d52107b43e1f, 0x3fef7c97337b9b5f, 0xbc892ab93b470dc9, 0x3fef864614f5a129,
    0x3c74b604603a88d3, 0x3fef902ee78b3ff6, 0x3c83c5ec519d7271, 0x3fef9a51fbc74c83,
    0xbc8ff7128fd391f0, 0x3fefa4afa2a490da, 0xbc8dae98e223747d, 0x3fefaf482d8e67f1,
    0x3c8ec3bc41aa2008, 0x3fefba1bee615a27, 0x3c842b94c3a9eb32, 0x3fefc52b376bba97,
    0x3c8a64a931d185ee, 0x3fefd0765b6e4540, 0xbc8e37bae43be3ed, 0x3fefdbfdad9cbe14,
    0x3c77893b4d91cd9d, 0x3fefe7c1819e90d8, 0x3c5305c14160cc89, 0x3feff3c22b8f71f1,
};

static inline __attribute__((target("avx512f"))) __m512d bcast(uint64_t bits) {
    return _mm512_castsi512_pd(_mm512_set1_epi64((long long)bits));
}

/* exp of 8 doubles in the fast range, the operations of __ieee754_exp_fma:
 *   z = fma(x, 128/ln2, shift); k = bits(z); kd = z - shift;
 *   r = fma(kd, -ln2hi/128, x); r = fma(kd, -ln2lo/128, r);
 *   tmp = fma(r^2 * r^2, fma(r, C5, C4), fma(fma(r, C3, C2), r^2, r + tail[k % 128]));
 *   exp(x) = fma(s, tmp, s), s = bits(T[k % 128] + (k << 45)) */
__attribute__((target("avx512f"))) static inline __m512d exp8(__m512d x) {
    const __m512d shift = bcast(EXPF_SHIFT);
    __m512d z = _mm512_fmadd_pd(x, bcast(EXP_INVLN2N), shift);
    __m512i ki = _mm512_castpd_si512(z);
    __m512d kd = _mm512_sub_pd(z, shift);
    __m512d r = _mm512_fmadd_pd(kd, bcast(EXP_NEGLN2HIN), x);
    r = _mm512_fmadd_pd(kd, bcast(EXP_NEGLN2LON), r);
    __m512i idx = _mm512_slli_epi64(_mm512_and_si512(ki, _mm512_set1_epi64(127)), 1);
    __m512d tail = _mm512_castsi512_pd(_mm512_i64gather_epi64(idx, (const void *)exp_tab, 8));
    __m512i sb = _mm512_i64gather_epi64(_mm512_add_epi64(idx, _mm512_set1_epi64(1)), (const void *)exp_tab, 8);
    __m512d s = _mm512_castsi512_pd(_mm512_add_epi64(sb, _mm512_slli_epi64(ki, 45)));
    __m512d a = _mm512_fmadd_pd(r, bcast(EXP_C3), bcast(EXP_C2));
    __m512d t1 = _mm512_add_pd(r, tail);
    __m512d r2 = _mm512_mul_pd(r, r);
    __m512d b = _mm512_fmadd_pd(r, bcast(EXP_C5), bcast(EXP_C4));
    __m512d t2 = _mm512_fmadd_pd(a, r2, t1);
    __m512d r4 = _mm512_mul_pd(r2, r2);
    __m512d tmp = _mm512_fmadd_pd(r4, b, t2);
    return _mm512_fmadd_pd(s, tmp, s);
}

/* y[i] = exp((double)x[i] - m) for n a multiple of 8; a group of 8 with an argument
 * outside the fast range (top 12 bits of |arg| in [0x3c9, 0x407]: 2^-54 <= |arg| <
 * 512) goes to exp itself. */
__attribute__((target("avx512f"))) static void exp_diff_avx512(const float *x, double m, double *y, int64_t n) {
    const __m512d mv = _mm512_set1_pd(m);
    const __m512i lo = _mm512_set1_epi64(0x3c9), span = _mm512_set1_epi64(0x407 - 0x3c9);
    for (int64_t i = 0; i < n; i += 8) {
        __m512d a = _mm512_sub_pd(_mm512_cvtps_pd(_mm256_loadu_ps(x + i)), mv);
        __m512i top = _mm512_and_si512(_mm512_srli_epi64(_mm512_castpd_si512(a), 52), _mm512_set1_epi64(0x7ff));
        if (_mm512_cmpgt_epu64_mask(_mm512_sub_epi64(top, lo), span)) {
            for (int k = 0; k < 8; k++) y[i + k] = exp((double)x[i + k] - m);
            continue;
        }
        _mm512_storeu_pd(y + i, exp8(a));
    }
}
/* dropout_select for n a multiple of 16. */
__attribute__((target("avx512f"))) static void select_avx512(const float *u, float ratio, const float *x, float scale,
                                                             float *y, uint8_t *mask, int64_t n) {
    const __m512 rv = _mm512_set1_ps(ratio), sv = _mm512_set1_ps(scale);
    for (int64_t i = 0; i < n; i += 16) {
        __mmask16 keep = _mm512_cmp_ps_mask(_mm512_loadu_ps(u + i), rv, _CMP_GE_OQ);
        _mm512_storeu_ps(y + i, _mm512_maskz_mul_ps(keep, _mm512_loadu_ps(x + i), sv));
        if (mask) /* the 16 keep bits as bytes 0 / 1 */
            _mm_storeu_si128((__m128i *)(void *)(mask + i),
                             _mm512_cvtepi32_epi8(_mm512_maskz_set1_epi32(keep, 1)));
    }
}
/* select_u32 for n a multiple of 16. */
__attribute__((target("avx512f"))) static void select_avx512_u32(const uint8_t *c, const uint32_t *x, bool xs,
                                                                 const uint32_t *y, bool ys, uint32_t *o, int64_t n) {
    const __m512i x0 = _mm512_set1_epi32((int)x[0]), y0 = _mm512_set1_epi32((int)y[0]);
    for (int64_t i = 0; i < n; i += 16) {
        __m128i cb = _mm_loadu_si128((const __m128i *)(const void *)(c + i));
        __mmask16 m = _mm512_cmpneq_epi32_mask(_mm512_cvtepu8_epi32(cb), _mm512_setzero_si512());
        __m512i xv = xs ? _mm512_loadu_si512((const void *)(x + i)) : x0;
        __m512i yv = ys ? _mm512_loadu_si512((const void *)(y + i)) : y0;
        _mm512_storeu_si512((void *)(o + i), _mm512_mask_blend_epi32(m, yv, xv));
    }
}
/* div_scale for n a multiple of 8. */
__attribute__((target("avx512f"))) static void div_scale_avx512(const double *e, double s, double g, float *v,
                                                                int64_t n) {
    const __m512d sv = _mm512_set1_pd(s), gv = _mm512_set1_pd(g);
    for (int64_t i = 0; i < n; i += 8)
        _mm256_storeu_ps(v + i, _mm512_cvtpd_ps(_mm512_mul_pd(gv, _mm512_div_pd(_mm512_loadu_pd(e + i), sv))));
}
#endif

/* The leading elements, whole groups of `lanes`, that a kernel's AVX-512 path takes:
 * 0 without AVX-512 or below one group; the scalar tail does the rest. */
static int64_t avx512_prefix(int64_t n, int64_t lanes) {
#ifdef VM_X86
    if (n >= lanes && __builtin_cpu_supports("avx512f")) return n & ~(lanes - 1);
#else
    (void)n, (void)lanes;
#endif
    return 0;
}

void ot_cpu_div_scale_f64(const double *e, double s, double g, float *v, int64_t n) {
    int64_t k = avx512_prefix(n, 8);
#ifdef VM_X86
    if (k) div_scale_avx512(e, s, g, v, k);
#endif
    for (; k < n; k++) v[k] = (float)(g * (e[k] / s));
}

void ot_cpu_select_u32(const uint8_t *c, const uint32_t *x, bool x_step, const uint32_t *y, bool y_step, uint32_t *o,
                       int64_t n) {
    int64_t k = avx512_prefix(n, 16);
#ifdef VM_X86
    if (k) select_avx512_u32(c, x, x_step, y, y_step, o, k);
#endif
    for (; k < n; k++) o[k] = c[k] ? x[x_step ? k : 0] : y[y_step ? k : 0];
}

void ot_cpu_dropout_select(const float *u, float ratio, const float *x, float scale, float *y, uint8_t *mask,
                           int64_t n) {
    int64_t k = avx512_prefix(n, 16);
#ifdef VM_X86
    if (k) select_avx512(u, ratio, x, scale, y, mask, k);
#endif
    for (; k < n; k++) {
        bool keep = u[k] >= ratio;
        y[k] = keep ? x[k] * scale : 0.0f;
        if (mask) mask[k] = keep;
    }
}

void ot_cpu_exp_diff_f64(const float *x, double m, double *y, int64_t n) {
    int64_t k = avx512_prefix(n, 8);
#ifdef VM_X86
    if (k) exp_diff_avx512(x, m, y, k);
#endif
    for (; k < n; k++) y[k] = exp((double)x[k] - m);
}

float ot_cpu_max_f32(const float *x, int64_t n) {
    float m = -INFINITY;
    int64_t k = avx512_prefix(n, 16);
#ifdef VM_X86
    if (k) m = max_avx512(x, k);
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

int ot_cpu_expf_lanes(void) {
#ifdef VM_X86
    if (__builtin_cpu_supports("avx512f")) return 16;
    if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) return 8;
#endif
    return 0;
}

/* The leading multiple of lanes done with that body (16 or 8, which the CPU has). */
static int64_t expf_body(int lanes, const float *x, float *y, int64_t n) {
    int64_t k = n & ~(int64_t)(lanes - 1);
#ifdef VM_X86
    if (k && lanes == 16) expf_avx512(x, y, k);
    if (k && lanes == 8) expf_avx2(x, y, k);
    return k;
#else
    (void)x, (void)y, (void)k;
    return 0;
#endif
}

int64_t ot_cpu_expf_n_lanes(int lanes, const float *x, float *y, int64_t n) {
    if ((lanes != 16 && lanes != 8) || lanes > ot_cpu_expf_lanes()) return 0;
    return expf_body(lanes, x, y, n);
}

void ot_cpu_expf_n(const float *x, float *y, int64_t n) {
    int lanes = ot_cpu_expf_lanes(); /* asked once per call: Softmax calls this per row */
    int64_t k = lanes ? expf_body(lanes, x, y, n) : 0;
    for (; k < n; k++) y[k] = expf(x[k]);
}

void ot_cpu_erf_n(const float *x, float *y, int64_t n) {
    int64_t k = avx512_prefix(n, 16);
#ifdef VM_X86
    if (k) erf_avx512(x, y, k);
#endif
    if (n - k >= 4) {
        int64_t k4 = k + ((n - k) & ~(int64_t)3);
        erf_v4(x + k, y + k, k4 - k);
        k = k4;
    }
    for (; k < n; k++) y[k] = ot_cpu_erf1(x[k]);
}

void ot_cpu_arith_f32(ot_cpu_arith_op op, const float *a, const float *b, bool b_step, float *y, int64_t n) {
    int64_t k = 0;
#ifdef VM_X86
    if (n >= 16 && __builtin_cpu_supports("avx512f")) k = arith_avx512(op, a, b, b_step, y, n);
#endif
    k += arith_v4(op, a + k, b_step ? b + k : b, b_step, y + k, n - k);
    for (; k < n; k++) {
        float u = a[k], v = b[b_step ? k : 0];
        switch (op) {
        case OT_CPU_ARITH_ADD: y[k] = u + v; break;
        case OT_CPU_ARITH_SUB: y[k] = u - v; break;
        case OT_CPU_ARITH_MUL: y[k] = u * v; break;
        case OT_CPU_ARITH_DIV: y[k] = u / v; break;
        }
    }
}
