/* cpu_common.c — helpers of the CPU kernels only: thread counts, the dtype error,
 * the sgemm wrapper over gemm_select.c and its low-precision twin over gemm_lowp.c
 * (the gradient sums of squares are in grad_norm_sum.c; the backend-neutral helpers
 * are in kernels/kernel_common.c). */
#include "kernels/cpu/cpu_common.h"

#include <omp.h>

#include "kernels/cpu/gemm_lowp.h"
#include "kernels/cpu/gemm_select.h"

int ot_cpu_threads(const ot_kernel_ctx *ctx) {
    if (ctx && ctx->n_threads > 0) return ctx->n_threads;
    return omp_get_max_threads();
}

void ot_cpu_sgemm(const ot_kernel_ctx *ctx, bool ta, bool tb, int M, int N, int K, float alpha,
                  const float *A, int lda, const float *B, int ldb, float beta, float *C, int ldc) {
    /* Inside an active parallel region both libraries run on the calling thread: the
     * rule is asked for one thread, so the choice matches what runs. */
    int threads = omp_in_parallel() ? 1 : ot_cpu_threads(ctx);
    ot_gemm_run(ot_gemm_select(ta, tb, M, N, K, threads), threads, ta, tb, M, N, K, alpha, A, lda, B, ldb, beta, C,
                ldc);
}

ot_status ot_cpu_gemm_lowp(const ot_node *node, const ot_kernel_ctx *ctx, const ot_gemm_lowp_args *g,
                           ot_error *err) {
    int threads = omp_in_parallel() ? 1 : ot_cpu_threads(ctx);
    return ot_gemm_lowp_run(node, g, threads, ctx ? ctx->node_state : NULL, ctx ? ctx->workspace : NULL,
                            ctx ? ctx->workspace_bytes : 0, err);
}

const char *ot_cpu_bf16_note(void) { return ot_gemm_lowp_isa_note(); }

ot_status ot_cpu_bad_dtype(const ot_node *node, const char *what, ot_dtype t, ot_error *err) {
    return ot_fail(err, OT_E_UNSUPPORTED, "node '%s' (%s): the CPU kernel does not support %s of dtype %s",
                   node->name ? node->name : "?", node->op_type ? node->op_type : ot_op_name(node->op), what,
                   ot_dtype_name(t));
}
