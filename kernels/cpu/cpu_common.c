/* cpu_common.c — helpers of the CPU kernels only: thread counts, the dtype error,
 * the gradient sums of squares, one and many at once for the training loop (the
 * backend-neutral helpers are in kernels/kernel_common.c). */
#include "kernels/cpu/cpu_common.h"

#include <cblas.h>
#include <math.h>
#include <omp.h>
#include <stdint.h>
#include <stdlib.h>

int ot_cpu_threads(const ot_kernel_ctx *ctx) {
    if (ctx && ctx->n_threads > 0) return ctx->n_threads;
    return omp_get_max_threads();
}

void ot_cpu_sgemm(const ot_kernel_ctx *ctx, bool ta, bool tb, int M, int N, int K, float alpha,
                  const float *A, int lda, const float *B, int ldb, float beta, float *C, int ldc) {
    int omp = omp_get_max_threads(), want = ctx && ctx->n_threads > 0 ? ctx->n_threads : omp;
    /* OpenBLAS's own count is set only when it differs (its buffers follow it), and
     * stays: every call sets it from its own context, so none depends on an earlier
     * one. This thread's OpenMP count is the caller's again afterwards. */
    if (openblas_get_num_threads() != want)
        openblas_set_num_threads(want); /* sets this thread's OpenMP count too */
    else if (omp != want)
        omp_set_num_threads(want);
    cblas_sgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans, M, N, K, alpha, A, lda,
                B, ldb, beta, C, ldc);
    if (omp_get_max_threads() != omp) omp_set_num_threads(omp);
}

ot_status ot_cpu_bad_dtype(const ot_node *node, const char *what, ot_dtype t, ot_error *err) {
    return ot_fail(err, OT_E_UNSUPPORTED, "node '%s' (%s): the CPU kernel does not support %s of dtype %s",
                   node->name ? node->name : "?", node->op_type ? node->op_type : ot_op_name(node->op), what,
                   ot_dtype_name(t));
}

double ot_grad_sum_sq(const float *g, size_t n) {
    double s = 0.0;
    for (size_t i = 0; i < n; i++) s += (double)g[i] * (double)g[i];
    return s;
}

/* ---- sums of squares of many gradients at once ----------------------------------
 * Each gradient's sum must be ot_grad_sum_sq's to the bit: a chain of double adds in
 * index order, whose latency (3-4 cycles an element) and not memory bounds one
 * gradient. So lanes walk up to 16 gradients side by side, each in its own order,
 * four elements of four gradients at a time in AVX2 registers: fma(x, x, s) is
 * s + x*x rounded once, and x*x of a float is exact in double, so it is the same add. */

#define SS_LANES 16

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>

/* s[l] += p[l][j]^2 for j < m, lanes l < 4*G, each in index order; the G groups'
 * add chains interleave. */
__attribute__((target("avx2,fma"), always_inline)) static inline void ss_lanes_g(const float *const *p, size_t m,
                                                                                 double *s, const int G) {
    __m256d acc[4];
    for (int q = 0; q < G; q++) acc[q] = _mm256_loadu_pd(s + 4 * q);
    size_t j = 0;
    for (; j + 4 <= m; j += 4) {
        for (int q = 0; q < G; q++) {
            __m128 r0 = _mm_loadu_ps(p[4 * q] + j), r1 = _mm_loadu_ps(p[4 * q + 1] + j),
                   r2 = _mm_loadu_ps(p[4 * q + 2] + j), r3 = _mm_loadu_ps(p[4 * q + 3] + j);
            _MM_TRANSPOSE4_PS(r0, r1, r2, r3); /* r0: element j of the four lanes, r1: j+1, ... */
            __m256d x = _mm256_cvtps_pd(r0);
            acc[q] = _mm256_fmadd_pd(x, x, acc[q]);
            x = _mm256_cvtps_pd(r1);
            acc[q] = _mm256_fmadd_pd(x, x, acc[q]);
            x = _mm256_cvtps_pd(r2);
            acc[q] = _mm256_fmadd_pd(x, x, acc[q]);
            x = _mm256_cvtps_pd(r3);
            acc[q] = _mm256_fmadd_pd(x, x, acc[q]);
        }
    }
    for (int q = 0; q < G; q++) _mm256_storeu_pd(s + 4 * q, acc[q]);
    for (int l = 0; l < 4 * G; l++)
        for (size_t k = j; k < m; k++) s[l] += (double)p[l][k] * (double)p[l][k];
}

