/* cuda_internal.h — private to kernels/cuda: the backend context (stream, cuBLAS and
 * cuDNN handles, the per-shape cuDNN algorithm cache), the error-check macros that
 * turn every CUDA / cuBLAS / cuDNN failure into an OT_E_DEVICE status naming the call,
 * file and line, and the kernel-family launchers (one .cu per family, C linkage).
 * Every launcher has the contract of ot_cpu_run_node (kernels/kernel.h) except that
 * tensor data pointers are device pointers and work is queued on cx->stream.
 *
 * Host mode: the kernels whose work is independent per element (or per output
 * element, in a fixed order) also accept cx == NULL, and then run their element code
 * (the same __host__ __device__ functors, through ot_cu_map) on the host over host
 * pointers: unary, binary, Equal, Where, Sum, Expand, ExpandLike, Cast, the
 * activation gradients, Dropout and DropoutGrad, the fills, the views, Transpose,
 * Concat, Split, Slice, SliceGrad, Gather, GatherGrad, the layout and indexing ops of
 * issue 13 (cuda_index.cu, cuda_scatter.cu), MaxPool, AveragePool and their
 * gradients, MseLossGrad, SgdStep and AdamStep (ot_cuda_has_host_mode says which).
 * ot_cuda_read_ints / ot_cuda_read_double read host memory then. The module exports
 * this as pointwise_host (cuda_module.h) so tests compare it with the CPU kernels, bit
 * for bit, on machines without a GPU. What needs warps or blocks (reductions,
 * normalisation, softmax, losses) and the vendor libraries have no host mode. */
#ifndef OT_CUDA_INTERNAL_H
#define OT_CUDA_INTERNAL_H

#include <cublas_v2.h>
#include <cuda_runtime_api.h>
#include <cudnn.h>

