/* cpu_common.c — helpers of the CPU kernels only: thread counts, the dtype error,
 * the sgemm wrapper (the gradient sums of squares are in grad_norm_sum.c; the
 * backend-neutral helpers are in kernels/kernel_common.c). */
#include "kernels/cpu/cpu_common.h"

#include <cblas.h>
#include <omp.h>

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