__attribute__((target("avx2,fma"))) static void ss_lanes_avx2(const float *const *p, size_t m, double *s,
                                                               int groups) {
    if (groups == 4)
        ss_lanes_g(p, m, s, 4);
    else
        ss_lanes_g(p, m, s, 1);
}

/* One long gradient's sum in blocks, to the bit of the add chain, without walking it.
 * While the sum s stays in one binade [2^(E-1), 2^E), every add rounds to the same
 * grid u = 2^(E-53): s + x*x becomes s + r*u with r = x*x/u (exact: a power of two)
 * rounded to an integer, to the nearest one, and at a tie (fraction exactly 1/2) to
 * the one that makes the running sum's significand S + K + r even. After a tie that
 * sum is even, so the parity a tie needs is S's (or 0 after the last tie) plus the low
 * bits of the r since. Integers below 2^53 add exactly in any order, so a block adds
 * sum(r)*u in vector registers and fixes each tie by one from the parities. A block
 * that would leave the binade (or holds NaN or Inf, or s is 0 or extreme) is walked
 * in order instead, up to the crossing (ss_blocked_avx2). */
#define SS_BLOCK 512

/* The ties' corrections from the block's masks (bit j of word w: element 64w + j):
 * tie, up (r rounded up from x*x/u) and odd (r odd); S: the sum's integer before the
 * block. */
__attribute__((target("popcnt"))) static int64_t ss_tie_fix(const uint64_t *tie, const uint64_t *up,
                                                            const uint64_t *odd, double S) {
    uint64_t par = (uint64_t)S & 1;
    int64_t adj = 0;
    for (int w = 0; w < SS_BLOCK / 64; w++) {
        uint64_t T = tie[w], from = ~0ull; /* bits from the last tie on */
        while (T) {
            int j = __builtin_ctzll(T);
            par ^= (uint64_t)__builtin_popcountll(odd[w] & from & ((1ull << j) - 1)) & 1;
            if (par) adj += (up[w] >> j & 1) ? 1 : -1; /* the odd neighbour: r + 1 above k, r - 1 below */
            par = 0;
            from = j == 63 ? 0 : ~0ull << (j + 1);
            T &= T - 1;
        }
        par ^= (uint64_t)__builtin_popcountll(odd[w] & from) & 1;
    }
    return adj;
}

/* The block's sum from K = sum(r) and its masks; false when it leaves the binade. */
static bool ss_block_end(double s, double S, double scale, double K, const uint64_t *tie, const uint64_t *up,
                         const uint64_t *odd, uint64_t any, double *out) {
    /* every r below 2^52 and the sum in the binade, ties' +-1 included; false for NaN */
    if (!(S + K + SS_BLOCK < 0x1p53)) return false;
    if (any) K += (double)ss_tie_fix(tie, up, odd, S);
    *out = s + K / scale;
    return true;
}

__attribute__((target("avx2,fma,popcnt"))) static bool ss_block_avx2(const float *x, double s, double *out) {
    int E;
    frexp(s, &E);
    const double scale = ldexp(1.0, 53 - E), S = s * scale; /* 1/u; S: an integer in [2^52, 2^53) */
    const __m256d sc = _mm256_set1_pd(scale), magic = _mm256_set1_pd(0x1p52), half = _mm256_set1_pd(0.5);
    const __m256d absmask = _mm256_castsi256_pd(_mm256_set1_epi64x(INT64_MAX)), zero = _mm256_setzero_pd();
    const __m256i one = _mm256_set1_epi64x(1);
    __m256d k0 = zero, k1 = zero;
    uint64_t tie[SS_BLOCK / 64], up[SS_BLOCK / 64], odd[SS_BLOCK / 64], any = 0;
    for (int w = 0; w < SS_BLOCK / 64; w++) {
        uint64_t tw = 0, uw = 0, ow = 0;
        for (int q = 0; q < 64; q += 8) {
            __m256 v = _mm256_loadu_ps(x + 64 * w + q);
            __m256d a = _mm256_cvtps_pd(_mm256_castps256_ps128(v)), b = _mm256_cvtps_pd(_mm256_extractf128_ps(v, 1));
            __m256d ka = _mm256_mul_pd(_mm256_mul_pd(a, a), sc), kb = _mm256_mul_pd(_mm256_mul_pd(b, b), sc);
            __m256d ya = _mm256_add_pd(ka, magic), yb = _mm256_add_pd(kb, magic); /* 2^52 + r, r rounded to even */
            __m256d ra = _mm256_sub_pd(ya, magic), rb = _mm256_sub_pd(yb, magic);
            __m256d da = _mm256_sub_pd(ka, ra), db = _mm256_sub_pd(kb, rb);
            unsigned t4 = (unsigned)_mm256_movemask_pd(_mm256_cmp_pd(_mm256_and_pd(da, absmask), half, _CMP_EQ_OQ)) |
                          (unsigned)_mm256_movemask_pd(_mm256_cmp_pd(_mm256_and_pd(db, absmask), half, _CMP_EQ_OQ)) << 4;
            unsigned u4 = (unsigned)_mm256_movemask_pd(_mm256_cmp_pd(da, zero, _CMP_GT_OQ)) |
                          (unsigned)_mm256_movemask_pd(_mm256_cmp_pd(db, zero, _CMP_GT_OQ)) << 4;
            __m256i oa = _mm256_cmpeq_epi64(_mm256_and_si256(_mm256_castpd_si256(ya), one), one);
            __m256i ob = _mm256_cmpeq_epi64(_mm256_and_si256(_mm256_castpd_si256(yb), one), one);
            unsigned o4 = (unsigned)_mm256_movemask_pd(_mm256_castsi256_pd(oa)) |
                          (unsigned)_mm256_movemask_pd(_mm256_castsi256_pd(ob)) << 4;
            tw |= (uint64_t)t4 << q, uw |= (uint64_t)u4 << q, ow |= (uint64_t)o4 << q;
            k0 = _mm256_add_pd(k0, ra);
            k1 = _mm256_add_pd(k1, rb);
        }
        tie[w] = tw, up[w] = uw, odd[w] = ow, any |= tw;
    }
    double k[4];
    _mm256_storeu_pd(k, _mm256_add_pd(k0, k1));
    return ss_block_end(s, S, scale, (k[0] + k[1]) + (k[2] + k[3]), tie, up, odd, any, out);
}

