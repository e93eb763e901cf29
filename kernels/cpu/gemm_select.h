/* gemm_select.h — which library runs one float GEMM on the CPU (OpenBLAS or oneDNN's
 * dnnl_sgemm, directly or on the transposed product), chosen from the shape, the
 * transposes and the thread count only, so the same call gives the same bits on every
 * run; ot_cpu_sgemm (cpu_common.h) is the one caller outside the tests. The rule and
 * the measurements behind it are in gemm_select.c. */
#ifndef OT_GEMM_SELECT_H
#define OT_GEMM_SELECT_H

#include <stdbool.h>
#include <stdint.h>

typedef enum {
    OT_GEMM_OPENBLAS, /* cblas_sgemm */
    OT_GEMM_DNNL,     /* dnnl_sgemm */
    OT_GEMM_DNNL_CT,  /* dnnl_sgemm of C^T = op(B)^T op(A)^T into a stack scratch, transposed into C */
} ot_gemm_impl;

/* Whether oneDNN runs its kernels with AVX-512 here (the ISA it picked, which
 * ONEDNN_MAX_CPU_ISA may lower); false in a build without oneDNN. Two things need it:
 * the rule below sends float GEMMs to dnnl_sgemm only then (with AVX2 alone its NN, NT
 * and C^T give one shape other bits: gemm_select.c), and oneDNN 2.6 has a bfloat16
 * matmul only then (gemm_lowp.c converts to float32 otherwise). */
bool ot_gemm_dnnl_avx512(void);

/* Row-major C = alpha op(A) op(B) + beta C with op(A) M x K, op(B) K x N, on `threads`
 * threads (1 inside an OpenMP parallel region: both libraries run on one there). */
ot_gemm_impl ot_gemm_select(bool ta, bool tb, int M, int N, int K, int threads);

/* Runs the GEMM with impl on `threads` threads (the caller's OpenMP count is restored
 * after); impl OT_GEMM_DNNL* without oneDNN in the build, or when dnnl_sgemm fails
 * (out of memory), runs OpenBLAS. */
void ot_gemm_run(ot_gemm_impl impl, int threads, bool ta, bool tb, int M, int N, int K, float alpha, const float *A,
                 int lda, const float *B, int ldb, float beta, float *C, int ldc);

/* Whether `batch` independent M x N x K NN GEMMs run faster spread over `threads`
 * threads, one single-threaded GEMM each, than one after another on all of them. */
bool ot_gemm_batch_parallel(int64_t batch, int M, int N, int K, int threads);

/* Elements of the DNNL_CT scratch (on the stack of the calling thread). */
#define OT_GEMM_CT_SCRATCH 16384

#endif
