/* cpu_common.h — what the CPU kernels (forward and backward) share beyond the
 * backend-neutral helpers of kernels/kernel_common.h: thread counts, the dtype error,
 * the kernel signature and the per-family kernel entry points that the op table
 * (cpu_ops.c) routes to.
 *
 * Determinism: every kernel parallelises over independent output elements (rows,
 * channels, batches) with static schedules and reduces in a fixed sequential order
 * inside one output element, so results do not depend on the thread count except
 * where a GEMM library splits a GEMM (ot_cpu_sgemm). */
#ifndef OT_CPU_COMMON_H
#define OT_CPU_COMMON_H

#include <stdbool.h>
#include <stdint.h>
#include <string.h>

#include "kernels/kernel.h"
#include "kernels/kernel_common.h"

/* Elements below which a kernel runs on one thread (thread start-up costs more). */
#define OT_CPU_PAR_MIN 16384
/* The same for a memory-bound element rule (a copy, a compare, an add): 16 Ki of
 * them take a few microseconds, less than waking a sleeping OpenMP worker
 * (OMP_WAIT_POLICY=PASSIVE, cli/main.c) and joining it; 128 Ki repay it. */
#define OT_CPU_PAR_MIN_CHEAP 131072

/* The float32 elementwise kernels' loops, written once: Y[i] = EXPR of v = X[i], and
 * dX[i] = EXPR of (g, v) = (dY[i], X[i]), for i < n, on the caller's `nt` threads when
 * its `par` is true (the pragma cannot take them as arguments). Macros rather than a
 * function over a rule so that each op's loop keeps its own inlined body. */
#define OT_CPU_X_Y_LOOP(X, Y, N, EXPR)                                                   \
    do {                                                                                 \
        _Pragma("omp parallel for schedule(static) num_threads(nt) if (par)")           \
        for (int64_t i_ = 0; i_ < (N); i_++) {                                           \
            float v = (X)[i_];                                                           \
            (Y)[i_] = (EXPR);                                                            \
        }                                                                                \
    } while (0)
#define OT_CPU_DY_X_LOOP(DY, X, DX, N, EXPR)                                             \
    do {                                                                                 \
        _Pragma("omp parallel for schedule(static) num_threads(nt) if (par)")           \
        for (int64_t i_ = 0; i_ < (N); i_++) {                                           \
            float g = (DY)[i_], v = (X)[i_];                                             \
            (DX)[i_] = (EXPR);                                                           \
        }                                                                                \
    } while (0)

/* Threads for an OpenMP region: ctx->n_threads when > 0, else the OpenMP default. */
int ot_cpu_threads(const ot_kernel_ctx *ctx);

/* Row-major C = alpha op(A) op(B) + beta C on ot_cpu_threads(ctx) threads (ctx->n_threads,
 * or with 0 the OpenMP default, as the kernels' own loops; one thread inside an active
 * OpenMP parallel region), by OpenBLAS or oneDNN as gemm_select.c's rule picks from the
 * shape, the transposes and the thread count: the same call gives the same bits. Each
 * library is given the context's count for the call, and the calling thread's OpenMP
 * count is put back after: the count belongs to the context, not to whatever set it
 * last for the process. ta / tb: op(A) = A^T, op(B) = B^T. */
void ot_cpu_sgemm(const ot_kernel_ctx *ctx, bool ta, bool tb, int M, int N, int K, float alpha,
                  const float *A, int lda, const float *B, int ldb, float beta, float *C, int ldc);

/* What a CPU kernel keeps in its node slot (ot_kernel_ctx.node_state) starts with
 * this: the backend's free_node_state calls it, so kernels of different families
 * (oneDNN convolutions, low-precision GEMMs) may keep states of their own types. */
typedef struct ot_cpu_node_state {
    void (*free)(void *state);
} ot_cpu_node_state;

struct ot_gemm_lowp_args;
/* The low-precision GEMM beside ot_cpu_sgemm (kernels/cpu/gemm_lowp.h: bfloat16 on
 * oneDNN, float16 through float32 panels in ctx->workspace), on the same thread count
 * ot_cpu_sgemm would use, with oneDNN's primitive kept in ctx->node_state: the same
 * call gives the same bits for a fixed count. */
