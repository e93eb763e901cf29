/* grad_norm_sum.c — the gradient sums of squares in their fixed order (see
 * grad_norm_sum.h): the scalar reference, AVX2 and AVX-512 block sums that match it
 * to the bit, and the many-gradient pass split over threads by block.
 *
 * Why this order: the old sum (one double add chain in index order) is bound by the
 * add's latency, 3-4 cycles an element. 32 independent lanes hide that latency behind
 * the float-to-double conversions, so a block costs about an eighth of a cycle an
 * element, fast enough to run right after each gradient's last writer while it is in
 * L2. Fixing lanes and blocks by index (not by thread or vector width) keeps the bits
 * the same everywhere, so a pass that already reads the gradient (the optimizer's
 * update, ot_grad_sum_sq_visit) can take the sums on the way at no extra read. */
#include "kernels/cpu/grad_norm_sum.h"

#include <omp.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* The lanes folded by halves: lane l += lane l + w, w = 16, 8, 4, 2, 1. */
static double ss_fold(double *s) {
    for (int w = OT_SS_LANES / 2; w >= 1; w /= 2)
        for (int l = 0; l < w; l++) s[l] += s[l + w];
    return s[0];
}

/* Elements [j, m) of a block into their lanes (j a multiple of the lane count). */
static void ss_tail(const float *x, size_t j, size_t m, double *s) {
    for (; j < m; j++) s[j % OT_SS_LANES] += (double)x[j] * (double)x[j];
}

/* One block of m <= OT_SS_BLOCK floats: the reference. */
static double ss_block_scalar(const float *x, size_t m) {
    double s[OT_SS_LANES] = {0};
    ss_tail(x, 0, m, s);
    return ss_fold(s);
}

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#define SS_HAVE_X86 1

/* acc = fma(x, x, acc) for the floats at p, widened to double. */
#define SS_FMA4(acc, p) (t4 = _mm256_cvtps_pd(_mm_loadu_ps(p)), acc = _mm256_fmadd_pd(t4, t4, acc))
#define SS_FMA8(acc, p) (t8 = _mm512_cvtps_pd(_mm256_loadu_ps(p)), acc = _mm512_fmadd_pd(t8, t8, acc))

/* Eight AVX2 accumulators of four lanes: aQ holds lanes 4Q .. 4Q + 3 (named, not an
 * array: GCC keeps an array of vectors in memory, and the store-reload lengthens every
 * add chain). */
__attribute__((target("avx2,fma"))) static double ss_block_avx2(const float *x, size_t m) {
    __m256d a0 = _mm256_setzero_pd(), a1 = a0, a2 = a0, a3 = a0, a4 = a0, a5 = a0, a6 = a0, a7 = a0, t4;
    size_t j = 0;
    for (; j + OT_SS_LANES <= m; j += OT_SS_LANES) {
        const float *p = x + j;
        SS_FMA4(a0, p), SS_FMA4(a1, p + 4), SS_FMA4(a2, p + 8), SS_FMA4(a3, p + 12);
        SS_FMA4(a4, p + 16), SS_FMA4(a5, p + 20), SS_FMA4(a6, p + 24), SS_FMA4(a7, p + 28);
    }
    double s[OT_SS_LANES];
    _mm256_storeu_pd(s, a0), _mm256_storeu_pd(s + 4, a1), _mm256_storeu_pd(s + 8, a2), _mm256_storeu_pd(s + 12, a3);
    _mm256_storeu_pd(s + 16, a4), _mm256_storeu_pd(s + 20, a5), _mm256_storeu_pd(s + 24, a6);
    _mm256_storeu_pd(s + 28, a7);
    ss_tail(x, j, m, s);
    return ss_fold(s);
}

/* Four AVX-512 accumulators of eight lanes: aQ holds lanes 8Q .. 8Q + 7. */
__attribute__((target("avx512f"))) static double ss_block_avx512(const float *x, size_t m) {
    __m512d a0 = _mm512_setzero_pd(), a1 = a0, a2 = a0, a3 = a0, t8;
    size_t j = 0;
    for (; j + OT_SS_LANES <= m; j += OT_SS_LANES) {
        const float *p = x + j;
        SS_FMA8(a0, p), SS_FMA8(a1, p + 8), SS_FMA8(a2, p + 16), SS_FMA8(a3, p + 24);
    }
    double s[OT_SS_LANES];
    _mm512_storeu_pd(s, a0), _mm512_storeu_pd(s + 8, a1), _mm512_storeu_pd(s + 16, a2), _mm512_storeu_pd(s + 24, a3);
    ss_tail(x, j, m, s);
    return ss_fold(s);
}
#endif

int ot_grad_sum_sq_best_isa(void) {
#ifdef SS_HAVE_X86
    if (__builtin_cpu_supports("avx512f")) return OT_SS_AVX512;
    if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) return OT_SS_AVX2;
#endif
    return OT_SS_SCALAR;
}

static double ss_block(const float *x, size_t m, int isa) {
#ifdef SS_HAVE_X86
    if (isa == OT_SS_AVX512) return ss_block_avx512(x, m);
    if (isa == OT_SS_AVX2) return ss_block_avx2(x, m);
#endif
    (void)isa;
    return ss_block_scalar(x, m);
}

static int ss_clamp(int isa) {
    int best = ot_grad_sum_sq_best_isa();
    return isa < OT_SS_SCALAR ? OT_SS_SCALAR : isa > best ? best : isa;
}

