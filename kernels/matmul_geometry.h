/* matmul_geometry.h — the shapes of Gemm and MatMul, resolved once for the CPU
 * (cpu_matmul.c) and CUDA (cuda_blas.c) kernels: M, N, K, Gemm's transA/transB,
 * alpha and beta, and MatMul's numpy semantics (1-D operands promoted, leading batch
 * dims broadcast) as batch dims with per-operand element strides. Every shape error is
 * OT_E_SHAPE naming the node. */
#ifndef OT_KERNELS_MATMUL_GEOMETRY_H
#define OT_KERNELS_MATMUL_GEOMETRY_H

#include <stdbool.h>
#include <stdint.h>

#include "ir.h"

typedef struct ot_matmul_geometry {
    int64_t M, N, K;
    bool ta, tb;       /* Gemm: transA, transB (MatMul: false) */
    float alpha, beta; /* Gemm (MatMul: 1, 0) */
    int r;             /* batch rank (0 for Gemm and 2-D MatMul) */
    int64_t batch;     /* product of bdim */
    /* per batch dim: size, and the element strides of A and B (0 where broadcast) */
    int64_t bdim[OT_MAX_RANK], sa[OT_MAX_RANK], sb[OT_MAX_RANK];
} ot_matmul_geometry;

/* Gemm: A, B and Y 2-D; Y = alpha op(A) op(B) (+ beta C, broadcast by the caller). */
ot_status ot_gemm_geometry_init(ot_matmul_geometry *g, const ot_node *node, const ot_tensor *a, const ot_tensor *b,
                                const ot_tensor *y, ot_error *err);
/* MatMul with numpy semantics; y must hold batch x M x N elements. */
ot_status ot_matmul_geometry_init(ot_matmul_geometry *g, const ot_node *node, const ot_tensor *a, const ot_tensor *b,
                                  const ot_tensor *y, ot_error *err);

/* Element offsets into A and B of batch i (0 <= i < g->batch). */
static inline void ot_matmul_batch_offsets(const ot_matmul_geometry *g, int64_t i, int64_t *oa, int64_t *ob) {
    int64_t q = i;
    *oa = *ob = 0;
    for (int d = g->r - 1; d >= 0; d--) {
        int64_t j = q % g->bdim[d];
        q /= g->bdim[d];
        *oa += j * g->sa[d];
        *ob += j * g->sb[d];
    }
}

#endif