#ifdef __cplusplus
extern "C" {
#endif
#include "ir.h"
#include "kernels/kernel.h"

/* One cached cuDNN choice: the node's shape signature and the algorithm picked for
 * it (deterministic, smallest time among those that fit), with its workspace. */
typedef struct ot_cuda_conv_algo {
    int64_t key[40];
    int algo;
    size_t ws_bytes;
} ot_cuda_conv_algo;

typedef struct ot_cuda_ctx {
    int device;
    char name[32]; /* "cuda:N" */
    cudaStream_t stream;
    cublasHandle_t cublas;
    cudnnHandle_t cudnn;
    ot_cuda_conv_algo *algos;
    int n_algos, cap_algos;
    size_t max_threads_per_block;
    /* ONNXTRAIN_CUDA_SYNC=1: synchronise after every node, so an asynchronous fault
     * (an illegal address, say) is reported with the node that caused it */
    bool sync_each;
    /* the last node queued (for a fault found later, at a synchronisation) */
    char last_node[96];
    /* ot_cuda_scan_f32's per-block results (OT_CUDA_SCAN_BLOCKS each), allocated once
     * with the context so a training step allocates nothing */
    double *scan_sums;
    long long *scan_bad;
    /* float32 GEMMs on TF32 tensor cores (--tf32, ot_backend.tf32; copied here before
     * each node): CUBLAS_COMPUTE_32F_FAST_TF32 instead of cublasSgemm's FMA */
    bool tf32;
} ot_cuda_ctx;

/* Blocks of the scan kernel: its per-block results are summed on the host in block
 * order, a fixed order for a given n. */
#define OT_CUDA_SCAN_BLOCKS 1024

/* Formats "FILE:LINE: CALL failed: NAME (text)" into err with OT_E_DEVICE. */
ot_status ot_cuda_fail(ot_error *err, const char *file, int line, const char *call, const char *what);
const char *ot_cublas_status_text(cublasStatus_t s);

#define OT_CUDA_CHECK(call)                                                                       \
    do {                                                                                          \
        cudaError_t ot_e_ = (call);                                                               \
        if (ot_e_ != cudaSuccess) return ot_cuda_fail(err, __FILE__, __LINE__, #call, cudaGetErrorString(ot_e_)); \
    } while (0)
#define OT_CUBLAS_CHECK(call)                                                                     \
    do {                                                                                          \
        cublasStatus_t ot_e_ = (call);                                                            \
        if (ot_e_ != CUBLAS_STATUS_SUCCESS)                                                       \
            return ot_cuda_fail(err, __FILE__, __LINE__, #call, ot_cublas_status_text(ot_e_));    \
    } while (0)
#define OT_CUDNN_CHECK(call)                                                                      \
    do {                                                                                          \
        cudnnStatus_t ot_e_ = (call);                                                             \
        if (ot_e_ != CUDNN_STATUS_SUCCESS)                                                        \
            return ot_cuda_fail(err, __FILE__, __LINE__, #call, cudnnGetErrorString(ot_e_));      \
    } while (0)
/* After a kernel launch: configuration errors show up here, not at the launch. */
#define OT_CUDA_LAUNCHED() OT_CUDA_CHECK(cudaGetLastError())

/* OT_E_UNSUPPORTED: "node 'N' (Op): the CUDA kernel does not support WHAT of dtype T". */
ot_status ot_cuda_bad_dtype(const ot_node *node, const char *what, ot_dtype t, ot_error *err);

/* Copies a small device tensor (attribute-like inputs: Clip bounds, Slice starts,
 * Reduce axes) to the host as int64 / double; false when the dtype is not integer /
 * numeric or it has more than `max` elements. Synchronises the stream. */
ot_status ot_cuda_read_ints(ot_cuda_ctx *cx, const ot_tensor *t, int64_t *v, int max, int *n, ot_error *err);
ot_status ot_cuda_read_double(ot_cuda_ctx *cx, const ot_tensor *t, double *v, ot_error *err);

typedef ot_status (*ot_cuda_kernel_fn)(ot_cuda_ctx *cx, const ot_node *node, const ot_tensor *in, ot_tensor *out,
                                       const ot_kernel_ctx *ctx, ot_error *err);

/* ---- the op table (cuda_ops.c, built from cuda_ops.def) ---------------------------- */

typedef bool (*ot_cuda_supports_fn)(const ot_node *node, const ot_tensor *in, const ot_tensor *out);
/* cx NULL: the host-side query (no cuDNN handle; cuDNN workspaces count 0) */
typedef size_t (*ot_cuda_workspace_fn)(ot_cuda_ctx *cx, const ot_node *node, const ot_tensor *in,
                                       const ot_tensor *out);
typedef struct ot_cuda_op_row {
    ot_cuda_op_kind status;         /* OT_CUDA_KERNEL or OT_CUDA_CPU_ONLY */
    ot_cuda_kernel_fn run;          /* NULL for CPU_ONLY */
    ot_cuda_supports_fn supports;   /* never NULL */
    ot_cuda_workspace_fn workspace; /* NULL: no scratch */
} ot_cuda_op_row;
/* The op's row; NULL for an op without one (or out of range). */
const ot_cuda_op_row *ot_cuda_op_row_of(ot_op op);
/* The status the module's table gives op, from what its row holds (a launcher: a
 * kernel); exported as ot_cuda_module.op_status. */
ot_cuda_op_kind ot_cuda_module_op_status(ot_op op);
/* OT_E_INTERNAL naming the first op whose row disagrees with ot_cuda_op_status
 * (kernels/cuda_op_status.c, from the same cuda_ops.def); run when a backend is made. */
ot_status ot_cuda_check_op_table(ot_error *err);
/* The backend's supports() (needs no GPU: dtypes, shapes and attributes only). */
bool ot_cuda_supports_node(const ot_node *node, const ot_tensor *in, const ot_tensor *out);
/* The node's workspace bytes: the row's function (cx NULL as above), 0 without one. */
size_t ot_cuda_node_workspace(ot_cuda_ctx *cx, const ot_node *node, const ot_tensor *in, const ot_tensor *out);
#define OT_CUDA_LAUNCHER(fn)                                                                                   \
    ot_status fn(ot_cuda_ctx *cx, const ot_node *node, const ot_tensor *in, ot_tensor *out, const ot_kernel_ctx *ctx, \
                 ot_error *err)

/* True when fn has the host mode described above. */
bool ot_cuda_has_host_mode(ot_cuda_kernel_fn fn);

/* cuda_elementwise.cu: pointwise forward ops, casts; cuda_pointwise_grad.cu: the
 * activation gradients, Dropout, the fills;
 * cuda_optim.cu: the optimizer steps */
OT_CUDA_LAUNCHER(ot_cuda_unary);
OT_CUDA_LAUNCHER(ot_cuda_binary);
OT_CUDA_LAUNCHER(ot_cuda_equal);
OT_CUDA_LAUNCHER(ot_cuda_where);
OT_CUDA_LAUNCHER(ot_cuda_sum);
/* The most inputs of a bfloat16 / float16 Sum (one pass over all of them) */
#define OT_CUDA_SUM_LOW_MAX 8
OT_CUDA_LAUNCHER(ot_cuda_expand);
OT_CUDA_LAUNCHER(ot_cuda_cast);
OT_CUDA_LAUNCHER(ot_cuda_copy_view);
OT_CUDA_LAUNCHER(ot_cuda_act_grad);
OT_CUDA_LAUNCHER(ot_cuda_dropout);
OT_CUDA_LAUNCHER(ot_cuda_dropout_grad);
OT_CUDA_LAUNCHER(ot_cuda_fill_like);
OT_CUDA_LAUNCHER(ot_cuda_expand_like);
OT_CUDA_LAUNCHER(ot_cuda_sgd_step);
OT_CUDA_LAUNCHER(ot_cuda_adam_step);
/* cuda_pointwise_math.cu: issue 13's comparisons, logic, IsNaN / IsInf, Abs .. Mish,
 * Min / Max, Mod and their backward ops (all with a host mode) */
OT_CUDA_LAUNCHER(ot_cuda_compare);
OT_CUDA_LAUNCHER(ot_cuda_predicate);
OT_CUDA_LAUNCHER(ot_cuda_math_unary);
OT_CUDA_LAUNCHER(ot_cuda_minmax);
OT_CUDA_LAUNCHER(ot_cuda_mod);
OT_CUDA_LAUNCHER(ot_cuda_math_grad);
OT_CUDA_LAUNCHER(ot_cuda_mod_grad);
OT_CUDA_LAUNCHER(ot_cuda_minmax_grad);
/* cuda_activation.cu (ops batch 1, issue 26): Elu .. Round, PRelu and their backward
 * ops (all with a host mode) */
OT_CUDA_LAUNCHER(ot_cuda_act_unary);
OT_CUDA_LAUNCHER(ot_cuda_prelu);
OT_CUDA_LAUNCHER(ot_cuda_act_ext_grad);
OT_CUDA_LAUNCHER(ot_cuda_prelu_grad);
/* cuda_reduce_ext.cu (ops batch 1, issue 26): ReduceMax .. ReduceSumSquare, ArgMax /
 * ArgMin, ReduceGrad (all with a host mode); ReduceGrad's workspace: its groups' figures */
OT_CUDA_LAUNCHER(ot_cuda_reduce_ext);
OT_CUDA_LAUNCHER(ot_cuda_arg_reduce);
/* ---- ops batch 4 (issue 26) ---- */
/* cuda_einsum.cu: Einsum, EinsumGrad (host mode) */
OT_CUDA_LAUNCHER(ot_cuda_einsum);
/* cuda_select.cu: TopK, OneHot (host mode) */
OT_CUDA_LAUNCHER(ot_cuda_top_k);
OT_CUDA_LAUNCHER(ot_cuda_one_hot);
/* cuda_rnn.cu (issue 26): RNN, GRU, LSTM, RnnGrad (host mode) */
OT_CUDA_LAUNCHER(ot_cuda_rnn);
OT_CUDA_LAUNCHER(ot_cuda_rnn_grad);
size_t ot_cuda_rnn_workspace(const ot_node *node, const ot_tensor *in, const ot_tensor *out);
OT_CUDA_LAUNCHER(ot_cuda_reduce_grad);
size_t ot_cuda_reduce_grad_workspace(const ot_node *node, const ot_tensor *in, const ot_tensor *out);
/* cuda_group_norm.cu (issue 26): InstanceNormalization, GroupNormalization, GroupNormGrad
 * (with a host mode) */
OT_CUDA_LAUNCHER(ot_cuda_group_norm);
OT_CUDA_LAUNCHER(ot_cuda_group_norm_grad);
/* integer Mod's zero-divisor flag */
size_t ot_cuda_mod_workspace(const ot_node *node, const ot_tensor *in, const ot_tensor *out);
/* cuda_blas.c: whether Gemm / MatMul run A, B of dtypes (ab, b) into Y of dtype yt:
 * float32, or bfloat16 / float16 (the same for both) into float32 or their dtype. */
bool ot_cuda_gemm_dtypes(ot_dtype ab, ot_dtype b, ot_dtype yt);
/* cuda_blas.c: the dtypes of a cuDNN convolution (X, W, Y alike): float32, bfloat16, float16 */
bool ot_cuda_conv_dtype(ot_dtype t);
/* y[i] = beta * c[broadcast(i)] over out's shape (Gemm's C term); C and Y float32,
 * float16 or bfloat16 (rounded to nearest even). */
ot_status ot_cuda_broadcast_scaled(ot_cuda_ctx *cx, const ot_node *node, const ot_tensor *c, ot_tensor *out, float beta,
                                   ot_error *err);
/* The Dropout generator of the CUDA kernels, run on the host (tests compare it with
 * exec/rng.h bit for bit). */
float ot_cuda_philox_uniform_host(uint64_t seed, uint64_t step, uint32_t node, uint64_t index);
/* cuda_layout.cu: data movement */
OT_CUDA_LAUNCHER(ot_cuda_transpose);
OT_CUDA_LAUNCHER(ot_cuda_concat);
OT_CUDA_LAUNCHER(ot_cuda_split);
OT_CUDA_LAUNCHER(ot_cuda_slice);
OT_CUDA_LAUNCHER(ot_cuda_slice_grad);
OT_CUDA_LAUNCHER(ot_cuda_gather);
OT_CUDA_LAUNCHER(ot_cuda_gather_grad);
/* cuda_index.cu: layout and indexing (issue 13) */
OT_CUDA_LAUNCHER(ot_cuda_pad);
OT_CUDA_LAUNCHER(ot_cuda_tile);
OT_CUDA_LAUNCHER(ot_cuda_trilu);
OT_CUDA_LAUNCHER(ot_cuda_gather_elements);
OT_CUDA_LAUNCHER(ot_cuda_cumsum);
OT_CUDA_LAUNCHER(ot_cuda_pad_grad);
OT_CUDA_LAUNCHER(ot_cuda_gather_elements_grad);
/* cuda_scatter.cu: layout and indexing (issue 13) */
OT_CUDA_LAUNCHER(ot_cuda_scatter_nd);
OT_CUDA_LAUNCHER(ot_cuda_scatter_elements);
OT_CUDA_LAUNCHER(ot_cuda_gather_nd);
/* cuda_spatial.cu: spatial ops (issue 26, ops batch 2) */
OT_CUDA_LAUNCHER(ot_cuda_resize);
OT_CUDA_LAUNCHER(ot_cuda_resize_grad);
OT_CUDA_LAUNCHER(ot_cuda_depth_space);
/* cuda_blas.c: ConvTranspose (issue 26), through the convolutions' cuDNN path */
OT_CUDA_LAUNCHER(ot_cuda_conv_transpose);
/* cuda_reduce.cu: reductions, normalisation, softmax; cuda_loss.cu: losses and the
 * reduce-family workspace */
OT_CUDA_LAUNCHER(ot_cuda_reduce);
OT_CUDA_LAUNCHER(ot_cuda_reduce_to_like);
OT_CUDA_LAUNCHER(ot_cuda_softmax);
OT_CUDA_LAUNCHER(ot_cuda_softmax_grad);
OT_CUDA_LAUNCHER(ot_cuda_layer_norm);
OT_CUDA_LAUNCHER(ot_cuda_layer_norm_grad);
OT_CUDA_LAUNCHER(ot_cuda_batch_norm);
OT_CUDA_LAUNCHER(ot_cuda_batch_norm_grad);
OT_CUDA_LAUNCHER(ot_cuda_class_loss);
OT_CUDA_LAUNCHER(ot_cuda_class_loss_grad);
OT_CUDA_LAUNCHER(ot_cuda_mse_loss);
/* cuda_linear_ce.cu (issue 28): the chunked cross-entropy and its gradient */
OT_CUDA_LAUNCHER(ot_cuda_linear_ce);
OT_CUDA_LAUNCHER(ot_cuda_linear_ce_grad);
/* cuda_blas.c: row-major C[M,N] = alpha op(A) op(B) + beta C on cuBLAS (lda.. the row
 * lengths), for kernels that run GEMMs of their own (cuda_linear_ce.cu) */
ot_status ot_cuda_sgemm(ot_cuda_ctx *cx, bool ta, bool tb, int64_t M, int64_t N, int64_t K, float alpha, const float *a,
                        int64_t lda, const float *b, int64_t ldb, float beta, float *c, int64_t ldc, ot_error *err);
/* cuda_xfmr.cu (ops3, issue 26): transformer ops, all with a host mode */
OT_CUDA_LAUNCHER(ot_cuda_rms_norm);
OT_CUDA_LAUNCHER(ot_cuda_rms_norm_grad);
OT_CUDA_LAUNCHER(ot_cuda_rotary_embedding);
OT_CUDA_LAUNCHER(ot_cuda_attention);
OT_CUDA_LAUNCHER(ot_cuda_attention_grad);
OT_CUDA_LAUNCHER(ot_cuda_mse_loss_grad);
OT_CUDA_LAUNCHER(ot_cuda_elementwise_loss); /* BceWithLogitsLoss, L1Loss */
OT_CUDA_LAUNCHER(ot_cuda_elementwise_loss_grad);
size_t ot_cuda_reduce_workspace(const ot_node *node, const ot_tensor *in, const ot_tensor *out);
/* Scratch of the pointwise kernels (integer Div's zero-divisor flag). */
size_t ot_cuda_pointwise_workspace(const ot_node *node, const ot_tensor *in, const ot_tensor *out);
/* The workspace of every node whose scratch needs no cuDNN handle (the table's
 * function with cx NULL); 0 for the rest. */
size_t ot_cuda_host_workspace(const ot_node *node, const ot_tensor *in, const ot_tensor *out);
/* cuda_pool.cu */
OT_CUDA_LAUNCHER(ot_cuda_max_pool);
OT_CUDA_LAUNCHER(ot_cuda_average_pool);
OT_CUDA_LAUNCHER(ot_cuda_global_average_pool);
OT_CUDA_LAUNCHER(ot_cuda_pool_grad);
/* cuda_blas.c: cuBLAS and cuDNN */
OT_CUDA_LAUNCHER(ot_cuda_gemm);
OT_CUDA_LAUNCHER(ot_cuda_matmul);
OT_CUDA_LAUNCHER(ot_cuda_conv);
OT_CUDA_LAUNCHER(ot_cuda_conv_grad_input);
OT_CUDA_LAUNCHER(ot_cuda_conv_grad_weight);
/* cuDNN workspace of a Conv / ConvGradInput / ConvGradWeight node (chooses and
 * caches the algorithm on first use); 0 and a status on failure. */
ot_status ot_cuda_conv_workspace(ot_cuda_ctx *cx, const ot_node *node, const ot_tensor *in, const ot_tensor *out,
                                 size_t *bytes, ot_error *err);
/* True when the node's geometry runs on cuDNN: 1-D (as 2-D), 2-D and 3-D; pads cuDNN
 * cannot express (begin != end where that changes the windows) through an explicit
 * zero-padded copy of X in the workspace. */
bool ot_cuda_conv_supported(const ot_node *node, const ot_tensor *in, const ot_tensor *out);
/* cuda_layout.cu: float tensor `small` placed at offset `begin` inside the zero-filled
 * `big` (crop false: src small, dst big), or the interior of `big` cut back out (crop
 * true: src big, dst small). Shapes of `rank` dims, row-major. */
ot_status ot_cuda_pad_copy(ot_cuda_ctx *cx, const ot_node *node, const float *src, float *dst, int rank,
                           const int64_t *small, const int64_t *big, const int64_t *begin, bool crop, ot_error *err);

/* cuda_random.cu: RandomUniformLike, RandomUniform (issue 13) */
OT_CUDA_LAUNCHER(ot_cuda_random_uniform);

/* ot_backend.scan_f32 (exec/backend.h): first non-finite index and the sum of
 * squares (double) of n device floats, with one D2H copy of the per-block results.
 * cuda_scan.cu. */
ot_status ot_cuda_scan_f32(ot_cuda_ctx *cx, const void *data, size_t n, int64_t *first_bad, double *sum_sq,
                           ot_error *err);
/* ot_backend.accumulate_f32: dst[i] += src[i] over n device floats, then src zeroed
 * when clear_src; queued on the stream. cx NULL: host mode over host pointers (the
 * same element code, for tests). cuda_scan.cu. */
ot_status ot_cuda_accumulate_f32(ot_cuda_ctx *cx, float *dst, float *src, size_t n, bool clear_src, ot_error *err);

#ifdef __cplusplus
}
#endif

#endif