ot_status ot_cpu_gemm_lowp(const ot_node *node, const ot_kernel_ctx *ctx, const struct ot_gemm_lowp_args *g,
                           ot_error *err);

/* A kernel: same contract as ot_cpu_run_node, dtypes already checked or checked inside. */
typedef ot_status (*ot_cpu_kernel_fn)(const ot_node *node, const ot_tensor *in, ot_tensor *out,
                                      const ot_kernel_ctx *ctx, ot_error *err);

/* Fails with OT_E_UNSUPPORTED naming the node, op, slot and dtype. */
ot_status ot_cpu_bad_dtype(const ot_node *node, const char *what, ot_dtype t, ot_error *err);

/* ---- kernel families (one file each) ----------------------------------------- */

/* cpu_elementwise.c */
ot_status ot_cpu_unary(const ot_node *, const ot_tensor *, ot_tensor *, const ot_kernel_ctx *, ot_error *);
ot_status ot_cpu_binary(const ot_node *, const ot_tensor *, ot_tensor *, const ot_kernel_ctx *, ot_error *);
ot_status ot_cpu_equal(const ot_node *, const ot_tensor *, ot_tensor *, const ot_kernel_ctx *, ot_error *);
ot_status ot_cpu_where(const ot_node *, const ot_tensor *, ot_tensor *, const ot_kernel_ctx *, ot_error *);
ot_status ot_cpu_sum(const ot_node *, const ot_tensor *, ot_tensor *, const ot_kernel_ctx *, ot_error *);
ot_status ot_cpu_expand(const ot_node *, const ot_tensor *, ot_tensor *, const ot_kernel_ctx *, ot_error *);
/* cpu_shape_ops.c */
ot_status ot_cpu_shape(const ot_node *, const ot_tensor *, ot_tensor *, const ot_kernel_ctx *, ot_error *);
ot_status ot_cpu_copy_view(const ot_node *, const ot_tensor *, ot_tensor *, const ot_kernel_ctx *, ot_error *);
ot_status ot_cpu_gather(const ot_node *, const ot_tensor *, ot_tensor *, const ot_kernel_ctx *, ot_error *);
ot_status ot_cpu_concat(const ot_node *, const ot_tensor *, ot_tensor *, const ot_kernel_ctx *, ot_error *);
ot_status ot_cpu_split(const ot_node *, const ot_tensor *, ot_tensor *, const ot_kernel_ctx *, ot_error *);
ot_status ot_cpu_slice(const ot_node *, const ot_tensor *, ot_tensor *, const ot_kernel_ctx *, ot_error *);
ot_status ot_cpu_transpose(const ot_node *, const ot_tensor *, ot_tensor *, const ot_kernel_ctx *, ot_error *);
ot_status ot_cpu_cast(const ot_node *, const ot_tensor *, ot_tensor *, const ot_kernel_ctx *, ot_error *);
ot_status ot_cpu_range(const ot_node *, const ot_tensor *, ot_tensor *, const ot_kernel_ctx *, ot_error *);
ot_status ot_cpu_constant(const ot_node *, const ot_tensor *, ot_tensor *, const ot_kernel_ctx *, ot_error *);
ot_status ot_cpu_constant_of_shape(const ot_node *, const ot_tensor *, ot_tensor *, const ot_kernel_ctx *,
                                   ot_error *);