double ot_grad_sum_sq_isa(const float *g, size_t n, int isa) {
    isa = ss_clamp(isa);
    double t = 0.0;
    for (size_t b = 0; b < n; b += OT_SS_BLOCK) t += ss_block(g + b, n - b < OT_SS_BLOCK ? n - b : OT_SS_BLOCK, isa);
    return t;
}

double ot_grad_sum_sq(const float *g, size_t n) { return ot_grad_sum_sq_isa(g, n, OT_SS_AVX512); }

/* Blocks below which a pass stays on one thread: 64 blocks (1 MiB of floats) take
 * tens of microseconds, about what waking a passive OpenMP worker costs. */
#define SS_PAR_MIN_BLOCKS 64

/* Block b's gradient k (found by stepping forward from *k), its first element and
 * length. */
static size_t ss_locate(const size_t *first, const size_t *n, size_t b, int *k, size_t *m) {
    while (first[*k + 1] <= b) (*k)++;
    size_t at = (b - first[*k]) * OT_SS_BLOCK;
    *m = n[*k] - at < OT_SS_BLOCK ? n[*k] - at : OT_SS_BLOCK;
    return at;
}

bool ot_grad_sum_sq_visit(const float *const *g, const size_t *n, int count, double *ss, const bool *want,
                          int n_threads, ot_ss_visit_fn visit, const void *user, bool *all_true) {
    int isa = ss_clamp(OT_SS_AVX512);
    size_t nb = 0;
    for (int k = 0; k < count; k++) nb += (n[k] + OT_SS_BLOCK - 1) / OT_SS_BLOCK;
    double *part = malloc((nb + 1) * sizeof *part);
    size_t *first = malloc(((size_t)count + 1) * sizeof *first);
    if (!part || !first) {
        free(part), free(first);
        return false;
    }
    first[0] = 0;
    for (int k = 0; k < count; k++) first[k + 1] = first[k] + (n[k] + OT_SS_BLOCK - 1) / OT_SS_BLOCK;
    int nt = n_threads > 0 ? n_threads : omp_get_max_threads();
    bool ok = true;
    /* Each block's sum is its own whatever thread runs it; a static split of the
     * blocks walks the gradients in order, so each thread finds its next gradient by
     * stepping forward. The block's sum comes right after the visit, which brought
     * the block into L1. */
#pragma omp parallel num_threads(nt) if (nt > 1 && nb > 1) reduction(&& : ok)
    {
        int t = omp_get_thread_num(), T = omp_get_num_threads(), k = 0;
        size_t lo = nb * (size_t)t / (size_t)T, hi = nb * (size_t)(t + 1) / (size_t)T;
        for (size_t b = lo; b < hi; b++) {
            size_t m, at = ss_locate(first, n, b, &k, &m);
            if (visit) ok = visit(user, k, at, at + m) && ok;
            if (!want || want[k]) part[b] = ss_block(g[k] + at, m, isa);
        }
    }
    for (int k = 0; k < count; k++) {
        if (want && !want[k]) continue;
        double t = 0.0;
        for (size_t b = first[k]; b < first[k + 1]; b++) t += part[b];
        ss[k] = t;
    }
    if (all_true) *all_true = ok;
    free(part), free(first);
    return true;
}

void ot_grad_sum_sq_many(const float *const *g, const size_t *n, int count, double *ss, int n_threads) {
    size_t nb = 0;
    for (int k = 0; k < count; k++) nb += (n[k] + OT_SS_BLOCK - 1) / OT_SS_BLOCK;
    int nt = n_threads > 0 ? n_threads : omp_get_max_threads();
    if (nt > 1 && nb >= SS_PAR_MIN_BLOCKS && ot_grad_sum_sq_visit(g, n, count, ss, NULL, nt, NULL, NULL, NULL)) return;
    /* one thread (or no memory for the split): the same sums in turn */
    for (int k = 0; k < count; k++) ss[k] = ot_grad_sum_sq(g[k], n[k]);
}

#ifdef SS_HAVE_X86
/* Sixteen lanes of |x|'s bits, maxed (an integer max: any order gives the same). */
__attribute__((target("avx512f"))) static uint32_t max_abs_bits_avx512(const float *x, size_t n) {
    const __m512i mask = _mm512_set1_epi32(0x7fffffff);
    __m512i a = _mm512_setzero_si512(), b = a;
    size_t i = 0;
    for (; i + 32 <= n; i += 32) {
        a = _mm512_max_epu32(a, _mm512_and_si512(_mm512_loadu_si512(x + i), mask));
        b = _mm512_max_epu32(b, _mm512_and_si512(_mm512_loadu_si512(x + i + 16), mask));
    }
    uint32_t top = _mm512_reduce_max_epu32(_mm512_max_epu32(a, b));
    for (; i < n; i++) {
        uint32_t u;
        memcpy(&u, x + i, sizeof u);
        u &= 0x7fffffffu;
        top = u > top ? u : top;
    }
    return top;
}
#endif

uint32_t ot_f32_max_abs_bits(const float *x, size_t n) {
#ifdef SS_HAVE_X86
    if (ot_grad_sum_sq_best_isa() == OT_SS_AVX512) return max_abs_bits_avx512(x, n);
#endif
    uint32_t top = 0;
    for (size_t i = 0; i < n; i++) {
        uint32_t u;
        memcpy(&u, x + i, sizeof u);
        u &= 0x7fffffffu;
        top = u > top ? u : top;
    }
    return top;
}
