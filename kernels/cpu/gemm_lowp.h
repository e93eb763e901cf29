/* gemm_lowp.h — the low-precision GEMM of the CPU backend, beside the float32 one
 * (gemm_select.h): A and B in bfloat16 or float16, C in float32 or in A's dtype,
 * products summed in float32. ot_cpu_gemm_lowp (cpu_common.h) is the one caller
 * outside the tests.
 *   bfloat16: oneDNN's matmul primitive (AVX512-BF16 / AMX where the CPU has them,
 *     else oneDNN's own emulation on AVX-512 or its reference code: still correct,
 *     slower; ot_gemm_lowp_isa_note says which), built once per shape, transposes,
 *     leading dims, alpha, beta and thread count and kept in the node's slot, so a
 *     given call always runs the same code: the same bits on every run for a fixed
 *     thread count;
 *   float16 (and bfloat16 in a build without oneDNN): the CPU has no float16
 *     arithmetic, so A and B are converted to float32 panels in the node's planned
 *     workspace and multiplied by ot_gemm_run (OpenBLAS or dnnl_sgemm as
 *     gemm_select.c picks); a float16 C is converted there too and rounded back. */
#ifndef OT_GEMM_LOWP_H
#define OT_GEMM_LOWP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "ir.h"

/* Row-major C = alpha op(A) op(B) + beta C, op(A) M x K, op(B) K x N; lda, ldb, ldc
 * the stored row lengths in elements. */
typedef struct ot_gemm_lowp_args {
    bool ta, tb;
    int64_t M, N, K;
    float alpha, beta;
    ot_dtype ab; /* A's and B's dtype: OT_BF16 or OT_F16 */
    ot_dtype c;  /* C's dtype: OT_F32 or ab */
    const void *A, *B;
    void *C;
    int64_t lda, ldb, ldc;
} ot_gemm_lowp_args;

/* Whether A, B of dtype ab and C of dtype c have a low-precision GEMM. */
bool ot_gemm_lowp_dtypes(ot_dtype ab, ot_dtype c);

/* Workspace bytes one GEMM of these dtypes and sizes needs: the float32 panels of
 * the converting path, 0 on oneDNN's. */
size_t ot_gemm_lowp_workspace(ot_dtype ab, ot_dtype c, int64_t M, int64_t N, int64_t K);

/* Runs it on `threads` threads (the caller's OpenMP count is restored after).
 * `state`: a slot that keeps oneDNN's primitive across calls (NULL: built and dropped
 * in this call); `ws`: ot_gemm_lowp_workspace's bytes. Errors name the node. */
ot_status ot_gemm_lowp_run(const ot_node *node, const ot_gemm_lowp_args *g, int threads, void **state, void *ws,
                           size_t ws_bytes, ot_error *err);

/* NULL when the CPU computes bfloat16 products natively (AVX512-BF16 or AMX, as
 * oneDNN reports its ISA); else one line saying that bfloat16 GEMMs are emulated. */
const char *ot_gemm_lowp_isa_note(void);

/* Which oneDNN implementation a bfloat16 GEMM of this shape runs ("brg:avx512_core_amx",
 * "ref:any", ...), for the bench and the tests; "convert+sgemm" off oneDNN. */
const char *ot_gemm_lowp_impl_name(const ot_gemm_lowp_args *g, int threads, char *buf, size_t n);

#endif
