/* grad_norm_sum.c — the gradient sums of squares in their fixed order (see
 * grad_norm_sum.h): the scalar reference, AVX2 and AVX-512 block sums that match it
 * to the bit, and the many-gradient pass split over threads by block.
 *
 * Why this order: the old sum (one double add chain in index order) is bound by the
 * add's latency, 3-4 cycles an element. 32 independent lanes hide that latency behind
 * the float-to-double conversions, so a block costs about an eighth of a cycle an
 * element, fast enough to run right after each gradient's last writer while it is in
 * L2. Fixing lanes and blocks by index (not by thread or vector width) keeps the bits
 * the same everywhere. */
#include "kernels/cpu/grad_norm_sum.h"

#include <omp.h>
#include <stdint.h>
#include <stdlib.h>

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

void ot_grad_sum_sq_many(const float *const *g, const size_t *n, int count, double *ss, int n_threads) {
    int isa = ss_clamp(OT_SS_AVX512);
    size_t nb = 0;
    for (int k = 0; k < count; k++) nb += (n[k] + OT_SS_BLOCK - 1) / OT_SS_BLOCK;
    int nt = n_threads > 0 ? n_threads : omp_get_max_threads();
    double *part = nt > 1 && nb >= SS_PAR_MIN_BLOCKS ? malloc(nb * sizeof *part) : NULL;
    size_t *first = part ? malloc(((size_t)count + 1) * sizeof *first) : NULL;
    if (!first) { /* one thread (or no memory for the split): the same sums in turn */
        free(part);
        for (int k = 0; k < count; k++) ss[k] = ot_grad_sum_sq_isa(g[k], n[k], isa);
        return;
    }
    first[0] = 0;
    for (int k = 0; k < count; k++) first[k + 1] = first[k] + (n[k] + OT_SS_BLOCK - 1) / OT_SS_BLOCK;
    /* Each block's sum is its own whatever thread runs it; a static split of the
     * blocks walks the gradients in order, so each thread finds its next gradient by
     * stepping forward. */
#pragma omp parallel num_threads(nt)
    {
        int t = omp_get_thread_num(), T = omp_get_num_threads();
        size_t lo = nb * (size_t)t / (size_t)T, hi = nb * (size_t)(t + 1) / (size_t)T;
        int k = 0;
        for (size_t b = lo; b < hi; b++) {
            while (first[k + 1] <= b) k++;
            size_t at = (b - first[k]) * OT_SS_BLOCK, m = n[k] - at < OT_SS_BLOCK ? n[k] - at : OT_SS_BLOCK;
            part[b] = ss_block(g[k] + at, m, isa);
        }
    }
    for (int k = 0; k < count; k++) {
        double t = 0.0;
        for (size_t b = first[k]; b < first[k + 1]; b++) t += part[b];
        ss[k] = t;
    }
    free(part), free(first);
}
