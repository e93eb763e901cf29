/* gemm_select.c — the rule that picks OpenBLAS or oneDNN for each float GEMM on the
 * CPU, and the calls into both with the context's thread count.
 *
 * Measured with bench/gemm_probe.sh (every GEMM shape of the seven bench cases, 1 and 2
 * threads, OpenBLAS 0.3.21 OpenMP build against libdnnl 2.6.3; the table is in
 * bench/results_gemm.md), on this machine (2 cores, AVX-512):
 *   - NN: dnnl_sgemm is 1.1-2.3x faster from 16 x 512 x 512 up to 512 x 768 x 50257
 *     (small M most: 32 x 512 x 512 79 us against 141 on one thread), never clearly
 *     slower above 2^18 multiply-adds;
 *   - TN (the weight gradients, op(A) = dY^T): dnnl as fast or faster (512 x 512 x 32
 *     316 GFLOP/s against 260 on 2 threads);
 *   - NT (nn.Linear forward, Gemm transB): dnnl 2x slower at small M (32 x 512 x 512:
 *     148 us against 80) and 10-15% slower at large ones; but the transposed product
 *     C^T = B op(A)^T by dnnl, written into a scratch and transposed into C, is the
 *     fastest of all below M = 32 (16 x 512 x 512: 47 us against OpenBLAS's 88 on one
 *     thread);
 *   - below 2^18 multiply-adds (attention heads of gpt4_d128: 64 x 32 x 64) OpenBLAS's
 *     lower call overhead wins (1.2 us against 1.6).
 * One more constraint: autodiff/fold_linear.c turns MatMul(X, Transpose(W)) into
 * Gemm(X, W, transB) and promises the same bits, so NN and NT of one shape must go to
 * one library. dnnl_sgemm gives NN, NT and the C^T form the same bits (it packs both
 * operands into one layout and sums K in the same order; tests/test_gemm_select.c
 * checks it on the bench shapes), as OpenBLAS gives NN and NT; across the two
 * libraries the bits differ once K > 512. So NT follows NN to dnnl and pays its 10-15%
 * at large M; below M = 32 it gains 2x through C^T (dnnl's direct NT at M = 8 is not
 * NN's bits; C^T is). Tiny GEMMs stay on OpenBLAS for both, as on main (where its
 * small-matrix kernels already give NN and NT other bits unless OPENBLAS_CORETYPE
 * picks Haswell's). The rule, on the shape, the
 * transposes and the thread count only:
 *   M N K <= 2^18, or TT           -> OpenBLAS
 *   NT, M <= 32, M N <= 16384      -> dnnl on C^T (scratch on the stack)
 *   NN, TN, other NT               -> dnnl
 * on a CPU with AVX-512 only (ot_gemm_dnnl_avx512): on AVX2, oneDNN 2.6's sgemm
 * gives NN and NT other bits at some shapes (512 x 128 x 384 and 256 x 768 x 640 of
 * test_gemm_select's) and C^T others at most (16 x 512 x 512), while OpenBLAS's
 * Haswell/Zen kernels give NN and NT the same bits at all nine; every float GEMM goes
 * to OpenBLAS there (measured on a 2-core AMD EPYC, AVX2, 2026-12-06).
 * And batched MatMuls of at least 4 GEMMs per thread, each at most 2^24 multiply-adds,
 * run their GEMMs spread over the threads on one thread each (an attention head of
 * 256 x 256 x 64 scales 1.3x on 2 threads inside one GEMM, 2x across GEMMs).
 *
 * Determinism: a library gives the same bits for the same shape and thread count on
 * every call, from any calling thread and at any address (tests/test_gemm_select.c
 * checks both libraries). Both are OpenMP builds on the one libgomp pool: OpenBLAS
 * keeps a count of its own (set here only when it differs, as openblas_set_num_threads
 * also sets the calling thread's OpenMP count); dnnl_sgemm takes omp_get_max_threads()
 * and runs on one thread inside an active parallel region. */
#include "kernels/cpu/gemm_select.h"

#include <cblas.h>
#include <omp.h>
#ifdef OT_HAVE_DNNL
#include <oneapi/dnnl/dnnl.h>
#endif

#define TINY_MACS (1 << 18)
#define CT_MAX_M 32
#define BATCH_MAX_MACS (1 << 24)
#define BATCH_PER_THREAD 4