/* cpu_matmul.c (float32; bfloat16 / float16 A and B into float32 or their own dtype) */
ot_status ot_cpu_gemm(const ot_node *, const ot_tensor *, ot_tensor *, const ot_kernel_ctx *, ot_error *);
ot_status ot_cpu_matmul(const ot_node *, const ot_tensor *, ot_tensor *, const ot_kernel_ctx *, ot_error *);
size_t ot_cpu_matmul_workspace(const ot_node *node, const ot_tensor *in, const ot_tensor *out); /* Gemm's too */
/* cpu_conv.c */
ot_status ot_cpu_conv(const ot_node *, const ot_tensor *, ot_tensor *, const ot_kernel_ctx *, ot_error *);
size_t ot_cpu_conv_workspace(const ot_node *node, const ot_tensor *in, const ot_tensor *out);
/* cpu_pool.c */
ot_status ot_cpu_max_pool(const ot_node *, const ot_tensor *, ot_tensor *, const ot_kernel_ctx *, ot_error *);
ot_status ot_cpu_average_pool(const ot_node *, const ot_tensor *, ot_tensor *, const ot_kernel_ctx *, ot_error *);
ot_status ot_cpu_global_average_pool(const ot_node *, const ot_tensor *, ot_tensor *, const ot_kernel_ctx *,
                                     ot_error *);
/* cpu_norm.c */
ot_status ot_cpu_softmax(const ot_node *, const ot_tensor *, ot_tensor *, const ot_kernel_ctx *, ot_error *);
ot_status ot_cpu_batch_norm(const ot_node *, const ot_tensor *, ot_tensor *, const ot_kernel_ctx *, ot_error *);
ot_status ot_cpu_layer_norm(const ot_node *, const ot_tensor *, ot_tensor *, const ot_kernel_ctx *, ot_error *);
ot_status ot_cpu_dropout(const ot_node *, const ot_tensor *, ot_tensor *, const ot_kernel_ctx *, ot_error *);
/* cpu_reduce.c */
ot_status ot_cpu_reduce(const ot_node *, const ot_tensor *, ot_tensor *, const ot_kernel_ctx *, ot_error *);
ot_status ot_cpu_softmax_ce_loss(const ot_node *, const ot_tensor *, ot_tensor *, const ot_kernel_ctx *,
                                 ot_error *);
ot_status ot_cpu_nll_loss(const ot_node *, const ot_tensor *, ot_tensor *, const ot_kernel_ctx *, ot_error *);
size_t ot_cpu_loss_workspace(const ot_node *node, const ot_tensor *in, const ot_tensor *out);
/* cpu_pointwise_math.c: comparisons, logic, IsNaN / IsInf, Abs .. Mish, Min / Max, Mod */
ot_status ot_cpu_compare(const ot_node *, const ot_tensor *, ot_tensor *, const ot_kernel_ctx *, ot_error *);
ot_status ot_cpu_predicate(const ot_node *, const ot_tensor *, ot_tensor *, const ot_kernel_ctx *, ot_error *);
ot_status ot_cpu_math_unary(const ot_node *, const ot_tensor *, ot_tensor *, const ot_kernel_ctx *, ot_error *);
ot_status ot_cpu_minmax(const ot_node *, const ot_tensor *, ot_tensor *, const ot_kernel_ctx *, ot_error *);
ot_status ot_cpu_mod(const ot_node *, const ot_tensor *, ot_tensor *, const ot_kernel_ctx *, ot_error *);
/* cpu_index.c: layout and indexing (issue 13) */
ot_status ot_cpu_pad(const ot_node *, const ot_tensor *, ot_tensor *, const ot_kernel_ctx *, ot_error *);
ot_status ot_cpu_tile(const ot_node *, const ot_tensor *, ot_tensor *, const ot_kernel_ctx *, ot_error *);
/* spatial ops (issue 26, ops batch 2): cpu_spatial.c; ConvTranspose in grad_conv.c (it
 * runs ConvGradInput's kernels) */
