/* cpu_common.h — helpers shared by the CPU kernels (forward and backward): thread
 * counts, multidirectional broadcasting iterators, dtype loads and stores, float16
 * conversions, and the per-family kernel entry points that cpu_dispatch.c routes to.
 *
 * Determinism: every kernel parallelises over independent output elements (rows,
 * channels, batches) with static schedules and reduces in a fixed sequential order
 * inside one output element, so results do not depend on the thread count except
 * where OpenBLAS splits a GEMM. */
#ifndef OT_CPU_COMMON_H
#define OT_CPU_COMMON_H

#include <stdbool.h>
#include <stdint.h>
#include <string.h>

#include "kernels/kernel.h"

/* Elements below which a kernel runs on one thread (thread start-up costs more). */
#define OT_CPU_PAR_MIN 16384

/* Threads for an OpenMP region: ctx->n_threads when > 0, else the OpenMP default. */
int ot_cpu_threads(const ot_kernel_ctx *ctx);

/* Element count of a tensor (shape is always static for kernel arguments). */
int64_t ot_cpu_numel(const ot_tensor *t);
/* Normalises a possibly negative axis against rank; -1 when out of range. */
int ot_cpu_axis(int64_t axis, int rank);

/* ---- broadcasting ----------------------------------------------------------- */

#define OT_CPU_BCAST_MAX_IN 3

/* An output shape and, per input, element strides (0 along broadcast dims), with
 * adjacent dims merged where every input is contiguous across them so the inner
 * loop is as long as possible. Iterate rows (all dims but the last) and inner. */
typedef struct ot_cpu_bcast {
    int rank;     /* >= 1 after init */
    int n_in;
    int64_t dim[OT_MAX_RANK];
    int64_t stride[OT_CPU_BCAST_MAX_IN][OT_MAX_RANK];
    int64_t rows, inner;
} ot_cpu_bcast;

/* False when some input does not broadcast to `out` (ONNX multidirectional rules,
 * aligned on the right). */
bool ot_cpu_bcast_init(ot_cpu_bcast *b, const ot_shape *out, const ot_shape *const *ins, int n_in);
/* Element offsets of each input at the start of row `row`. */
void ot_cpu_bcast_row(const ot_cpu_bcast *b, int64_t row, int64_t *off);

/* ---- dtype helpers ---------------------------------------------------------- */

float ot_f16_to_f32(uint16_t h);
uint16_t ot_f32_to_f16(float f);
float ot_bf16_to_f32(uint16_t h);
uint16_t ot_f32_to_bf16(float f);
/* Reads element i of an integer tensor (int64/int32/int8/uint8/bool) as int64. */
bool ot_cpu_load_int(ot_dtype t, const void *p, int64_t i, int64_t *v);
/* Reads element i of a numeric tensor as double. */
bool ot_cpu_load_double(ot_dtype t, const void *p, int64_t i, double *v);
bool ot_cpu_is_int_dtype(ot_dtype t);

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
/* cpu_matmul.c */
ot_status ot_cpu_gemm(const ot_node *, const ot_tensor *, ot_tensor *, const ot_kernel_ctx *, ot_error *);
ot_status ot_cpu_matmul(const ot_node *, const ot_tensor *, ot_tensor *, const ot_kernel_ctx *, ot_error *);
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

/* Pool / conv geometry shared by the forward and backward kernels: spatial rank
 * (1..3), kernel, strides, dilations and begin pads resolved from the attributes
 * (auto_pad included) and the input/output spatial sizes. */
typedef struct ot_cpu_window {
    int nd;
    int64_t in[3], out[3], k[3], stride[3], dil[3], pad_begin[3], pad_end[3];
} ot_cpu_window;
/* x, y: NC... tensors; kernel: spatial kernel sizes (from W or attribute). */
ot_status ot_cpu_window_init(ot_cpu_window *w, const ot_node *node, const ot_shape *x, const ot_shape *y,
                             const int64_t *kernel, ot_error *err);

#endif