bool ot_gemm_dnnl_avx512(void) {
#ifdef OT_HAVE_DNNL
    /* the ISA oneDNN runs its kernels with (ONEDNN_MAX_CPU_ISA may lower it); asked
     * once, racing first callers computing the same answer */
    static _Atomic int known; /* 0 not yet asked, 1 no, 2 yes */
    int k = known;
    if (!k) {
        unsigned isa = (unsigned)dnnl_get_effective_cpu_isa(), avx512 = (unsigned)dnnl_cpu_isa_avx512_core;
        known = k = (isa & avx512) == avx512 ? 2 : 1;
    }
    return k == 2;
#else
    return false;
#endif
}

ot_gemm_impl ot_gemm_select(bool ta, bool tb, int M, int N, int K, int threads) {
    (void)threads; /* the measurements gave the same choice on 1 and 2 threads */
#ifdef OT_HAVE_DNNL
    int64_t macs = (int64_t)M * N * K;
    if (macs <= TINY_MACS || (ta && tb) || !ot_gemm_dnnl_avx512()) return OT_GEMM_OPENBLAS;
    if (tb && !ta && M <= CT_MAX_M && (int64_t)M * N <= OT_GEMM_CT_SCRATCH) return OT_GEMM_DNNL_CT;
    return OT_GEMM_DNNL;
#else
    (void)ta, (void)tb, (void)M, (void)N, (void)K;
    return OT_GEMM_OPENBLAS;
#endif
}

bool ot_gemm_batch_parallel(int64_t batch, int M, int N, int K, int threads) {
    return threads > 1 && batch >= (int64_t)BATCH_PER_THREAD * threads && (int64_t)M * N * K <= BATCH_MAX_MACS;
}

static void run_openblas(bool ta, bool tb, int M, int N, int K, float alpha, const float *A, int lda, const float *B,
                         int ldb, float beta, float *C, int ldc) {
    cblas_sgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans, M, N, K, alpha, A, lda,
                B, ldb, beta, C, ldc);
}

#ifdef OT_HAVE_DNNL
/* C^T (N x M) = op(B)^T op(A)^T with op(B) = B^T: B is N x K as stored, op(A)^T is A
 * stored K x M (ta) or A^T of the stored M x K. The scratch keeps C unread when beta is 0. */
static bool run_dnnl_ct(bool ta, int M, int N, int K, float alpha, const float *A, int lda, const float *B, int ldb,
                        float beta, float *C, int ldc) {
    float s[OT_GEMM_CT_SCRATCH];
    if (dnnl_sgemm('N', ta ? 'N' : 'T', N, M, K, alpha, B, ldb, A, lda, 0.0f, s, M) != dnnl_success) return false;
    for (int i = 0; i < M; i++) {
        float *c = C + (int64_t)i * ldc;
        if (beta == 0.0f)
            for (int j = 0; j < N; j++)
                c[j] = s[(int64_t)j * M + i];
        else
            for (int j = 0; j < N; j++)
                c[j] = s[(int64_t)j * M + i] + beta * c[j];
    }
    return true;
}
#endif

void ot_gemm_run(ot_gemm_impl impl, int threads, bool ta, bool tb, int M, int N, int K, float alpha, const float *A,
                 int lda, const float *B, int ldb, float beta, float *C, int ldc) {
    bool nested = omp_in_parallel();
    int omp = omp_get_max_threads();
    /* Inside a parallel region both libraries run on the calling thread; the counts
     * are per thread there and stay as they are. */
    if (!nested) {
        if (impl == OT_GEMM_OPENBLAS && openblas_get_num_threads() != threads)
            openblas_set_num_threads(threads); /* sets this thread's OpenMP count too */
        else if (omp != threads)
            omp_set_num_threads(threads);
    }
    bool done = false;
#ifdef OT_HAVE_DNNL
    if (impl == OT_GEMM_DNNL)
        done = dnnl_sgemm(ta ? 'T' : 'N', tb ? 'T' : 'N', M, N, K, alpha, A, lda, B, ldb, beta, C, ldc) == dnnl_success;
    else if (impl == OT_GEMM_DNNL_CT)
        done = run_dnnl_ct(ta, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
#endif
    /* dnnl_sgemm fails only on arguments it rejects or when it cannot allocate; it
     * leaves C as it was then. */
    if (!done) {
        if (!nested && openblas_get_num_threads() != threads) openblas_set_num_threads(threads);
        run_openblas(ta, tb, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
    }
    if (!nested && omp_get_max_threads() != omp) omp_set_num_threads(omp);
}