/* ss_block_avx2 in AVX-512 registers, eight doubles a vector, in two passes: the first
 * computes every r, their sum K and the tie masks (compares give mask registers: no
 * movemask) and keeps each 64 elements' sum; only a block with a tie needs more, and
 * of it only the words (64 elements) that hold one get their up and odd masks, by the
 * same arithmetic again. A word without a tie contributes only the parity of its r's
 * to the fix, which is its sum's low bit (integers below 2^53, exact in any order).
 * The same r, K and fixes as ss_block_avx2: the same bits. */
__attribute__((target("avx512f,avx2,fma,popcnt"))) static bool ss_block_avx512(const float *x, double s,
                                                                                  double *out) {
    int E;
    frexp(s, &E);
    const double scale = ldexp(1.0, 53 - E), S = s * scale;
    const __m512d sc = _mm512_set1_pd(scale), magic = _mm512_set1_pd(0x1p52), half = _mm512_set1_pd(0.5);
    const __m512d zero = _mm512_setzero_pd();
    __m512d k = zero;
    double kw[SS_BLOCK / 64][8];
    uint8_t tb[SS_BLOCK / 8];
    for (int w = 0; w < SS_BLOCK / 64; w++) {
        __m512d k0 = zero, k1 = zero;
        for (int q = 64 * w; q < 64 * w + 64; q += 16) {
            __m512d a = _mm512_cvtps_pd(_mm256_loadu_ps(x + q)), b = _mm512_cvtps_pd(_mm256_loadu_ps(x + q + 8));
            __m512d ka = _mm512_mul_pd(_mm512_mul_pd(a, a), sc), kb = _mm512_mul_pd(_mm512_mul_pd(b, b), sc);
            /* to the nearest integer, ties to even: (k + 2^52) - 2^52 for 0 <= k < 2^52 in one
             * instruction (a larger k fails the binade check either way) */
            __m512d ra = _mm512_roundscale_pd(ka, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC),
                    rb = _mm512_roundscale_pd(kb, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
            tb[q / 8] = (uint8_t)_mm512_cmp_pd_mask(_mm512_abs_pd(_mm512_sub_pd(ka, ra)), half, _CMP_EQ_OQ);
            tb[q / 8 + 1] = (uint8_t)_mm512_cmp_pd_mask(_mm512_abs_pd(_mm512_sub_pd(kb, rb)), half, _CMP_EQ_OQ);
            k0 = _mm512_add_pd(k0, ra);
            k1 = _mm512_add_pd(k1, rb);
        }
        __m512d kk = _mm512_add_pd(k0, k1);
        _mm512_storeu_pd(kw[w], kk);
        k = _mm512_add_pd(k, kk);
    }
    double kl[8];
    _mm512_storeu_pd(kl, k);
    double K = ((kl[0] + kl[1]) + (kl[2] + kl[3])) + ((kl[4] + kl[5]) + (kl[6] + kl[7]));
    uint64_t tie[SS_BLOCK / 64], up[SS_BLOCK / 64], odd[SS_BLOCK / 64], any = 0;
    memcpy(tie, tb, sizeof tie); /* byte b of word w: elements 64w + 8b .. + 7 (little-endian) */
    for (int w = 0; w < SS_BLOCK / 64; w++) any |= tie[w];
    if (any && S + K + SS_BLOCK < 0x1p53) {
        const __m512i one = _mm512_set1_epi64(1);
        uint8_t ub[8], ob[8];
        for (int w = 0; w < SS_BLOCK / 64; w++) {
            if (!tie[w]) { /* the parity of the word's r's, its only part in the fix */
                double sw = ((kw[w][0] + kw[w][1]) + (kw[w][2] + kw[w][3])) + ((kw[w][4] + kw[w][5]) + (kw[w][6] + kw[w][7]));
                odd[w] = (uint64_t)sw & 1, up[w] = 0;
                continue;
            }
            for (int b = 0; b < 8; b++) {
                __m512d ka = _mm512_cvtps_pd(_mm256_loadu_ps(x + 64 * w + 8 * b));
                ka = _mm512_mul_pd(_mm512_mul_pd(ka, ka), sc);
                __m512d y = _mm512_add_pd(ka, magic), d = _mm512_sub_pd(ka, _mm512_sub_pd(y, magic));
                ub[b] = (uint8_t)_mm512_cmp_pd_mask(d, zero, _CMP_GT_OQ);
                ob[b] = (uint8_t)_mm512_test_epi64_mask(_mm512_castpd_si512(y), one);
            }
            memcpy(&up[w], ub, 8);
            memcpy(&odd[w], ob, 8);
        }
    }
    return ss_block_end(s, S, scale, K, tie, up, odd, any, out);
}

/* One long gradient's sum: blocks while the sum stays in one binade, else the add
 * chain itself, only until the sum leaves its binade (or the block ends): a crossing
 * costs the few elements up to it rather than a block. */
__attribute__((target("avx2,fma,popcnt"))) static double ss_blocked_avx2(const float *x, size_t n, bool avx512) {
    double s = 0.0;
    size_t i = 0;
    while (i + SS_BLOCK <= n) {
        double t;
        if (s >= 0x1p-900 && s <= 0x1p900 && (avx512 ? ss_block_avx512(x + i, s, &t) : ss_block_avx2(x + i, s, &t))) {
            s = t;
            i += SS_BLOCK;
            continue;
        }
        int E;
        frexp(s, &E);
        /* NaN or Inf (no compare with NaN holds): the whole block */
        const double next = !isfinite(s) ? NAN : s < 0x1p-900 ? 0x1p-900 : ldexp(1.0, E);
        for (size_t end = i + SS_BLOCK; i < end;) {
            s += (double)x[i] * (double)x[i];
            i++;
            if (s >= next) break;
        }
    }
    for (; i < n; i++) s += (double)x[i] * (double)x[i];
    return s;
}
#define SS_HAVE_AVX2 1
#endif

static void ss_lanes_plain(const float *const *p, size_t m, double *s, int lanes) {
    for (int l = 0; l < lanes; l++)
        for (size_t k = 0; k < m; k++) s[l] += (double)p[l][k] * (double)p[l][k];
}

/* The gradients list[0..count) of g / n, their sums into ss, on this thread. A lane
 * that runs out takes the next gradient; idle lanes repeat a busy one's reads into a
 * sum that is dropped. */
static void ss_lanes_walk(const float *const *g, const size_t *n, const int *list, int count, double *ss,
                          bool avx2) {
    const float *ptr[SS_LANES], *rd[SS_LANES];
    size_t left[SS_LANES];
    double acc[SS_LANES], tmp[SS_LANES];
    int who[SS_LANES], next = 0;
    for (int l = 0; l < SS_LANES; l++) who[l] = -1;
    for (;;) {
        int active = 0, first = -1;
        size_t m = SIZE_MAX;
        for (int l = 0; l < SS_LANES; l++) {
            while (who[l] < 0 && next < count) {
                int k = list[next++];
                if (n[k] == 0) {
                    ss[k] = 0.0;
                    continue;
                }
                who[l] = k, ptr[l] = g[k], left[l] = n[k], acc[l] = 0.0;
            }
            if (who[l] < 0) continue;
            active++;
            if (first < 0) first = l;
            if (left[l] < m) m = left[l];
        }
        if (!active) return;
        /* one gradient left: the plain loop's add chain (latency 3 on Zen 4) beats
         * the vector one's fma (4), and there is nothing to interleave */
        int lanes = active == 1 ? 1 : active <= 4 ? 4 : SS_LANES, used = 0;
        for (int l = 0; l < SS_LANES && used < lanes; l++) /* busy lanes first, packed */
            if (who[l] >= 0) rd[used] = ptr[l], tmp[used++] = acc[l];
        for (; used < lanes; used++) rd[used] = ptr[first], tmp[used] = 0.0;
#ifdef SS_HAVE_AVX2
        if (avx2 && lanes > 1)
            ss_lanes_avx2(rd, m, tmp, lanes / 4);
        else
#endif
            ss_lanes_plain(rd, m, tmp, lanes);
        used = 0;
        for (int l = 0; l < SS_LANES && used < lanes; l++) {
            if (who[l] < 0) continue;
            acc[l] = tmp[used++];
            ptr[l] += m;
            if ((left[l] -= m) == 0) ss[who[l]] = acc[l], who[l] = -1;
        }
    }
}

/* The gradients of list on this thread: a long one in blocks (ss_blocked_avx2), the
 * rest side by side (ss_lanes_walk). */
static void ss_walk(const float *const *g, const size_t *n, const int *list, int count, double *ss, int isa) {
    bool avx2 = isa > 0;
#ifdef SS_HAVE_AVX2
    int *rest = avx2 ? malloc((size_t)(count ? count : 1) * sizeof *rest) : NULL;
    if (rest) {
        int c = 0;
        for (int a = 0; a < count; a++) {
            if (n[list[a]] >= 8 * SS_BLOCK) ss[list[a]] = ss_blocked_avx2(g[list[a]], n[list[a]], isa > 1);
            else rest[c++] = list[a];
        }
        ss_lanes_walk(g, n, rest, c, ss, avx2);
        free(rest);
        return;
    }
#endif
    ss_lanes_walk(g, n, list, count, ss, avx2);
}

void ot_grad_sum_sq_many(const float *const *g, const size_t *n, int count, double *ss, int n_threads) {
    int isa = 0; /* 1: AVX2 and FMA, 2: AVX-512 too */
#ifdef SS_HAVE_AVX2
    if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma"))
        isa = __builtin_cpu_supports("avx512f") ? 2 : 1;
#endif
    size_t total = 0;
    for (int k = 0; k < count; k++) total += n[k];
    int nt = n_threads > 0 ? n_threads : omp_get_max_threads();
    if ((size_t)nt > total / (1u << 18)) nt = (int)(total / (1u << 18));
    if (nt > count) nt = count;
    int *order = nt > 1 ? malloc((size_t)count * 2 * sizeof *order) : NULL;
    if (!order) { /* one thread (or no memory for the split) */
        int *all = malloc((size_t)(count ? count : 1) * sizeof *all);
        if (!all) {
            for (int k = 0; k < count; k++) ss[k] = ot_grad_sum_sq(g[k], n[k]);
            return;
        }
        for (int k = 0; k < count; k++) all[k] = k;
        ss_walk(g, n, all, count, ss, isa);
        free(all);
        return;
    }
    /* Largest first, each to the thread with the least so far: the split is fixed by
     * the sizes, and each sum is its own gradient's whatever thread runs it. */
    int *thread_of = order + count;
    for (int k = 0; k < count; k++) order[k] = k;
    for (int a = 1; a < count; a++) { /* insertion sort by size, stable */
        int x = order[a], b = a;
        for (; b > 0 && n[order[b - 1]] < n[x]; b--) order[b] = order[b - 1];
        order[b] = x;
    }
    size_t load[64] = {0};
    if (nt > 64) nt = 64;
    for (int a = 0; a < count; a++) {
        int best = 0;
        for (int t = 1; t < nt; t++)
            if (load[t] < load[best]) best = t;
        thread_of[order[a]] = best;
        load[best] += n[order[a]];
    }
#pragma omp parallel num_threads(nt)
    {
        int t = omp_get_thread_num(), c = 0;
        int *list = malloc((size_t)count * sizeof *list);
        if (list) {
            for (int k = 0; k < count; k++)
                if (thread_of[k] == t) list[c++] = k;
            ss_walk(g, n, list, c, ss, isa);
            free(list);
        } else {
            for (int k = 0; k < count; k++)
                if (thread_of[k] == t) ss[k] = ot_grad_sum_sq(g[k], n[k]);
        }
    }
    free(order);
}
