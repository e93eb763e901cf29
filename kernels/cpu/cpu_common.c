/* cpu_common.c — helpers of the CPU kernels only: thread counts, the dtype error,
 * the gradient sum of squares (the backend-neutral ones are in kernels/kernel_common.c). */
#include "kernels/cpu/cpu_common.h"

#include <cblas.h>
#include <omp.h>

int ot_cpu_threads(const ot_kernel_ctx *ctx) {
    if (ctx && ctx->n_threads > 0) return ctx->n_threads;
    return omp_get_max_threads();
}

void ot_cpu_sgemm(const ot_kernel_ctx *ctx, bool ta, bool tb, int M, int N, int K, float alpha,
                  const float *A, int lda, const float *B, int ldb, float beta, float *C, int ldc) {
    int want = ctx ? ctx->n_threads : 0;
    int blas = want > 0 ? openblas_get_num_threads() : 0, omp = want > 0 ? omp_get_max_threads() : 0;
    if (want > 0 && blas != want)
        openblas_set_num_threads(want); /* sets this thread's OpenMP count too */
    else if (want > 0 && omp != want)
        omp_set_num_threads(want);
    cblas_sgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
    if (want > 0 && blas != want) openblas_set_num_threads(blas);
    if (want > 0 && (blas != want || omp != want)) omp_set_num_threads(omp);
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