ot_status ot_cpu_conv_transpose(const ot_node *, const ot_tensor *, ot_tensor *, const ot_kernel_ctx *, ot_error *);
ot_status ot_cpu_depth_space(const ot_node *, const ot_tensor *, ot_tensor *, const ot_kernel_ctx *, ot_error *);
ot_status ot_cpu_resize(const ot_node *, const ot_tensor *, ot_tensor *, const ot_kernel_ctx *, ot_error *);
size_t ot_cpu_resize_workspace(const ot_node *node, const ot_tensor *in, const ot_tensor *out); /* also ResizeGrad's */
ot_status ot_cpu_trilu(const ot_node *, const ot_tensor *, ot_tensor *, const ot_kernel_ctx *, ot_error *);
ot_status ot_cpu_gather_elements(const ot_node *, const ot_tensor *, ot_tensor *, const ot_kernel_ctx *, ot_error *);
ot_status ot_cpu_cumsum(const ot_node *, const ot_tensor *, ot_tensor *, const ot_kernel_ctx *, ot_error *);
/* cpu_scatter.c: layout and indexing (issue 13) */
ot_status ot_cpu_scatter_nd(const ot_node *, const ot_tensor *, ot_tensor *, const ot_kernel_ctx *, ot_error *);
ot_status ot_cpu_scatter_elements(const ot_node *, const ot_tensor *, ot_tensor *, const ot_kernel_ctx *, ot_error *);
ot_status ot_cpu_gather_nd(const ot_node *, const ot_tensor *, ot_tensor *, const ot_kernel_ctx *, ot_error *);
/* Pad / PadGrad geometry from host pads and axes tensors (axes may be NULL or empty). */
struct ot_pad_geom;
ot_status ot_cpu_pad_geom(const ot_node *node, const ot_tensor *pads_t, const ot_tensor *axes_t, const ot_shape *xs,
                          const ot_shape *ys, struct ot_pad_geom *g, ot_error *err);
/* cpu_activation.c (ops batch 1, issue 26): Elu .. Round, PRelu */
ot_status ot_cpu_act_unary(const ot_node *, const ot_tensor *, ot_tensor *, const ot_kernel_ctx *, ot_error *);
ot_status ot_cpu_prelu(const ot_node *, const ot_tensor *, ot_tensor *, const ot_kernel_ctx *, ot_error *);
/* cpu_reduce_ext.c (ops batch 1, issue 26): ReduceMax .. ReduceSumSquare, ArgMax / ArgMin */
ot_status ot_cpu_reduce_ext(const ot_node *, const ot_tensor *, ot_tensor *, const ot_kernel_ctx *, ot_error *);
ot_status ot_cpu_arg_reduce(const ot_node *, const ot_tensor *, ot_tensor *, const ot_kernel_ctx *, ot_error *);
/* cpu_group_norm.c (issue 26): InstanceNormalization, GroupNormalization */
ot_status ot_cpu_group_norm(const ot_node *, const ot_tensor *, ot_tensor *, const ot_kernel_ctx *, ot_error *);

/* cpu_xfmr.c (ops3, issue 26): RMSNormalization, RotaryEmbedding (and its inverse),
 * Attention */
ot_status ot_cpu_rms_norm(const ot_node *, const ot_tensor *, ot_tensor *, const ot_kernel_ctx *, ot_error *);
ot_status ot_cpu_rotary_embedding(const ot_node *, const ot_tensor *, ot_tensor *, const ot_kernel_ctx *, ot_error *);
ot_status ot_cpu_attention(const ot_node *, const ot_tensor *, ot_tensor *, const ot_kernel_ctx *, ot_error *);
size_t ot_cpu_attention_workspace(const ot_node *node, const ot_tensor *in, const ot_tensor *out);
/* ---- ops batch 4 (issue 26) ---- */
/* cpu_einsum.c: Einsum, EinsumGrad */
ot_status ot_cpu_einsum(const ot_node *, const ot_tensor *, ot_tensor *, const ot_kernel_ctx *, ot_error *);
/* cpu_select.c: TopK, OneHot, Size */
ot_status ot_cpu_top_k(const ot_node *, const ot_tensor *, ot_tensor *, const ot_kernel_ctx *, ot_error *);
ot_status ot_cpu_one_hot(const ot_node *, const ot_tensor *, ot_tensor *, const ot_kernel_ctx *, ot_error *);
ot_status ot_cpu_size(const ot_node *, const ot_tensor *, ot_tensor *, const ot_kernel_ctx *, ot_error *);

/* ---- recurrent ops (issue 26): cpu_rnn.c ---- */
ot_status ot_cpu_rnn(const ot_node *, const ot_tensor *, ot_tensor *, const ot_kernel_ctx *, ot_error *);
size_t ot_cpu_rnn_workspace(const ot_node *node, const ot_tensor *in, const ot_tensor *out);

#endif
